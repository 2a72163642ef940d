"""SQLite coordination store: one embedded file, WAL, every claim one IMMEDIATE transaction.

The contract is implemented once, by aggregate (core.py, selection.py, queue.py, commits.py,
catalogue.py, origins.py, operator.py, reads.py); this class puts them together, opens the
file and migrates it.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from ..errors import CoordinationError, StoreUnavailable
from .base import (
    OriginPolicy,
    TrapCaps,
)
from .commits import CommitStore
from .core import _domain_of, url_digest
from .operator import OperatorStore
from .queue import QueueStore
from .reads import ReadStore
from .schema import MIGRATIONS
from .selection import FrontierStore

__all__ = ["SqliteStore", "url_digest"]

# The migration that fills fetch_records.committed_at once (the column came with 17; opens
# before this one filled it on every open, a full-table update).
_FILL_COMMITTED_AT = 21


class SqliteStore(FrontierStore, QueueStore, CommitStore, OperatorStore, ReadStore):
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

    def _migrate(self) -> None:
        with self._tx() as c:
            self._lock_migrations(c)
            c.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT)"
            )
            done = {r[0] for r in c.execute("SELECT version FROM schema_migrations")}
            applied = set()
            for version, statements in MIGRATIONS:
                if version in done:
                    continue
                for stmt in statements:
                    c.execute(self._ddl(stmt))
                c.execute("INSERT INTO schema_migrations VALUES (?, datetime('now'))", (version,))
                applied.add(version)
            if _FILL_COMMITTED_AT in applied:
                # once: records from before migration 17 count as committed now, so retention
                # starts there (every record since carries its commit time)
                c.execute("UPDATE fetch_records SET committed_at = ? WHERE committed_at IS NULL",
                          (time.time(),))  # fmt: skip
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
