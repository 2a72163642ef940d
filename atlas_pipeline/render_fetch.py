"""The render lane's subrequests, answered the way Atlas answers any request: nothing relaxes.

A rendered page asks for scripts, JSON, styles and frames. Each one here passes, in order:
its method (GET and HEAD only), its URL (http(s), Atlas's normal form), the robots rules of
its own origin (an origin whose robots.txt Atlas does not know yet is refused, not guessed:
`render_robots_unknown`), that origin's bucket in the coordination store (its gap, its
in-flight cap, Retry-After backoffs and pauses, taken atomically by `reserve_hop`, the page's
own lease counting as the slot of a request to its own origin; the session's `on_sent`
moves the clock again if the request leaves late, as for every claim), then the egress gate
with pinned addresses and the byte and time caps of `fetcher.fetch`. Every request that
left is reported as a `FetchRecord` of kind `subresource` (with its reason: `fetched`, or the
fetch's own error code such as `egress_refused` or `timeout`), so the politeness audit sees
plain and rendered requests together.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import aiohttp

from .config import CrawlConfig
from .egress import EgressGate
from .errors import EgressRefused
from .fetcher import fetch
from .reasons import Reason
from .records import FetchRecord
from .render import SubAnswer, SubRequest
from .robots import RobotsPolicy
from .urls import normalize, origin_of, shard_of

RobotsLookup = Callable[[str], Awaitable[RobotsPolicy | None]]
Reserve = Callable[[str, int, float, int], Awaitable[tuple[float, float]]]


@dataclass(frozen=True, slots=True)
class SubSend:
    """The trace context of a subrequest: what the session's `on_sent` needs to move the
    origin's clock when the request leaves later than its reservation (the fields of a claim
    it reads)."""

    origin: str
    gap_s: float
    claimed_at: float
    lease_id: str = ""


@dataclass(frozen=True, slots=True)
class PageContext:
    """The page a subrequest belongs to: its origin (whose lease the render holds) and the
    time by which its render must be done."""

    url: str
    origin: str
    deadline: float


class SubrequestGate:
    def __init__(
        self,
        cfg: CrawlConfig,
        session: aiohttp.ClientSession,
        gate: EgressGate,
        robots: RobotsLookup,
        reserve: Reserve,
        clock: Callable[[], float],
        on_request: Callable[[FetchRecord], None],
    ) -> None:
        self.cfg, self.session, self.gate, self.clock = cfg, session, gate, clock
        self._robots, self._reserve, self._on_request = robots, reserve, on_request

    async def answer(self, req: SubRequest, page: PageContext) -> SubAnswer:
        if req.method not in ("GET", "HEAD"):
            return SubAnswer("render_method_refused")
        try:
            url = normalize(req.url)
            origin = origin_of(url)
        except ValueError:
            return SubAnswer("render_url_refused")
        try:  # an address literal (a loopback canary, a metadata service) goes no further
            self.gate.check_url(url)
        except EgressRefused:
            return SubAnswer(Reason.EGRESS_REFUSED.value)
        except ValueError:
            return SubAnswer("render_url_refused")
        policy = await self._robots(origin)
        if policy is None:
            return SubAnswer("render_robots_unknown")
        if not policy.allows(url, self.cfg.robots_token):
            return SubAnswer("robots_disallowed")
        held = 1 if origin == page.origin else 0
        shard = shard_of(origin, self.cfg.shards)
        while True:
            now = self.clock()
            at, gap = await self._reserve(origin, shard, now, held)
            if at <= now:
                break
            if at > page.deadline:
                return SubAnswer("origin_paused" if at == float("inf") else "render_origin_busy")
            await asyncio.sleep(at - now)
        resp = await fetch(self.session, self.gate, url, {}, self.cfg.limits.max_body_bytes,
                           trace_ctx=SubSend(origin, gap, now),
                           max_header_bytes=self.cfg.limits.max_header_bytes)  # fmt: skip
        reason = (
            "fetched" if resp.status is not None and not resp.error else "render_subrequest_failed"
        )
        self._on_request(FetchRecord(
            kind="subresource", url=url, origin=origin, status=resp.status, reason=reason,
            content_type=resp.headers.get("content-type"), bytes=len(resp.body),
            started_at=resp.started_at, elapsed_s=round(resp.elapsed_s, 6),
            etag=resp.headers.get("etag"), last_modified=resp.headers.get("last-modified"),
            robots_version=policy.version, error=resp.detail, original_url=page.url,
        ))  # fmt: skip
        if resp.status is None or resp.error:
            return SubAnswer(reason)
        headers = {k: v for k, v in resp.headers.items() if k in _PASSED_HEADERS}
        return SubAnswer("fetched", resp.status, headers, resp.body)


# what the page may learn of a response: its type and where a redirect points (the browser
# follows it as a new request, which comes back through this gate)
_PASSED_HEADERS = frozenset({"content-type", "location", "last-modified", "etag"})
