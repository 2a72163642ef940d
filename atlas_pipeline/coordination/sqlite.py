"""SQLite coordination store: one embedded file, WAL, every claim one IMMEDIATE transaction."""

from __future__ import annotations

import functools
import hashlib
import json
import socket
import sqlite3
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from rbloom import Bloom

from ..errors import CoordinationError, StaleAttempt, StoreUnavailable
from ..frontier import split_budget
from ..politeness import (
    Answer,
    Pacing,
    PacingRule,
    adapt,
    bucket_of,
    class_of,
    decayed,
    over_quota,
)
from ..reasons import Reason
from ..recrawl import validators_trusted
from ..robots import RobotsPolicy, RobotsStatus
from ..traps import Novelty, TrapKeys, VariantFetch, judge_novelty, trap_keys
from ..urls import registrable_domain
from .base import (
    POLICY_KEYS,
    BatchLease,
    Candidate,
    Claim,
    Drained,
    Lease,
    OriginPolicy,
    Outcome,
    Purged,
    RobotsRecord,
    RobotsTask,
    Suppression,
    TrapCaps,
    UrlState,
    Wait,
    override_for,
)
from .schema import MIGRATIONS

# The SQL below is written for SQLite; PostgresStore (postgres.py) runs the same statements
# through a small translation, so both backends share one implementation of the contract.
Conn = Any  # sqlite3.Connection, or postgres.py's adapter with the same execute surface
Row = Any  # sqlite3.Row, or postgres.py's row with the same [name] / [index] access

_POLL_S = 0.25  # how soon to look again when another worker holds the only free slot
# states a URL reaches only after a fetch: picking one again is a revisit, not discovery
_REVISITED = frozenset({"fetched", "quarantined", "blocked"})
_BATCH = 200  # rows per multi-row statement (18 parameters a URL row)
_INSERT_RECORD = """INSERT OR REPLACE INTO fetch_records
    (fetch_id, cycle, shard, url, fence, record, links, document, body_key, committed_at)
    VALUES (?,?,?,?,?,?,?,?,?,?)"""
# An operator pause of the origin itself or of its registrable domain (correlated on `o`).
_PAUSED = """SELECT 1 FROM pauses p WHERE (p.scope = 'origin' AND p.value = o.origin)
             OR (p.scope = 'domain' AND p.value = o.registrable_domain)"""
_SCAN = 16  # URLs of one origin looked at per claim before giving up on robots-blocked ones


class SqliteStore:
    """CoordinationStore on SQLite. One connection per thread; safe across processes."""

    def __init__(
        self,
        path: Path,
        default_policy: OriginPolicy,
        cycle_budget: int,
        busy_timeout_s: float = 30.0,
        caps: TrapCaps | None = None,
    ) -> None:
        self.path = path
        self.url = f"sqlite:///{path}"
        self._busy_ms = int(busy_timeout_s * 1000)
        self._setup(default_policy, cycle_budget, caps)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._migrate()
        except (OSError, sqlite3.Error, StoreUnavailable) as exc:
            raise CoordinationError(
                f"cannot open the coordination store {self.url} ({exc}); "
                "fix coordination_url or data_dir in the crawl config"
            ) from None

    def _setup(
        self, default_policy: OriginPolicy, cycle_budget: int, caps: TrapCaps | None
    ) -> None:
        self.default_policy = default_policy
        self.caps = caps or TrapCaps()
        self._bloom: Bloom | None = None
        self.digest_collisions = 0  # lookups where another URL shared the digest
        self.cycle_budget = cycle_budget  # URLs queued per origin per cycle
        self._local = threading.local()
        self._policies: dict[tuple[str, int], RobotsPolicy] = {}
        self._classes = dict(default_policy.classes)
        self._resolve = dict(default_policy.resolve)

    # connection and transactions -------------------------------------------------
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

    def _lock_migrations(self, c: Conn) -> None:
        """One migrator at a time (IMMEDIATE already makes it so here)."""

    def _ddl(self, stmt: str) -> str:
        """A migration statement in this backend's dialect (MIGRATIONS are written for SQLite)."""
        return stmt

    def _migrate(self) -> None:
        with self._tx() as c:
            self._lock_migrations(c)
            c.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT)"
            )
            done = {r[0] for r in c.execute("SELECT version FROM schema_migrations")}
            for version, statements in MIGRATIONS:
                if version in done:
                    continue
                for stmt in statements:
                    c.execute(self._ddl(stmt))
                c.execute("INSERT INTO schema_migrations VALUES (?, datetime('now'))", (version,))
            # registrable domains are computed in Python (public suffix list), not in SQL
            missing = c.execute("SELECT origin FROM origins WHERE registrable_domain IS NULL")
            c.executemany(
                "UPDATE origins SET registrable_domain = ? WHERE origin = ?",
                [(_domain_of(r[0]), r[0]) for r in missing.fetchall()],
            )
            self._regroup(c)
            self._backfill_trap_keys(c)
            self._backfill_trap_counts(c)
            self._backfill_path_counts(c)
            self._backfill_url_digests(c)
            # records from before migration 17 count as committed now: retention starts there
            c.execute("UPDATE fetch_records SET committed_at = ? WHERE committed_at IS NULL",
                      (time.time(),))  # fmt: skip

    def _backfill_url_digests(self, c: Conn) -> None:
        if c.execute("SELECT 1 FROM store_settings WHERE key = 'url_hash'").fetchone():
            return
        c.executemany(
            "UPDATE urls SET url_hash = ? WHERE seq = ?",
            [(url_digest(r[1]), r[0]) for r in c.execute(
                "SELECT seq, url FROM urls WHERE url_hash IS NULL").fetchall()],
        )  # fmt: skip
        c.execute("INSERT INTO store_settings VALUES ('url_hash', 'done')")

    def _backfill_trap_keys(self, c: Conn) -> None:
        """Trap keys of URLs from before migration 11, computed in Python once (a settings
        mark spares every later open the scan)."""
        if c.execute("SELECT 1 FROM store_settings WHERE key = 'trap_keys'").fetchone():
            return
        c.executemany(
            "UPDATE urls SET trap_pattern = ?, trap_query = ? WHERE seq = ?",
            [(k.pattern, k.query_key, r[0]) for r in c.execute(
                "SELECT seq, url FROM urls WHERE trap_pattern IS NULL").fetchall()
             for k in [trap_keys(r[1])]],
        )  # fmt: skip
        c.execute("INSERT INTO store_settings VALUES ('trap_keys', 'done')")

    def _backfill_trap_counts(self, c: Conn) -> None:
        """Trap counters of a catalogue from before migration 14, counted once."""
        if c.execute("SELECT 1 FROM store_settings WHERE key = 'trap_counts'").fetchone():
            return
        c.execute("DELETE FROM trap_counts")
        for kind, column in (("pattern", "trap_pattern"), ("query", "trap_query")):
            c.execute(
                f"""INSERT INTO trap_counts (origin, kind, key, n)
                    SELECT origin, '{kind}', {column}, COUNT(*) FROM urls
                    WHERE {column} IS NOT NULL GROUP BY origin, {column}"""
            )
        c.execute("INSERT INTO store_settings VALUES ('trap_counts', 'done')")

    def _backfill_path_counts(self, c: Conn) -> None:
        """Per-path variant counters (kind 'path') of a catalogue from before migration 20,
        summed from its per-key-set ones once."""
        if c.execute("SELECT 1 FROM store_settings WHERE key = 'trap_path_counts'").fetchone():
            return
        paths: Counter[tuple[str, str, str]] = Counter()
        for origin, key, n in c.execute(
            "SELECT origin, key, n FROM trap_counts WHERE kind = 'query'"
        ).fetchall():
            paths[(origin, "path", key.partition("?")[0])] += int(n)
        c.execute("DELETE FROM trap_counts WHERE kind = 'path'")
        c.executemany("INSERT INTO trap_counts (origin, kind, key, n) VALUES (?, ?, ?, ?)",
                      [(*k, n) for k, n in sorted(paths.items())])  # fmt: skip
        c.execute("INSERT INTO store_settings VALUES ('trap_path_counts', 'done')")

    def _regroup(self, c: Conn) -> None:
        """Buckets and fairness classes follow the config: recompute them when it changed."""
        p = self.default_policy
        grouping = json.dumps(
            [p.bucket, sorted(p.classes), sorted(p.resolve) if p.bucket == "ip" else []]
        )
        row = c.execute("SELECT value FROM store_settings WHERE key = 'grouping'").fetchone()
        stale = "bucket IS NULL" if row and row[0] == grouping else "1 = 1"
        rows = c.execute(f"SELECT origin, registrable_domain FROM origins WHERE {stale}").fetchall()
        c.executemany(
            "UPDATE origins SET bucket = ?, fair_class = ? WHERE origin = ?",
            [(*self._groups(r[0], r[1]), r[0]) for r in rows],
        )
        c.execute("DELETE FROM store_settings WHERE key = 'grouping'")
        c.execute("INSERT INTO store_settings VALUES ('grouping', ?)", (grouping,))

    def _groups(self, origin: str, domain: str) -> tuple[str, str]:
        """(politeness bucket, fairness class) of an origin under the current config."""
        p = self.default_policy
        bucket = bucket_of(origin, p.bucket, domain, self._ip_of)
        return bucket, class_of(origin, domain, self._classes)

    def _ip_of(self, host: str) -> str:
        """The address an "ip" bucket is keyed on: the resolve map, else DNS, else the host."""
        ip = self._resolve.get(host)
        if ip is None:
            try:
                infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
                ip = sorted(str(i[4][0]) for i in infos)[0]
            except (OSError, IndexError):
                ip = host  # unresolvable now: its own bucket, and the fetch will fail anyway
            self._resolve[host] = ip
        return ip

    def schema_version(self) -> int:
        row = self._select("SELECT MAX(version) FROM schema_migrations").fetchone()
        return int(row[0] or 0)

    # discovery ---------------------------------------------------------------------
    def discover(self, candidates: list[Candidate], cycle: str | None) -> list[str]:
        """Insert-if-absent each candidate; return its decision reason, in order."""
        if not candidates:
            return []
        with self._tx() as c:
            return self._discover(c, candidates, cycle, now=None)

    def _ensure_origins(
        self, c: Conn, cands: list[Candidate], overrides: list[dict[str, Any]] | None = None
    ) -> None:
        p = self.default_policy
        c.executemany(
            """INSERT OR IGNORE INTO origins
               (origin, shard, min_gap_s, max_in_flight, registrable_domain, bucket, fair_class)
               VALUES (?,?,?,?,?,?,?)""",
            sorted(  # one insertion order for every writer: no lock-order deadlocks
                (o, shard, p.min_gap_s, p.max_in_flight, d, *self._groups(o, d))
                for o, shard, d in {(x.origin, x.shard, _domain_of(x.origin)) for x in cands}
            ),
        )
        overrides = self._operator_state(c)[0] if overrides is None else overrides
        if overrides:
            self._apply_rates(c, overrides, sorted({x.origin for x in cands}))

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

    def _apply_rates(self, c: Conn, overrides: list[dict[str, Any]], origins: list[str]) -> None:
        """Operator rate limits on these origins: a gap floor (kept by robots refreshes) and
        an in-flight cap."""
        for origin in origins:
            gap = override_for(overrides, origin, "min_gap_s")
            cap = override_for(overrides, origin, "max_in_flight")
            if gap is not None:
                c.execute(
                    """UPDATE origins SET operator_gap_s = ?, min_gap_s = MAX(min_gap_s, ?)
                       WHERE origin = ?""",
                    (gap, gap, origin),
                )
            if cap is not None:
                c.execute("UPDATE origins SET max_in_flight = ? WHERE origin = ?",
                          (int(cap), origin))  # fmt: skip

    def _admitted_counts(self, c: Conn, origins: set[str], cycle: str) -> dict[str, int]:
        counts: dict[str, int] = {}
        for o in sorted(origins):  # one lock order for every writer
            row = c.execute(
                "SELECT admitted_cycle, admitted_count FROM origins WHERE origin = ?"
                + self._for_update,
                (o,),
            ).fetchone()
            counts[o] = int(row["admitted_count"]) if row and row["admitted_cycle"] == cycle else 0
        return counts

    _for_update = ""  # SQLite's IMMEDIATE transactions already serialize writers

    def _lock_origins(self, c: Conn, origins: set[str]) -> None:
        """Lock the origin rows a commit group will update, all at once and in one order
        (IMMEDIATE already serializes writers here)."""

    def _lock_shard(self, c: Conn, shard: int) -> None:
        """Serialize claims and frontier selection of one shard (IMMEDIATE does it here)."""

    def _discover(
        self,
        c: Conn,
        cands: list[Candidate],
        cycle: str | None,
        now: float | None,
    ) -> list[str]:
        """Opted-out URLs first: refused before anything of them is stored, origin included."""
        if not cands:
            return []
        overrides, blocked = self._operator_state(c)
        if any("priority" in o["settings"] for o in overrides):
            # an operator's priority for an origin or domain holds for new URLs too
            cands = [replace(x, priority=p) if (p := override_for(overrides, x.origin, "priority"))
                     is not None else x for x in cands]  # fmt: skip
        out = [Reason.SUPPRESSED.value if any(b.matches(x.url) for b in blocked) else ""
               for x in cands]  # fmt: skip
        allowed = iter(self._discover_allowed(c, [x for x, d in zip(cands, out, strict=True)
                                                  if not d], cycle, now, overrides))  # fmt: skip
        return [d or next(allowed) for d in out]

    def _discover_allowed(
        self,
        c: Conn,
        cands: list[Candidate],
        cycle: str | None,
        now: float | None,
        overrides: list[dict[str, Any]],
    ) -> list[str]:
        if not cands:
            return []
        now = time.time() if now is None else now
        self._ensure_origins(c, cands, overrides)
        counts = self._admitted_counts(c, {x.origin for x in cands}, cycle) if cycle else {}
        # Three statements for the whole batch (known? insert-if-absent, counters), not one
        # round trip per link: a page offers ~17 links and PostgreSQL is a network hop away.
        known = self._known_urls(c, self._maybe_known(c, [x.url for x in cands]))
        decisions = [Reason.ALREADY_KNOWN.value] * len(cands)
        planned: dict[str, tuple[int, str, str | None, str]] = {}
        rows = []
        fresh = [x for x in cands if x.url not in known]
        keys = {x.url: trap_keys(x.url) for x in fresh}
        traps = self._trap_counts(c, fresh, keys)
        for i, x in enumerate(cands):
            if x.url in known or x.url in planned:
                continue
            cut = self._trap_cut(x, keys[x.url], traps)
            if cut is not None:
                decisions[i] = cut
                continue
            state, reason, queued_cycle = x.state.value, x.reason, None
            if x.state is UrlState.ELIGIBLE:
                if cycle is None:
                    state = UrlState.DISCOVERED.value  # the next frontier selection queues it
                elif counts[x.origin] < self.cycle_budget:
                    queued_cycle = cycle
                    counts[x.origin] += 1
                else:
                    state, reason = UrlState.DISCOVERED.value, Reason.ORIGIN_BUDGET.value
            planned[x.url] = (i, reason, queued_cycle, x.origin)
            rows.append((
                x.url, x.discovered_url, x.origin, x.shard, x.depth, x.priority,
                state, reason, queued_cycle, x.robots_version, x.source, cycle, now,
                json.dumps(x.via) if x.via else None, keys[x.url].pattern, keys[x.url].query_key,
                x.kind, url_digest(x.url),
            ))  # fmt: skip
        inserted = self._insert_urls(c, rows)
        self._count_traps(c, [(planned[u][3], keys[u]) for u in inserted])
        if self._bloom is not None:
            self._bloom.update(inserted)
        for url, (i, reason, queued_cycle, origin) in planned.items():
            if url in inserted:
                decisions[i] = reason
            elif queued_cycle is not None:
                counts[origin] -= 1  # another writer inserted it first
        if cycle is not None:
            c.executemany(
                "UPDATE origins SET admitted_cycle = ?, admitted_count = ? WHERE origin = ?",
                [(cycle, n, o) for o, n in counts.items()],
            )
        return decisions

    def _trap_counts(
        self, c: Conn, fresh: list[Candidate], keys: dict[str, TrapKeys]
    ) -> Counter[tuple[str, str, str]]:
        """URLs already in the catalogue per (origin, kind, key) for the keys of `fresh`, and
        1 under (origin, 'stopped', path) for each of their paths the novelty rule stopped (in
        the same statement: no extra round trip per discovery)."""
        counts: Counter[tuple[str, str, str]] = Counter()
        wanted = sorted(
            {(x.origin, kind, k) for x in fresh for kind in _TRAP_KINDS
             for k in [_trap_key(keys[x.url], kind)] if k is not None}
        )  # fmt: skip
        paths = sorted({(x.origin, p) for x in fresh if (p := keys[x.url].path_key) is not None})
        for i in range(0, max(len(wanted), len(paths)), _BATCH):
            part, stops = wanted[i : i + _BATCH], paths[i : i + _BATCH]
            selects, params = [], []
            if part:
                marks = " OR ".join(["(origin = ? AND kind = ? AND key = ?)"] * len(part))
                selects.append(f"SELECT origin, kind, key, n FROM trap_counts WHERE {marks}")
                params += [v for triple in part for v in triple]
            if stops:
                marks = " OR ".join(["(origin = ? AND path = ?)"] * len(stops))
                selects.append("SELECT origin, 'stopped', path, stopped FROM trap_novelty "
                               f"WHERE stopped = 1 AND ({marks})")  # fmt: skip
                params += [v for pair in stops for v in pair]
            for row in c.execute(" UNION ALL ".join(selects), params):
                counts[(row[0], row[1], row[2])] = int(row[3])
        return counts

    def _count_traps(self, c: Conn, inserted: list[tuple[str, TrapKeys]]) -> None:
        """Add the URLs this statement inserted to their trap counters, in one key order for
        every writer (no lock-order deadlocks on PostgreSQL)."""
        added: Counter[tuple[str, str, str]] = Counter()
        for origin, k in inserted:
            for kind in _TRAP_KINDS:
                key = _trap_key(k, kind)
                if key is not None:
                    added[(origin, kind, key)] += 1
        c.executemany(
            """INSERT INTO trap_counts (origin, kind, key, n) VALUES (?, ?, ?, ?)
               ON CONFLICT (origin, kind, key) DO UPDATE SET n = trap_counts.n + excluded.n""",
            [(*key, n) for key, n in sorted(added.items())],
        )

    def _trap_cut(
        self, x: Candidate, keys: TrapKeys, counts: Counter[tuple[str, str, str]]
    ) -> str | None:
        """The cap reason when admitting `x` would pass a trap cap (or its path's variants
        are stopped for no novelty); else count it in."""
        if keys.path_key is not None and counts[(x.origin, "stopped", keys.path_key)]:
            return Reason.TRAP_NO_NOVELTY.value
        pattern_cap = self.caps.calendar_urls if keys.dated else self.caps.pattern_urls
        checks = [("pattern", keys.pattern, pattern_cap,
                   Reason.CALENDAR_CAP if keys.dated else Reason.PATTERN_CAP)]  # fmt: skip
        if keys.query_key is not None:
            checks.append(("query", keys.query_key, self.caps.query_variants,
                           Reason.QUERY_VARIANT_CAP))  # fmt: skip
        if keys.path_key is not None:
            checks.append(("path", keys.path_key, self.caps.path_variants,
                           Reason.PATH_VARIANT_CAP))  # fmt: skip
        for kind, key, cap, reason in checks:
            if counts[(x.origin, kind, key)] >= cap:
                return reason.value
        for kind, key, _, _ in checks:
            counts[(x.origin, kind, key)] += 1
        return None

    def _maybe_known(self, c: Conn, urls: list[str]) -> list[str]:
        """The URLs worth an exact lookup. With the Bloom prefilter, only its "maybe"s: a
        "no" can be wrong only for URLs another process added since we loaded it, and those
        the insert-if-absent still refuses, so a filter answer never drops or duplicates."""
        if not self.caps.bloom_capacity:
            return urls
        if self._bloom is None:
            self._bloom = Bloom(self.caps.bloom_capacity, 0.01)
            self._bloom.update(r[0] for r in c.execute("SELECT url FROM urls"))
        return [u for u in urls if u in self._bloom]

    def _known_urls(self, c: Conn, urls: list[str]) -> set[str]:
        """Exact: looked up by digest, confirmed on the full string (a digest collision is
        counted and never taken for a match)."""
        digests = sorted({url_digest(u) for u in urls})
        found: list[tuple[str, int]] = []
        for i in range(0, len(digests), _BATCH):
            part = digests[i : i + _BATCH]
            marks = ",".join("?" * len(part))
            found += [(r[0], int(r[1])) for r in c.execute(
                f"SELECT url, url_hash FROM urls WHERE url_hash IN ({marks})", part)]  # fmt: skip
        return self._confirmed(found, urls)

    def _confirmed(self, found: list[tuple[str, int]], urls: list[str]) -> set[str]:
        """The URLs of `urls` that `found` (url, digest) rows hold; a row whose digest was
        asked for by another URL is a collision: counted, never a match."""
        asked: dict[int, set[str]] = {}
        for u in urls:
            asked.setdefault(url_digest(u), set()).add(u)
        self.digest_collisions += sum(u not in asked.get(h, ()) for u, h in found)
        wanted = set(urls)
        return {u for u, _ in found if u in wanted}

    def _insert_urls(self, c: Conn, rows: list[tuple[Any, ...]]) -> set[str]:
        """Insert-if-absent; the URLs this statement actually inserted."""
        inserted: set[str] = set()
        for i in range(0, len(rows), _BATCH):
            part = rows[i : i + _BATCH]
            values = ",".join(["(" + ",".join("?" * 18) + ")"] * len(part))
            params = [v for row in part for v in row]
            cur = c.execute(
                "INSERT OR IGNORE INTO urls (url, discovered_url, origin, shard, depth, priority, "
                "state, reason, cycle, robots_version, source, discovered_cycle, discovered_at, "
                "redirect_chain, trap_pattern, trap_query, kind, url_hash) "
                f"VALUES {values} RETURNING url",
                params,
            )
            inserted.update(r[0] for r in cur.fetchall())
        return inserted

    # frontier ----------------------------------------------------------------------
    def select_frontier(self, cycle: str, shard: int, now: float) -> list[dict[str, Any]]:
        """Queue this shard's due URLs for `cycle`, at most `cycle_budget` per origin; idempotent."""
        with self._tx() as c:
            self._lock_shard(c, shard)
            counts: dict[str, int] = {
                r["origin"]: r["n"]
                for r in c.execute(
                    "SELECT origin, COUNT(*) AS n FROM urls WHERE shard = ? AND cycle = ? GROUP BY origin",
                    (shard, cycle),
                )
            }
            due = c.execute(
                # Robots-blocked URLs come back once their origin's policy is due for a refresh:
                # the claim fetches robots.txt first and judges them against the new rules.
                """SELECT seq, origin, state FROM urls
                   WHERE shard = ? AND (cycle IS NULL OR cycle <> ?) AND (
                       state = 'discovered'
                       OR (state IN ('eligible', 'failed_retryable', 'fetched', 'quarantined')
                           AND due_at <= ?)
                       OR (state = 'blocked' AND reason = 'robots_disallowed' AND origin IN
                           (SELECT origin FROM origins WHERE robots_expires_at <= ?)))
                   ORDER BY priority + ? * (? - discovered_at) / 3600.0 DESC, depth, seq""",
                # aging: a URL left out of earlier cycles by the budget gains priority as it waits
                (shard, cycle, now, now, self.default_policy.aging_per_hour, now),
            ).fetchall()
            picked = [
                (_selection_reason(row["state"]), row["seq"])
                for row in self._split_budget(due, counts)
            ]
            c.executemany(
                """UPDATE urls SET cycle = ?, state = 'eligible', reason = ?,
                   attempts = CASE WHEN state IN ('fetched', 'quarantined') THEN 0 ELSE attempts END
                   WHERE seq = ?""",
                [(cycle, reason, seq) for reason, seq in picked],
            )
            c.executemany(
                "UPDATE origins SET admitted_cycle = ?, admitted_count = ? WHERE origin = ?",
                [(cycle, n, o) for o, n in counts.items()],
            )
        return self.frontier_rows(cycle, shard)

    def _split_budget(self, due: list[Row], counts: dict[str, int]) -> list[Row]:
        """Each origin's picks under its free budget (frontier.split_budget); `counts` is
        advanced."""
        by_origin: dict[str, list[Row]] = {}
        for row in due:
            by_origin.setdefault(row["origin"], []).append(row)
        picked: list[Row] = []
        for origin, rows in by_origin.items():
            free = self.cycle_budget - counts.get(origin, 0)
            revisit = [row["state"] in _REVISITED for row in rows]
            mine = [
                rows[i] for i in split_budget(revisit, free, self.default_policy.discovery_share)
            ]
            counts[origin] = counts.get(origin, 0) + len(mine)
            picked += mine
        return picked

    def frontier_rows(self, cycle: str, shard: int) -> list[dict[str, Any]]:
        rows = self._select(
            """SELECT url, origin, depth, priority, state, reason, due_at, attempts
               FROM urls WHERE shard = ? AND cycle = ? ORDER BY origin, priority DESC, seq""",
            (shard, cycle),
        )
        return [dict(r) for r in rows]

    # claim -------------------------------------------------------------------------
    def claim(self, cycle: str, shard: int, now: float, token: str, lease_s: float) -> Claim:
        got = self.claim_batch(cycle, shard, now, token, lease_s, 1)
        return got[0] if isinstance(got, list) else got

    def claim_batch(
        self,
        cycle: str,
        shard: int,
        now: float,
        token: str,
        lease_s: float,
        limit: int,
        release: Sequence[tuple[str, int]] = (),
    ) -> list[Lease | RobotsTask] | Wait | Drained:
        """Up to `limit` claims in one transaction, after giving back the slots of `release`
        ((url, fence) of finished requests): one round trip set for many URLs."""
        with self._tx() as c:
            self._release(c, release)
            self._lock_shard(c, shard)
            params = {"now": now, "cycle": cycle, "shard": shard}
            # Fast path: origins whose clocks allow a request now and that have due work,
            # earliest clock first; each EXISTS stops at its first index entry.
            ready_now = c.execute(
                f"""SELECT o.*, {self._in_flight_sql} AS in_flight
                   FROM origins o
                   WHERE o.shard = :shard AND o.next_eligible_at <= :now AND o.backoff_until <= :now
                     AND EXISTS (SELECT 1 FROM urls u WHERE u.origin = o.origin AND u.cycle = :cycle
                                 AND u.state IN ('eligible', 'failed_retryable') AND u.due_at <= :now)
                     AND NOT EXISTS ({_PAUSED})
                   ORDER BY o.next_eligible_at LIMIT :n""",
                # wider than `limit`, so classes under their quota are seen behind a big one
                {**params, "n": max(64, 4 * limit)},
            ).fetchall()
            claims: list[Lease | RobotsTask] = []
            clocks: list[tuple[Any, ...]] = []
            buckets: set[str] = set()  # buckets served by this call: one claim each
            # longest-waiting first (the clock is when an origin became eligible): aging
            ready = [o for o in ready_now if _has_capacity(o, now)]
            scores = self._class_scores(c, shard, now)
            pending = Counter(o["fair_class"] for o in ready)  # classes with eligible work
            looked = False
            for origin in ready:
                if len(claims) >= limit:
                    break
                cls = origin["fair_class"]
                if origin["bucket"] in buckets:
                    pending[cls] -= 1
                    continue
                if self._held_back(origin, scores, pending, now):
                    continue
                looked = True
                pending[cls] -= 1
                got = self._claim_origin(c, origin, cycle, now, token, lease_s, limit - len(claims))
                claims.extend(got)
                if got:
                    clocks.append(_clock_update(origin["origin"], got[0]))
                    buckets.add(origin["bucket"])
                    scores[cls] = scores.get(cls, 0.0) + len(got)
            if claims:
                self._save_class_scores(c, shard, scores, now)
                c.executemany(
                    # in origin order, the order commits lock origins in: no deadlocks
                    """UPDATE origins SET next_eligible_at = ?,
                         robots_lease_id = CASE WHEN ? THEN ? ELSE robots_lease_id END,
                         robots_lease_until = CASE WHEN ? THEN ? ELSE robots_lease_until END
                       WHERE origin = ?""",
                    sorted(clocks, key=lambda u: u[-1]),
                )
                if self._shared_buckets:
                    # one clock per bucket: its other origins wait as long
                    self._push_clocks(c, [(u[-1], u[0], 0.0) for u in clocks])
                return claims
            # every due URL of a ready origin was robots-blocked: look again at once
            return Wait(now) if looked else self._when_next(c, cycle, shard, now)

    def _held_back(
        self, origin: Row, scores: dict[str, float], pending: Counter[str], now: float
    ) -> bool:
        """Over its class quota while other classes wait, and not yet waiting past the
        starvation bound (which beats the quota)."""
        p = self.default_policy
        if now - float(origin["next_eligible_at"]) >= p.starvation_bound_s:
            return False
        waiting = {k for k, n in pending.items() if n > 0}
        return over_quota(origin["fair_class"], scores, p.class_quota, waiting)

    def _class_scores(self, c: Conn, shard: int, now: float) -> dict[str, float]:
        """Recent attempts per fairness class in this shard, decayed to `now`."""
        if self.default_policy.class_quota >= 1.0:
            return {}
        rows = c.execute(
            "SELECT fair_class, score, at FROM class_usage WHERE shard = ?", (shard,)
        ).fetchall()
        half_life = self.default_policy.class_window_s
        return {r[0]: decayed(float(r[1]), float(r[2]), now, half_life) for r in rows}

    def _save_class_scores(self, c: Conn, shard: int, scores: dict[str, float], now: float) -> None:
        if self.default_policy.class_quota >= 1.0:
            return
        c.executemany(
            """INSERT INTO class_usage (shard, fair_class, score, at) VALUES (?,?,?,?)
               ON CONFLICT (shard, fair_class) DO UPDATE SET score = excluded.score, at = excluded.at""",
            sorted((shard, k, v, now) for k, v in scores.items() if v > 1e-3),
        )

    def _claim_origin(
        self,
        c: Conn,
        origin: Row,
        cycle: str,
        now: float,
        token: str,
        lease_s: float,
        limit: int,
    ) -> list[Lease | RobotsTask]:
        """The robots task, or up to `limit` URLs of one origin (one while it has a gap)."""
        gap = float(origin["min_gap_s"]) + float(origin["adapt_gap_s"])
        if gap > 0:
            gap += self.default_policy.gap_guard_s
        if origin["robots_expires_at"] <= now:
            return [RobotsTask(origin["origin"], uuid.uuid4().hex, now + lease_s, now, gap)]
        free = int(origin["max_in_flight"]) - int(origin["in_flight"])
        n = 1 if gap > 0 else max(1, min(limit, free))
        return list(self._lease_best_urls(c, origin, self._policy(origin), cycle, now, token,
                                          lease_s, gap, n))  # fmt: skip

    def _when_next(self, c: Conn, cycle: str, shard: int, now: float) -> Wait | Drained:
        """Nothing is claimable now: when might something be (the slow, full look)?"""
        origins = c.execute(
            f"""SELECT o.*,
                 {self._in_flight_sql} AS in_flight,
                 (SELECT MIN(u.due_at) FROM urls u WHERE u.origin = o.origin AND u.cycle = :cycle
                    AND u.state IN ('eligible', 'failed_retryable')) AS due
               FROM origins o WHERE o.shard = :shard AND NOT EXISTS ({_PAUSED})""",
            {"now": now, "cycle": cycle, "shard": shard},
        ).fetchall()
        ready = [max(o["next_eligible_at"], o["backoff_until"], o["due"]) for o in origins
                 if o["due"] is not None and _has_capacity(o, now)]  # fmt: skip
        busy = any(o["due"] is not None and not _has_capacity(o, now) for o in origins)
        if ready:
            # A slot held elsewhere may free up any moment: look again soon, then.
            soonest = max(min(ready), now)
            return Wait(min(soonest, now + _POLL_S) if busy else soonest)
        if busy:
            return Wait(now + _POLL_S)
        leased = c.execute(
            """SELECT MIN(lease_expires_at) FROM urls
               WHERE shard = ? AND cycle = ? AND state = 'leased'""",
            (shard, cycle),
        ).fetchone()[0]
        return Drained() if leased is None else Wait(min(leased, now + _POLL_S))

    def _policy(self, origin_row: Row) -> RobotsPolicy:
        key = (origin_row["origin"], int(origin_row["robots_version"]))
        policy = self._policies.get(key)
        if policy is None:
            policy = RobotsPolicy(
                key[0], key[1], RobotsStatus(origin_row["robots_status"]), origin_row["robots_text"]
            )
            self._policies[key] = policy
        return policy

    def _lease_best_urls(
        self,
        c: Conn,
        origin: Row,
        policy: RobotsPolicy,
        cycle: str,
        now: float,
        token: str,
        lease_s: float,
        gap: float,
        n: int,
    ) -> list[Lease]:
        rows = c.execute(
            """SELECT seq, url, depth, fence, attempts, etag, last_modified, redirect_chain, kind,
                      priority, content_hash, document_id, change_history, last_checked_at,
                      revisit_interval_s
               FROM urls
               WHERE origin = ? AND cycle = ? AND state IN ('eligible', 'failed_retryable')
                 AND due_at <= ? ORDER BY priority DESC, seq LIMIT ?""",
            (origin["origin"], cycle, now, _SCAN + n - 1),
        ).fetchall()
        blocked: list[tuple[str, int, int]] = []
        leases: list[Lease] = []
        for row in rows:
            if len(leases) == n:
                break
            if not policy.allows(row["url"], token):
                blocked.append((Reason.ROBOTS_DISALLOWED.value, policy.version, row["seq"]))
                continue
            leases.append(
                Lease(
                    url=row["url"],
                    origin=origin["origin"],
                    shard=int(origin["shard"]),
                    depth=int(row["depth"]),
                    fence=int(row["fence"]) + 1,
                    lease_id=uuid.uuid4().hex,
                    expires_at=now + lease_s,
                    attempts=int(row["attempts"]) + 1,
                    robots_version=policy.version,
                    etag=row["etag"],
                    last_modified=row["last_modified"],
                    claimed_at=now,
                    gap_s=gap,
                    redirect_chain=tuple(json.loads(row["redirect_chain"] or "[]")),
                    kind=row["kind"],
                    priority=float(row["priority"]),
                    content_hash=row["content_hash"],
                    document_id=row["document_id"],
                    change_history=row["change_history"],
                    last_checked_at=row["last_checked_at"],
                    revisit_interval_s=row["revisit_interval_s"],
                    conditional=bool(origin["validators_trusted"]),
                )
            )
        if blocked:
            c.executemany(
                "UPDATE urls SET state = 'blocked', reason = ?, robots_version = ? WHERE seq = ?",
                blocked,
            )
        if leases:
            c.executemany(
                """UPDATE urls SET state = 'leased', lease_id = ?, lease_expires_at = ?, fence = ?,
                   attempts = attempts + 1, slot_held = 1, robots_version = ?, extended = 0
                   WHERE url = ?""",
                [(x.lease_id, x.expires_at, x.fence, x.robots_version, x.url) for x in leases],
            )
        return leases

    # request end and commit --------------------------------------------------------
    def release_slots(self, finished: Sequence[tuple[str, int]]) -> None:
        """Requests are over: give their origin slots back (only the current attempts can)."""
        if finished:
            with self._tx() as c:
                self._release(c, finished)

    def _release(self, c: Conn, finished: Sequence[tuple[str, int]]) -> None:
        if finished:
            c.executemany(
                "UPDATE urls SET slot_held = 0 WHERE url = ? AND fence = ? AND state = 'leased'",
                sorted(finished),  # one lock order for every writer
            )

    def extend_lease(self, lease: Lease, now: float, lease_s: float) -> Lease | None:
        """Extend a live lease once, with its current fence; None if it is stale, expired or
        already extended (the worker must then give up, not commit late)."""
        with self._tx() as c:
            cur = c.execute(
                """UPDATE urls SET lease_expires_at = ?, extended = 1
                   WHERE url = ? AND fence = ? AND state = 'leased' AND extended = 0
                     AND lease_expires_at > ?""",
                (now + lease_s, lease.url, lease.fence, now),
            )
            return replace(lease, expires_at=now + lease_s) if cur.rowcount == 1 else None

    def commit(self, lease: Lease, outcome: Outcome, cycle: str, now: float) -> bool:
        """Apply a fetch result if `lease` still owns the URL; else record a stale attempt."""
        return self.commit_batch([(lease, outcome)], cycle, now)[0]

    def commit_batch(
        self, results: Sequence[tuple[Lease, Outcome]], cycle: str, now: float
    ) -> list[bool]:
        """Several fenced commits in one transaction (group commit); each applies only while
        its lease still owns the URL, else it is recorded as a stale attempt."""
        if not results:
            return []
        with self._tx() as c:
            self._lock_origins(c, {x.origin for x, _ in results}
                               | {cand.origin for _, o in results for _, cand in o.links if cand})  # fmt: skip
            applied = self._apply_all(c, results, now)
            blocked = self._operator_state(c)[1] if not all(applied) else []
            stale = [(lease.url, lease.fence, cycle, now, json.dumps(outcome.record, default=str))
                     for (lease, outcome), ok in zip(results, applied, strict=True)
                     if not ok and not any(b.matches(lease.url) for b in blocked)]  # fmt: skip
            if stale:
                c.executemany("INSERT INTO stale_attempts VALUES (?,?,?,?,?)", stale)
            live = [r for r, ok in zip(results, applied, strict=True) if ok]
            if live:
                self._write_records(c, live, cycle, now)
                self._note_validators(c, live)
                if self.default_policy.adaptive_max_gap_s > 0:
                    self._adapt(c, live)
        return applied

    def _adapt(self, c: Conn, results: Sequence[tuple[Lease, Outcome]]) -> None:
        """AIMD pacing per origin (politeness.adapt): read each origin's pacing state, apply
        the rule to its answers in commit order, write the decision."""
        by_origin: dict[str, list[tuple[Lease, Outcome]]] = {}
        for lease, outcome in results:
            by_origin.setdefault(lease.origin, []).append((lease, outcome))
        marks = ",".join("?" * len(by_origin))
        rows = c.execute(
            f"""SELECT origin, min_gap_s, adapt_gap_s, latency_s, stress FROM origins
                WHERE origin IN ({marks}) ORDER BY origin"""
            + self._for_update,
            sorted(by_origin),
        ).fetchall()
        p = self.default_policy
        rule = PacingRule(p.adaptive_max_gap_s, p.overload_share, p.recover_steps)
        updates = []
        for row in rows:
            latency = None if row["latency_s"] is None else float(row["latency_s"])
            state = Pacing(float(row["adapt_gap_s"]), latency, float(row["stress"]))
            for lease, outcome in by_origin[row["origin"]]:
                answer = Answer(outcome.reason, lease.attempts, outcome.record.get("elapsed_s"))
                state = adapt(state, answer, float(row["min_gap_s"]), rule)
            updates.append((state.extra_gap_s, state.latency_s, state.stress, row["origin"]))
        c.executemany(
            "UPDATE origins SET adapt_gap_s = ?, latency_s = ?, stress = ? WHERE origin = ?",
            updates,
        )

    def _apply_all(
        self, c: Conn, results: Sequence[tuple[Lease, Outcome]], now: float
    ) -> list[bool]:
        """The conditional updates of a group; which of them applied."""
        order = sorted(range(len(results)), key=lambda i: results[i][0].url)  # one lock order
        applied = [False] * len(results)
        for i in order:
            applied[i] = self._apply(c, *results[i], now)
        return applied

    def _apply(self, c: Conn, lease: Lease, outcome: Outcome, now: float) -> bool:
        o = outcome
        cur = c.execute(
            """UPDATE urls SET state = ?, reason = ?, due_at = ?, lease_id = NULL,
                 lease_expires_at = NULL, slot_held = 0, last_fetch_at = ?, last_status = ?,
                 etag = COALESCE(?, etag), last_modified = COALESCE(?, last_modified),
                 content_hash = COALESCE(?, content_hash),
                 document_id = COALESCE(?, document_id),
                 change_history = COALESCE(?, change_history),
                 last_checked_at = CASE WHEN ? = 1 THEN ? ELSE last_checked_at END,
                 checks = checks + ?, changes = changes + ?,
                 revisit_interval_s = COALESCE(?, revisit_interval_s),
                 revisit_reason = COALESCE(?, revisit_reason), change_rate = COALESCE(?, change_rate)
               WHERE url = ? AND fence = ? AND state = 'leased'""",
            (
                o.state.value, o.reason, o.due_at, now, o.status, o.etag, o.last_modified,
                o.content_hash, o.document_id, o.change_history, int(o.checked), now,
                int(o.checked), int(o.changed), o.revisit_interval_s, o.revisit_reason,
                o.change_rate, lease.url, lease.fence,
            ),
        )  # fmt: skip
        return bool(cur.rowcount == 1)

    def _note_validators(self, c: Conn, results: Sequence[tuple[Lease, Outcome]]) -> None:
        """Count each origin's answers to conditional requests and judge its validators
        again (recrawl.validators_trusted)."""
        seen: dict[str, list[int]] = {}
        for lease, outcome in results:
            if outcome.validators is not None:
                n = seen.setdefault(lease.origin, [0, 0])
                n[0] += 1
                n[1] += outcome.validators == "misleading"
        if not seen:
            return
        marks = ",".join("?" * len(seen))
        rows = c.execute(
            f"""SELECT origin, validator_checks, validator_misses, validators_trusted FROM origins
                WHERE origin IN ({marks}) ORDER BY origin"""
            + self._for_update,
            sorted(seen),
        ).fetchall()
        updates = []
        for row in rows:
            answered, misled = seen[row["origin"]]
            checks = int(row["validator_checks"]) + answered
            misses = int(row["validator_misses"]) + misled
            trusted = validators_trusted(
                bool(row["validators_trusted"]), checks, misses, self.default_policy.untrusted_after
            )
            updates.append((checks, misses, int(trusted), row["origin"]))
        c.executemany(
            """UPDATE origins SET validator_checks = ?, validator_misses = ?,
                 validators_trusted = ? WHERE origin = ?""",
            updates,
        )

    def _write_records(
        self, c: Conn, results: Sequence[tuple[Lease, Outcome]], cycle: str, now: float
    ) -> None:
        # One discovery for every page of the group: three statements, not three per page.
        cands = [cand for _, o in results for _, cand in o.links if cand is not None]
        decided = self._discover(c, cands, cycle, now)
        decisions = iter(decided)
        records = []
        for lease, outcome in results:
            rows = [{**row, "reason": next(decisions) if cand is not None else row["reason"]}
                    for row, cand in outcome.links]  # fmt: skip
            # an opted-out URL leaves no trace, not even as another page's outlink
            rows = [r for r in rows if r["reason"] != Reason.SUPPRESSED.value]
            records.append((
                outcome.record["fetch_id"], cycle, lease.shard, lease.url, lease.fence,
                json.dumps(outcome.record, default=str), json.dumps(rows, default=str),
                json.dumps(outcome.document, default=str) if outcome.document else None,
                outcome.record.get("body_key"), now,
            ))  # fmt: skip
        c.executemany(_INSERT_RECORD, records)
        self._note_novelty(c, results, decided, cycle, now)

    def _note_novelty(
        self,
        c: Conn,
        results: Sequence[tuple[Lease, Outcome]],
        decided: list[str],
        cycle: str,
        now: float,
    ) -> None:
        """The novelty rule (traps.judge_novelty) for the query variants this group fetched:
        what each brought (new non-variant URLs among its links' decisions, a document text
        no other URL holds), one read of the paths' states, the rule in commit order, one
        write; a stopped path's queued, never-fetched variants leave this cycle."""
        reasons = iter(decided)
        events: list[tuple[str, str, int, str | None, str]] = []
        for lease, outcome in results:
            found = [(cand.url, next(reasons)) for _, cand in outcome.links if cand is not None]
            path = trap_keys(lease.url).path_key
            if path is None or lease.kind != "page":
                continue
            new = sum(r not in _NOT_NEW and trap_keys(u).path_key is None for u, r in found)
            doc = outcome.document_id if outcome.document is not None else None
            events.append((lease.origin, path, new, doc, lease.url))
        if not events:
            return
        docs = sorted({e[3] for e in events if e[3] is not None})
        holders: dict[str, set[str]] = {}
        for i in range(0, len(docs), _BATCH):
            held = docs[i : i + _BATCH]
            marks = ",".join("?" * len(held))
            for url, doc in c.execute(
                f"SELECT url, document_id FROM urls WHERE document_id IN ({marks})", held
            ):
                holders.setdefault(doc, set()).add(url)
        firsts: dict[str, str] = {}
        for e in events:
            if e[3] is not None:
                firsts.setdefault(e[3], e[4])
        group = {e[4] for e in events}
        keys = sorted({(e[0], e[1]) for e in events})
        states: dict[tuple[str, str], tuple[Novelty, float | None]] = {}
        for i in range(0, len(keys), _BATCH):
            part = keys[i : i + _BATCH]
            marks = " OR ".join(["(origin = ? AND path = ?)"] * len(part))
            for row in c.execute(
                "SELECT origin, path, fetched, barren, stopped, stopped_at FROM trap_novelty "
                f"WHERE {marks} ORDER BY origin, path" + self._for_update,
                [v for pair in part for v in pair],
            ):
                states[(row[0], row[1])] = (Novelty(int(row[2]), int(row[3]), bool(row[4])), row[5])
        for origin, path, new, doc, url in events:
            state, since = states.get((origin, path), (Novelty(), None))
            fresh = doc is not None and firsts[doc] == url and not (holders.get(doc, set()) - group)
            after = judge_novelty(state, VariantFetch(new, fresh), self.caps.novelty_window)
            states[(origin, path)] = (after, (since or now) if after.stopped else None)
        c.executemany(
            """INSERT INTO trap_novelty (origin, path, fetched, barren, stopped, stopped_at)
               VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (origin, path) DO UPDATE SET
                 fetched = excluded.fetched, barren = excluded.barren,
                 stopped = excluded.stopped, stopped_at = excluded.stopped_at""",
            [(o, p, s.fetched, s.barren, int(s.stopped), at)
             for (o, p), (s, at) in sorted(states.items())],
        )  # fmt: skip
        for (origin, path), (state, _) in sorted(states.items()):
            if state.stopped:
                self._withdraw_variants(c, origin, path, cycle)

    def _withdraw_variants(self, c: Conn, origin: str, path: str, cycle: str) -> None:
        """A stopped path's variants queued in `cycle` and never fetched go back to
        'discovered' (reason trap_no_novelty), their budget to the origin's other URLs."""
        cur = c.execute(
            """UPDATE urls SET state = 'discovered', reason = ?, cycle = NULL
               WHERE origin = ? AND cycle = ? AND state = 'eligible' AND last_fetch_at IS NULL
                 AND substr(trap_query, 1, CAST(? AS INTEGER)) = ?""",
            (Reason.TRAP_NO_NOVELTY.value, origin, cycle, len(path) + 1, path + "?"),
        )
        if cur.rowcount > 0:
            c.execute(
                """UPDATE origins SET admitted_count = CASE WHEN admitted_count > ?
                     THEN admitted_count - ? ELSE 0 END
                   WHERE origin = ? AND admitted_cycle = ?""",
                (cur.rowcount, cur.rowcount, origin, cycle),
            )

    # robots ------------------------------------------------------------------------
    def robots(self, origin: str) -> RobotsRecord | None:
        row = self._select("SELECT * FROM origins WHERE origin = ?", (origin,)).fetchone()
        if row is None or row["robots_status"] is None:
            return None
        return RobotsRecord(
            origin, int(row["robots_version"]), row["robots_status"], row["robots_text"],
            float(row["robots_fetched_at"] or 0), float(row["robots_expires_at"]),
        )  # fmt: skip

    def robots_good_at(self, origin: str) -> float | None:
        row = self._select(
            "SELECT robots_good_at FROM origins WHERE origin = ?", (origin,)
        ).fetchone()
        return None if row is None or row[0] is None else float(row[0])

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
        record: dict[str, Any] | None = None,
        not_before: float = 0.0,
    ) -> RobotsRecord:
        """Store the robots outcome of `task` (and its fetch record); the version grows only
        when the effective rules change. The origin's next request waits for `not_before` in
        the same transaction (a Crawl-delay counts from the robots.txt request itself)."""
        with self._tx() as c:
            if record is not None and cycle is not None and shard is not None:
                c.execute(
                    _INSERT_RECORD,
                    (record["fetch_id"], cycle, shard, record["url"], 0,
                     json.dumps(record, default=str), "[]", None, None, now),
                )  # fmt: skip
            row = c.execute(
                "SELECT * FROM origins WHERE origin = ? AND robots_lease_id = ?" + self._for_update,
                (task.origin, task.lease_id),
            ).fetchone()
            if row is None:
                raise StaleAttempt(f"{task.origin}/robots.txt", 0)  # another worker took it over
            changed = row["robots_status"] != status or row["robots_text"] != text
            version = int(row["robots_version"]) + int(changed)
            c.execute(
                """UPDATE origins SET robots_version = ?, robots_status = ?, robots_text = ?,
                     robots_fetched_at = ?, robots_expires_at = ?, robots_lease_id = NULL,
                     robots_lease_until = 0, backoff_until = MAX(backoff_until, ?),
                     next_eligible_at = MAX(next_eligible_at, ?),
                     min_gap_s = CASE WHEN COALESCE(?, min_gap_s) > operator_gap_s
                       THEN COALESCE(?, min_gap_s) ELSE operator_gap_s END,
                     robots_good_at = CASE WHEN ? THEN ? ELSE robots_good_at END
                   WHERE origin = ?""",
                (
                    version, status, text, now, now + ttl_s, backoff_until,
                    max(backoff_until, not_before),
                    min_gap_s, min_gap_s, good, now, task.origin,
                ),
            )  # fmt: skip
            if changed and status in (RobotsStatus.PARSED.value, RobotsStatus.UNAVAILABLE.value):
                # New rules may allow what the old ones blocked: those URLs go back to the
                # queue, and the claim judges them against the policy now in force.
                c.execute(
                    """UPDATE urls SET state = 'eligible', reason = ?
                       WHERE origin = ? AND state = 'blocked' AND reason = ?""",
                    (Reason.ROBOTS_RECHECK.value, task.origin, Reason.ROBOTS_DISALLOWED.value),
                )
        return RobotsRecord(task.origin, version, status, text, now, now + ttl_s)

    def push_origin_clocks(self, pushes: Sequence[tuple[str, float, float]]) -> None:
        """(origin, next_eligible_at, backoff_until) for many origins: clocks only move forward,
        for the origin's whole bucket."""
        if pushes:
            with self._tx() as c:
                self._push_clocks(c, pushes)

    def reserve_hop(self, origin: str, shard: int, now: float) -> float:
        with self._tx() as c:
            self._ensure_origins(c, [Candidate(origin, origin, origin, shard, 0, 0.0)])
            o = c.execute(
                f"""SELECT o.*, {self._in_flight_sql} AS in_flight,
                     EXISTS ({_PAUSED}) AS paused FROM origins o WHERE o.origin = :origin""",
                {"origin": origin, "now": now},
            ).fetchone()
            if o["paused"]:
                return float("inf")
            ready = max(float(o["next_eligible_at"]), float(o["backoff_until"]))
            if ready > now:
                return ready
            if not _has_capacity(o, now):
                return now + _POLL_S
            gap = float(o["min_gap_s"]) + float(o["adapt_gap_s"])
            gap += self.default_policy.gap_guard_s if gap > 0 else 0.0
            self._push_clocks(c, [(origin, now + gap, 0.0)])
            return now

    def _push_clocks(self, c: Conn, pushes: Sequence[tuple[str, float, float]]) -> None:
        where = "origin = ?"
        if self._shared_buckets:
            where = "bucket = (SELECT bucket FROM origins WHERE origin = ?)"
        c.executemany(
            # the clock carries the backoff too: "ready soonest" is one indexed column
            f"""UPDATE origins SET next_eligible_at = MAX(next_eligible_at, ?),
                backoff_until = MAX(backoff_until, ?) WHERE {where}""",
            [(max(t, b), b, o) for o, t, b in sorted(pushes)],
        )

    @property
    def _shared_buckets(self) -> bool:
        """Whether a bucket may hold several origins (registrable domain or IP address)."""
        return self.default_policy.bucket != "origin"

    @property
    def _in_flight_sql(self) -> str:
        """Requests in flight in origin `o`'s bucket (the origin, or all origins of its domain
        or address, whose robots.txt fetches count too)."""
        if not self._shared_buckets:
            return """(SELECT COUNT(*) FROM urls s WHERE s.origin = o.origin
                       AND s.slot_held = 1 AND s.lease_expires_at > :now)"""
        return """((SELECT COUNT(*) FROM urls s WHERE s.slot_held = 1
                     AND s.lease_expires_at > :now AND s.origin IN (SELECT d.origin FROM origins d
                         WHERE d.bucket = o.bucket))
                   + (SELECT COUNT(*) FROM origins r WHERE r.bucket = o.bucket
                         AND r.origin <> o.origin
                         AND r.robots_lease_until > :now))"""

    # maintenance -------------------------------------------------------------------
    def sweep(self, now: float) -> int:
        """Return expired leases to eligible, attempts kept."""
        with self._tx() as c:
            cur = c.execute(
                """UPDATE urls SET state = 'eligible', reason = ?, lease_id = NULL,
                   lease_expires_at = NULL, slot_held = 0
                   WHERE state = 'leased' AND lease_expires_at <= ?""",
                (Reason.LEASE_EXPIRED.value, now),
            )
            return int(cur.rowcount)

    def acquire_batch(self, cycle: str, shard: int, holder: str, now: float) -> BatchLease:
        """Take the next fence token of partition (cycle, shard) for `holder` (a run id)."""
        with self._tx() as c:
            self._lock_shard(c, shard)
            row = c.execute(
                "SELECT fence FROM batch_leases WHERE cycle = ? AND shard = ?" + self._for_update,
                (cycle, shard),
            ).fetchone()
            fence = (int(row["fence"]) if row else 0) + 1
            c.execute(
                "INSERT OR REPLACE INTO batch_leases VALUES (?,?,?,?,?)",
                (cycle, shard, fence, holder, now),
            )
        return BatchLease(cycle, shard, fence, holder)

    def batch_lease(self, cycle: str, shard: int) -> BatchLease | None:
        """The newest batch lease of a partition."""
        row = self._select(
            "SELECT fence, holder FROM batch_leases WHERE cycle = ? AND shard = ?", (cycle, shard)
        ).fetchone()
        return BatchLease(cycle, shard, int(row["fence"]), row["holder"]) if row else None

    # operator controls ------------------------------------------------------------
    def pause(self, scope: str, value: str, reason: str, who: str, now: float) -> None:
        """Pause an origin or a registrable domain: no claim from the next one on."""
        if scope not in ("origin", "domain") or not reason.strip():
            raise CoordinationError("a pause needs scope 'origin' or 'domain' and a reason")
        with self._tx() as c:
            c.execute(
                "INSERT OR REPLACE INTO pauses VALUES (?,?,?,?,?)", (scope, value, reason, who, now)
            )
            self._audit(c, "pause", scope, value, reason, who, now)

    def resume(self, scope: str, value: str, reason: str, who: str, now: float) -> bool:
        """Lift a pause; False if there was none."""
        with self._tx() as c:
            cur = c.execute("DELETE FROM pauses WHERE scope = ? AND value = ?", (scope, value))
            if cur.rowcount:
                self._audit(c, "resume", scope, value, reason, who, now)
            return bool(cur.rowcount)

    def _audit(self, c: Conn, action: str, scope: str, value: str, reason: str, who: str,
               now: float) -> None:  # fmt: skip
        c.execute(
            "INSERT INTO operator_log (action, scope, value, reason, who, at) VALUES (?,?,?,?,?,?)",
            (action, scope, value, reason, who, now),
        )

    # opt-out ------------------------------------------------------------------------
    def suppress(
        self, target: Suppression, reason: str, verification: str, who: str, now: float
    ) -> Purged:
        """Record the suppression and, in the same transaction, remove everything the store
        holds of its URLs (queue rows, fetch records, stale attempts, outlinks naming them):
        from the commit of this call no claim can return them and no discovery admits them.
        Returns what was removed, for the lake, body and index purges that follow."""
        if target.scope not in ("origin", "domain", "prefix") or not target.value:
            raise CoordinationError(
                "a suppression needs scope origin, domain or prefix and a value"
            )
        if not reason.strip() or not verification.strip():
            raise CoordinationError("a suppression needs a reason and how the request was verified")
        with self._tx() as c:
            c.execute(
                """INSERT INTO suppressions (scope, value, reason, verification, who, at)
                   VALUES (?,?,?,?,?,?) ON CONFLICT (scope, value) DO UPDATE SET
                   reason = excluded.reason, verification = excluded.verification,
                   who = excluded.who, at = excluded.at""",
                (target.scope, target.value, reason, verification, who, now),
            )
            self._audit(c, "suppress", target.scope, target.value,
                        f"{reason} (verified: {verification})", who, now)  # fmt: skip
            purged = self._purge(c, target)
            self._audit(c, "purge_store", target.scope, target.value,
                        f"{purged.urls} urls, {purged.records} fetch records, "
                        f"{purged.stale_attempts} stale attempts, "
                        f"{purged.links_rewritten} records' outlinks", who, now)  # fmt: skip
        return purged

    def _purge(self, c: Conn, target: Suppression) -> Purged:
        out = Purged()
        urls = [r for r in c.execute("SELECT url, content_hash FROM urls")
                if target.matches(r[0])]  # fmt: skip
        out.body_keys |= {r[1] for r in urls if r[1]}
        for i in range(0, len(urls), _BATCH):
            part = [r[0] for r in urls[i : i + _BATCH]]
            c.execute(f"DELETE FROM urls WHERE url IN ({','.join('?' * len(part))})", part)
        out.urls = len(urls)
        records = [r for r in c.execute("SELECT fetch_id, url, body_key FROM fetch_records")
                   if target.matches(r[1])]  # fmt: skip
        out.body_keys |= {r[2] for r in records if r[2]}
        for i in range(0, len(records), _BATCH):
            ids = [r[0] for r in records[i : i + _BATCH]]
            marks = ",".join("?" * len(ids))
            for (document,) in c.execute(
                f"SELECT document FROM fetch_records WHERE fetch_id IN ({marks})", ids
            ).fetchall():
                if document:
                    doc = json.loads(document)
                    out.documents.append((doc["url"], doc["text_hash"],
                                          str(doc["extraction_version"])))  # fmt: skip
            c.execute(f"DELETE FROM fetch_records WHERE fetch_id IN ({marks})", ids)
        out.records = len(records)
        stale = [r[0] for r in c.execute("SELECT DISTINCT url FROM stale_attempts")
                 if target.matches(r[0])]  # fmt: skip
        for url in stale:
            c.execute("DELETE FROM stale_attempts WHERE url = ?", (url,))
        out.stale_attempts = len(stale)
        for fetch_id, links in c.execute("SELECT fetch_id, links FROM fetch_records").fetchall():
            rows = json.loads(links)
            kept = [r for r in rows if not (r.get("url") and target.matches(r["url"]))]
            if len(kept) != len(rows):
                c.execute("UPDATE fetch_records SET links = ? WHERE fetch_id = ?",
                          (json.dumps(kept, default=str), fetch_id))  # fmt: skip
                out.links_rewritten += 1
        if target.scope != "prefix":
            out.origins = [r[0] for r in c.execute("SELECT origin FROM origins")
                           if target.matches(r[0] + "/")]  # fmt: skip
            for origin in out.origins:
                c.execute("DELETE FROM trap_counts WHERE origin = ?", (origin,))
                c.execute("DELETE FROM trap_novelty WHERE origin = ?", (origin,))
                c.execute("DELETE FROM origins WHERE origin = ?", (origin,))
        return out

    def audit(self, action: str, scope: str, value: str, reason: str, who: str, now: float) -> None:
        """Record an operator action that happened outside the store (lake, bodies, index)."""
        with self._tx() as c:
            self._audit(c, action, scope, value, reason, who, now)

    def purge(self, target: Suppression, who: str, now: float) -> Purged:
        """Purge a suppressed target again (idempotent): catches what in-flight work of the
        moment of suppression may have left."""
        with self._tx() as c:
            purged = self._purge(c, target)
            if purged.urls or purged.records or purged.stale_attempts or purged.links_rewritten:
                self._audit(c, "purge_store", target.scope, target.value,
                            f"{purged.urls} urls, {purged.records} fetch records (re-run)", who, now)  # fmt: skip
        return purged

    def set_policy(
        self, target: Suppression, settings: dict[str, float | None], reason: str, who: str,
        now: float,
    ) -> int:  # fmt: skip
        """Change an origin's or a domain's operator policy (None removes a setting); the
        new version applies at once to its origins and URLs and is audited, old -> new."""
        if target.scope not in ("origin", "domain"):
            raise CoordinationError("a policy applies to an origin or a registrable domain")
        if not reason.strip():
            raise CoordinationError("a policy change needs a reason")
        for key, value in settings.items():
            if key not in POLICY_KEYS:
                raise CoordinationError(
                    f"unknown policy setting {key!r}; known: {', '.join(POLICY_KEYS)}"
                )
            lo, hi = POLICY_KEYS[key]
            if value is not None and not lo <= value <= hi:
                raise CoordinationError(f"{key} = {value:g} is outside [{lo:g}, {hi:g}]")
        with self._tx() as c:
            row = c.execute(
                "SELECT settings, version FROM policy_overrides WHERE scope = ? AND value = ?",
                (target.scope, target.value),
            ).fetchone()
            old = json.loads(row["settings"]) if row else {}
            new = {k: v for k, v in {**old, **settings}.items() if v is not None}
            version = (int(row["version"]) if row else 0) + 1
            c.execute(
                """INSERT INTO policy_overrides (scope, value, settings, version, who, reason, at)
                   VALUES (?,?,?,?,?,?,?) ON CONFLICT (scope, value) DO UPDATE SET
                   settings = excluded.settings, version = excluded.version,
                   who = excluded.who, reason = excluded.reason, at = excluded.at""",
                (target.scope, target.value, json.dumps(new, sort_keys=True), version, who,
                 reason, now),
            )  # fmt: skip
            self._audit(c, "set_policy", target.scope, target.value,
                        f"v{version}: {json.dumps(old, sort_keys=True)} -> "
                        f"{json.dumps(new, sort_keys=True)} ({reason})", who, now)  # fmt: skip
            origins = [r[0] for r in c.execute("SELECT origin FROM origins")
                       if target.matches(r[0] + "/")]  # fmt: skip
            overrides = self._operator_state(c)[0]
            self._apply_rates(c, overrides, origins)
            for origin in origins:
                priority = override_for(overrides, origin, "priority")
                if priority is not None:
                    c.execute("UPDATE urls SET priority = ? WHERE origin = ?", (priority, origin))
        return version

    def cycle_progress(self, cycle: str) -> tuple[int, int]:
        """(URLs of `cycle` done, URLs queued for it): the total grows as links come in."""
        row = self._select(
            """SELECT COALESCE(SUM(CASE WHEN state IN ('eligible', 'failed_retryable', 'leased')
                                   THEN 0 ELSE 1 END), 0), COUNT(*)
               FROM urls WHERE cycle = ?""",
            (cycle,),
        ).fetchone()
        return int(row[0]), int(row[1])

    def policy_overrides(self) -> list[dict[str, Any]]:
        rows = self._select("SELECT * FROM policy_overrides ORDER BY scope, value")
        return [{**dict(r), "settings": json.loads(r["settings"])} for r in rows]

    def expire_bodies(self, before: float) -> int:
        """Drop the body references of fetch records committed before `before` (raw-body
        retention): the bodies become orphans unless a newer record or a URL's current
        content still names them, and the orphan sweep removes them safely."""
        with self._tx() as c:
            cur = c.execute(
                """UPDATE fetch_records SET body_key = NULL
                   WHERE body_key IS NOT NULL AND committed_at < ?""",
                (before,),
            )
            return int(cur.rowcount)

    def suppressions(self) -> list[dict[str, Any]]:
        return [dict(r) for r in self._select("SELECT * FROM suppressions ORDER BY scope, value")]

    def add_tombstones(self, events: Sequence[dict[str, Any]], now: float) -> int:
        """Queue tombstone events for the indexer (idempotent by event id)."""
        with self._tx() as c:
            before = c.execute("SELECT COUNT(*) FROM tombstones").fetchone()[0]
            c.executemany(
                "INSERT OR IGNORE INTO tombstones (event_id, event, created_at) VALUES (?,?,?)",
                [(e["event_id"], json.dumps(e, default=str), now) for e in events],
            )
            return int(c.execute("SELECT COUNT(*) FROM tombstones").fetchone()[0] - before)

    def pending_tombstones(self, limit: int) -> list[dict[str, Any]]:
        rows = self._select(
            """SELECT event FROM tombstones WHERE delivered_at IS NULL
               ORDER BY created_at, event_id LIMIT ?""",
            (limit,),
        )
        return [json.loads(r[0]) for r in rows]

    def tombstones_delivered(self, event_ids: Sequence[str], now: float) -> None:
        with self._tx() as c:
            c.executemany(
                "UPDATE tombstones SET delivered_at = ? WHERE event_id = ?",
                [(now, e) for e in event_ids],
            )

    def pauses(self) -> list[dict[str, Any]]:
        return [dict(r) for r in self._select("SELECT * FROM pauses ORDER BY scope, value")]

    def operator_log(self) -> list[dict[str, Any]]:
        return [dict(r) for r in self._select("SELECT * FROM operator_log ORDER BY seq")]

    def mark_paused(self, cycle: str, shard: int) -> int:
        """Give the open URLs of paused origins the reason they were not fetched."""
        with self._tx() as c:
            cur = c.execute(
                f"""UPDATE urls SET reason = ? WHERE shard = ? AND cycle = ?
                    AND state IN ('eligible', 'failed_retryable')
                    AND origin IN (SELECT o.origin FROM origins o WHERE EXISTS ({_PAUSED}))""",
                (Reason.OPERATOR_PAUSED.value, shard, cycle),
            )
            return int(cur.rowcount)

    def defer_remaining(self, cycle: str, shard: int, reason: str) -> int:
        with self._tx() as c:
            cur = c.execute(
                """UPDATE urls SET reason = ? WHERE shard = ? AND cycle = ?
                   AND state IN ('eligible', 'failed_retryable')""",
                (reason, shard, cycle),
            )
            return int(cur.rowcount)

    # reads for the lake --------------------------------------------------------------
    def fetch_records(self, cycle: str, shard: int) -> Iterator[dict[str, Any]]:
        """The committed records of one partition, streamed (a partition can be large)."""
        rows = self._select(
            """SELECT record, links, document FROM fetch_records
               WHERE cycle = ? AND shard = ? ORDER BY rowid""",
            (cycle, shard),
        )
        for r in rows:
            yield {
                "record": json.loads(r["record"]),
                "links": json.loads(r["links"]),
                "document": json.loads(r["document"]) if r["document"] else None,
            }

    def referenced_bodies(self) -> set[str]:
        """Every body key a committed record or a URL's current version references."""
        rows = self._select(
            """SELECT body_key FROM fetch_records WHERE body_key IS NOT NULL
               UNION SELECT content_hash FROM urls WHERE content_hash IS NOT NULL"""
        )
        return {r[0] for r in rows}

    def origin_rows(self, shard: int) -> list[dict[str, Any]]:
        """Each origin of the shard: its pacing, grouping, robots and validator standing."""
        rows = self._select(
            f"""SELECT origin, registrable_domain, fair_class, bucket, min_gap_s, adapt_gap_s,
                       max_in_flight, backoff_until, robots_status, robots_version,
                       robots_fetched_at, validators_trusted, validator_checks,
                       validator_misses, EXISTS ({_PAUSED}) AS paused
               FROM origins o WHERE shard = ? ORDER BY origin""",
            (shard,),
        )
        return [{**dict(r), "paused": bool(r["paused"]),
                 "validators_trusted": bool(r["validators_trusted"])} for r in rows]  # fmt: skip

    def url_rows(self, shard: int) -> list[dict[str, Any]]:
        rows = self._select(
            """SELECT url, discovered_url, origin, depth, priority, state, reason, cycle, due_at,
                      attempts, fence, robots_version, source, discovered_cycle, discovered_at,
                      last_fetch_at, last_status, etag, last_modified, content_hash,
                      document_id, last_checked_at, checks, changes, revisit_interval_s,
                      revisit_reason, change_rate,
                      (SELECT validators_trusted FROM origins o WHERE o.origin = urls.origin)
                        AS validators_trusted
               FROM urls WHERE shard = ? ORDER BY seq""",
            (shard,),
        )
        return [dict(r) for r in rows]

    def stale_attempts(self) -> list[dict[str, Any]]:
        return [dict(r) for r in self._select("SELECT * FROM stale_attempts")]

    def url_row(self, url: str) -> dict[str, Any] | None:
        """One URL's catalogue row (looked up by digest, confirmed on the full string), with
        its kind, redirect chain and its origin's validator trust; None if it is unknown."""
        row = self._select(
            """SELECT url, discovered_url, origin, shard, kind, depth, priority, state, reason,
                      cycle, due_at, attempts, fence, robots_version, source, discovered_cycle,
                      discovered_at, redirect_chain, lease_expires_at, last_fetch_at,
                      last_status, etag, last_modified, content_hash, document_id,
                      last_checked_at, checks, changes, revisit_interval_s, revisit_reason,
                      change_rate,
                      (SELECT validators_trusted FROM origins o WHERE o.origin = urls.origin)
                        AS validators_trusted
               FROM urls WHERE url_hash = ? AND url = ?""",
            (url_digest(url), url),
        ).fetchone()
        return None if row is None else dict(row)

    def stale_attempts_of(self, url: str) -> list[dict[str, Any]]:
        """The stale attempts (fenced commits refused) of one URL, oldest first."""
        rows = self._select("SELECT * FROM stale_attempts WHERE url = ? ORDER BY at", (url,))
        return [dict(r) for r in rows]


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


def _has_capacity(origin: Row, now: float) -> bool:
    """A free in-flight slot, and no robots fetch in progress for an expired policy."""
    robots_busy = origin["robots_lease_until"] > now
    if robots_busy and origin["robots_expires_at"] <= now:
        return False
    return bool(origin["in_flight"] + int(robots_busy) < origin["max_in_flight"])


def url_digest(url: str) -> int:
    """64 bits of SHA-256 as a signed integer (both backends' INTEGER/BIGINT)."""
    return int.from_bytes(hashlib.sha256(url.encode("utf-8")).digest()[:8], "big", signed=True)


def _trap_key(keys: TrapKeys, kind: str) -> str | None:
    if kind == "pattern":
        return keys.pattern
    return keys.query_key if kind == "query" else keys.path_key


_TRAP_KINDS = ("pattern", "query", "path")  # trap_counts kinds, one counter per URL each
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
