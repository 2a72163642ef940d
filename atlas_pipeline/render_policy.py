"""Whether a page class needs the browser: decided by measurement, per origin and page class.

Rendering costs about 30x the CPU of a plain fetch and extraction (seed 003 decision 12:
20 ms against 600 ms), so it is worth it only where the raw HTML lacks the text. For each
(origin, page class) the first `sample_pages` pages are extracted twice, from the raw HTML
and from the rendered DOM; the class is rendered from then on only when the raw extraction
recovers too little of the rendered text (under `min_share` of its words, or under
`min_words` a page where the rendered page has them). The decision is kept with its numbers
and sampled afresh after `resample_after_s`. Pure functions: the coordination store holds
each class's decision with its tally (`advance` moves it on by one page), so a decision
outlives the batch that made it and is shared by every run of the origin's shard.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from urllib.parse import urlsplit

_WORD = re.compile(r"\w+", re.UNICODE)
# Over ASCII, \w is [A-Za-z0-9_]: each byte becomes "a" (a word character) or " " (not one),
# and a word starts wherever an "a" follows a " " or opens the text.
_WORD_MARKS = (
    bytes(ord("a") if chr(i).isalnum() or chr(i) == "_" else ord(" ") for i in range(128))
    + b" " * 128
)


class RenderState(StrEnum):
    SAMPLING = "sampling"  # render every page of the class, to measure
    RENDER = "render"  # raw HTML recovers too little: render the class
    PLAIN = "plain"  # raw HTML holds the text: never render the class


@dataclass(frozen=True, slots=True)
class RenderRule:
    sample_pages: int = 3
    min_share: float = 0.5
    min_words: int = 50
    resample_after_s: float = 7 * 86400.0


@dataclass(frozen=True, slots=True)
class Sample:
    """One page extracted both ways: words of the raw HTML's text and of the rendered DOM's."""

    raw_words: int
    rendered_words: int


@dataclass(frozen=True, slots=True)
class RenderDecision:
    state: RenderState
    samples: int
    raw_words: int  # summed over the samples
    rendered_words: int
    share: float | None  # raw / rendered words (None: nothing rendered to compare with)
    decided_at: float | None  # when sampling ended (None while sampling)

    @property
    def reason(self) -> str:
        """The reason code a page of the class records."""
        return "render_not_needed" if self.state is RenderState.PLAIN else "render_needed"


def words(text: str | None) -> int:
    """Words of `text` as the regex \\w+ finds them, in any script. An ASCII text is counted
    from a translated copy of its bytes instead: 0.2 ms for a 55 kB text where findall,
    which builds every word as a string, took 1.4 ms. The lane counts the raw text of every
    page with a script, in the extraction worker."""
    if not text:
        return 0
    if text.isascii():
        marks = text.encode("ascii").translate(_WORD_MARKS)
        return marks.count(b" a") + (marks[0] == ord("a"))
    return len(_WORD.findall(text))


def page_class(url: str, patterns: Sequence[str] = ()) -> str:
    """The page class of `url`: the first glob of `patterns` its path matches, else its
    first path segment as `/segment/*` (`/` for the root and top-level pages)."""
    path = urlsplit(url).path or "/"
    for pattern in patterns:
        if fnmatch.fnmatchcase(path, pattern):
            return pattern
    head, sep, _ = path.lstrip("/").partition("/")
    return f"/{head}/*" if sep else "/"


def decide(samples: Sequence[Sample], rule: RenderRule, now: float,
           decided_at: float | None = None) -> RenderDecision:  # fmt: skip
    """The class's state after `samples` (its most recent sampling round); a decision older
    than `rule.resample_after_s` goes back to sampling."""
    raw = sum(s.raw_words for s in samples)
    rendered = sum(s.rendered_words for s in samples)
    return _decided(len(samples), raw, rendered, rule, now, decided_at)


def advance(previous: RenderDecision | None, sample: Sample | None, rule: RenderRule,
            now: float) -> RenderDecision:  # fmt: skip
    """The class's decision once `sample` (None: a page that measured nothing) is counted:
    a class never seen, or decided longer than `rule.resample_after_s` ago, starts a new
    sampling round; a decided class takes no more samples."""
    if previous is None or (
        previous.decided_at is not None and now - previous.decided_at > rule.resample_after_s
    ):
        n, raw, rendered, decided_at = 0, 0, 0, None
    else:
        n, raw, rendered = previous.samples, previous.raw_words, previous.rendered_words
        decided_at = previous.decided_at
    if sample is not None and decided_at is None:
        n, raw, rendered = n + 1, raw + sample.raw_words, rendered + sample.rendered_words
    return _decided(n, raw, rendered, rule, now, decided_at)


def _decided(n: int, raw: int, rendered: int, rule: RenderRule, now: float,
             decided_at: float | None) -> RenderDecision:  # fmt: skip
    share = raw / rendered if rendered else None
    if n < rule.sample_pages or (
        decided_at is not None and now - decided_at > rule.resample_after_s
    ):
        return RenderDecision(RenderState.SAMPLING, n, raw, rendered, share, None)
    too_few = raw / n < rule.min_words <= rendered / n
    need = (share is not None and share < rule.min_share) or too_few
    state = RenderState.RENDER if need else RenderState.PLAIN
    return RenderDecision(state, n, raw, rendered, share, decided_at if decided_at else now)
