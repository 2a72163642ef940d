"""Re-extraction rebuilds documents from stored bodies: the same documents, the same outbox
events, and not one request in the sandbox's log."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from atlas_pipeline.config import load_config
from atlas_pipeline.crawl import Engine, fetch_shard, plan_frontier, reextract
from atlas_pipeline.urls import shard_key
from tests.conftest import SandboxProcess, sandbox_config, write_config
from tests.integration.test_cli import run_atlas

COLUMNS = ["url", "fetch_id", "text_hash", "title", "language", "body_key", "batch_fence"]


def test_reextraction_reproduces_documents_without_a_request(
    sandbox: SandboxProcess, tmp_path: Path
) -> None:
    cfg_path = write_config(tmp_path / "atlas.yaml", sandbox_config(sandbox, tmp_path, shards=1))
    engine = Engine.from_config(load_config(cfg_path))
    plan_frontier(engine, "c0001", 0)
    fetch_shard(engine, "c0001", 0)
    before = engine.lake.with_text(
        engine.lake.read_partition("documents", "c0001", shard_key(0))
    ).sort("url")
    events = engine.lake.read_partition("index_ready", "c0001", shard_key(0)).sort("event_id")
    assert before.height > 10
    sandbox.log.clear()
    done = reextract(engine, "c0001", 0)
    engine.close()
    assert sandbox.log.entries() == []  # not one request
    after = engine.lake.with_text(
        pl.read_delta(str(engine.cfg.lake_path / "crawl" / "documents"))
    ).sort("url")
    assert done.failed == 0 and done.documents.rows == before.height
    assert after.select(COLUMNS).equals(before.select(COLUMNS))
    assert (after["text"] == before["text"]).all()
    again = pl.read_delta(str(engine.cfg.lake_path / "crawl" / "index_ready")).sort("event_id")
    assert again["event_id"].to_list() == events["event_id"].to_list()  # same ids: no resend
    res = run_atlas("reextract", "--config", str(cfg_path), "--cycle", "c0001")
    assert res.returncode == 0, res.stderr
    assert f"{before.height} documents re-extracted" in res.stdout
    assert sandbox.log.entries() == []
