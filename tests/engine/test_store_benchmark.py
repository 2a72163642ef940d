"""benchmarks/store_throughput.py run small, in this process: its workers' claims and commits
go through the store as a fetch batch's do (it is the measure issue 15 quotes), so a change
to the store's contract that the benchmark did not follow fails here, not on the day someone
measures."""

from __future__ import annotations

import queue
import time
from pathlib import Path

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
