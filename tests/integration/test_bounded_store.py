"""A bounded store (issue 15, part 5): a partition's fetch records leave the coordination store
once its lake write is recorded; what read them reads the lake (or the body references kept
for them) instead. Re-runs of a written partition, a crash between the Delta commits and the
records' removal, the body sweep, retention and an opt-out purge all still see everything;
and over three cycles of the demo configuration the store's file stays the same size."""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from atlas_pipeline import failpoints
from atlas_pipeline.config import config_from_mapping
from atlas_pipeline.coordination import SqliteStore, Suppression
from atlas_pipeline.crawl import Engine, fetch_shard, plan_frontier
from atlas_pipeline.optout import opt_out
from atlas_sandbox import changing
from tests.conftest import running_sandbox, sandbox_config

KEY = "shard_000"


def _partition(engine: Engine, table: str, cycle: str) -> pl.DataFrame:
    return engine.lake.read_partition(table, cycle, KEY)


def _ids(df: pl.DataFrame) -> list[str]:
    return sorted(df["fetch_id"].to_list())


@pytest.fixture(scope="module")
def crawled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Two cycles of changing pages; the second one's first write "crashes" after its Delta
    commits, before its records leave the store, and is run again."""
    tmp = tmp_path_factory.mktemp("bounded")
    with running_sandbox(tmp / "requests.jsonl", 0, 12, changing=True) as server:
        cfg = config_from_mapping(sandbox_config(
            server, tmp / "data", shards=1, seeds=[server.url(changing.RATES, "/")],
            resolve={h: "127.0.0.1" for h in changing.CHANGING_HOSTS},
            revisit_interval_s=0.5, recrawl={"min_interval_s": 0.2},
        ), base_dir=tmp)  # fmt: skip
        engine = Engine.from_config(cfg)
        out: dict[str, Any] = {"engine": engine, "port": server.port}
        try:
            plan_frontier(engine, "c0001", 0)
            first = fetch_shard(engine, "c0001", 0)
            out["c0001_fence"] = first.lease.fence
            out["c0001_left"] = engine.store.fetch_record_count("c0001", 0)
            server.bump_generation()
            time.sleep(0.6)
            plan_frontier(engine, "c0002", 0)
            real = engine.store.partition_written

            def crash(*args: Any) -> int | None:
                raise failpoints.InjectedFault("killed between the Delta commits and the delete")

            engine.store.partition_written = crash  # type: ignore[method-assign]
            try:
                with pytest.raises(failpoints.InjectedFault):
                    fetch_shard(engine, "c0002", 0)
            finally:
                engine.store.partition_written = real  # type: ignore[method-assign]
            out["crashed"] = {t: _partition(engine, t, "c0002")
                              for t in ("fetches", "documents", "links", "index_ready")}  # fmt: skip
            out["crashed_left"] = engine.store.fetch_record_count("c0002", 0)
            out["rerun"] = fetch_shard(engine, "c0002", 0)
            yield out
        finally:
            engine.close()


def test_a_written_partition_leaves_no_fetch_record_in_the_store(crawled: dict[str, Any]) -> None:
    engine: Engine = crawled["engine"]
    assert crawled["c0001_left"] == 0 and engine.store.lake_write("c0001", 0) == 1
    assert _partition(engine, "fetches", "c0001").height > 0
    assert engine.store.fetch_record_count("c0002", 0) == 0
    assert engine.store.lake_write("c0002", 0) == crawled["rerun"].lease.fence == 2


def test_a_crash_before_the_records_leave_rewrites_nothing_twice(crawled: dict[str, Any]) -> None:
    engine: Engine = crawled["engine"]
    crashed = crawled["crashed"]
    assert crashed["fetches"].height > 0 and crawled["crashed_left"] == crashed["fetches"].height
    for table, before in crashed.items():
        after = _partition(engine, table, "c0002")
        assert _ids(after) == _ids(before), table  # the same rows, none twice
        assert set(after["batch_fence"].to_list()) == {crawled["rerun"].lease.fence}
    docs = _partition(engine, "documents", "c0002")
    assert docs.height == docs["url"].n_unique() > 0


def test_a_rerun_of_a_written_partition_keeps_every_row(crawled: dict[str, Any]) -> None:
    """Its records are gone from the store: the rows come from the lake, under the new fence."""
    engine: Engine = crawled["engine"]
    tables = ("fetches", "documents", "links", "index_ready")
    before = {t: _partition(engine, t, "c0001") for t in tables}
    again = fetch_shard(engine, "c0001", 0)
    assert again.stats.requests == 0 and again.superseded_by is None
    for table in tables:
        after = _partition(engine, table, "c0001")
        assert after.height == before[table].height > 0, table
        assert set(after["batch_fence"].to_list()) == {again.lease.fence}
        cols = [c for c in after.columns if c != "batch_fence"]
        assert sorted(after.select(cols).rows()) == sorted(before[table].select(cols).rows()), table
    assert engine.store.lake_write("c0001", 0) == again.lease.fence
    texts = set(engine.lake.read("document_texts")["document_id"].to_list())
    assert set(engine.lake.read("documents")["text_hash"].to_list()) <= texts


def test_the_body_sweep_keeps_every_body_the_lake_names(crawled: dict[str, Any]) -> None:
    engine: Engine = crawled["engine"]
    named = set(engine.lake.read("fetches")["body_key"].drop_nulls().to_list())
    current = {r["content_hash"] for r in engine.store.url_rows(0) if r["content_hash"]}
    assert named - current  # old versions: only their (moved) records' references name them
    swept = engine.bodies.sweep_orphans(engine.store.referenced_bodies, 3600.0,
                                        now=time.time() + 7200)  # fmt: skip
    assert all(engine.bodies.has(k) for k in named), swept


def test_an_opt_out_finds_the_documents_and_bodies_of_moved_records(
    crawled: dict[str, Any],
) -> None:
    engine: Engine = crawled["engine"]
    url = sorted(changing.changed_between(0, 1, crawled["port"]))[0]
    docs = engine.lake.read("documents").filter(pl.col("url") == url)
    fetches = engine.lake.read("fetches").filter(pl.col("url") == url)
    assert docs["text_hash"].n_unique() == 2  # both versions are in the lake, not the store
    mine = set(fetches["body_key"].drop_nulls().to_list())
    others = set(engine.lake.read("fetches")["body_key"].drop_nulls().to_list()) - mine
    assert len(mine) == 2 and others
    report = opt_out(engine, Suppression("prefix", url), "owner asked", "mail", "ops")
    assert report.store.records == 0  # nothing of it was left in the store's records
    assert {(e["url"], e["document_id"]) for e in engine.store.pending_tombstones(1000)} >= {
        (url, h) for h in docs["text_hash"].to_list()
    }
    assert not any(engine.bodies.has(k) for k in mine)
    assert all(engine.bodies.has(k) for k in others)
    assert not mine & engine.store.referenced_bodies()
    assert engine.lake.read("documents").filter(pl.col("url") == url).height == 0


# "Done when": three cycles of the demo configuration ----------------------------------------


def _db_size(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return os.path.getsize(db)


def test_three_demo_cycles_keep_the_store_the_size_of_the_first(tmp_path: Path) -> None:
    from assets.cli.sandbox import DEMO_ORIGINS, DEMO_PAGES, demo_config

    with running_sandbox(tmp_path / "requests.jsonl", DEMO_ORIGINS, DEMO_PAGES) as server:
        cfg = config_from_mapping(demo_config(tmp_path / "data", server.port), base_dir=tmp_path)
        engine = Engine.from_config(cfg)
        store = engine.store
        assert isinstance(store, SqliteStore)
        sizes, fetched = [], []
        try:
            for n in (1, 2, 3):
                cycle = f"c{n:04d}"
                for shard in range(cfg.shards):
                    plan_frontier(engine, cycle, shard)
                for shard in range(cfg.shards):
                    fetch_shard(engine, cycle, shard)
                    # recorded lake write: no fetch record of the partition is left
                    assert store.lake_write(cycle, shard) is not None
                    assert store.fetch_record_count(cycle, shard) == 0
                fetched.append(engine.lake.read("fetches").height)
                sizes.append(_db_size(store.path))
        finally:
            engine.close()
    print(f"coordination.db after cycles 1-3: {sizes} bytes; lake fetches rows: {fetched}")
    assert fetched[0] < fetched[1] < fetched[2]  # every cycle did crawl
    assert sizes[2] <= 1.5 * sizes[0], sizes
