"""SQLite coordination store: one embedded file, WAL, every claim one IMMEDIATE transaction.

The contract is implemented once, by aggregate (core.py, selection.py, queue.py, leases.py,
commits.py, catalogue.py, origins.py, operator.py with overrides.py, reads.py,
render_classes.py, owners.py); this class puts them together, opens the file and migrates
it (migrate.py: Alembic revisions, run once each).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import sqlalchemy as sa

from ..errors import CoordinationError, StoreUnavailable
from .base import (
    OriginPolicy,
    TrapCaps,
)
from .commits import CommitStore
from .core import url_digest
from .leases import LeaseStore
from .migrate import HEAD, engine_for, upgrade
from .operator import OperatorStore
from .owners import OwnerStore
from .queue import QueueStore
from .reads import ReadStore
from .render_classes import RenderClassStore
from .selection import FrontierStore

__all__ = ["SqliteStore", "url_digest"]


class SqliteStore(
    FrontierStore,
    QueueStore,
    LeaseStore,
    CommitStore,
    OperatorStore,
    ReadStore,
    RenderClassStore,
    OwnerStore,
):
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

    def _engine(self) -> sa.Engine:
        return engine_for(self.url, self._busy_ms / 1000)

    def _schema_head(self) -> str | None:
        try:
            row = self._select("SELECT version_num FROM alembic_version").fetchone()
        except sqlite3.OperationalError as exc:
            if "no such table" not in str(exc):
                raise
            return None
        return str(row[0]) if row else None

    def _migrate(self) -> None:
        # Opening a store at the newest revision costs one read: Alembic is not even imported.
        if self._schema_head() != HEAD:
            try:
                upgrade(self._engine())
            except sa.exc.DBAPIError as exc:
                with self._unavailable_as_error():
                    raise (exc.orig or exc) from None
        with self._tx() as c:
            self._lock_migrations(c)  # openers of one store regroup its origins in turn
            self._regroup(c)
