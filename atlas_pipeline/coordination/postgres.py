"""PostgreSQL coordination store: the same contract and the same statements as SQLite.

Statements are written once, with named parameters, in SQL both backends read as it is
(upserts as ON CONFLICT, core.greatest for the larger of two values); SQLAlchemy's compiler
renders their parameters in psycopg's style. Only what PostgreSQL does better (arrays for
bulk inserts and updates, row locks) has statements of its own here.

A claim looks at the ready origins without a lock and locks each origin row it takes (FOR
UPDATE SKIP LOCKED) as it reaches it, so cooperating runs of one shard claim side by side
and never the same origin; frontier selection of a shard is serialized with a
transaction-scoped advisory lock, and admission counters are read FOR UPDATE, so
cooperating runs on many machines see the same atomic claim as threads on one.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

import orjson
import psycopg
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from ..errors import CoordinationError, StoreUnavailable
from .base import Lease, OriginPolicy, Outcome, TrapCaps
from .catalogue import _URL_COLUMNS
from .core import _PAUSED, Many
from .migrate import MIGRATOR, engine_for
from .sqlite import SqliteStore

_CLAIM_LOCK = 0x41544C53  # advisory lock class "ATLS"; the shard number is the second key


# Many-row statements read their rows from one JSON array (json_to_recordset): psycopg dumps a
# list parameter element by element in Python, and a group's 18 columns x 80 new URLs as
# arrays cost the client more CPU than the insert costs the server; JSON is encoded in C.
_INSERT_URLS = """
    INSERT INTO urls (url, discovered_url, origin, shard, depth, priority, state, reason, cycle,
                      robots_version, source, discovered_cycle, discovered_at, redirect_chain,
                      trap_pattern, trap_query, kind, url_hash)
    SELECT url, discovered_url, origin, shard, depth, priority, state, reason, cycle,
           robots_version, source, discovered_cycle, discovered_at, redirect_chain,
           trap_pattern, trap_query, kind, url_hash
    FROM json_to_recordset(%(rows)s::json) AS v(url text, discovered_url text, origin text,
        shard int, depth int, priority float8, state text, reason text, cycle text,
        robots_version int, source text, discovered_cycle text, discovered_at float8,
        redirect_chain text, trap_pattern text, trap_query text, kind text, url_hash int8)
    ON CONFLICT DO NOTHING RETURNING url"""

_APPLY = """
    UPDATE urls u SET state = v.state, reason = v.reason, due_at = v.due_at, lease_id = NULL,
        lease_expires_at = NULL, slot_held = 0, last_fetch_at = %(now)s, last_status = v.status,
        etag = COALESCE(v.etag, u.etag), last_modified = COALESCE(v.lm, u.last_modified),
        content_hash = COALESCE(v.ch, u.content_hash),
        document_id = COALESCE(v.doc, u.document_id),
        change_history = COALESCE(v.hist, u.change_history),
        last_checked_at = CASE WHEN v.checked = 1 THEN %(now)s ELSE u.last_checked_at END,
        checks = u.checks + v.checked, changes = u.changes + v.changed,
        revisit_interval_s = COALESCE(v.interval, u.revisit_interval_s),
        revisit_reason = COALESCE(v.why, u.revisit_reason),
        change_rate = COALESCE(v.rate, u.change_rate)
    FROM json_to_recordset(%(rows)s::json) AS v(url text, fence int, state text, reason text,
        due_at float8, status int, etag text, lm text, ch text, doc text, hist text, checked int,
        changed int, "interval" float8, why text, rate float8)
    WHERE u.url = v.url AND u.fence = v.fence AND u.state = 'leased' AND u.url = ANY(%(keys)s)
    RETURNING u.url, u.fence"""
_APPLY_COLUMNS = ("url", "fence", "state", "reason", "due_at", "status", "etag", "lm", "ch",
                  "doc", "hist", "checked", "changed", "interval", "why", "rate")  # fmt: skip


def _finite(value: Any) -> Any:
    return value if not isinstance(value, float) or math.isfinite(value) else str(value)


def rows_json(rows: Sequence[Mapping[str, Any]]) -> str:
    """Rows as the JSON array json_to_recordset reads. JSON has no infinity: such a float is
    sent as the string "inf", which float8's input reads back as it was (orjson would send
    null). orjson with that scan costs a sixth of json.dumps: 70 vs 410 us for a commit's
    80 new URLs, client CPU every claim and commit spends."""
    if any(isinstance(v, float) and not math.isfinite(v) for r in rows for v in r.values()):
        rows = [{k: _finite(v) for k, v in r.items()} for r in rows]
    return orjson.dumps(rows).decode("utf-8")


class _Row(tuple[Any, ...]):
    """A row readable by column name and by index, like sqlite3.Row."""

    _names: dict[str, int]

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return tuple.__getitem__(self, self._names[key])
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self._names)


def _row_factory(cursor: psycopg.Cursor[Any]) -> Any:
    # the names from the result itself: `description` builds a Column object per column, and
    # a claim's look reads rows of 27 columns
    res = cursor.pgresult
    fields = [res.fname(i) for i in range(res.nfields)] if res is not None else []
    names = {(f or b"").decode(): i for i, f in enumerate(fields)}

    def make(values: Sequence[Any]) -> _Row:
        row = _Row(values)
        row._names = names
        return row

    return make


_PG = postgresql.psycopg.dialect()  # type: ignore[no-untyped-call]


@functools.lru_cache(maxsize=4096)
def for_psycopg(sql: str) -> str:
    """A statement written with named parameters (`:name`, what sqlite3 takes as it is) in
    psycopg's parameter style, rendered by SQLAlchemy's compiler for `text()`."""
    return str(sa.text(sql).compile(dialect=_PG))


class _Conn:
    """psycopg connection with sqlite3's execute/executemany surface."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.raw = conn
        # origin -> (admitted_cycle, admitted_count) of the rows this transaction locked
        # (_lock_origins); the counts until discovery has read them once
        self.locked: dict[str, tuple[str | None, int]] = {}
        self.counts_read = False

    def execute(self, sql: str, params: Mapping[str, Any] | None = None) -> psycopg.Cursor[Any]:
        return self.raw.execute(for_psycopg(sql), params)

    def executemany(self, sql: str, rows: Iterable[Mapping[str, Any]]) -> None:
        with self.raw.cursor() as cur:
            cur.executemany(for_psycopg(sql), list(rows))


def redact(url: str) -> str:
    parts = urlsplit(url)
    return url.replace(f":{parts.password}@", ":***@") if parts.password else url


_CLASHES = 3  # attempts of a claim or commit that PostgreSQL rolled back for a lock clash


def _clash(exc: StoreUnavailable) -> bool:
    """A deadlock or serialization failure: the whole transaction was rolled back, so running
    it again is safe (claims and fenced commits are all-or-nothing)."""
    return isinstance(exc.__cause__, psycopg.errors.TransactionRollback)


def _again(call: Any, *args: Any, **kwargs: Any) -> Any:
    for attempt in range(_CLASHES):
        try:
            return call(*args, **kwargs)
        except StoreUnavailable as exc:
            if not _clash(exc) or attempt == _CLASHES - 1:
                raise
    raise AssertionError("unreachable")


class PostgresStore(SqliteStore):
    """CoordinationStore on PostgreSQL (psycopg 3). One connection per thread."""

    _for_update = " FOR UPDATE"

    # Claims lock origin rows as they find them while commits lock them in origin order, and
    # PostgreSQL may follow a row's update chain with a wait even under SKIP LOCKED: now and
    # then two of them clash and one is rolled back. Run it again before calling it an outage.
    def claim_batch(self, *args: Any, **kwargs: Any) -> Any:
        return _again(super().claim_batch, *args, **kwargs)

    def commit_batch(self, *args: Any, **kwargs: Any) -> Any:
        return _again(super().commit_batch, *args, **kwargs)

    # a request outside any claim moves its bucket's clocks like a claim: the same clashes
    def hold_slot(self, *args: Any, **kwargs: Any) -> Any:
        return _again(super().hold_slot, *args, **kwargs)

    def claim_robots(self, *args: Any, **kwargs: Any) -> Any:
        return _again(super().claim_robots, *args, **kwargs)

    def __init__(
        self,
        url: str,
        default_policy: OriginPolicy,
        cycle_budget: int,
        caps: TrapCaps | None = None,
    ) -> None:
        self.url = url
        self._setup(default_policy, cycle_budget, caps)
        try:
            self._migrate()
        except StoreUnavailable as exc:
            cause = exc.__cause__ or exc
            first = (str(cause).strip().splitlines() or [type(cause).__name__])[0]
            raise CoordinationError(
                f"cannot reach the coordination store {redact(url)} ({first}); "
                "start PostgreSQL or fix coordination_url"
            ) from None

    def _conn(self) -> _Conn:
        conn: _Conn | None = getattr(self._local, "conn", None)
        if conn is None or conn.raw.closed:
            raw = psycopg.connect(
                self.url, autocommit=True, connect_timeout=5, row_factory=_row_factory
            )
            conn = _Conn(raw)
            self._local.conn = conn
        return conn

    @contextmanager
    def _tx(self) -> Iterator[_Conn]:
        with self._unavailable_as_error():
            conn = self._conn()
            conn.locked, conn.counts_read = {}, False
            with conn.raw.transaction():
                yield conn

    @contextmanager
    def _unavailable_as_error(self) -> Iterator[None]:
        """Lost connections, a stopped server, deadlocks and serialization failures roll the
        transaction back: an outage (or a clash) to retry, not a bug."""
        try:
            yield
        except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
            conn: _Conn | None = getattr(self._local, "conn", None)
            if conn is not None and (conn.raw.closed or conn.raw.broken):
                self._local.conn = None  # reconnect on the next call
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise StoreUnavailable(f"coordination store {redact(self.url)}: {first}") from exc

    def close(self) -> None:
        conn: _Conn | None = getattr(self._local, "conn", None)
        if conn is not None:
            conn.raw.close()
            self._local.conn = None

    def _lock_origins(self, c: Any, origins: set[str]) -> None:
        # Admission counters and adaptive gaps are updated in separate statements; taking all
        # the group's origin rows first, in origin order, keeps two committers from deadlocking.
        # The rows' admission counters come with the lock: discovery reads them next, and the
        # rows it finds need no insert-if-absent (one statement, not three).
        if origins:
            cur = c.raw.execute(
                """SELECT origin, admitted_cycle, admitted_count FROM origins
                   WHERE origin = ANY(%s) ORDER BY origin FOR UPDATE""",
                (sorted(origins),),
            )
            c.locked = {o: (cyc, int(n)) for o, cyc, n in cur.fetchall()}

    def _locked_origins(self, c: _Conn) -> Collection[str]:
        return c.locked.keys()

    def _admitted_counts(self, c: Any, origins: set[str], cycle: str) -> dict[str, int]:
        if not c.counts_read and origins <= c.locked.keys():
            # locked by this transaction and not written since: the reading is current
            c.counts_read = True
            return {o: c.locked[o][1] if c.locked[o][0] == cycle else 0 for o in origins}
        # LockRows sits above the sort: rows are locked in origin order, as everywhere else.
        cur = c.raw.execute(
            """SELECT origin, admitted_cycle, admitted_count FROM origins
               WHERE origin = ANY(%s) ORDER BY origin FOR UPDATE""",
            (sorted(origins),),
        )
        counts = dict.fromkeys(origins, 0)
        for origin, admitted_cycle, n in cur.fetchall():
            counts[origin] = int(n) if admitted_cycle == cycle else 0
        return counts

    def _many(self, c: Any, many: Many, rows: list[dict[str, Any]]) -> None:
        if not rows:
            return
        if many.pg is None:
            c.executemany(many.each, rows)
        else:
            keys = [r[many.key] for r in rows] if many.key else None
            c.raw.execute(many.pg, {"rows": rows_json(rows), "keys": keys})

    def _apply_all(
        self, c: Any, results: Sequence[tuple[Lease, Outcome]], now: float
    ) -> list[bool]:
        rows = [
            dict(zip(_APPLY_COLUMNS, (
                x.url, x.fence, o.state.value, o.reason, o.due_at, o.status, o.etag,
                o.last_modified, o.content_hash, o.document_id, o.change_history,
                int(o.checked), int(o.changed), o.revisit_interval_s, o.revisit_reason,
                o.change_rate), strict=True))
            for x, o in sorted(results, key=lambda r: r[0].url)  # one lock order
        ]  # fmt: skip
        keys = [r["url"] for r in rows]
        cur = c.raw.execute(_APPLY, {"now": now, "rows": rows_json(rows), "keys": keys})
        done = {(url, fence) for url, fence in cur.fetchall()}
        return [(x.url, x.fence) in done for x, _ in results]

    def _known_urls(self, c: Any, urls: list[str]) -> set[str]:
        cur = c.raw.execute("SELECT url FROM urls WHERE url = ANY(%s)", (sorted(set(urls)),))
        return {r[0] for r in cur.fetchall()}

    def _insert_urls(self, c: Any, rows: list[tuple[Any, ...]]) -> set[str]:
        """Insert-if-absent as one statement over a JSON array: a VALUES list of thousands of
        placeholders costs more to build and parse than the insert itself."""
        if not rows:
            return set()
        cur = c.raw.execute(
            _INSERT_URLS,
            {"rows": rows_json([dict(zip(_URL_COLUMNS, row, strict=True)) for row in rows])},
        )
        return {r[0] for r in cur.fetchall()}

    def _lock_shard(self, c: Any, shard: int) -> None:
        c.execute(
            "SELECT pg_advisory_xact_lock(:cls, :shard)", {"cls": _CLAIM_LOCK, "shard": shard}
        )

    def _lock_migrations(self, c: Any) -> None:
        c.execute(
            "SELECT pg_advisory_xact_lock(:cls, :key)", {"cls": MIGRATOR[0], "key": MIGRATOR[1]}
        )

    def _lock_claims(self, c: Any, shard: int) -> None:
        # One claim of a shared bucket (domain, IP) advances the clocks of origins it has not
        # locked: those claims still take turns per shard.
        if self._shared_buckets:
            self._lock_shard(c, shard)

    _waits = True
    # The look only orders the ready origins and counts their slots (_origin_slot, _part):
    # each taken row is read again whole, locked. Its robots.txt text and the rest of 64
    # rows a claim cost more to send and decode than the look took to run.
    _look_columns = ("o.origin, o.fair_class, o.next_eligible_at, o.backoff_until, "
                     "o.max_in_flight, o.share, o.robots_lease_until, o.robots_expires_at, "
                     "o.min_gap_s, o.adapt_gap_s")  # fmt: skip

    def _take_origins(
        self, c: Any, part: list[Any], now: float, params: dict[str, Any], wait: bool
    ) -> dict[str, Any]:
        # The origin rows a claim serves are locked as it reaches them, passing those another
        # claimer holds (SKIP LOCKED, the PostgreSQL job-queue pattern): runs of one shard
        # claim different origins side by side and never one origin twice. The look's
        # conditions are judged again on the locked row, at its newest version: a claimer
        # that committed since may have moved its clock.
        if not part:
            return {}
        rows = c.execute(
            f"""SELECT o.* FROM origins o WHERE o.origin = ANY(:origins)
                  AND o.next_eligible_at <= :now AND o.backoff_until <= :now
                  AND NOT EXISTS ({_PAUSED}){self._owned}
                ORDER BY o.origin FOR UPDATE OF o{"" if wait else " SKIP LOCKED"}""",
            {**params, "origins": [o["origin"] for o in part]},
        ).fetchall()
        if not rows:
            return {}
        if self._shared_buckets:  # under the shard lock the look's count is current
            held = {o["origin"]: int(o["in_flight"]) for o in part}
        else:
            # The look counted slots as of its snapshot; a claimer that committed since may
            # have leased this origin's free slots (a gap of 0 leaves its clock where it was).
            # Count them again, now that the row is ours.
            cur = c.raw.execute(
                """SELECT origin, COUNT(*) FROM (
                     SELECT origin FROM urls WHERE origin = ANY(%(o)s) AND slot_held = 1
                       AND lease_expires_at > %(now)s
                     UNION ALL SELECT origin FROM sub_slots WHERE origin = ANY(%(o)s)
                       AND until > %(now)s) held GROUP BY origin""",
                {"o": [r["origin"] for r in rows], "now": now},
            )
            held = {origin: int(n) for origin, n in cur.fetchall()}
        taken = [{**dict(zip(r.keys(), r, strict=True)), "in_flight": held.get(r["origin"], 0)}
                 for r in rows]  # fmt: skip
        return {o["origin"]: o for o in taken}

    def _engine(self) -> sa.Engine:
        return engine_for(self.url, 5.0)

    def _schema_head(self) -> str | None:
        try:
            row = self._select("SELECT version_num FROM alembic_version").fetchone()
        except psycopg.errors.UndefinedTable:
            return None
        return str(row[0]) if row else None
