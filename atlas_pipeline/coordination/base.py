"""The coordination store contract: URL work queue, origin buckets, robots cache, fenced commits.

URL states (one per row, seed 000 ch. 9):

    discovered --frontier/admission--> eligible --claim--> leased --commit--> fetched
                                          ^                  |  \\--> failed_retryable (5xx, timeout)
                                          |   lease expiry   |   \\-> terminal (404/410, max attempts)
                                          +------------------+    \\> quarantined (over a bound)
    blocked: robots or egress said no (with the policy version that decided).

A claim is one short transaction: pick the origin that is eligible soonest under its caps,
take its best URL (re-checked against the robots policy in force), lease it with a new fence
token and advance the origin clock. A commit applies only while (url, fence, leased) match.
claim_batch and commit_batch do the same for many URLs in one transaction each, so a batch
pays a few round trips per group of pages instead of per page.

Calls raise StoreUnavailable when the store cannot be reached or rolled the transaction back;
nothing was applied then, and the caller may retry.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

from ..records import Document, FetchRecord
from ..render_policy import RenderDecision, RenderRule, Sample
from .overrides import Purged, Suppression

if TYPE_CHECKING:
    from .owners import OwnerRow


class UrlState(StrEnum):
    DISCOVERED = "discovered"
    ELIGIBLE = "eligible"
    LEASED = "leased"
    FETCHED = "fetched"
    FAILED_RETRYABLE = "failed_retryable"
    BLOCKED = "blocked"
    TERMINAL = "terminal"
    QUARANTINED = "quarantined"


@dataclass(frozen=True, slots=True)
class OriginPolicy:
    """Pacing of one origin bucket."""

    min_gap_s: float
    max_in_flight: int
    gap_guard_s: float = 0.0  # added to a non-zero gap: requests reach the origin after the claim
    adaptive_max_gap_s: float = 0.0  # AIMD: errors widen the gap up to this; 0 = off
    # "domain" / "ip": all origins of a registrable domain / of an address share clock and cap
    bucket: str = "origin"
    classes: tuple[tuple[str, str], ...] = ()  # (host or registrable domain, fairness class)
    class_quota: float = 1.0  # most share of recent attempts per class while others wait; 1 = off
    class_window_s: float = 60.0  # half-life of the recent-attempt counts the quota judges
    starvation_bound_s: float = 30.0  # an origin waiting longer is served first, quota or not
    aging_per_hour: float = 0.0  # priority a queued URL gains per hour it has waited
    resolve: tuple[tuple[str, str], ...] = ()  # host -> IP for "ip" buckets (else DNS)
    discovery_share: float = 0.0  # of each origin's cycle budget, kept for never-fetched URLs
    untrusted_after: int = 3  # misleading validator answers before an origin goes unconditional
    overload_share: float = 0.5  # 5xx share at which a repeated 5xx slows the whole origin
    recover_steps: int = 10  # healthy answers that undo any adaptive widening of the gap
    # regions: claims take only origins this region holds an ownership lease on, until
    # `owner_margin_s` before it ends ("" = one region: every origin is its own)
    region: str = ""
    owner_margin_s: float = 0.0


@dataclass(frozen=True, slots=True)
class TrapCaps:
    """Distinct URLs the catalogue takes per trap key of an origin (traps.py)."""

    query_variants: int = 100  # worded query strings per path and key set (facets, searches)
    pattern_urls: int = 5000  # URLs per digit pattern (/item?id=9, /page/9)
    calendar_urls: int = 36  # URLs per digit pattern whose digits are a date (calendars)
    bloom_capacity: int = 0  # > 0: a Bloom prefilter of known URLs this large (a speed aid)
    path_variants: int = 200  # worded query strings per path, all key sets together
    novelty_window: int = 8  # variants of a path fetched in a row with nothing new: stop it


@dataclass(frozen=True, slots=True)
class Candidate:
    """A URL offered to the catalogue (seed, link or redirect target)."""

    url: str  # canonical
    discovered_url: str  # the spelling as found
    origin: str
    shard: int
    depth: int
    priority: float
    source: str | None = None  # URL of the page it was found on
    state: UrlState = UrlState.ELIGIBLE  # BLOCKED when a robots policy already says no
    reason: str = "admitted"
    robots_version: int | None = None
    via: tuple[str, ...] = ()  # the redirect chain that led here, first URL first
    kind: str = "page"  # "sitemap": fetched the same polite way, read for URLs, not text


@dataclass(frozen=True, slots=True)
class Lease:
    """Authority to fetch one URL once; the fence token must accompany the commit."""

    url: str
    origin: str
    shard: int
    depth: int
    fence: int
    lease_id: str
    expires_at: float
    attempts: int
    robots_version: int
    etag: str | None = None
    last_modified: str | None = None
    claimed_at: float = 0.0
    gap_s: float = 0.0  # the gap the claim reserved, guard included
    redirect_chain: tuple[str, ...] = ()  # URLs that redirected to this one, first URL first
    kind: str = "page"  # or "sitemap"
    priority: float = 0.5
    content_hash: str | None = None  # body key of the last content
    document_id: str | None = None  # text hash of the last document
    change_history: str | None = None  # recrawl.dump_history of earlier content checks
    last_checked_at: float | None = None
    revisit_interval_s: float | None = None  # the interval that led to this visit
    conditional: bool = True  # False once the origin's validators proved misleading
    owner_token: int = 0  # regions: the ownership token the claim was made under


@dataclass(frozen=True, slots=True)
class RobotsTask:
    """Authority to fetch an origin's robots.txt (it takes a slot in the bucket like any request)."""

    origin: str
    lease_id: str
    expires_at: float
    claimed_at: float = 0.0
    gap_s: float = 0.0
    owner_token: int = 0  # regions: the ownership token the claim was made under


@dataclass(frozen=True, slots=True)
class BatchLease:
    """A run's claim on a fetch partition; a newer run (or a Dagster retry) takes fence + 1,
    and a partition write carrying an older fence is ignored."""

    cycle: str
    shard: int
    fence: int
    holder: str


@dataclass(frozen=True, slots=True)
class Wait:
    """Nothing is claimable before `until` (epoch seconds)."""

    until: float


@dataclass(frozen=True, slots=True)
class Drained:
    """No eligible, retryable or leased URL is left in this (cycle, shard)."""


Claim = Lease | RobotsTask | Wait | Drained


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a fetch attempt established, committed under its fence."""

    state: UrlState
    reason: str
    due_at: float  # when the URL is eligible again (retry or revisit)
    status: int | None = None
    content_hash: str | None = None
    etag: str | None = None
    last_modified: str | None = None
    record: FetchRecord = field(default_factory=FetchRecord)  # the fetch row, kept for the lake
    # the parse manifest: link rows, each with the Candidate it offers (None when rejected earlier)
    links: list[tuple[dict[str, Any], Candidate | None]] = field(default_factory=list)
    document: Document | None = None  # the documents row
    document_id: str | None = None  # the text hash the URL holds now (new or kept)
    checked: bool = False  # content was compared (a 304, or a 200 that was hashed)
    changed: bool = False  # ... and it had changed since the last check
    change_history: str | None = None
    revisit_reason: str | None = None
    revisit_interval_s: float | None = None
    change_rate: float | None = None  # changes per second, estimated
    validators: str | None = None  # "honest" or "misleading" answer to a conditional request
    # requests a rendered page made (kind subresource): fetch rows of their own, for the lake
    subrequests: tuple[FetchRecord, ...] = ()


@dataclass(frozen=True, slots=True)
class RobotsRecord:
    """The robots policy stored for an origin."""

    origin: str
    version: int
    status: str
    text: str
    fetched_at: float
    expires_at: float


class CoordinationStore(Protocol):
    """What the engine needs from a transactional store; SQLite and PostgreSQL implement it."""

    url: str

    def close(self) -> None: ...

    def discover(self, candidates: list[Candidate], cycle: str | None) -> list[str]: ...

    def select_frontier(self, cycle: str, shard: int, now: float) -> list[dict[str, Any]]: ...

    def claim(self, cycle: str, shard: int, now: float, token: str, lease_s: float) -> Claim: ...

    def claim_batch(
        self,
        cycle: str,
        shard: int,
        now: float,
        token: str,
        lease_s: float,
        limit: int,
        release: Sequence[tuple[str, int]] = (),
    ) -> list[Lease | RobotsTask] | Wait | Drained: ...

    def release_slots(self, finished: Sequence[tuple[str, int]]) -> None: ...

    def extend_lease(self, lease: Lease, now: float, lease_s: float) -> Lease | None: ...

    def commit(self, lease: Lease, outcome: Outcome, cycle: str, now: float) -> bool: ...

    def commit_batch(
        self, results: Sequence[tuple[Lease, Outcome]], cycle: str, now: float
    ) -> list[bool]: ...

    def robots(self, origin: str) -> RobotsRecord | None: ...

    def robots_good_at(self, origin: str) -> float | None: ...

    def put_robots(
        self,
        task: RobotsTask,
        status: str,
        text: str,
        now: float,
        ttl_s: float,
        backoff_until: float,
        min_gap_s: float | None = None,
        good: bool = False,
        cycle: str | None = None,
        shard: int | None = None,
        record: FetchRecord | None = None,
        not_before: float = 0.0,
    ) -> RobotsRecord: ...

    def push_origin_clocks(self, pushes: Sequence[tuple[str, float, float]]) -> None: ...

    def reserve_hop(self, origin: str, shard: int, now: float) -> float:
        """A request start at `origin` outside any claim (a robots.txt redirect into another
        origin, a rendered page's subrequest): `now` when taken (its clock advanced by its
        gap, atomically), else when to ask again (inf while it is paused)."""
        ...

    def claim_robots(self, origin: str, shard: int, now: float,
                     lease_s: float) -> RobotsTask | float: ...  # fmt: skip

    def reserve_slot(self, origin: str, shard: int, now: float) -> tuple[float, float]:
        """`reserve_hop`, with the gap it applies: (when, gap), so a request that leaves
        later than its reservation moves the clock from its own start."""
        ...

    def hold_slot(
        self, origin: str, shard: int, now: float, hold_s: float
    ) -> tuple[float, float, str | None]:
        """`reserve_slot`, also holding one of the origin's in-flight slots (counted like a
        lease's in every run) until `release_sub_slots`, or `hold_s` at most."""
        ...

    def release_sub_slots(self, slot_ids: Sequence[str]) -> None: ...

    def sweep(self, now: float) -> int: ...

    def pause(self, scope: str, value: str, reason: str, who: str, now: float) -> None: ...

    def resume(self, scope: str, value: str, reason: str, who: str, now: float) -> bool: ...

    def pauses(self) -> list[dict[str, Any]]: ...

    def operator_log(self) -> list[dict[str, Any]]: ...

    def mark_paused(self, cycle: str, shard: int) -> int: ...

    def acquire_batch(self, cycle: str, shard: int, holder: str, now: float) -> BatchLease: ...

    def batch_lease(self, cycle: str, shard: int) -> BatchLease | None: ...

    def defer_remaining(self, cycle: str, shard: int, reason: str) -> int: ...

    def fetch_records(
        self, cycle: str, shard: int, parts: Collection[str] = ("record", "links", "document")
    ) -> Iterator[dict[str, Any]]: ...

    def fetch_record_count(self, cycle: str, shard: int) -> int: ...

    def open_url_count(self, cycle: str, shard: int) -> int: ...

    def partition_written(
        self, cycle: str, shard: int, fence: int, fetch_ids: Collection[str], fetches: int,
        now: float,
    ) -> int | None:  # fmt: skip
        """Record a partition's lake write at its (newest) batch fence, moving its records
        out of the store; None if a newer fence exists."""
        ...

    def lake_write(self, cycle: str, shard: int) -> int | None: ...

    def frontier_rows(self, cycle: str, shard: int) -> list[dict[str, Any]]: ...

    def url_rows(self, shard: int) -> list[dict[str, Any]]: ...

    def iter_url_rows(self, shard: int, chunk: int = 1000) -> Iterator[dict[str, Any]]: ...

    def suppress(
        self, target: Suppression, reason: str, verification: str, who: str, now: float
    ) -> Purged: ...

    def suppressions(self) -> list[dict[str, Any]]: ...

    def purge(self, target: Suppression, who: str, now: float) -> Purged: ...

    def set_policy(
        self,
        target: Suppression,
        settings: dict[str, float | None],
        reason: str,
        who: str,
        now: float,
    ) -> int: ...

    def policy_overrides(self) -> list[dict[str, Any]]: ...

    def cycle_progress(self, cycle: str) -> tuple[int, int]: ...

    def cycle_statuses(self, cycle: str) -> dict[str, int]: ...

    def expire_bodies(self, before: float) -> int: ...

    def audit(
        self, action: str, scope: str, value: str, reason: str, who: str, now: float
    ) -> None: ...

    def add_tombstones(self, events: Sequence[dict[str, Any]], now: float) -> int: ...

    def pending_tombstones(self, limit: int) -> list[dict[str, Any]]: ...

    def tombstones_delivered(self, event_ids: Sequence[str], now: float) -> None: ...

    def url_row(self, url: str) -> dict[str, Any] | None: ...

    def stale_attempts_of(self, url: str) -> list[dict[str, Any]]: ...

    def origin_rows(self, shard: int) -> list[dict[str, Any]]: ...

    def render_class(self, origin: str, page_class: str) -> RenderDecision | None: ...

    def render_sample(self, origin: str, page_class: str, sample: Sample | None,
                      rule: RenderRule, now: float) -> RenderDecision: ...  # fmt: skip

    def render_class_rows(self, shard: int) -> list[dict[str, Any]]: ...

    def ownership_wanted(self, cycle: str, shard: int,
                         also: Sequence[str] = ()) -> list[OwnerRow]: ...  # fmt: skip

    def set_owners(self, rows: Sequence[OwnerRow]) -> None: ...

    def referenced_bodies(self) -> set[str]: ...
