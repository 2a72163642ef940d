"""Schema upgrades of the coordination store: Alembic revisions (migrations/versions), run once
each, in one transaction, by one migrator at a time.

A store made before Alembic recorded its migrations as numbered rows of `schema_migrations`;
revision N is that list's migration N, so such a store is stamped at its last number and
upgraded from there. Every applied revision is still logged in `schema_migrations` (env.py),
so `schema_version()` and the migration history read the same on old and new stores.
"""

from __future__ import annotations

import functools
import sqlite3
import time
from pathlib import Path
from typing import TYPE_CHECKING

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.pool import NullPool

from .tables import metadata

if TYPE_CHECKING:
    from alembic.script import ScriptDirectory

HEAD = "0026"  # the newest revision; a test checks it against migrations/versions
LATEST = int(HEAD)
_SCRIPTS = Path(__file__).with_name("migrations")
MIGRATOR = (0x41544C53, -1)  # PostgreSQL advisory lock class "ATLS", key -1: the migrator


def engine_for(url: str, timeout_s: float = 30.0) -> sa.Engine:
    """An engine for Alembic on a coordination URL (sqlite:///path or postgresql://...), on its
    own connection. SQLite transactions are IMMEDIATE, so one migrator runs at a time."""
    if url.startswith("sqlite:///"):
        path = url.removeprefix("sqlite:///")
        engine = sa.create_engine(
            "sqlite://",
            creator=lambda: sqlite3.connect(path, isolation_level=None, timeout=timeout_s),
            poolclass=NullPool,
        )
        event.listen(engine, "begin", lambda conn: conn.exec_driver_sql("BEGIN IMMEDIATE"))
        return engine
    import psycopg

    return sa.create_engine(
        "postgresql+psycopg://",
        creator=lambda: psycopg.connect(url, connect_timeout=max(1, int(timeout_s))),
        poolclass=NullPool,
    )


def log_applied(conn: sa.Connection, versions: list[int]) -> None:
    """Record revisions as applied now in `schema_migrations` (the log old stores kept)."""
    at = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
    conn.execute(
        sa.text("INSERT INTO schema_migrations (version, applied_at) VALUES (:v, :at)"),
        [{"v": v, "at": at} for v in versions],
    )


def _config(conn: sa.Connection) -> object:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(_SCRIPTS))
    cfg.attributes["connection"] = conn
    return cfg


@functools.cache
def _script() -> ScriptDirectory:
    """The revisions, read once per process (each file is compiled when first read)."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory(str(_SCRIPTS))


def revision_numbers() -> list[int]:
    """Every revision's number, oldest first."""
    return sorted(int(s.revision) for s in _script().walk_revisions())


def upgrade(engine: sa.Engine, target: str = "head") -> None:
    """Bring the store at `engine` to `target` (a revision id, or "head")."""
    from alembic import command
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as conn, conn.begin():
        if conn.dialect.name == "postgresql":
            # several runs may start together; one migrates, the others then find it done
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(:a, :b)"),
                         {"a": MIGRATOR[0], "b": MIGRATOR[1]})  # fmt: skip
        conn.execute(sa.text(
            "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT)"
        ))  # fmt: skip
        context = MigrationContext.configure(conn)
        if context.get_current_revision() is None:
            legacy = conn.execute(sa.text("SELECT MAX(version) FROM schema_migrations")).scalar()
            script = _script()
            if legacy:
                context.stamp(script, f"{int(legacy):04d}")
            elif target == "head" and not sa.inspect(conn).has_table("urls"):
                # An empty database: build the newest schema at once and stamp it, as Alembic
                # advises, instead of replaying every revision (a test replays them and checks
                # both roads lead to the same schema).
                metadata.create_all(conn)
                log_applied(conn, revision_numbers())
                context.stamp(script, HEAD)
                return
        command.upgrade(_config(conn), target)  # type: ignore[arg-type]
