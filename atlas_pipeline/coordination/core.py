"""What every part of the coordination store shares: the connection and transaction
discipline (SQLite here; postgres.py overrides it), migrations, and the small helpers and
constants the statements use."""

from __future__ import annotations

import functools
import hashlib
import json
import sqlite3
import threading
from collections.abc import Collection, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rbloom import Bloom

from ..errors import StoreUnavailable
from ..politeness import OriginSlot, has_capacity
from ..reasons import Reason
from ..regions.ownership import share_cap, share_gap
from ..robots import RobotsPolicy
from ..urls import registrable_domain
from .base import (
    Lease,
    OriginPolicy,
    RobotsTask,
    TrapCaps,
    UrlState,
)
from .overrides import Suppression

Conn = Any  # sqlite3.Connection, or postgres.py's adapter with the same execute surface
Row = Any  # sqlite3.Row, or postgres.py's row with the same [name] / [index] access

_POLL_S = 0.25  # how soon to look again when another worker holds the only free slot
# states a URL reaches only after a fetch: picking one again is a revisit, not discovery
_REVISITED = frozenset({"fetched", "quarantined", "blocked"})
_BATCH = 200  # rows per multi-row statement (18 parameters a URL row)
_INSERT_RECORD = """INSERT INTO fetch_records
    (fetch_id, cycle, shard, url, fence, record, links, document, body_key, committed_at)
    VALUES (:fetch_id, :cycle, :shard, :url, :fence, :record, :links, :document, :body_key,
            :committed_at)
    ON CONFLICT (fetch_id) DO UPDATE SET fence = excluded.fence, record = excluded.record,
        links = excluded.links, document = excluded.document, body_key = excluded.body_key,
        committed_at = excluded.committed_at"""
# An operator pause of the origin itself or of its registrable domain (correlated on `o`).
_PAUSED = """SELECT 1 FROM pauses p WHERE (p.scope = 'origin' AND p.value = o.origin)
             OR (p.scope = 'domain' AND p.value = o.registrable_domain)"""
_SCAN = 16  # URLs of one origin looked at per claim before giving up on robots-blocked ones


@dataclass(frozen=True, slots=True)
class Many:
    """A write of many rows. `each` is the statement for one row (:named parameters), which
    SQLite runs per row; `pg`, if given, is PostgreSQL's statement for all rows at once,
    reading them as `v` from the JSON array that %(rows)s stands for (postgres.py), and the
    rows' `key` column as the array %(keys)s.

    An UPDATE names its rows by key as well as joining them (`t.key = ANY(%(keys)s)`): the
    planner takes a JSON array for 100 rows, and joined only by it, it would rather scan a
    partial index full of dead entries (urls_leases: every lease leaves one until a vacuum)
    than look up 8 URLs by their unique key."""

    each: str
    pg: str | None = None
    key: str | None = None


def marks(name: str, values: Iterable[Any]) -> tuple[str, dict[str, Any]]:
    """Named parameters for an `IN (...)` list: (":name0, :name1, ...", their values).

    Statements are written once for both backends with named parameters (sqlite3 takes
    `:name` as it is; postgres.py renders it for psycopg with SQLAlchemy's compiler)."""
    params = {f"{name}{i}": v for i, v in enumerate(values)}
    return ", ".join(f":{key}" for key in params), params


def greatest(a: str, b: str) -> str:
    """The larger of two non-null SQL expressions, in SQL both backends read the same way
    (SQLite's two-argument MAX is PostgreSQL's GREATEST)."""
    return f"CASE WHEN {a} >= {b} THEN {a} ELSE {b} END"


class StoreCore:
    """Connection, transactions and migrations; the store's parts (queue, commits, catalogue,
    origins, operator, reads) build on it."""

    path: Path
    url: str
    _busy_ms: int

    def _setup(
        self, default_policy: OriginPolicy, cycle_budget: int, caps: TrapCaps | None
    ) -> None:
        self.default_policy = default_policy
        self.caps = caps or TrapCaps()
        self._bloom: Bloom | None = None
        self.cycle_budget = cycle_budget  # URLs queued per origin per cycle
        self._local = threading.local()
        self._policies: dict[tuple[str, int], RobotsPolicy] = {}
        self._classes = dict(default_policy.classes)
        self._resolve = dict(default_policy.resolve)

    def _conn(self) -> Conn:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, isolation_level=None, timeout=self._busy_ms / 1000)
            conn.row_factory = sqlite3.Row
            conn.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            self._local.conn = conn
        return conn

    @contextmanager
    def _tx(self) -> Iterator[Conn]:
        with self._unavailable_as_error():
            conn = self._conn()
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def _select(self, sql: str, params: Any = ()) -> Any:
        """A read outside any transaction; a connection lost since its last use (a cut,
        a server restart) is replaced once, since re-running a read is harmless."""
        for attempt in (0, 1):
            try:
                with self._unavailable_as_error():
                    return self._conn().execute(sql, params)
            except StoreUnavailable:
                if attempt:
                    raise
        raise AssertionError("unreachable")

    @contextmanager
    def _unavailable_as_error(self) -> Iterator[None]:
        """A busy or unreadable database file is an outage to wait out, not a bug."""
        try:
            yield
        except sqlite3.OperationalError as exc:
            text = str(exc).lower()
            if not any(s in text for s in ("locked", "busy", "unable to open", "disk i/o")):
                raise
            raise StoreUnavailable(f"coordination store {self.url}: {exc}") from exc

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def _many(self, c: Conn, many: Many, rows: list[dict[str, Any]]) -> None:
        """Run `many` for `rows` (SQLite: one statement a row; PostgreSQL: one for all)."""
        if rows:
            c.executemany(many.each, rows)

    def _lock_migrations(self, c: Conn) -> None:
        """One store opener at a time past the schema check (IMMEDIATE already makes it so
        here); postgres.py takes the migrator's advisory lock."""

    def schema_version(self) -> int:
        row = self._select("SELECT MAX(version) FROM schema_migrations").fetchone()
        return int(row[0] or 0)

    _for_update = ""  # SQLite's IMMEDIATE transactions already serialize writers

    def _lock_origins(self, c: Conn, origins: set[str]) -> None:
        """Lock the origin rows a commit group will update, all at once and in one order
        (IMMEDIATE already serializes writers here)."""

    def _locked_origins(self, c: Conn) -> Collection[str]:
        """Origins this transaction has locked (_lock_origins), so known to exist."""
        return ()

    def _lock_shard(self, c: Conn, shard: int) -> None:
        """Serialize frontier selection of one shard (IMMEDIATE does it here)."""

    def _lock_claims(self, c: Conn, shard: int) -> None:
        """Whatever a claim of `shard` must lock before it reads the ready origins."""

    def _operator_state(self, c: Conn) -> tuple[list[dict[str, Any]], list[Suppression]]:
        """Operator policies and suppressions, in one round trip (discovery needs both)."""
        overrides: list[dict[str, Any]] = []
        blocked: list[Suppression] = []
        for kind, scope, value, settings in c.execute(
            """SELECT 'policy', scope, value, settings FROM policy_overrides
               UNION ALL SELECT 'suppress', scope, value, NULL FROM suppressions"""
        ):
            if kind == "policy":
                overrides.append({"scope": scope, "value": value, "settings": json.loads(settings)})
            else:
                blocked.append(Suppression(scope, value))
        return overrides, blocked


@functools.lru_cache(maxsize=65536)
def _domain_of(origin: str) -> str:
    host = origin.split("://", 1)[-1].rsplit(":", 1)[0]
    return registrable_domain(host)


def _clock_update(origin: str, claim: Lease | RobotsTask) -> tuple[Any, ...]:
    """Parameters of the origin update a claim makes: clock advanced, robots lease taken."""
    robots = isinstance(claim, RobotsTask)
    return (
        claim.claimed_at + claim.gap_s,
        robots,
        claim.lease_id,
        robots,
        claim.expires_at,
        origin,
    )


def _origin_slot(origin: Row) -> OriginSlot:
    """An origin row (with its in_flight count) as the claim scheduler's rules see it."""
    return OriginSlot(
        fair_class=origin["fair_class"],
        next_eligible_at=float(origin["next_eligible_at"]),
        backoff_until=float(origin["backoff_until"]),
        in_flight=int(origin["in_flight"]),
        max_in_flight=share_cap(int(origin["max_in_flight"]), float(origin["share"])),
        robots_lease_until=float(origin["robots_lease_until"]),
        robots_expires_at=float(origin["robots_expires_at"]),
    )


def origin_gap_s(origin: Row, guard_s: float) -> float:
    """The gap a claim of this origin applies: its own (adaptive widening included), the
    guard on a non-zero one, and divided by this region's share of a split budget."""
    gap = float(origin["min_gap_s"]) + float(origin["adapt_gap_s"])
    if gap > 0:
        gap += guard_s
    return share_gap(gap, float(origin["share"]))


def _has_capacity(origin: Row, now: float) -> bool:
    """A free in-flight slot, and no robots fetch in progress for an expired policy
    (politeness.has_capacity)."""
    return has_capacity(_origin_slot(origin), now)


def url_digest(url: str) -> int:
    """64 bits of SHA-256 as a signed integer (both backends' INTEGER/BIGINT): the URL's
    compact key, written into its row (urls.url_hash). No lookup goes by it since migration
    0026: the full URL decides identity, so a collision cannot make two URLs one."""
    return int.from_bytes(hashlib.sha256(url.encode("utf-8")).digest()[:8], "big", signed=True)


# link decisions that added no URL to the catalogue (everything else inserted one)
_NOT_NEW = frozenset(
    {Reason.ALREADY_KNOWN.value, Reason.SUPPRESSED.value, Reason.QUERY_VARIANT_CAP.value,
     Reason.PATTERN_CAP.value, Reason.CALENDAR_CAP.value, Reason.PATH_VARIANT_CAP.value,
     Reason.TRAP_NO_NOVELTY.value}
)  # fmt: skip


def _selection_reason(state: str) -> str:
    if state == UrlState.DISCOVERED.value:
        return Reason.ADMITTED.value
    if state == UrlState.BLOCKED.value:
        return Reason.ROBOTS_RECHECK.value
    if state in (UrlState.FETCHED.value, UrlState.QUARANTINED.value):
        return Reason.REVISIT_DUE.value
    return Reason.CARRIED_OVER.value
