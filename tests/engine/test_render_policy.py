"""The selective-render rule, table by table: sample, then render a page class only when the
raw HTML recovers too little of the rendered text; re-sample after a while."""

from __future__ import annotations

import pytest

from atlas_pipeline.render_policy import (
    RenderDecision,
    RenderRule,
    RenderState,
    Sample,
    advance,
    decide,
    page_class,
    words,
)

RULE = RenderRule(sample_pages=3, min_share=0.5, min_words=50, resample_after_s=100.0)
S, R, P = RenderState.SAMPLING, RenderState.RENDER, RenderState.PLAIN


@pytest.mark.parametrize(
    ("samples", "state", "share"),
    [
        ([], S, None),
        ([(0, 400), (0, 380)], S, 0.0),  # two of three samples: still measuring
        ([(0, 400), (0, 380), (2, 410)], R, 2 / 1190),  # a script-built shell
        ([(400, 410), (390, 400), (500, 500)], P, 1290 / 1310),  # the text is in the HTML
        ([(180, 400), (190, 400), (200, 400)], R, 570 / 1200),  # under half of it
        ([(200, 400), (200, 400), (200, 400)], P, 0.5),  # exactly half: not under it
        ([(10, 60), (30, 60), (30, 60)], R, 70 / 180),  # too few words where there are 60
        ([(10, 20), (15, 20), (18, 20)], P, 43 / 60),  # short pages both ways: no gain
        ([(0, 0), (0, 0), (0, 0)], P, None),  # nothing rendered either: the browser adds nothing
        ([(40, 55), (45, 55), (45, 55)], R, 130 / 165),  # under min_words a page, 55 rendered
    ],
)
def test_a_class_is_rendered_only_where_raw_html_falls_short(
    samples: list[tuple[int, int]], state: RenderState, share: float | None
) -> None:
    d = decide([Sample(a, b) for a, b in samples], RULE, now=10.0)
    assert d.state is state
    assert d.share == (None if share is None else pytest.approx(share))
    assert d.samples == len(samples)
    assert d.decided_at == (None if state is S else 10.0)
    assert d.reason == ("render_not_needed" if state is P else "render_needed")


@pytest.mark.parametrize(
    ("decided_at", "now", "state"),
    [(10.0, 50.0, R), (10.0, 110.0, R), (10.0, 110.5, S), (None, 1e9, R)],
)
def test_a_decision_is_kept_until_it_is_due_for_a_new_sample(
    decided_at: float | None, now: float, state: RenderState
) -> None:
    samples = [Sample(0, 300)] * 3
    d = decide(samples, RULE, now=now, decided_at=decided_at)
    assert d.state is state
    if state is R:
        assert d.decided_at == (decided_at if decided_at is not None else now)


def test_the_decision_keeps_its_numbers() -> None:
    d = decide([Sample(5, 100), Sample(0, 200), Sample(10, 300)], RULE, now=1.0)
    assert d == RenderDecision(R, 3, 15, 600, 0.025, 1.0)


def _d(state: RenderState, n: int, raw: int, rendered: int, at: float | None) -> RenderDecision:
    return RenderDecision(state, n, raw, rendered, raw / rendered if rendered else None, at)


@pytest.mark.parametrize(
    ("previous", "sample", "now", "expected"),
    [
        (None, None, 5.0, _d(S, 0, 0, 0, None)),  # first sight, nothing measured yet
        (None, (0, 300), 5.0, _d(S, 1, 0, 300, None)),
        (_d(S, 1, 0, 300, None), (0, 280), 6.0, _d(S, 2, 0, 580, None)),
        (_d(S, 2, 0, 580, None), (5, 310), 7.0, _d(R, 3, 5, 890, 7.0)),  # the third decides
        (_d(S, 2, 400, 410, None), (390, 400), 7.0, _d(P, 3, 790, 810, 7.0)),
        (_d(S, 2, 0, 580, None), None, 7.0, _d(S, 2, 0, 580, None)),  # a page that measured nothing
        (
            _d(R, 3, 5, 890, 7.0),
            (400, 400),
            50.0,
            _d(R, 3, 5, 890, 7.0),
        ),  # decided: no more samples
        (_d(P, 3, 790, 810, 7.0), None, 107.0, _d(P, 3, 790, 810, 7.0)),  # 100 s: still in force
        (_d(P, 3, 790, 810, 7.0), None, 107.5, _d(S, 0, 0, 0, None)),  # due: a new round
        (_d(P, 3, 790, 810, 7.0), (0, 300), 200.0, _d(S, 1, 0, 300, None)),  # its first sample
    ],
)
def test_a_stored_decision_advances_page_by_page(
    previous: RenderDecision | None, sample: tuple[int, int] | None, now: float,
    expected: RenderDecision,
) -> None:  # fmt: skip
    got = advance(previous, None if sample is None else Sample(*sample), RULE, now)
    assert got == expected


@pytest.mark.parametrize(
    ("url", "patterns", "cls"),
    [
        ("https://a.test/", (), "/"),
        ("https://a.test/about", (), "/"),
        ("https://a.test/news/2026/x", (), "/news/*"),
        ("https://a.test/news/2026/x?q=1", ("/news/2026/*",), "/news/2026/*"),
        ("https://a.test/shop/x", ("/news/*", "/shop/*"), "/shop/*"),
        ("https://a.test/Shop/x", ("/shop/*",), "/Shop/*"),  # case-sensitive, as paths are
    ],
)
def test_page_classes_come_from_patterns_else_the_first_segment(
    url: str, patterns: tuple[str, ...], cls: str
) -> None:
    assert page_class(url, patterns) == cls


@pytest.mark.parametrize(
    ("text", "n"),
    [
        (None, 0),
        ("", 0),
        ("one two, three.", 3),
        ("Grüße aus Köln", 3),
        ("a", 1),
        (" a", 1),
        ("a ", 1),
        ("...", 0),
        ("snake_case and __dunder__", 3),  # the underscore is a word character
        ("x-ray, 9:30 a.m.", 6),  # punctuation splits words, digits are word characters
        ("tab\tnew\nline\r\nend\x0bvt", 5),
        ("don't stop", 3),
        ("~`!@#$%^&*()+={}[]|\\:;\"'<>,.?/ z", 1),
        ("\x00a\x7fb", 2),  # control characters are not word characters
        ("naïve café", 2),  # non-ASCII: the regex's own count
        ("“quoted” — dash", 2),
    ],
)
def test_words_are_counted_in_any_script(text: str | None, n: int) -> None:
    assert words(text) == n


def test_an_ascii_text_counts_as_the_regex_counts_it() -> None:
    """The ASCII shortcut against \\w+ itself, over every ASCII character and random mixes
    of the ones that decide a count (word characters, separators, punctuation, controls)."""
    import random
    import re

    regex = re.compile(r"\w+")
    every = "".join(chr(i) for i in range(128))
    assert words(every) == len(regex.findall(every))
    rng = random.Random(15)
    alphabet = "aZ09_ -.,'\t\n\x00\x7f~"
    for _ in range(2000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 30)))
        assert words(text) == len(regex.findall(text)), repr(text)
