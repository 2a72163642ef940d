"""A fetch batch: drain one (cycle, shard) queue with an async fetcher, extraction overlapping.

Per URL: claim (lease + fence, origin clock advanced) -> egress-checked bounded GET ->
slot released -> body put (idempotent) -> parse in a worker process -> fenced commit that
stores the fetch record, the document and the parse manifest (links) in one transaction.
The lake is written from those committed records afterwards, so a crash loses nothing.
This module is the loop (claims, the send gate, group commits); robots.txt is fetched by
`robots_fetch.py`'s part of the batch, what an answer means is `classify.py`'s pure rule, and
what gets committed for it is built in `outcomes.py`.
It runs past 400 lines because the loop's state (spool, slots, clocks, send locks, hops)
is one object whose turns must be read together.

The event loop never waits on the store or a disk. Every store call runs on one store thread
of the batch (`_off`: its own connection, calls in submission order, so a clock pushed when a
request left is in before any later claim), body-store reads and writes on a small pool of
their own (`_blob`); the loop only awaits them. Each turn the loop group-commits the spooled
results, pushes origin clocks, and claims as many URLs as there is room for while giving
back finished slots in the same transaction. When the store is unreachable the loop stops
claiming, keeps the spool (bounded: nothing new is leased) and retries with backoff; past
`limits.store_outage_s` the batch fails with a clear error. tests/engine/test_loop_never_blocks
checks both: a store whose every call sleeps stalls no loop callback, and no store, body or
lake call in this module is made except through `_off` / `_blob`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import random
import signal
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from . import defaults as d
from . import failpoints
from .backlog import claim_room
from .bodies import Bodies
from .classify import ClassifyPolicy, classify
from .config import CrawlConfig
from .coordination import (
    CoordinationStore,
    Drained,
    Lease,
    Outcome,
    RobotsTask,
    UrlState,
    Wait,
)
from .egress import DnsCachePolicy, EgressGate
from .errors import StoreOutageTooLong, StoreUnavailable
from .extractor_pool import ExtractorPool
from .fetcher import Response, fetch, make_session
from .heap import start_heap_frozen
from .outcomes import Outcomes
from .politeness import send_delay
from .reasons import Reason
from .records import FetchRecord
from .regions.keeper import OwnershipKeeper, refresh_quietly
from .render_fetch import SubrequestGate, SubSend
from .render_policy import RenderDecision, Sample
from .render_step import RenderStep
from .robots import RobotsPolicy
from .robots_fetch import MAX_SLEEP_S, RobotsFetching, _Hop
from .scope import ScopeGuard
from .stop import is_error

log = logging.getLogger(__name__)
T = TypeVar("T")

SWEEP_EVERY_S = 1.0
OUTAGE_RETRY_S = (0.1, 5.0)  # first and longest wait between attempts on an unreachable store


@dataclass
class BatchStats:
    """What one batch did, for asset metadata and logs."""

    cycle: str
    shard: int
    started_at: float
    finished_at: float = 0.0
    requests: int = 0
    robots_requests: int = 0
    bytes: int = 0
    extracted: int = 0
    extraction_reused: int = 0
    stale_commits: int = 0
    deferred: int = 0
    store_outages: int = 0  # times the store became unreachable during the batch
    store_outage_s: float = 0.0  # total time it was unreachable
    max_held: int = 0  # most finished results held while the store was unreachable
    paused: int = 0  # URLs left open because an operator paused their origin or domain
    interrupted: bool = False  # stopped on Ctrl-C (FetchBatch.interrupt)
    given_back: int = 0  # URLs in flight at an interrupt, back in the queue untried
    deadline_hit: bool = False  # limits.batch_max_s ended the batch; `deferred` URLs wait
    outcomes: Counter[str] = field(default_factory=Counter)
    statuses: Counter[str] = field(default_factory=Counter)  # per request: "200", or "none"
    render: dict[str, Any] = field(default_factory=dict)  # the render lane's figures
    not_owned: int = 0  # regions: requests held back because the ownership lease had ended
    ownership: dict[str, int] = field(default_factory=dict)  # regions: the keeper's counts
    claims: int = 0  # claims that leased URLs (a store transaction each)
    claimed: int = 0  # URLs those claims leased: claimed / claims is the store's batching
    slot_returns: int = 0  # transactions that only gave finished slots back (claims do too)

    @property
    def errors(self) -> int:
        """Requests that failed: no response, or a 5xx (what --max-errors counts)."""
        return sum(n for status, n in self.statuses.items()
                   if is_error(None if status == "none" else status))  # fmt: skip

    @property
    def elapsed_s(self) -> float:
        return self.finished_at - self.started_at

    def progress_line(self, now: float) -> str:
        """One log line: what the batch did so far, how fast, with which answers."""
        took = max(now - self.started_at, 1e-9)
        statuses = " ".join(f"{k}={n}" for k, n in sorted(self.statuses.items())) or "none yet"
        return (f"{self.cycle}/shard {self.shard}: {self.requests} requests "
                f"({self.requests / took:.1f}/s), statuses {statuses}, {self.errors} errors, "
                f"{self.extracted} extracted, {self.bytes / 1e6:.1f} MB, "
                f"{self.stale_commits} stale commits, {took:.0f} s")  # fmt: skip


class StoreOutage:
    """An unreachable store: backoff between attempts; an error once it lasts too long."""

    def __init__(
        self, store_url: str, limit_s: float, stats: BatchStats, clock: Callable[[], float]
    ) -> None:
        self.store_url, self.limit_s, self.stats, self.clock = store_url, limit_s, stats, clock
        self.down_since: float | None = None
        self.retry_at = 0.0
        self._delay = OUTAGE_RETRY_S[0]

    def failed(self, exc: StoreUnavailable) -> float:
        """Note a failed attempt; seconds to wait before the next one."""
        now = self.clock()
        if self.down_since is None:
            self.down_since = now
            self.stats.store_outages += 1
            log.warning("coordination store unreachable, holding results and claims: %s", exc)
        elif now - self.down_since > self.limit_s:
            raise StoreOutageTooLong(
                f"the coordination store {self.store_url} was unreachable for "
                f"{now - self.down_since:.0f} s (limits.store_outage_s = {self.limit_s:g}): {exc}. "
                "Uncommitted results are fetched again once their leases expire; "
                "bring the store back and re-run this partition."
            ) from exc
        delay, self._delay = self._delay, min(self._delay * 2, OUTAGE_RETRY_S[1])
        self.retry_at = now + delay
        return delay

    def ok(self) -> None:
        if self.down_since is not None:
            self.stats.store_outage_s += self.clock() - self.down_since
            log.warning("coordination store reachable again")
        self.down_since, self.retry_at, self._delay = None, 0.0, OUTAGE_RETRY_S[0]


class FetchBatch(RobotsFetching):
    """Runs one batch; construct, then `await run()`."""

    def __init__(
        self,
        cfg: CrawlConfig,
        store: CoordinationStore,
        bodies: Bodies,
        pool: ExtractorPool,
        cycle: str,
        shard: int,
        clock: Callable[[], float] = time.time,
        on_progress: Callable[[BatchStats], None] | None = None,
    ) -> None:
        self.cfg, self.store, self.bodies, self.pool = cfg, store, bodies, pool
        self._on_progress = on_progress
        self.cycle, self.shard, self.clock = cycle, shard, clock
        dns = DnsCachePolicy(cfg.dns.ttl_s, cfg.dns.max_ttl_s, cfg.dns.negative_ttl_s,
                             cfg.dns.cache_entries)  # fmt: skip
        self.gate = EgressGate(cfg.resolve, cfg.resolve_only, dns=dns)
        self.guard = ScopeGuard(cfg)
        self.stats = BatchStats(cycle, shard, clock())
        self.outage = StoreOutage(store.url, cfg.limits.store_outage_s, self.stats, clock)
        self.rng = random.Random()
        self._classify = ClassifyPolicy(cfg.limits.max_attempts, cfg.limits.retry_backoff_s,
                                        cfg.revisit_interval_s)  # fmt: skip
        self._policies: dict[str, RobotsPolicy] = {}
        self.render: RenderStep | None = None  # the render lane, while the batch runs
        self.outcomes = Outcomes(cfg, self.guard, bodies, pool, self.stats, self.rng,
                                 self._policies, self._blob, clock)  # fmt: skip
        self._net_active = 0  # requests on the wire
        self._parsing = 0  # fetched pages waiting for or in extraction
        # Fetching pauses at this many pages awaiting extraction: a few per worker, so no
        # worker idles while the loop is busy, and the pool's queue stays bounded.
        self._parse_backlog = pool.workers * d.PARSE_BACKLOG_PER_WORKER
        self._failure: BaseException | None = None
        # What the loop owes the store: slots to give back, results to commit, clock pushes.
        self._finished: list[tuple[str, int]] = []
        self._finished_since = 0.0  # when the oldest of `_finished` ended
        self._spool: list[tuple[Lease, Outcome, asyncio.Future[bool]]] = []
        self._spool_since = 0.0  # when the oldest result in the spool arrived
        self._pushes: dict[str, tuple[float, float]] = {}
        self._wake = asyncio.Event()
        self._last_sweep = 0.0
        self._db: ThreadPoolExecutor | None = None  # the store thread (run() starts it)
        self._io: ThreadPoolExecutor | None = None  # body-store reads and writes
        self._background: set[asyncio.Task[None]] = set()  # clock pushes from trace callbacks
        # The send gate (politeness.send_delay): what this batch knows of each origin's last
        # send (or answer: politeness.gap_from) and of backoffs learnt after claims; one
        # request per gapped origin at a time between passing the gate and its headers leaving.
        self._sent: dict[str, float] = {}
        self._backoffs: dict[str, float] = {}
        self._send_locks: dict[str, asyncio.Lock] = {}
        self._holding: dict[str, asyncio.Lock] = {}  # lease id -> the send lock it holds
        # robots.txt fetches for the origins of rendered pages' subrequests, by origin
        self._learning: dict[str, asyncio.Future[bool]] = {}
        self._hops: list[_Hop] = []  # robots redirect hops waiting for another origin's slot
        self._stop_at = float("inf")  # after an interrupt: when requests in flight are dropped
        limit = self.cfg.limits.batch_max_s
        self._deadline = self.clock() + limit if limit > 0 else float("inf")
        self._abandoned: list[Lease] = []  # leases whose tasks an interrupt cancelled
        # regions: the leases this region holds, renewed off the loop, checked at each send
        self.owners = (OwnershipKeeper(cfg, store, cycle, shard, clock)
                       if cfg.regions.name else None)  # fmt: skip
        self._spooled: set[str] = set()  # lease ids whose outcome is in the spool

    def interrupt(self) -> None:
        """Ctrl-C: claim nothing more, give requests in flight up to limits.interrupt_grace_s
        to finish, commit what they brought and hand the rest back to the queue. A second
        one stops the batch at once (KeyboardInterrupt): its leases expire, nothing is lost."""
        if self.stats.interrupted:
            raise KeyboardInterrupt
        self.stats.interrupted = True
        self._stop_at = self.clock() + self.cfg.limits.interrupt_grace_s
        log.warning("interrupted: finishing the requests in flight (Ctrl-C again stops at once)")
        self._wake.set()

    async def run(self) -> BatchStats:
        async with self.running():
            # no page is leased before a worker can take it: a lease would otherwise run while
            # the page waits for the workers' imports (seconds on a busy machine)
            await self._blob(self.pool.wait_warm, self.pool.wall_s)
            ticker = asyncio.create_task(self._tick_progress()) if self._on_progress else None
            try:
                await self._loop()
            finally:
                if ticker is not None:
                    ticker.cancel()
            if self._background:
                await asyncio.gather(*self._background)
            try:
                self.stats.paused = await self._off(self.store.mark_paused, self.cycle, self.shard)
            except StoreUnavailable as exc:
                log.warning("could not label the URLs of paused origins: %s", exc)
        self.stats.finished_at = self.clock()
        return self.stats

    async def _tick_progress(self) -> None:
        """A progress line every `limits.progress_every_s` whatever the loop is waiting on;
        the callback (a Dagster log write: a database) runs off the loop."""
        assert self._on_progress is not None
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(self.cfg.limits.progress_every_s)
            await loop.run_in_executor(self._io, self._on_progress, self.stats)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """What a batch runs with: its store thread, its body pool and its HTTP session."""
        self._db = ThreadPoolExecutor(1, thread_name_prefix=f"atlas-store-{self.shard}")
        self._io = ThreadPoolExecutor(
            d.BODY_THREADS, thread_name_prefix=f"atlas-bodies-{self.shard}"
        )
        keeping: asyncio.Task[None] | None = None
        try:
            self.outcomes.overrides = await self._durably(self.store.policy_overrides)
            if self.owners is not None:
                await self._keep_owners(once=True)  # the first claim needs leases to look at
                keeping = asyncio.create_task(self._keep_owners())
            async with make_session(
                self.cfg, self.gate, self._on_sent, self._on_answered
            ) as session:
                self.session = session
                if self.cfg.render.enabled:
                    self.render = RenderStep(self.cfg, self.outcomes.extract_dom,
                                             self._subrequest_gate, self._render_sample,
                                             self.clock)  # fmt: skip
                    self.outcomes.render = self.render
                try:
                    yield
                finally:
                    for learning in list(self._learning.values()):
                        learning.cancel()  # no page waits for them now
                    await asyncio.gather(*self._learning.values(), return_exceptions=True)
                    if self.render is not None:
                        self.stats.render = self.render.summary()
                        await self.render.close()
        finally:
            if keeping is not None:
                keeping.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await keeping
            if self.owners is not None:
                await self._blob(self.owners.release_done)
                self.stats.ownership = dict(vars(self.owners.stats))
                await self._blob(self.owners.close)
            with contextlib.suppress(Exception):
                await self._off(self.store.close)  # the store thread's own connection
            self._db.shutdown(wait=True)
            self._io.shutdown(wait=True)

    async def _keep_owners(self, once: bool = False) -> None:
        """Regions: renew and ask for leases every `regions.renew_every_s`, on the body
        threads (a network call and a store write; never on the loop). The first round's
        error fails the batch (a control plane that cannot work, say); a later one is logged
        and the round tried again, while the leases held run out on their own."""
        assert self.owners is not None
        while True:
            try:
                await self._blob(refresh_quietly, self.owners)
            except Exception:
                if once:
                    raise
                log.exception("region %s: renewing ownership failed", self.owners.region)
            self._wake.set()  # an origin just granted may be claimed at once
            if once:
                return
            await asyncio.sleep(self.cfg.regions.renew_every_s)

    def _not_owned(self, origin: str, token: int | None) -> str | None:
        """Regions: why a request to `origin` may not leave now (the egress check)."""
        if self.owners is None:
            return None
        refusal = self.owners.refusal(origin, token, self.clock())
        if refusal is not None:
            self.stats.not_owned += 1
        return refusal

    def _subrequest_gate(self, on_request: Callable[[FetchRecord], None]) -> SubrequestGate:
        """What answers a rendered page's requests: this batch's session (its sends move the
        origins' clocks, `_on_sent`), egress gate, robots policies and the store's buckets."""
        return SubrequestGate(self.cfg, self.session, self.gate, self._robots_policy,
                              self._hold_slot, self._release_sub_slot, self._send_turn,
                              self.clock, on_request)  # fmt: skip

    async def _send_turn(self, origin: str, gap_s: float, key: str,
                         deadline: float) -> Callable[[], None] | None:  # fmt: skip
        """The origin's send lock, as a claim's `_clear_to_send` takes it, once `gap_s` has
        passed since this batch's last send to it (or answer); `_on_sent` gives it back when
        the request leaves (the returned release, if it never does). None when that is past
        `deadline`."""
        lock = self._send_locks.setdefault(origin, asyncio.Lock())
        try:
            await asyncio.wait_for(lock.acquire(), max(deadline - self.clock(), 0.0))
        except TimeoutError:
            return None
        self._holding[key] = lock
        while (wait := send_delay(self.clock(), self._sent.get(origin), gap_s,
                                  self._backoffs.get(origin, 0.0))) > 0:  # fmt: skip
            if self.clock() + wait > deadline:
                self._release_send(key)
                return None
            await asyncio.sleep(wait)
        if self._not_owned(origin, None) is not None:
            self._release_send(key)
            return None
        return lambda: self._release_send(key)

    async def _render_sample(self, origin: str, page_class: str,
                             sample: Sample | None) -> RenderDecision:  # fmt: skip
        assert self.render is not None
        return await self._durably(self.store.render_sample, origin, page_class, sample,
                                   self.render.rule, self.clock())  # fmt: skip

    async def _hold_slot(self, origin: str, shard: int, now: float,
                         hold_s: float) -> tuple[float, float, str | None]:  # fmt: skip
        # regions: an origin this region holds no lease on is asked for at the next renewal
        # (the store's slot says no until then)
        self._not_owned(origin, None)
        return await self._off(self.store.hold_slot, origin, shard, now, hold_s)

    async def _release_sub_slot(self, slot_id: str) -> None:
        with contextlib.suppress(StoreUnavailable):  # else it lapses at its own time
            await self._off(self.store.release_sub_slots, [slot_id])

    async def _off(self, call: Callable[..., T], *args: Any) -> T:
        """A store call, on the store thread; the loop goes on while it runs."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._db, functools.partial(call, *args))

    async def _blob(self, call: Callable[..., T], *args: Any) -> T:
        """A body-store read or write (a disk or an object store), off the loop."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._io, functools.partial(call, *args))

    async def _loop(self) -> None:
        tasks: set[asyncio.Task[None]] = set()
        while True:
            self._wake.clear()
            now = self.clock()
            if self._failure is not None:
                raise self._failure  # a bug in a fetch task fails the batch loudly
            if self.stats.interrupted:
                await self._wind_down(tasks)
                return
            if now >= self._deadline:
                await self._end_at_deadline(tasks)
                return
            if not await self._flush(now):
                await self._sleep(min(self.outage.retry_at - now, MAX_SLEEP_S))
                continue
            # before this turn's claim: a hop was claimed, with its robots task, earlier
            next_hop = await self._reserve_hops(now) if self._hops else float("inf")
            room = claim_room(
                self.cfg.politeness.global_concurrency - self._net_active,
                self._parse_backlog - self._parsing,
                self._parse_backlog,
            )
            if room <= 0:
                # Finished slots ride on the next claim's transaction; with the backlog full
                # they go back on their own only once they have waited a window: given back
                # at every turn, they took a transaction per finished request or two (593 of
                # the 10k-page benchmark's 2,610)
                wait = min(MAX_SLEEP_S, max(next_hop - now, 0.0))
                if self._finished:
                    due = self._finished_since + d.GIVE_BACK_WINDOW_S
                    if now >= due:
                        await self._give_back_slots()
                    else:
                        wait = min(wait, due - now)
                await self._sleep(wait)
                continue
            claim = await self._claim(now, room)
            if claim is None:
                continue
            if isinstance(claim, list):
                leased = sum(isinstance(job, Lease) for job in claim)
                self.stats.claims += leased > 0
                self.stats.claimed += leased
                for job in claim:
                    self._start(tasks, job)
                continue
            if isinstance(claim, Drained) and not tasks:
                return
            idle = claim.until - now if isinstance(claim, Wait) else 0.0
            if isinstance(claim, Wait) and not tasks and idle > self.cfg.limits.batch_max_idle_s:
                self.stats.deferred = await self._off(
                    self.store.defer_remaining, self.cycle, self.shard,
                    Reason.DEFERRED_BACKOFF.value,
                )  # fmt: skip
                return
            if next_hop - now < (idle or MAX_SLEEP_S):
                idle = next_hop - now  # a hop falls due first: be there for it
            await self._sleep(min(max(idle, 0.0), MAX_SLEEP_S) if idle else MAX_SLEEP_S)

    async def _end_at_deadline(self, tasks: set[asyncio.Task[None]]) -> None:
        """limits.batch_max_s is up: claim nothing more, let the requests in flight end (each
        within its own timeout) and commit them; the URLs still open wait for the next cycle
        with reason cycle_deadline."""
        self.stats.deadline_hit = True
        log.warning("limits.batch_max_s reached: finishing the requests in flight, leaving the "
                    "rest for the next cycle")  # fmt: skip
        while tasks:
            await self._flush(self.clock())
            await self._give_back_slots()
            await self._sleep(MAX_SLEEP_S)
        self._spool_since = float("-inf")  # nothing more will come: commit now, whatever its size
        await self._commit_rest()
        self.stats.deferred = await self._off(
            self.store.defer_remaining, self.cycle, self.shard, Reason.CYCLE_DEADLINE.value
        )

    async def _commit_rest(self) -> None:
        """Commit every result still held, whatever the commit window, for as long as a store
        outage may last."""
        deadline = self.clock() + self.cfg.limits.store_outage_s
        while (self._spool or self._finished) and self.clock() < deadline:
            if await self._flush(self.clock()):
                self._spool_since = float("-inf")
                await self._give_back_slots()
            else:
                await asyncio.sleep(min(max(self.outage.retry_at - self.clock(), 0.05), 1.0))

    async def _wind_down(self, tasks: set[asyncio.Task[None]]) -> None:
        """After an interrupt: commit results as they come until the tasks end or the grace
        runs out, cancel the rest, give their URLs back (due at once), commit everything."""
        while tasks and self.clock() < self._stop_at:
            await self._flush(self.clock())
            await self._give_back_slots()
            await self._sleep(min(self._stop_at - self.clock(), MAX_SLEEP_S))
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        detail = "interrupted (Ctrl-C) before its answer was handled"
        loop = asyncio.get_running_loop()
        for lease in self._abandoned:  # back in the queue, due at once
            outcome = self._untried(lease, Reason.INTERRUPTED, detail, self.clock())
            self._spool.append((lease, outcome, loop.create_future()))
        self.stats.given_back = len(self._abandoned)
        self._spool_since = float("-inf")  # the window is over: commit now, whatever its size
        await self._commit_rest()

    def _start(self, tasks: set[asyncio.Task[None]], claim: Lease | RobotsTask) -> None:
        self._net_active += 1  # counted from the claim, so the next turn sees it
        if isinstance(claim, Lease):
            failpoints.hit("after_claim")
        job = self._fetch_url(claim) if isinstance(claim, Lease) else self._fetch_robots(claim)
        task = asyncio.create_task(job)
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        task.add_done_callback(self._note_failure)
        task.add_done_callback(lambda _: self._wake.set())

    async def _sleep(self, timeout: float) -> None:
        """Until a task has something for the store (or ends), or `timeout`, or the spool's
        commit window closes."""
        if self._spool:
            timeout = min(timeout, self._spool_since + d.COMMIT_WINDOW_S - self.clock())
        if timeout <= 0:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), timeout)

    # the store pump ------------------------------------------------------------------
    async def _flush(self, now: float) -> bool:
        """Push origin clocks, commit the spool, sweep when due; False while the store is
        unreachable (everything owed is kept for the next attempt). Tasks go on adding to
        the spool and the pushes while a call is out: each call takes what is owed first and
        puts back what it could not deliver."""
        if now < self.outage.retry_at:
            return False
        spool: list[tuple[Lease, Outcome, asyncio.Future[bool]]] = []
        try:
            await self._deliver_pushes()
            if self._spool and (len(self._spool) >= d.COMMIT_GROUP
                                or now >= self._spool_since + d.COMMIT_WINDOW_S):  # fmt: skip
                spool, self._spool = self._spool, []
                applied = await self._off(self.store.commit_batch, [(x, o) for x, o, _ in spool],
                                          self.cycle, self.clock())  # fmt: skip
                for (_, _, fut), ok in zip(spool, applied, strict=True):
                    if not fut.done():
                        fut.set_result(ok)
                spool = []
                failpoints.hit("after_commit")
            if now - self._last_sweep >= SWEEP_EVERY_S:
                await self._off(self.store.sweep, now)
                self._last_sweep = now
        except StoreUnavailable as exc:
            self._spool = spool + self._spool
            self.stats.max_held = max(self.stats.max_held, len(self._spool))
            self.outage.failed(exc)
            return False
        self.outage.ok()
        return True

    async def _claim(
        self, now: float, room: int
    ) -> list[Lease | RobotsTask] | Wait | Drained | None:
        finished, self._finished = self._finished, []
        try:
            # clocks first: a slot given back with this claim must not be claimable sooner
            # than its answer's clock says (_on_answered queued it before the request ended)
            await self._deliver_pushes()
            return await self._off(self.store.claim_batch, self.cycle, self.shard, now,
                                   self.cfg.robots_token, self.cfg.lease_s, room, finished)  # fmt: skip
        except StoreUnavailable as exc:
            self._finished = finished + self._finished
            self.outage.failed(exc)
            return None

    async def _give_back_slots(self) -> None:
        if not self._finished:
            return
        finished, self._finished = self._finished, []
        try:
            await self._deliver_pushes()  # before the slots: as in _claim
            await self._off(self.store.release_slots, finished)
            self.stats.slot_returns += 1
        except StoreUnavailable as exc:
            self._finished = finished + self._finished
            self.outage.failed(exc)

    async def _deliver_pushes(self) -> None:
        """Hand the store the clock pushes owed; on StoreUnavailable they stay owed (merged
        with any queued meanwhile) and the error goes to the caller."""
        if not self._pushes:
            return
        pushes, self._pushes = self._pushes, {}
        try:
            await self._off(self.store.push_origin_clocks,
                            [(o, t, b) for o, (t, b) in pushes.items()])  # fmt: skip
        except StoreUnavailable:
            for origin, (t, b) in pushes.items():
                self._push_clock(origin, t, b)
            raise

    def _push_clock(
        self, origin: str, next_eligible_at: float = 0.0, backoff_until: float = 0.0
    ) -> None:
        t, b = self._pushes.get(origin, (0.0, 0.0))
        self._pushes[origin] = (max(t, next_eligible_at), max(b, backoff_until))
        self._wake.set()

    async def _commit(self, lease: Lease, outcome: Outcome) -> bool:
        fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._spooled.add(lease.lease_id)  # committed by the spool even if this task ends
        if not self._spool:
            self._spool_since = self.clock()
        self._spool.append((lease, outcome, fut))
        self._wake.set()
        return await fut

    async def _durably(self, call: Callable[..., T], *args: Any) -> T:
        """A store call a task cannot do without (robots): retried through an outage."""
        while True:
            try:
                result = await self._off(call, *args)
            except StoreUnavailable as exc:
                await asyncio.sleep(self.outage.failed(exc))
                continue
            self.outage.ok()
            return result

    def _note_failure(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None and self._failure is None:
            self._failure = task.exception()

    # URL fetches ---------------------------------------------------------------------
    def _request_headers(self, lease: Lease) -> dict[str, str]:
        headers = {"Accept": "text/html,application/xhtml+xml;q=0.9,*/*;q=0.1"}
        if lease.conditional:
            if lease.etag:
                headers["If-None-Match"] = lease.etag
            if lease.last_modified:
                headers["If-Modified-Since"] = lease.last_modified
        return headers

    def _body_cap(self, lease: Lease) -> int:
        # a .gz sitemap arrives compressed by its own format, not by Content-Encoding
        return (
            self.cfg.discovery.sitemap_max_bytes
            if lease.kind == "sitemap"
            else (self.cfg.limits.max_body_bytes)
        )

    def _on_sent(self, claim: Lease | RobotsTask | SubSend) -> None:
        # The gap runs between request *starts*: if this request's headers left later than
        # its claim (a busy event loop, a slow store call), the origin's next slot moves with
        # it, at once, so no other run claims that slot in the meantime.
        sent = self.clock()
        if isinstance(claim, SubSend):
            claim.sent_at = sent
        self._sent[claim.origin] = max(self._sent.get(claim.origin, sent), sent)
        if claim.gap_s > 0 and sent - claim.claimed_at > d.START_SLACK_S:
            task = asyncio.create_task(self._push_now(claim.origin, sent + claim.gap_s))
            self._background.add(task)
            task.add_done_callback(self._background.discard)
            task.add_done_callback(self._note_failure)
        # after the push is queued: whoever takes the send lock next reaches the store later
        self._release_send(claim.lease_id)

    def _on_answered(self, claim: Lease | RobotsTask | SubSend) -> None:
        # politeness.gap_from = answer: the origin had started on the request by the time its
        # answer began, whereas the send says nothing of how long the origin queued it first;
        # so the next request to it leaves a gap after this, not after the send. A failure
        # counts too (late, so on the safe side). The store's clock moves with it, before the
        # request's slot goes back (_claim), so no run claims the origin sooner either; the
        # robots fetch moves it itself.
        if self.cfg.politeness.gap_from != "answer":
            return
        now = self.clock()
        self._sent[claim.origin] = max(self._sent.get(claim.origin, now), now)
        if claim.gap_s > 0 and not isinstance(claim, RobotsTask):
            self._push_clock(claim.origin, now + claim.gap_s)

    async def _push_now(
        self, origin: str, next_eligible_at: float = 0.0, backoff_until: float = 0.0
    ) -> None:
        """Move an origin's clock at once (other runs must see it before their next claim:
        the store thread runs it before any claim submitted after it); queued for the store
        pump if the store is unreachable."""
        try:
            await self._off(self.store.push_origin_clocks,
                            [(origin, next_eligible_at, backoff_until)])  # fmt: skip
        except StoreUnavailable:
            self._push_clock(origin, next_eligible_at, backoff_until)

    async def _clear_to_send(self, lease: Lease) -> bool:
        """Wait until the request may leave (politeness.send_delay); False when the wait
        would outlast the lease (a long Retry-After learnt after the claim)."""
        if lease.gap_s > 0:
            lock = self._send_locks.setdefault(lease.origin, asyncio.Lock())
            await lock.acquire()
            self._holding[lease.lease_id] = lock
        while True:
            now = self.clock()
            wait = send_delay(now, self._sent.get(lease.origin), lease.gap_s,
                              self._backoffs.get(lease.origin, 0.0))  # fmt: skip
            if wait <= 0:
                return True
            if now + wait > lease.expires_at - d.SEND_MARGIN_S:
                return False
            await asyncio.sleep(wait)

    def _release_send(self, lease_id: str) -> None:
        lock = self._holding.pop(lease_id, None)
        if lock is not None:
            lock.release()

    def _not_sent(self, lease: Lease) -> Outcome:
        """The URL goes back untried, due when the origin's backoff ends."""
        now = self.clock()
        until = max(self._backoffs.get(lease.origin, 0.0), now)
        # several in flight: a slow answer to another request can hold the gap's start too
        what = "a backoff learnt after the claim" if until > now else "the origin's gap"
        detail = f"not sent: {what} outlasts the lease"
        return self._untried(lease, Reason.DEFERRED_BACKOFF, detail, until)

    def _untried(self, lease: Lease, reason: Reason, detail: str, until: float) -> Outcome:
        """A URL back in the queue, due at `until`, with a record of why (no answer)."""
        resp = Response(url=lease.url, status=None, started_at=self.clock())
        resp.detail = detail
        return Outcome(UrlState.FAILED_RETRYABLE, reason.value, until,
                       record=self.outcomes.record(lease, resp, reason.value))  # fmt: skip

    async def _fetch_url(self, lease: Lease) -> None:
        try:
            await self._fetch_and_commit(lease)
        except asyncio.CancelledError:
            # an interrupt's grace ran out: the URL goes back, unless its result is spooled
            if lease.lease_id not in self._spooled:
                self._abandoned.append(lease)
            raise
        finally:
            self._spooled.discard(lease.lease_id)

    async def _fetch_and_commit(self, lease: Lease) -> None:
        resp: Response | None = None
        refusal: str | None = None
        try:
            if await self._clear_to_send(lease) and not (
                refusal := self._not_owned(lease.origin, lease.owner_token)
            ):
                failpoints.hit("before_send")
                resp = await fetch(
                    self.session, self.gate, lease.url, self._request_headers(lease),
                    self._body_cap(lease), trace_ctx=lease,
                    max_header_bytes=self.cfg.limits.max_header_bytes,
                    sniff=lease.kind == "page",
                )  # fmt: skip
        finally:
            self._release_send(lease.lease_id)  # a request that never left frees the gate
            self._net_active -= 1
            if not self._finished:
                self._finished_since = self.clock()
            self._finished.append((lease.url, lease.fence))
            self._wake.set()
        if resp is None:
            if refusal is not None:
                outcome = self._untried(lease, Reason.OWNERSHIP_LOST, f"not sent: {refusal}",
                                        self.clock())  # fmt: skip
            else:
                outcome = self._not_sent(lease)
            if await self._commit(lease, outcome):
                self.stats.outcomes[outcome.reason] += 1
            return
        failpoints.hit("after_response")
        self.stats.requests += 1
        self.stats.statuses["none" if resp.status is None else str(resp.status)] += 1
        self.stats.bytes += len(resp.body)
        self._parsing += 1
        try:
            lease, outcome = await self._outcome_kept_alive(lease, resp)
        finally:
            self._parsing -= 1
        if await self._commit(lease, outcome):
            self.stats.outcomes[outcome.reason] += 1
        else:
            self.stats.stale_commits += 1

    async def _outcome_kept_alive(self, lease: Lease, resp: Response) -> tuple[Lease, Outcome]:
        """The outcome, with the lease kept: if half of it is gone before the outcome is ready
        (a slow response, a page waiting in the parse backlog behind slow documents), it is
        extended, once, with its fence, rather than left for the sweeper to hand the URL to
        another fetch while this one still works on it. Returns the lease to commit with."""
        handling = asyncio.ensure_future(self._outcome(lease, resp))
        try:
            half = lease.claimed_at + self.cfg.lease_s / 2 - self.clock()
            done, _ = await asyncio.wait({handling}, timeout=max(half, 0.0))
            if not done:
                try:
                    extended = await self._off(
                        self.store.extend_lease, lease, self.clock(), self.cfg.lease_s
                    )
                    lease = extended or lease
                except StoreUnavailable as exc:
                    self.outage.failed(exc)  # the commit will tell whether the lease held
            return lease, await handling
        finally:
            handling.cancel()  # done: nothing; this task cancelled (an interrupt): the parse too

    async def _outcome(self, lease: Lease, resp: Response) -> Outcome:
        now = self.clock()
        verdict = classify(lease, resp, now, self._classify, self.rng)
        if verdict.origin_until is not None:
            until = verdict.origin_until
            self._backoffs[lease.origin] = max(self._backoffs.get(lease.origin, 0.0), until)
            await self._push_now(lease.origin, backoff_until=until)
        return await self.outcomes.settle(lease, resp, verdict, now)


def run_batch(
    cfg: CrawlConfig,
    store: CoordinationStore,
    bodies: Bodies,
    pool: ExtractorPool,
    cycle: str,
    shard: int,
    on_progress: Callable[[BatchStats], None] | None = None,
) -> BatchStats:
    """Sync boundary for assets and the CLI; `on_progress` hears about the batch every
    `limits.progress_every_s` and once when it ends, however short it was. In the main
    thread, Ctrl-C (SIGINT) interrupts the batch gracefully (FetchBatch.interrupt;
    `stats.interrupted` tells), a second one at once, from the moment this is called."""
    with _ctrl_c_held() as held:
        batch = FetchBatch(cfg, store, bodies, pool, cycle, shard, on_progress=on_progress)
        with start_heap_frozen():
            stats = asyncio.run(_interruptible(batch, held))
            if on_progress is not None:
                on_progress(stats)
    return stats


@contextlib.contextmanager
def _ctrl_c_held() -> Iterator[list[bool]]:
    """Holds a Ctrl-C that comes before the batch's loop takes SIGINT over (while the batch
    is set up and the heap collected: a fraction of a second) for the batch, which starts
    interrupted. Left to the handler before, it would be lost to the batch: Dagster's notes
    it for later, and the batch ran to its end. A second one stops at once, as during the
    batch; one that comes after the batch, and was not the batch's, goes on to that
    handler when this ends."""
    held: list[bool] = []  # one entry: a Ctrl-C is held
    if threading.current_thread() is not threading.main_thread():
        yield held
        return

    def hold(signum: int, frame: object) -> None:
        if held:
            raise KeyboardInterrupt
        held.append(True)

    previous = signal.signal(signal.SIGINT, hold)
    try:
        yield held
    finally:
        signal.signal(signal.SIGINT, previous)
    if held:  # after the batch's own: the handler before gets it, as it would have
        signal.raise_signal(signal.SIGINT)


async def _interruptible(batch: FetchBatch, held: list[bool] | None = None) -> BatchStats:
    if threading.current_thread() is not threading.main_thread():
        return await batch.run()
    loop = asyncio.get_running_loop()
    previous = signal.getsignal(signal.SIGINT)
    loop.add_signal_handler(signal.SIGINT, batch.interrupt)
    if held:  # a Ctrl-C came while the batch was being set up: it is this batch's
        held.clear()
        batch.interrupt()
    try:
        return await batch.run()
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        signal.signal(signal.SIGINT, previous)  # asyncio would leave Python's default
