"""Retention per data class (issues: documents and dedupe, operators and analysts): raw
bodies and superseded document versions go after their retention; a URL's current content,
current documents and a body a worker is committing right now stay."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import polars as pl
import pytest

from atlas_pipeline.config import config_from_mapping
from atlas_pipeline.crawl import Engine, fetch_shard, plan_frontier, reextract
from atlas_pipeline.retention import DAY_S, run_retention
from atlas_sandbox import changing
from tests.conftest import running_sandbox, sandbox_config


@pytest.fixture(scope="module")
def two_cycles(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("retention")
    with running_sandbox(tmp / "requests.jsonl", 0, 12, changing=True) as server:
        cfg = config_from_mapping(sandbox_config(
            server, tmp / "data", shards=1, seeds=[server.url(changing.RATES, "/")],
            resolve={h: "127.0.0.1" for h in changing.CHANGING_HOSTS},
            revisit_interval_s=0.5, recrawl={"min_interval_s": 0.2},
        ), base_dir=tmp)  # fmt: skip
        engine = Engine.from_config(cfg)
        try:
            for cycle in ("c0001", "c0002"):
                plan_frontier(engine, cycle, 0)
                fetch_shard(engine, cycle, 0)
                if cycle == "c0001":
                    server.bump_generation()
                    time.sleep(0.6)
            yield {"engine": engine, "port": server.port,
                   "documents": engine.lake.read("documents"),
                   "fetches": engine.lake.read("fetches")}  # fmt: skip
        finally:
            engine.close()


def test_reextraction_keeps_documents_whose_body_expired(two_cycles: dict[str, Any]) -> None:
    """Bodies go after 5 days, superseded documents after 30: at day 10 the old versions are
    still documents, but their bodies are gone, and re-extraction keeps them as they were."""
    engine: Engine = two_cycles["engine"]
    changed = changing.changed_between(0, 1, two_cycles["port"])
    mid = run_retention(engine, now=time.time() + 10 * DAY_S)
    assert mid.documents_deleted == 0 and mid.bodies_deleted >= len(changed)
    before = engine.lake.read_partition("documents", "c0001", "shard_000")
    done = reextract(engine, "c0001", 0)
    assert done.documents.rows == before.height
    assert done.expired == len(changed)


def test_retention_keeps_current_content_and_drops_the_rest(two_cycles: dict[str, Any]) -> None:
    engine: Engine = two_cycles["engine"]
    changed = changing.changed_between(0, 1, two_cycles["port"])
    docs = two_cycles["documents"]
    old_versions = docs.filter(
        pl.col("url").is_in(list(changed)) & (pl.col("crawl_cycle") == "c0001")
    )
    assert old_versions.height == len(changed) > 0
    current = {r["content_hash"] for r in engine.store.url_rows(0) if r["content_hash"]}
    old_bodies = set(old_versions["body_key"].to_list())
    assert old_bodies and not old_bodies & current
    # a body a batch has put but not yet committed: the grace keeps it
    in_flight = engine.bodies.put(b"<html>fetched a moment ago, commit on its way</html>")

    nothing = run_retention(engine, now=time.time())  # nothing new is old yet
    assert nothing.documents_deleted == 0 and nothing.body_refs_expired == 0
    assert engine.bodies.has(in_flight)

    later = run_retention(engine, now=time.time() + 40 * DAY_S)
    assert later.documents_deleted == len(changed)
    assert not engine.bodies.has(in_flight)  # never committed: an orphan once past the grace
    left = engine.lake.read("documents")
    assert set(left["fetch_id"].to_list()) == set(docs["fetch_id"].to_list()) - set(
        old_versions["fetch_id"].to_list()
    )
    assert set(left["url"].to_list()) == set(docs["url"].to_list())  # every URL keeps one
    texts = engine.lake.read("document_texts")
    assert set(texts["document_id"].to_list()) == set(left["text_hash"].to_list())
    assert not any(engine.bodies.has(k) for k in old_bodies)
    assert all(engine.bodies.has(k) for k in current)  # current content stays
    events = engine.lake.read("index_ready")
    assert not set(events["fetch_id"].to_list()) & set(old_versions["fetch_id"].to_list())
    log = [e for e in engine.store.operator_log() if e["action"] == "retention"]
    assert len(log) == 3 and "superseded documents deleted" in log[-1]["reason"]
