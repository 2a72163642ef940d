"""The render lane's subrequests, answered the way Atlas answers any request: nothing relaxes.

A rendered page asks for scripts, JSON, styles and frames. Each one here passes, in order:
its method (GET and HEAD only), its URL (http(s), Atlas's normal form), the robots rules of
its own origin (an origin whose robots.txt Atlas does not know yet has it fetched first, as
a claim's robots task would; when that cannot be done before the page's render ends, the
request is refused, not guessed: `render_robots_unknown`), that origin's bucket in the coordination store (its gap, its
in-flight cap, Retry-After backoffs and pauses, taken atomically by `hold_slot`, whose slot is
held until the answer is in and counts in every run's claims; the page's own lease gave its
slot back when its document arrived, so a subrequest to the page's origin waits for a free
slot like any request; the session's `on_sent`
moves the clock again if the request leaves late, as for every claim), then the egress gate
with pinned addresses and the byte and time caps of `fetcher.fetch`. Every request that
left is reported as a `FetchRecord` of kind `subresource` (with its reason: `fetched`, or the
fetch's own error code such as `egress_refused` or `timeout`), so the politeness audit sees
plain and rendered requests together.
"""

from __future__ import annotations

import asyncio
import uuid
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

# (origin, deadline) -> its robots policy, learnt by then if Atlas has none; None: not in time
RobotsLookup = Callable[[str, float], Awaitable[RobotsPolicy | None]]
# (origin, shard, now, hold_s) -> (when, gap, the in-flight slot held if taken now), and its
# release: the store's hold_slot and release_sub_slots
Reserve = Callable[[str, int, float, float], Awaitable[tuple[float, float, str | None]]]
Release = Callable[[str], Awaitable[None]]
# The origin's send turn: (origin, gap, key, deadline) -> wait until this process may send to
# it (no other request of the process about to leave, the gap since its last send or answer
# kept) and hold the turn until the request with trace context `lease_id == key` leaves (the
# session's `on_sent` gives it back) or the returned release is called; None, holding
# nothing, when that wait would pass the deadline.
Turn = Callable[[str, float, str, float], Awaitable[Callable[[], None] | None]]


@dataclass(slots=True)
class SubSend:
    """The trace context of a subrequest: what the session's `on_sent` needs to move the
    origin's clock when the request leaves later than its reservation (the fields of a claim
    it reads), and where it notes when the request left."""

    origin: str
    gap_s: float
    claimed_at: float
    lease_id: str = ""
    sent_at: float | None = None


@dataclass(frozen=True, slots=True)
class PageContext:
    """The page a subrequest belongs to, and the time by which its render must be done."""

    url: str
    deadline: float


class SubrequestGate:
    def __init__(
        self,
        cfg: CrawlConfig,
        session: aiohttp.ClientSession,
        gate: EgressGate,
        robots: RobotsLookup,
        reserve: Reserve,
        release_slot: Release,
        turn: Turn,
        clock: Callable[[], float],
        on_request: Callable[[FetchRecord], None],
    ) -> None:
        self.cfg, self.session, self.gate, self.clock = cfg, session, gate, clock
        self._robots, self._reserve, self._turn = robots, reserve, turn
        self._release_slot = release_slot
        self._on_request = on_request
        self._gaps: dict[str, float] = {}  # each origin's gap, as its reservations said
        self._giving_back: set[asyncio.Future[None]] = set()  # slots of abandoned reservations

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
        policy = await self._robots(origin, page.deadline)
        if policy is None:
            return SubAnswer("render_robots_unknown")
        if not policy.allows(url, self.cfg.robots_token):
            return SubAnswer("robots_disallowed")
        shard = shard_of(origin, self.cfg.shards)
        key = f"sub-{uuid.uuid4().hex}"
        release: Callable[[], None] | None = None
        slot: str | None = None
        try:
            # Taken in this order: the process's turn (so no two of its requests to the origin
            # leave together after waiting on one connection), then the store's slot, held in
            # flight for every run to count until the answer is in (or the page's time is up).
            # The turn is held until the request leaves, and waits out the gap from the last
            # send (or answer); a gap learnt only now from the store means one more turn with
            # the right one.
            while True:
                known = self._gaps.get(origin, 0.0)
                release = await self._turn(origin, known, key, page.deadline)
                if release is None:
                    return SubAnswer("render_origin_busy")
                now = self.clock()
                # held for as long as the request may still run once it leaves; released as
                # soon as its answer is in
                hold = max(page.deadline - now, 0.0) + self.cfg.limits.total_timeout_s
                at, gap, slot = await self._reserved(origin, shard, now, hold)
                self._gaps[origin] = gap
                if at <= now and gap > known and slot is not None:
                    await self._release_slot(slot)  # the turn again, with the gap it has
                    slot = None
                if at <= now and gap <= known:
                    break
                release()
                release = None
                if at > page.deadline:
                    return SubAnswer("origin_paused" if at == float("inf")
                                     else "render_origin_busy")  # fmt: skip
                await asyncio.sleep(max(at - now, 0.0))
            return await self._send(url, origin, policy, page, SubSend(origin, gap, now, key))
        finally:
            if release is not None:
                release()
            if slot is not None:
                await asyncio.shield(self._release_slot(slot))

    async def _reserved(self, origin: str, shard: int, now: float,
                        hold_s: float) -> tuple[float, float, str | None]:  # fmt: skip
        """The store's reservation, which a page's end cannot leave half done: a slot taken
        by a reservation the page stopped waiting for is given back when it arrives."""
        call = asyncio.ensure_future(self._reserve(origin, shard, now, hold_s))
        try:
            return await asyncio.shield(call)
        except asyncio.CancelledError:
            call.add_done_callback(self._give_back)
            raise

    def _give_back(self, call: asyncio.Future[tuple[float, float, str | None]]) -> None:
        if not call.cancelled() and call.exception() is None and (slot := call.result()[2]):
            task = asyncio.ensure_future(self._release_slot(slot))
            self._giving_back.add(task)
            task.add_done_callback(self._giving_back.discard)

    async def _send(self, url: str, origin: str, policy: RobotsPolicy, page: PageContext,
                    ctx: SubSend) -> SubAnswer:  # fmt: skip
        try:
            resp = await fetch(self.session, self.gate, url, {}, self.cfg.limits.max_body_bytes,
                               trace_ctx=ctx, max_header_bytes=self.cfg.limits.max_header_bytes)  # fmt: skip
        except asyncio.CancelledError:
            if ctx.sent_at is not None:  # it reached the origin: it is a request of the crawl
                self._on_request(FetchRecord(
                    kind="subresource", url=url, origin=origin, reason=Reason.INTERRUPTED.value,
                    started_at=ctx.sent_at, elapsed_s=round(self.clock() - ctx.sent_at, 6),
                    robots_version=policy.version, original_url=page.url,
                    error="its page's render ended first",
                ))  # fmt: skip
            raise
        reason = resp.error or (
            "fetched" if resp.status is not None else Reason.NETWORK_ERROR.value
        )
        self._on_request(FetchRecord(
            kind="subresource", url=url, origin=origin, status=resp.status, reason=reason,
            content_type=resp.headers.get("content-type"), bytes=len(resp.body),
            # when it left (its wait for a connection is not the origin's concern)
            started_at=ctx.sent_at or resp.started_at, elapsed_s=round(resp.elapsed_s, 6),
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
