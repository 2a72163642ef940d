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
    out: queue.Queue[tuple[int, float]] = queue.Queue()
    bench.worker(url, 0, time.time() + 1.0, 3, 8, out)
    pairs, cpu_s = out.get_nowait()
    assert pairs > 0
    assert 0.0 < cpu_s < 5.0  # its own CPU over the window, not the process's since start
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


@pytest.mark.parametrize(
    ("line", "busy"),
    [
        # user nice system idle iowait irq softirq steal guest guest_nice, in ticks of 1/100 s
        ("cpu  100 0 50 1000 0 0 0 0 0 0", 1.5),
        ("cpu  100 0 50 1000 300 0 0 0 0 0", 1.5),  # waiting on the disk is not busy
        ("cpu  100 20 50 1000 0 5 5 10 40 0", 1.9),  # guest time is inside user: not twice
        ("cpu  0 0 0 5000 10 0 0 0", 0.0),  # an older kernel's shorter line
    ],
)
def test_busy_seconds_count_what_the_cpus_did_but_idle_and_iowait(line: str, busy: float) -> None:
    bench = load_benchmark("store_throughput")
    assert bench.busy_seconds(line, 100.0) == pytest.approx(busy)


def test_a_row_shows_the_ceiling_the_machine_allows() -> None:
    bench = load_benchmark("store_throughput")
    one = bench.Measured(pairs=3000, seconds=6.0, client_cpu_s=3.0, machine_cpu_s=6.6)
    many = bench.Measured(pairs=6000, seconds=6.0, client_cpu_s=5.4, machine_cpu_s=12.0)
    assert one.rate == 500 and one.busy_cores == pytest.approx(1.1)
    assert many.ms_per_pair(many.machine_cpu_s) == pytest.approx(2.0)
    line = bench.row("postgresql", 1, 8, one, many, cores=2)
    assert "2.00x" in line  # the scaling measured
    assert "1.82x" in line  # 2 cores / 1.1 busy with one worker: the machine's ceiling
    assert "1.00 / 2.20" in line and "0.90 / 2.00" in line
