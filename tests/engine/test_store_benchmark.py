"""benchmarks/store_throughput.py run small, in this process: its workers' claims and commits
go through the store as a fetch batch's do (it is the measure issue 15 quotes), so a change
to the store's contract that the benchmark did not follow fails here, not on the day someone
measures."""

from __future__ import annotations

import queue
import time
from pathlib import Path

import pytest

from tests.conftest import load_benchmark


def test_the_store_benchmark_claims_and_commits_through_the_store(tmp_path: Path) -> None:
    bench = load_benchmark("store_throughput")
    url = f"sqlite:///{tmp_path / 'bench.db'}"
    bench.prepare(url, origins=4, urls_per_origin=20, shards=1)
    out: queue.Queue[int] = queue.Queue()
    bench.worker(url, 0, time.time() + 1.0, 3, 8, out)
    pairs = out.get_nowait()
    assert pairs > 0
    from atlas_pipeline.coordination import OriginPolicy, open_store

    store = open_store(url, OriginPolicy(0.0, 4), 10**9)
    try:
        fetched = [r for r in store.url_rows(0) if r["state"] == "fetched"]
        assert len(fetched) == pairs  # every pair counted is a URL the store took as fetched
        assert any(r["depth"] == 1 for r in store.url_rows(0))  # and its links were admitted
    finally:
        store.close()


def test_the_store_benchmark_drops_the_postgres_schemas_it_made() -> None:
    """It once left one schema per measurement in the test database, run after run."""
    import psycopg

    from tests.conftest import postgres_available

    why = postgres_available()
    if why:
        pytest.skip(why)
    bench = load_benchmark("store_throughput")
    schemas = bench.PgSchemas()
    url = schemas.url("w1b8s1")
    bench.prepare(url, origins=2, urls_per_origin=3, shards=1)
    made = list(schemas.made)

    def present() -> list[str]:
        with psycopg.connect(bench.PG) as conn:
            rows = conn.execute(
                "SELECT nspname FROM pg_namespace WHERE nspname = ANY(%s)", (made,)
            ).fetchall()
        return [r[0] for r in rows]

    assert len(made) == 1 and present() == made
    schemas.drop()
    assert present() == [] and schemas.made == []
