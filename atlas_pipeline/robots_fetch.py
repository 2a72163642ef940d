"""robots.txt in a fetch batch: a claim's robots task fetched and stored, its redirect hops
paced like any request to the origin they reach, and the policies of origins a rendered
page's subrequests go to learnt on demand.

`RobotsFetching` is a part of `batch.FetchBatch`, kept in its own module so that each reads
on its own: it uses the batch's store runners (`_off`, `_durably`), its send gate
(`_send_turn`, `_release_send`), its ownership check and its state (the policies it holds,
the hops waiting for a slot), declared below for the type checker.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

import aiohttp

from . import defaults as d
from .classify import MAX_RETRY_AFTER_S, REDIRECTS
from .config import CrawlConfig
from .coordination import CoordinationStore, RobotsTask
from .errors import StaleAttempt, StoreUnavailable
from .fetcher import Response, fetch
from .outcomes import redacted
from .politeness import origin_gap, parse_retry_after
from .reasons import Reason
from .records import FetchRecord
from .robots import RobotsPolicy, RobotsStatus, decode_robots, status_for_http
from .scope import ScopeGuard
from .urls import BadUrl, normalize, origin_of, shard_of

if TYPE_CHECKING:
    from .batch import BatchStats, StoreOutage
    from .egress import EgressGate

T = TypeVar("T")

ROBOTS_MAX_HOPS = 5
MAX_SLEEP_S = 0.5  # the batch looks at the store again at least this often (other runs change it)


class RobotsFetching:
    """The robots.txt half of a fetch batch (see the module docstring)."""

    cfg: CrawlConfig
    store: CoordinationStore
    session: aiohttp.ClientSession
    gate: EgressGate
    guard: ScopeGuard
    stats: BatchStats
    outage: StoreOutage
    cycle: str
    shard: int
    clock: Callable[[], float]
    _policies: dict[str, RobotsPolicy]
    _learning: dict[str, asyncio.Future[bool]]
    _holding: dict[str, asyncio.Lock]
    _hops: list[_Hop]
    _net_active: int
    _wake: asyncio.Event

    if TYPE_CHECKING:  # the batch's own, used here

        async def _off(self, call: Callable[..., T], *args: Any) -> T: ...

        async def _durably(self, call: Callable[..., T], *args: Any) -> T: ...

        async def _send_turn(
            self, origin: str, gap_s: float, key: str, deadline: float
        ) -> Callable[[], None] | None: ...

        def _release_send(self, lease_id: str) -> None: ...

        def _not_owned(self, origin: str, token: int | None) -> str | None: ...

    async def _robots_policy(self, origin: str, deadline: float) -> RobotsPolicy | None:
        """The robots policy in force for `origin`: this batch's, else the store's while it is
        fresh, else learnt now (`_learn_robots`) if that fits before `deadline`; None when
        Atlas has none in time (a subrequest there is refused, not guessed)."""
        while (policy := self._policies.get(origin)) is None:
            rec = await self._durably(self.store.robots, origin)
            if rec is not None and rec.expires_at > self.clock():
                # kept for the batch, as a robots fetch's own policy is: a page's every script
                # and XHR to that origin asks again
                policy = RobotsPolicy(origin, rec.version, RobotsStatus(rec.status), rec.text)
                self._policies[origin] = policy
                return policy
            learning = self._learning.get(origin)
            if learning is None:  # one fetch per origin, however many subrequests wait on it
                learning = asyncio.ensure_future(self._learn_robots(origin, deadline))
                self._learning[origin] = learning
                learning.add_done_callback(lambda _: self._learning.pop(origin, None))
            if not await asyncio.shield(learning) and self.clock() >= deadline:
                return None
            # learnt (in _policies now), or not in the time of the page that started it while
            # this one has longer: round again
        return policy

    async def _learn_robots(self, origin: str, deadline: float) -> bool:
        """Fetch the robots.txt of an origin a rendered page asks for (a script or an XHR on
        another origin) as a claim's robots task: the process's send turn, then the store's
        robots lease with its bucket's slot. Its sitemaps are not followed: the origin is
        not in the crawl for having served a page a script. True once the batch holds the
        policy (fetched here, or by another run meanwhile); False when not by `deadline`."""
        shard = shard_of(origin, self.cfg.shards)
        key = f"robots-{uuid.uuid4().hex}"
        while self.clock() < deadline:
            release = await self._send_turn(origin, self.cfg.politeness.min_gap_s, key, deadline)
            if release is None:
                return False
            handed = False
            try:
                now = self.clock()
                got = await self._durably(self.store.claim_robots, origin, shard, now,
                                          self.cfg.lease_s)  # fmt: skip
                if isinstance(got, RobotsTask):
                    self._holding[got.lease_id] = self._holding.pop(key)  # freed when it leaves
                    handed = True
                    self._net_active += 1
                    try:
                        await self._fetch_robots(got, discover=False)
                    finally:
                        self._release_send(got.lease_id)
                    return origin in self._policies
            finally:
                if not handed:
                    release()
            if got == now:  # known already: another run learnt it meanwhile
                rec = await self._durably(self.store.robots, origin)
                if rec is not None:
                    self._policies[origin] = RobotsPolicy(origin, rec.version,
                                                          RobotsStatus(rec.status), rec.text)  # fmt: skip
                    return True
            # paused, backed off, its slot taken, or another run fetching it (its lease can
            # outlast the page though the fetch takes a moment): look again soon
            await asyncio.sleep(min(max(got - now, 0.01), d.ROBOTS_POLL_S))
        return False

    async def _reserve_hops(self, now: float) -> float:
        """Take the slots of robots redirect hops that are due; the soonest time another one
        falls due (inf when none waits)."""
        soonest = float("inf")
        for hop in list(self._hops):
            if hop.not_before <= now:
                try:
                    at = await self._off(self.store.reserve_hop, hop.origin, hop.shard, now)
                except StoreUnavailable as exc:
                    self.outage.failed(exc)
                    return now + MAX_SLEEP_S
                if at <= now or at > hop.deadline:
                    self._hops.remove(hop)
                    hop.taken.set_result(at <= now)
                    continue
                hop.not_before = at
            soonest = min(soonest, hop.not_before)
        return soonest

    async def _fetch_robots(self, task: RobotsTask, discover: bool = True) -> None:
        url = f"{_origin_base(task.origin)}/robots.txt"
        try:
            if self._not_owned(task.origin, task.owner_token) is not None:
                return  # its robots lease runs out and the origin's next owner fetches it
            resp = await self._get_following(url, task)
        finally:
            self._net_active -= 1
        self.stats.robots_requests += 1
        now = self.clock()
        status = (
            status_for_http(resp.status)
            if resp.status and not resp.error
            else RobotsStatus.UNREACHABLE
        )
        text, ttl, backoff_until, good = "", self.cfg.robots.cache_s, 0.0, False
        if status is RobotsStatus.PARSED:
            text, good = decode_robots(resp.body, self.cfg.robots.max_bytes), True
        elif status is RobotsStatus.THROTTLED:
            wait = parse_retry_after(resp.headers.get("retry-after"), now)
            ttl = (
                min(wait, MAX_RETRY_AFTER_S)
                if wait is not None
                else self.cfg.robots.throttled_backoff_s
            )
            backoff_until = now + ttl
        elif status is RobotsStatus.UNREACHABLE:
            ttl = self.cfg.robots.unreachable_backoff_s
            backoff_until = now + ttl
            status, text = await self._last_good_copy(task.origin, now)
        policy = RobotsPolicy(task.origin, 0, status, text)
        gap = origin_gap(self.cfg.politeness.min_gap_s, policy.crawl_delay(self.cfg.robots_token),
                         self.cfg.politeness.crawl_delay_cap_s)  # fmt: skip
        # the gap (Crawl-delay included) runs from this robots.txt request: its answer is in
        not_before = now + gap + self.cfg.politeness.gap_guard_s if gap > 0 else 0.0
        record = FetchRecord(
            kind="robots", url=url, origin=task.origin, status=resp.status, reason=status.value,
            content_type=resp.headers.get("content-type"), bytes=len(resp.body),
            started_at=resp.started_at, elapsed_s=round(resp.elapsed_s, 6),
            location=redacted(resp.headers.get("location")), lease_id=task.lease_id,
            error=resp.detail,
        )  # fmt: skip
        try:
            stored = await self._durably(
                lambda: self.store.put_robots(task, status.value, text, now, ttl, backoff_until, gap,
                                              good, cycle=self.cycle, shard=self.shard, record=record,
                                              not_before=not_before)
            )  # fmt: skip
        except StaleAttempt:
            self.stats.stale_commits += 1  # the robots lease ran out; another claim refetches it
            return
        policy = RobotsPolicy(task.origin, stored.version, RobotsStatus(stored.status), stored.text)
        self._policies[task.origin] = policy
        sitemaps = policy.sitemaps() if discover and self.cfg.discovery.robots_sitemaps else []
        announced = self.guard.announced_sitemaps(sitemaps, url)
        if announced:
            await self._durably(self.store.discover, announced, self.cycle)

    async def _last_good_copy(self, origin: str, now: float) -> tuple[RobotsStatus, str]:
        prev = await self._durably(self.store.robots, origin)
        good_at = await self._durably(self.store.robots_good_at, origin)
        fresh_enough = good_at is not None and now - good_at <= self.cfg.robots.stale_grace_s
        if prev and prev.status == RobotsStatus.PARSED.value and fresh_enough:
            return RobotsStatus.PARSED, prev.text
        return RobotsStatus.UNREACHABLE, ""

    async def _get_following(self, url: str, task: RobotsTask) -> Response:
        """robots.txt: up to 5 redirects, each hop through the egress gate and paced like any
        request to the origin it goes to."""
        seen = {url}
        ctx: RobotsTask | None = task
        for hop in range(ROBOTS_MAX_HOPS + 1):
            if hop and not await self._hop_slot(url, task):
                break
            resp = await fetch(self.session, self.gate, url, {}, self.cfg.robots.max_bytes,
                               truncate=True, trace_ctx=ctx)  # fmt: skip
            if resp.status not in REDIRECTS or "location" not in resp.headers:
                return resp
            try:
                url = normalize(resp.headers["location"], url, self.guard.tracking)
            except BadUrl:
                return resp
            if url in seen:
                break
            seen.add(url)
            # a later hop to the task's own origin leaves late: its clock moves again when it
            # does (claimed_at in the past forces the push); reserve_hop moved any other's
            ctx = replace(task, claimed_at=-1.0) if origin_of(url) == task.origin else None
        resp = Response(url=url, status=None, started_at=self.clock())
        resp.error = Reason.NETWORK_ERROR.value
        resp.detail = "robots.txt redirect loop, more than 5 hops, or its target busy or paused"
        return resp

    async def _hop_slot(self, url: str, task: RobotsTask) -> bool:
        """Wait until the next hop may start. Within the task's origin the robots lease holds
        its slot and the hop waits out the gap; another origin's slot and clock are taken in
        the store like a claim's (False when it stays busy or paused too long)."""
        target = origin_of(url)
        if target == task.origin:
            await asyncio.sleep(task.gap_s)
            return True
        # The loop takes the slot for the hop, in the turn it falls due and before that turn's
        # claim: the hop was claimed, with its robots task, before anything the claim takes.
        hop = _Hop(target, shard_of(target, self.cfg.shards),
                   self.clock() + self.cfg.limits.total_timeout_s,
                   asyncio.get_running_loop().create_future())  # fmt: skip
        self._hops.append(hop)
        self._wake.set()
        return await hop.taken


@dataclass
class _Hop:
    """A robots redirect hop into another origin, waiting for the loop to take its slot."""

    origin: str
    shard: int
    deadline: float
    taken: asyncio.Future[bool]
    not_before: float = 0.0


def _origin_base(origin: str) -> str:
    scheme, rest = origin.split("://", 1)
    host, port = rest.rsplit(":", 1)
    default = {"http": "80", "https": "443"}[scheme]
    return f"{scheme}://{host}" if port == default else f"{scheme}://{host}:{port}"
