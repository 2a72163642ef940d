"""The render lane inside a fetch batch: which pages go to the browser, and what they give.

For each page parsed from its raw HTML, per (origin, page class) as `render_policy` decides:
a page without a script element is never rendered (nothing could draw text); one whose raw
HTML already gives `render.skip_above_words` words is never rendered (and
counts as a sample where the raw text is all there is); while a class is sampled, or once it
is decided to need the browser, the page is rendered (`render.RenderLane`, its subrequests
answered by `render_fetch.SubrequestGate`) and its DOM parsed like any page; its text is the
document's when it gives more words than the raw HTML. Every page parsed here records why
(`documents.render_reason`), and every request the browser caused is a `subresource` fetch.

The browser starts at the first page that needs it, so a batch whose pages all hold their
text never starts one. Each class's decision lives in the coordination store (`Advance`:
`render_policy.advance` in one store transaction), so every run of the shard adds its
samples to one tally and a later batch starts from the decision in force; this step keeps a
decided class for the batch and asks the store again only while a class is sampled or once
its decision is due for a fresh measurement. A store out of reach is waited out like any
store call (the batch's `Advance`); the page's text does not depend on it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from .config import CrawlConfig
from .extractor_pool import ParserFailure
from .reasons import Reason
from .records import FetchRecord
from .render import LaneLimits, RenderLane, SubAnswer, SubRequest
from .render_fetch import PageContext, SubrequestGate
from .render_policy import RenderDecision, RenderRule, RenderState, Sample, page_class
from .render_policy import words as count_words

log = logging.getLogger(__name__)

Extract = Callable[[bytes, str], Awaitable[dict[str, Any]]]  # (DOM bytes, url) -> a parse
GateFactory = Callable[[Callable[[FetchRecord], None]], SubrequestGate]
# (origin, page class, a sample or None) -> the class's decision once it is counted, stored
Advance = Callable[[str, str, Sample | None], Awaitable[RenderDecision]]


@dataclass(frozen=True, slots=True)
class RenderChoice:
    """What the lane made of one page: the parse to use (None: keep the raw HTML's), the
    rendered DOM it came from, the reason the document records, the lane's own word for a
    fallback, and the requests the browser caused."""

    parsed: dict[str, Any] | None
    body: bytes | None
    reason: str
    detail: str | None
    subrequests: tuple[FetchRecord, ...]


class RenderStep:
    def __init__(self, cfg: CrawlConfig, extract: Extract, gates: GateFactory, advance: Advance,
                 clock: Callable[[], float]) -> None:  # fmt: skip
        r = cfg.render
        self.cfg, self._extract, self._gates, self.clock = cfg, extract, gates, clock
        self._advance = advance
        self.rule = RenderRule(r.sample_pages, r.min_share, r.min_words, r.resample_after_s)
        self.limits = LaneLimits(
            concurrency=r.concurrency, queue=r.queue, budget_s=r.budget_s,
            navigation_timeout_s=r.navigation_timeout_s, page_timeout_s=r.page_timeout_s,
            settle_s=r.settle_s, max_dom_bytes=r.max_dom_bytes,
            abort_types=frozenset(r.abort_types), max_browser_bytes=r.max_browser_mib * 2**20,
        )  # fmt: skip
        self._lane: RenderLane | None = None
        self._starting = asyncio.Lock()
        self.decisions: dict[tuple[str, str], RenderDecision] = {}  # as this batch last saw them

    @property
    def lane(self) -> RenderLane | None:
        return self._lane

    def summary(self) -> dict[str, Any]:
        """The lane's figures for the batch's metadata: pages rendered, render seconds,
        fallbacks and subrequests by reason, and each page class's decision with its numbers."""
        lane = self._lane
        stats = lane.stats if lane is not None else None
        return {
            "browser": "not started" if lane is None else
                       ("available" if lane.available else lane.unavailable_reason),
            "rendered": stats.rendered if stats else 0,
            "seconds": round(stats.seconds, 2) if stats else 0.0,
            "fallbacks": dict(stats.fallbacks) if stats else {},
            "subrequests": dict(stats.subrequests) if stats else {},
            "peak_browser_mib": round(stats.peak_browser_bytes / 2**20) if stats else 0,
            "decisions": [
                {"origin": o, "page_class": c, "state": d.state.value, "samples": d.samples,
                 "raw_words": d.raw_words, "rendered_words": d.rendered_words,
                 "share": None if d.share is None else round(d.share, 3)}
                for (o, c), d in sorted(self.decisions.items())
            ],
        }  # fmt: skip

    async def close(self) -> None:
        if self._lane is not None:
            await self._lane.__aexit__(None, None, None)
            self._lane = None

    async def _started_lane(self) -> RenderLane:
        async with self._starting:
            if self._lane is None:
                lane = RenderLane(self.limits, self.cfg.user_agent)
                await lane.__aenter__()
                if not lane.available:  # said once per batch; the pages say it each
                    log.warning("render lane unavailable, pages stay HTML-only: %s",
                                lane.unavailable_reason)  # fmt: skip
                self._lane = lane
            return self._lane

    async def _decision(self, key: tuple[str, str], sample: Sample | None = None) -> RenderDecision:
        known = self.decisions.get(key)
        if (
            known is not None
            and known.decided_at is not None
            and self.clock() - known.decided_at <= self.rule.resample_after_s
        ):
            return known  # decided and in force: it takes no samples, and no store call
        decision = await self._advance(key[0], key[1], sample)
        self.decisions[key] = decision
        return decision

    async def consider(self, url: str, origin: str, body: bytes, content_type: str,
                       raw: dict[str, Any]) -> RenderChoice | None:  # fmt: skip
        """The lane's choice for a page parsed from its raw HTML (`raw`); None: lane off."""
        if not self.cfg.render.enabled:
            return None
        if not raw["has_script"]:  # nothing can draw text the raw HTML lacks
            return RenderChoice(None, None, Reason.RENDER_NOT_NEEDED.value, None, ())
        ext = raw["extraction"]  # a worker that kept the text counted its words (kept_parse)
        raw_words = ext["words"] if "words" in ext else count_words(ext["text"])
        key = (origin, page_class(url, self.cfg.render.page_classes))
        decision = await self._decision(key)
        if raw_words >= self.cfg.render.skip_above_words:
            if decision.state is RenderState.SAMPLING:
                await self._decision(key, Sample(raw_words, raw_words))
            return RenderChoice(None, None, Reason.RENDER_NOT_NEEDED.value, None, ())
        if decision.state is RenderState.PLAIN:
            return RenderChoice(None, None, Reason.RENDER_NOT_NEEDED.value, None, ())
        if self.limits.budget_s <= 0:  # no render seconds at all: no browser to start either
            return RenderChoice(None, None, Reason.RENDER_FALLBACK.value, "render_budget_spent", ())
        lane = await self._started_lane()
        records: list[FetchRecord] = []
        gate = self._gates(records.append)
        page = PageContext(url, self.clock() + self.limits.page_timeout_s)

        async def answer(req: SubRequest) -> SubAnswer:
            return await gate.answer(req, page)

        rendered = await lane.render(url, body, content_type, answer)
        subs = tuple(records)
        log.info("render %s: %s in %.1f s (%s), %d subrequests", url, rendered.reason,
                 rendered.elapsed_s, "complete" if rendered.complete else "still loading",
                 len(rendered.subrequests))  # fmt: skip
        if rendered.html is None:
            reason = (Reason.RENDER_UNAVAILABLE if rendered.reason == "render_unavailable"
                      else Reason.RENDER_FALLBACK)  # fmt: skip
            return RenderChoice(None, None, reason.value, rendered.reason, subs)
        dom = rendered.html.encode("utf-8")
        try:
            parsed = await self._extract(dom, url)
        except ParserFailure as exc:  # the rendered DOM broke the parser: the raw page stands
            return RenderChoice(None, None, Reason.RENDER_FALLBACK.value, exc.reason, subs)
        rendered_words = count_words(parsed["extraction"]["text"])
        if not rendered.complete and rendered_words <= raw_words:
            # still loading when its time was up, and nothing gained: no measurement either
            return RenderChoice(None, None, Reason.RENDER_FALLBACK.value, "render_incomplete", subs)
        if decision.state is RenderState.SAMPLING:
            decision = await self._decision(key, Sample(raw_words, rendered_words))
        if rendered_words > raw_words and decision.state is not RenderState.PLAIN:
            return RenderChoice(parsed, dom, Reason.RENDER_NEEDED.value, None, subs)
        return RenderChoice(None, None, Reason.RENDER_NOT_NEEDED.value, None, subs)
