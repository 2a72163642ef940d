"""`parsing.text_hash` is a document's content identity: stored in the lake, compared across
cycles and extraction versions. Its whitespace rule (every run of Unicode whitespace is one
space, none at the ends) must never drift, whatever code computes it."""

from __future__ import annotations

import hashlib
import re
import sys

import pytest

from atlas_pipeline.parsing import one_space, text_hash

_RULE = re.compile(r"\s+")  # the rule as first written: what every stored digest follows


def _by_rule(text: str) -> str:
    return hashlib.sha256(_RULE.sub(" ", text).strip().encode("utf-8")).hexdigest()


@pytest.mark.parametrize(
    ("text", "same_as"),
    [
        ("", ""),
        ("   \n\t ", ""),
        ("hello world", "hello world"),
        ("  hello \n\n\t world  ", "hello world"),
        ("a\u00a0b", "a b"),  # no-break space
        ("a\u3000\u2003b", "a b"),  # ideographic and em spaces
        ("a\x1c\x1d\x1e\x1fb", "a b"),  # information separators count as whitespace
        ("a\x85b", "a b"),  # next line (NEL)
        ("a\u2028b\u2029c", "a b c"),  # line and paragraph separators
        ("a\u200bb", "a\u200bb"),  # a zero-width space is not whitespace
        ("é\r\nü", "é ü"),
    ],
)
def test_whitespace_runs_are_one_space(text: str, same_as: str) -> None:
    assert text_hash(text) == text_hash(same_as) == _by_rule(text)


def test_every_whitespace_code_point_is_treated_as_the_rule_treats_it() -> None:
    for cp in range(sys.maxunicode + 1):
        if _RULE.fullmatch(chr(cp)) or chr(cp).isspace():
            text = f"x{chr(cp)}y"
            assert text_hash(text) == _by_rule(text), hex(cp)


def test_the_digest_is_pinned() -> None:
    # sha256 of "hello world": a change of encoding or of the rule fails here
    assert text_hash(" hello\tworld\n") == (
        "b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9"
    )


def test_ascii_texts_take_the_fast_path_to_the_same_digest() -> None:
    # one_space translates ASCII text and halves runs of spaces: runs of every length, odd
    # and even, every ASCII whitespace character, at the ends and inside
    import random

    rng = random.Random(16)
    spaces = [chr(c) for c in range(128) if chr(c).isspace()]
    pieces = ["a", "bc", "word", ".", "x y", *spaces]
    cases = ["", " " * 1001, "a" + " " * 7 + "b", "\x1f\x1ca\x0b\x0cb\r\n"]
    cases += ["".join(rng.choice(pieces) * rng.randint(1, 9) for _ in range(rng.randint(0, 60)))
              for _ in range(400)]  # fmt: skip
    for text in cases:
        assert text.isascii()
        assert one_space(text) == " ".join(text.split()) == _RULE.sub(" ", text).strip()
        assert text_hash(text) == _by_rule(text), repr(text)
