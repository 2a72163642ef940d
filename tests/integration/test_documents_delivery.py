"""Documents, dedupe and delivery on the duplicate-content origin (`atlas web --dupes`),
materialized through Dagster (issue: documents and dedupe, "Done when"):

- print twins are one document with two URL mappings; timestamp and related-box variants share
  a cluster label but keep their own documents; a corrected article is not merged;
- the index_delivery sensor, cut mid-partition by the indexer and run again, leaves the indexer
  with every event exactly once after dedupe by id.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import polars as pl
import pytest

from assets.definitions import CRAWL_JOB, build_definitions
from assets.partitions import CYCLE_PARTITIONS, partition_key
from assets.sensors import index_delivery
from atlas_pipeline.config import load_config
from atlas_pipeline.urls import normalize
from atlas_sandbox import dupes
from resources.config import AtlasCrawl
from tests.conftest import running_indexer, running_sandbox, sandbox_config, write_config


def _config(tmp: Path, server: Any, sink: str) -> Path:
    cfg = sandbox_config(
        server, tmp / "data", seeds=dupes.seed_urls(server.port), shards=1,
        resolve={h: "127.0.0.1" for h in dupes.DUPES_HOSTS},
        indexer={"sink": sink, "batch_size": 4},
    )  # fmt: skip
    return write_config(tmp / "atlas.yaml", cfg)


@pytest.fixture(scope="module")
def crawled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("dupes")
    with running_sandbox(tmp / "requests.jsonl", 0, 12, dupes=True) as server:
        cfg_path = _config(tmp, server, "http://127.0.0.1:9/events")  # set per test below
        cfg = load_config(cfg_path)
        job = build_definitions(cfg, str(cfg_path), None).resolve_job_def(CRAWL_JOB)
        with dg.instance_for_test() as instance:
            instance.add_dynamic_partitions(CYCLE_PARTITIONS, ["c0001"])
            result = job.execute_in_process(
                instance=instance, partition_key=str(partition_key("c0001", 0))
            )
            assert result.success
            lake = Path(cfg.lake_path) / "crawl"
            yield {"tmp": tmp, "server": server, "instance": instance, "port": server.port,
                   "clusters": pl.read_delta(str(lake / "dedupe_clusters")),
                   "events": pl.read_delta(str(lake / "index_ready"))}  # fmt: skip


def _row(clusters: pl.DataFrame, url: str) -> dict[str, Any]:
    rows = clusters.filter(pl.col("url") == normalize(url)).to_dicts()
    assert len(rows) == 1, url
    return rows[0]


def test_print_twins_are_one_document_with_two_urls(crawled: dict[str, Any]) -> None:
    for article, printed in dupes.print_twins(crawled["port"]):
        a, p = _row(crawled["clusters"], article), _row(crawled["clusters"], printed)
        assert a["document_id"] == p["document_id"] and a["fetch_id"] != p["fetch_id"]


def test_variants_share_a_cluster_but_keep_their_documents(crawled: dict[str, Any]) -> None:
    for group in dupes.near_duplicate_groups(crawled["port"]):
        rows = [_row(crawled["clusters"], u) for u in group]
        assert len({r["cluster_id"] for r in rows}) == 1, group
        assert len({r["document_id"] for r in rows}) == len(group), group


def test_a_corrected_article_is_not_merged(crawled: dict[str, Any]) -> None:
    for original, corrected in dupes.corrected_pairs(crawled["port"]):
        a, b = _row(crawled["clusters"], original), _row(crawled["clusters"], corrected)
        assert a["cluster_id"] != b["cluster_id"] and a["document_id"] != b["document_id"]


def test_a_canonical_claim_is_accepted_only_when_content_confirms_it(
    crawled: dict[str, Any],
) -> None:
    claims = dupes.canonical_claims(crawled["port"])
    assert {c.confirmed for c in claims} == {True, False}
    for claim in claims:
        row = _row(crawled["clusters"], claim.page)
        assert row["canonical_url"] == normalize(claim.target)
        assert row["canonical_confirmed"] is claim.confirmed, claim


def _tick(
    crawled: dict[str, Any], port: int, cursor: str | None
) -> dg.SensorResult | dg.SkipReason:
    cfg_path = _config(crawled["tmp"], crawled["server"], f"http://127.0.0.1:{port}/events")
    context = dg.build_sensor_context(instance=crawled["instance"], cursor=cursor,
                                      resources={"atlas": AtlasCrawl(config_path=str(cfg_path))})  # fmt: skip
    return index_delivery(context)


def test_a_cut_delivery_run_again_leaves_every_event_once(crawled: dict[str, Any]) -> None:
    store = crawled["tmp"] / "indexer.jsonl"
    expected = set(crawled["events"]["event_id"].to_list())
    assert len(expected) > 8  # several batches of 4
    with running_indexer(store, fail_after=2, fail_mode="close") as (port, stats):
        cut = _tick(crawled, port, None)
        assert isinstance(cut, dg.SkipReason)  # the partition was not taken whole: no cursor
        assert stats()["unique"] == 12  # two batches taken, the third stored but never answered
    with running_indexer(store) as (port, stats):
        done = _tick(crawled, port, None)
        assert isinstance(done, dg.SensorResult) and done.cursor
        final = stats()
        assert final["unique"] == len(expected) and final["duplicates"] >= 12  # re-sent
        again = _tick(crawled, port, done.cursor)
        assert isinstance(again, dg.SkipReason)  # nothing new after the cursor
