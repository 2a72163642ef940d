"""Schema migrations of the coordination store (Alembic revisions under
atlas_pipeline/coordination/migrations): a fresh store, and stores made by the code of main
before Alembic (tests/fixtures/, made by a 2-cycle crawl of the sandbox at commit 055e90c),
all end at the schema tables.py defines, on SQLite and on PostgreSQL."""

from __future__ import annotations

import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from atlas_pipeline.coordination import Candidate, Lease, OriginPolicy, RobotsTask, open_store
from atlas_pipeline.coordination.migrate import (
    HEAD,
    LATEST,
    engine_for,
    revision_numbers,
    upgrade,
)
from atlas_pipeline.coordination.tables import metadata

from ..conftest import PG_URL, postgres_available

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
LEGACY_SQLITE = FIXTURES / "coordination-main-055e90c.db"
LEGACY_PG = FIXTURES / "coordination-main-055e90c.pg.sql"


def schema_differences(url: str) -> list[Any]:
    """What Alembic's autogenerate finds between the migrated store and tables.py."""
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    engine = engine_for(url)
    try:
        with engine.connect() as conn:
            context = MigrationContext.configure(
                conn, opts={"compare_type": True, "compare_server_default": True}
            )
            diffs = compare_metadata(context, metadata)
            dialect = conn.dialect.name
    finally:
        engine.dispose()
    if dialect == "sqlite":
        # SQLite has no identity columns (its AUTOINCREMENT rowid is the row id), and reflects
        # an INTEGER PRIMARY KEY as nullable; neither is a difference in the stored schema.
        diffs = [d for d in diffs if not _sqlite_artifact(d)]
    return diffs


def _sqlite_artifact(diff: Any) -> bool:
    if isinstance(diff, list) and len(diff) == 1:
        diff = diff[0]
    kind, _, table, column = diff[0], diff[1], diff[2], diff[3]
    if kind == "modify_default" and isinstance(diff[-1], sa.Identity):
        return True
    return bool(kind == "modify_nullable" and (table, column) == ("schema_migrations", "version"))


@pytest.fixture(params=["sqlite", "postgres"])
def fresh_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'coord.db'}"
    else:
        yield request.getfixturevalue("pg_schema_url")


def test_head_is_the_newest_revision() -> None:
    from alembic.script import ScriptDirectory

    from atlas_pipeline.coordination import migrate

    script = ScriptDirectory(str(Path(migrate.__file__).with_name("migrations")))
    assert script.get_heads() == [HEAD]
    assert revision_numbers() == list(range(1, LATEST + 1))  # one chain, numbered in order


def test_a_fresh_store_has_exactly_the_schema_of_tables_py(fresh_url: str) -> None:
    open_store(fresh_url, OriginPolicy(1.0, 1), 10).close()
    assert schema_differences(fresh_url) == []


def test_urls_are_looked_up_by_the_url_index_not_by_digest(fresh_url: str) -> None:
    """Revision 0026: no index on the URL digest (random keys: each new URL dirtied a page of
    its own at commit), and the catalogue's exact lookup is served by the unique index on the
    URL string (SQLite's plan names it)."""
    open_store(fresh_url, OriginPolicy(1.0, 1), 10).close()
    engine = engine_for(fresh_url)
    try:
        indexed = [ix["column_names"] for ix in sa.inspect(engine).get_indexes("urls")]
    finally:
        engine.dispose()
    assert ["url_hash"] not in indexed and all("url_hash" not in cols for cols in indexed)
    if fresh_url.startswith("sqlite"):
        plan = " ".join(str(r[-1]) for r in _rows(
            fresh_url, "EXPLAIN QUERY PLAN SELECT url FROM urls WHERE url IN ('a', 'b')"))  # fmt: skip
        assert "sqlite_autoindex_urls" in plan, plan


def test_replaying_every_revision_builds_the_same_schema(fresh_url: str) -> None:
    """A fresh store is built from tables.py at once; the revisions, replayed one by one on an
    empty database, must arrive at exactly that schema (else an upgraded store would differ
    from a new one)."""
    engine = engine_for(fresh_url)
    upgrade(engine, HEAD)  # an explicit target replays the chain
    engine.dispose()
    assert _rows(fresh_url, "SELECT version_num FROM alembic_version") == [(HEAD,)]
    assert [v for v, _ in _rows(fresh_url, "SELECT * FROM schema_migrations ORDER BY 1")] == (
        revision_numbers()
    )
    assert schema_differences(fresh_url) == []


def test_opening_a_store_at_head_runs_no_migration(fresh_url: str) -> None:
    store = open_store(fresh_url, OriginPolicy(1.0, 1), 10)
    log = store._select("SELECT version, applied_at FROM schema_migrations").fetchall()
    store.close()
    reopened = open_store(fresh_url, OriginPolicy(1.0, 1), 10)
    again = reopened._select("SELECT version, applied_at FROM schema_migrations").fetchall()
    head = reopened._select("SELECT version_num FROM alembic_version").fetchall()
    reopened.close()
    assert [tuple(r) for r in again] == [tuple(r) for r in log]
    assert [v for v, _ in log] == revision_numbers()
    assert [tuple(r) for r in head] == [(HEAD,)]


def _legacy_sqlite(tmp_path: Path) -> str:
    path = tmp_path / "legacy.db"
    shutil.copy(LEGACY_SQLITE, path)
    return f"sqlite:///{path}"


@pytest.fixture(params=["sqlite", "postgres"])
def legacy_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A copy of a store made by main before Alembic, in a place of its own."""
    if request.param == "sqlite":
        yield _legacy_sqlite(tmp_path)
        return
    why = postgres_available()
    if why:
        pytest.skip(why)
    import psycopg

    name = f"atlas_legacy_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = PG_URL.rsplit("/", 1)[0] + f"/{name}"
    try:
        subprocess.run(
            ["psql", "-q", "-v", "ON_ERROR_STOP=1", "-d", url, "-f", str(LEGACY_PG)],
            check=True, capture_output=True,
        )  # fmt: skip
        yield url
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def _rows(url: str, sql: str) -> list[tuple[Any, ...]]:
    engine = engine_for(url)
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(sa.text(sql))]
    finally:
        engine.dispose()


def test_a_store_made_by_main_before_alembic_upgrades_in_place(legacy_url: str) -> None:
    before = {
        table: _rows(legacy_url, f"SELECT * FROM {table} ORDER BY 1, 2")
        for table in ("urls", "origins", "lake_writes", "body_refs", "batch_leases")
    }
    log = _rows(legacy_url, "SELECT version, applied_at FROM schema_migrations ORDER BY 1")
    assert [v for v, _ in log] == list(range(1, 22))  # what main recorded: migrations 1-21
    assert len(before["urls"]) > 20 and before["lake_writes"]  # a real crawl's store
    store = open_store(legacy_url, OriginPolicy(0.0, 2), 100)
    store.close()
    assert schema_differences(legacy_url) == []
    assert _rows(legacy_url, "SELECT version_num FROM alembic_version") == [(HEAD,)]
    # stamped at 21, not migrated again: main's log is kept, later revisions follow it
    after_log = _rows(legacy_url, "SELECT version, applied_at FROM schema_migrations ORDER BY 1")
    assert after_log[: len(log)] == log
    assert [v for v, _ in after_log] == revision_numbers()
    for table, rows in before.items():
        # every column main had, value for value (later revisions may add columns after them)
        after = _rows(legacy_url, f"SELECT * FROM {table} ORDER BY 1, 2")
        assert [r[: len(rows[0]) if rows else 0] for r in after] == rows, table
    # revision 0025's ownership columns: a single-region store's defaults
    assert set(_rows(legacy_url, "SELECT owner_region, owner_token, owner_until, share "
                                 "FROM origins")) == {(None, 0, 0.0, 1.0)}  # fmt: skip


def test_an_upgraded_store_of_main_crawls_on(legacy_url: str) -> None:
    """The upgraded store takes new work and leases it: the catalogue, clocks and robots cache
    main left are used as they are."""
    origin, shard = _rows(legacy_url, "SELECT origin, shard FROM origins ORDER BY origin")[0]
    store = open_store(legacy_url, OriginPolicy(0.0, 2), 100)
    try:
        known = sorted(r["url"] for r in store.url_rows(shard) if r["origin"] == origin)
        fresh = f"{origin}/after-the-upgrade"
        offered = [fresh, *known[:3]]
        decided = store.discover(
            [Candidate(url=u, discovered_url=u, origin=origin, shard=shard, depth=1,
                       priority=9.0) for u in offered],
            "after",
        )  # fmt: skip
        assert decided == ["admitted", "already_known", "already_known", "already_known"]
        claim = store.claim("after", shard, time.time() + 10**6, "tok", 30.0)
        assert isinstance(claim, Lease | RobotsTask), claim
    finally:
        store.close()
