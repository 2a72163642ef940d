"""The catalogue exports (urls, recrawl_schedule) stream the store's rows into the lake: the
process holds a chunk of them, not the shard's whole catalogue."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

from atlas_pipeline.config import config_from_mapping
from atlas_pipeline.coordination import Candidate
from atlas_pipeline.crawl import Engine, export_schedule, export_urls

CYCLE = "c0001"


def engine(tmp_path: Path, urls: int) -> Engine:
    cfg = config_from_mapping({"seeds": ["http://a.example.test/"], "data_dir": str(tmp_path),
                               "scope": {"max_pages_per_origin": 10**6}},
                              base_dir=tmp_path)  # fmt: skip
    eng = Engine.from_config(cfg)
    cands = [Candidate(f"http://o{i % 50}.example.test/a/long/enough/path/{i}?q={i}",
                       f"http://o{i % 50}.example.test/a/long/enough/path/{i}?q={i}",
                       f"http://o{i % 50}.example.test:80", 0, 1, 0.5) for i in range(urls)]  # fmt: skip
    eng.store.discover(cands, CYCLE)
    return eng


def peak_of_exports(eng: Engine, urls: int) -> int:
    tracemalloc.start()
    try:
        written = export_urls(eng, CYCLE, 0)
        export_schedule(eng, CYCLE, 0, now=1.0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert written.rows == urls
    return peak


def test_exports_hold_a_chunk_of_the_catalogue_not_all_of_it(tmp_path: Path) -> None:
    small, large = engine(tmp_path / "s", 3_000), engine(tmp_path / "l", 12_000)
    try:
        peak_of_exports(small, 3_000)  # the first write's imports and tables are not the measure
        few, many = peak_of_exports(small, 3_000), peak_of_exports(large, 12_000)
        urls = large.lake.read("urls")
        assert urls.height == 12_000 and set(urls["queued_cycle"]) == {CYCLE}
        assert large.lake.read("recrawl_schedule").height == 0  # nothing was checked yet
    finally:
        small.close()
        large.close()
    # as dicts, 12,000 rows of 28 columns held together are over 20 MB
    assert many < 1.5 * few, (few, many)
