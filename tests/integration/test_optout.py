"""Opt-out and deletion, end to end through Dagster (issue: operators and analysts, "Done
when"): after an opt-out for one origin, no table, body or indexer-visible document of it
remains (except the audited suppression record), and a later cycle sends it no request.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import dagster as dg
import polars as pl
import pytest

from assets.definitions import CRAWL_JOB, build_definitions
from assets.partitions import CYCLE_PARTITIONS, partition_key
from assets.sensors import index_delivery
from atlas_pipeline.bodies import BodyStore
from atlas_pipeline.config import load_config
from atlas_pipeline.coordination import OriginPolicy, open_store
from atlas_pipeline.lake import SCHEMAS, Lake
from resources.config import AtlasCrawl
from tests.conftest import running_indexer, running_sandbox, sandbox_config, write_config

GONE = "site-001.example.test"


@pytest.fixture(scope="module")
def opted_out(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("optout")
    with (
        running_sandbox(tmp / "requests.jsonl", 2, 12) as server,
        running_indexer(tmp / "indexer.jsonl") as (indexer_port, _),
    ):
        cfg_path = write_config(tmp / "atlas.yaml", sandbox_config(
            server, tmp / "data", shards=1, revisit_interval_s=0.5,
            recrawl={"min_interval_s": 0.2},
            indexer={"sink": f"http://127.0.0.1:{indexer_port}/events", "batch_size": 50},
        ))  # fmt: skip
        cfg = load_config(cfg_path)
        defs = build_definitions(cfg, str(cfg_path), None)
        resources = {"atlas": AtlasCrawl(config_path=str(cfg_path))}
        lake = Lake(cfg.lake_path)
        with dg.instance_for_test() as instance:

            def cycle(key: str) -> None:
                instance.add_dynamic_partitions(CYCLE_PARTITIONS, [key])
                run = defs.resolve_job_def(CRAWL_JOB).execute_in_process(
                    instance=instance, partition_key=str(partition_key(key, 0))
                )
                assert run.success

            def deliver(cursor: str | None) -> str | None:
                ctx = dg.build_sensor_context(instance=instance, cursor=cursor, resources=resources)
                result = index_delivery(ctx)
                return result.cursor if isinstance(result, dg.SensorResult) else cursor

            cycle("c0001")
            cursor = deliver(None)
            before = {t: lake.read(t) for t in SCHEMAS}
            bodies_before = set(before["fetches"].filter(
                pl.col("origin").str.contains(GONE))["body_key"].drop_nulls().to_list())  # fmt: skip
            target = server.url(GONE, "/")
            run = defs.resolve_job_def("opt_out_job").execute_in_process(
                instance=instance,
                run_config={"ops": {"opt_out_target": {"config": {
                    "scope": "origin", "value": target, "reason": "owner asked (ticket 42)",
                    "verification": "mail from webmaster@site-001 via DNS TXT proof",
                    "who": "ops-oncall"}}}},
            )  # fmt: skip
            assert run.success
            deliver(cursor)
            time.sleep(0.6)  # every page due again
            mark = len(server.log.entries())
            cycle("c0002")
            after_requests = server.log.entries()[mark:]
            store = open_store(cfg.coordination, OriginPolicy(0.0, 1), 10)
            yield {
                "before": before, "after": {t: lake.read(t) for t in SCHEMAS},
                "bodies_before": bodies_before, "bodies": BodyStore(cfg.bodies_path),
                "requests": after_requests, "store": store, "cfg": cfg, "target": target,
                "indexer": [json.loads(line) for line in
                            (tmp / "indexer.jsonl").read_text().splitlines()],
            }  # fmt: skip
            store.close()


def test_the_origin_was_crawled_before(opted_out: dict[str, Any]) -> None:
    docs = opted_out["before"]["documents"]
    assert docs.filter(pl.col("origin").str.contains(GONE)).height >= 5
    assert opted_out["bodies_before"]


def test_no_table_keeps_a_row_of_the_origin(opted_out: dict[str, Any]) -> None:
    for table, df in opted_out["after"].items():
        text = [c for c, t in df.schema.items() if t == pl.String]
        hits = df.filter(pl.any_horizontal(pl.col(c).fill_null("").str.contains(GONE)
                                           for c in text)) if text else df.head(0)  # fmt: skip
        assert hits.height == 0, (table, hits.head(3).to_dicts())
    # other origins keep their rows
    assert opted_out["after"]["documents"].height > 0


def test_no_body_of_the_origin_is_left(opted_out: dict[str, Any]) -> None:
    bodies: BodyStore = opted_out["bodies"]
    assert not any(bodies.has(k) for k in opted_out["bodies_before"])


def test_the_store_keeps_only_the_audited_suppression(opted_out: dict[str, Any]) -> None:
    store = opted_out["store"]
    with store._tx() as c:
        for table, column in (("urls", "url"), ("fetch_records", "url"), ("fetch_records", "links"),
                              ("stale_attempts", "url"), ("origins", "origin"),
                              ("render_classes", "origin")):  # fmt: skip
            n = c.execute(f"SELECT COUNT(*) FROM {table} WHERE {column} LIKE :gone",
                          {"gone": f"%{GONE}%"}).fetchone()[0]  # fmt: skip
            assert n == 0, (table, column, n)
    (supp,) = store.suppressions()
    assert supp["scope"] == "origin" and GONE in supp["value"] and supp["who"] == "ops-oncall"
    actions = [e["action"] for e in store.operator_log() if GONE in e["value"]]
    assert actions == ["suppress", "purge_store", "purge_lake", "tombstones", "purge_bodies"]


def test_the_indexer_holds_no_live_document_of_the_origin(opted_out: dict[str, Any]) -> None:
    live: dict[tuple[str, str], dict[str, Any]] = {}
    for event in opted_out["indexer"]:
        key = (event["url"], event["document_id"])
        if event["action"] == "upsert":
            live[key] = event
        else:
            live.pop(key, None)
    assert any(GONE in url for url, _ in
               [(e["url"], 0) for e in opted_out["indexer"] if e["action"] == "upsert"])  # fmt: skip
    assert not [k for k in live if GONE in k[0]]
    assert [k for k in live if GONE not in k[0]]  # the rest stays indexed


def test_a_later_cycle_sends_it_no_request(opted_out: dict[str, Any]) -> None:
    requests = opted_out["requests"]
    assert requests  # the cycle did crawl the other origins
    assert [r for r in requests if r["host"] == GONE] == []


def test_inspect_explains_a_suppressed_url(opted_out: dict[str, Any]) -> None:
    from atlas_pipeline.crawl import Engine
    from atlas_pipeline.inspect import inspect_url

    engine = Engine.from_config(opted_out["cfg"])
    try:
        ins = inspect_url(engine, opted_out["target"] + "some/page")
    finally:
        engine.close()
    assert ins.verdict.startswith("suppressed by an opt-out of origin")
    assert "ops-oncall" in ins.verdict and "ticket 42" in ins.verdict
    assert [e["action"] for e in ins.operator_log][:2] == ["suppress", "purge_store"]


def test_texts_only_the_origin_held_are_gone_and_shared_ones_stay(
    opted_out: dict[str, Any],
) -> None:
    before, after = opted_out["before"], opted_out["after"]
    gone = set(before["documents"].filter(pl.col("origin").str.contains(GONE))["text_hash"])
    held = set(after["documents"]["text_hash"].to_list())
    texts = set(after["document_texts"]["document_id"].to_list())
    assert gone - held and not (gone - held) & texts  # its own texts went with it
    assert texts == held  # every remaining document keeps its text, nothing is left unheld
