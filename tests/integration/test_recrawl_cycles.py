"""Recrawl across cycles on the changing-content origins (`atlas web --changing`), materialized
through Dagster (issue: recrawl and freshness, "Done when"):

- the second cycle sends validators for every page that had them, gets 304s for unchanged
  pages, re-parses nothing unchanged and emits no index event for it; changed pages get new
  document versions and events;
- origins whose validators mislead (an ETag that churns, conditional headers ignored) are
  marked untrusted and fetched unconditionally from then on;
- the freshness asset checks pass when the targets are met and fail when they are broken.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import polars as pl
import pytest

from assets.crawl import TABLES
from assets.definitions import CRAWL_JOB, FRESHNESS_JOB, build_definitions
from assets.partitions import CYCLE_PARTITIONS, partition_key
from atlas_pipeline.config import load_config
from atlas_pipeline.coordination import Suppression
from atlas_pipeline.crawl import Engine
from atlas_pipeline.urls import origin_of
from atlas_sandbox import changing
from tests.conftest import running_sandbox, sandbox_config, write_config

HOSTS = changing.CHANGING_HOSTS


def _config(tmp: Path, server: Any, name: str, **overrides: Any) -> Path:
    cfg = sandbox_config(
        server, tmp / "data", shards=1,
        seeds=[f"http://{h}:{server.port}/" for h in HOSTS],
        resolve={h: "127.0.0.1" for h in HOSTS},
        # every page is due again by the next cycle: the test is about what a revisit does;
        # an origin's validators are judged after all seven of its URLs answered once
        revisit_interval_s=0.5,
        recrawl={"min_interval_s": 0.2, "jitter": 0.0, "untrusted_after": 7},
        **overrides,
    )  # fmt: skip
    return write_config(tmp / name, cfg)


def _run(cfg_path: Path, instance: dg.DagsterInstance, cycle: str) -> dg.ExecuteInProcessResult:
    cfg = load_config(cfg_path)
    job = build_definitions(cfg, str(cfg_path), None).resolve_job_def(CRAWL_JOB)
    instance.add_dynamic_partitions(CYCLE_PARTITIONS, [cycle])
    result = job.execute_in_process(
        instance=instance, partition_key=str(partition_key(cycle, 0)), raise_on_error=False
    )
    assert result.success
    return result


def _check(result: dg.ExecuteInProcessResult, name: str) -> dg.AssetCheckEvaluation:
    found = [e for e in result.get_asset_check_evaluations() if e.check_name == name]
    assert len(found) == 1, name
    return found[0]


@pytest.fixture(scope="module")
def crawled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("recrawl")
    with running_sandbox(tmp / "requests.jsonl", 0, 12, changing=True) as server:
        cfg_path = _config(tmp, server, "atlas.yaml")
        lake = Path(load_config(cfg_path).lake_path) / "crawl"
        with dg.instance_for_test() as instance:
            first = _run(cfg_path, instance, "c0001")
            time.sleep(0.6)  # past every first revisit interval
            mark = len(server.log.entries())
            assert server.bump_generation() == 1
            # an operator slows the churning origin's revisits (versioned, audited)
            engine = Engine.from_config(load_config(cfg_path))
            churn = origin_of(server.url(changing.ETAG_CHURN, "/"))
            engine.store.set_policy(Suppression("origin", churn), {"revisit_min_s": 7200.0},
                                    "wasteful origin", "ops", time.time())  # fmt: skip
            engine.close()
            second = _run(cfg_path, instance, "c0002")
            second_requests = server.log.entries()[mark:]
            time.sleep(0.6)
            mark = len(server.log.entries())
            # a broken freshness target: every class wants a check within a millisecond
            broken = _config(tmp, server, "broken.yaml", freshness={
                "classes": {"low": {"min_priority": 0.0, "target_s": 0.001}},
                "max_stale_share": 0.0})  # fmt: skip
            third = _run(broken, instance, "c0003")
            third_requests = server.log.entries()[mark:]
            yield {
                "server": server, "port": server.port, "instance": instance, "tmp": tmp,
                "cfg": cfg_path, "broken": broken, "results": (first, second, third),
                "second_requests": second_requests, "third_requests": third_requests,
                "fetches": pl.read_delta(str(lake / "fetches")),
                "documents": pl.read_delta(str(lake / "documents")),
                "events": pl.read_delta(str(lake / "index_ready")),
                "schedule": pl.read_delta(str(lake / "recrawl_schedule")),
            }  # fmt: skip


def _pages(port: int) -> set[str]:
    return {changing.url(h, p, port) for h in HOSTS for p in changing.pages(h)}


def _cycle(df: pl.DataFrame, cycle: str) -> pl.DataFrame:
    return df.filter(pl.col("crawl_cycle") == cycle)


def _page_requests(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in entries if e["host"] in HOSTS and e["path"] != "/robots.txt"]


def test_the_second_cycle_sends_validators_for_every_page_that_had_them(
    crawled: dict[str, Any],
) -> None:
    first = _cycle(crawled["fetches"], "c0001").filter(pl.col("kind") == "page")
    had = set(first.filter(pl.col("etag").is_not_null())["url"].to_list())
    assert _pages(crawled["port"]) <= had
    requests = _page_requests(crawled["second_requests"])
    assert {crawled["server"].url(e["host"], e["path"]) for e in requests} >= _pages(
        crawled["port"]
    )
    for e in requests:
        assert e["headers"]["if-none-match"], e  # every page had an ETag in the first cycle
        if e["host"] != changing.ETAG_CHURN:  # the churning origin sends no Last-Modified
            assert e["headers"]["if-modified-since"], e


def test_unchanged_pages_get_304s_and_are_neither_reparsed_nor_reindexed(
    crawled: dict[str, Any],
) -> None:
    port = crawled["port"]
    changed = changing.changed_between(0, 1, port)
    assert changed and all("/volatile/" in u for u in changed)
    second = _cycle(crawled["fetches"], "c0002").filter(pl.col("kind") == "page")
    rates = second.filter(pl.col("origin").str.contains(changing.RATES))
    unchanged = rates.filter(~pl.col("url").is_in(list(changed)))
    assert unchanged.height >= 12 and set(unchanged["status"].to_list()) == {304}
    assert set(unchanged["reason"].to_list()) == {"not_modified"}
    assert (unchanged["bytes"] == 0).all()
    # 200s for content that had not changed (the misleading origins): hashed, not parsed
    misled = second.filter(~pl.col("origin").str.contains(changing.RATES))
    assert set(misled["status"].to_list()) == {200}
    assert set(misled["reason"].to_list()) == {"content_unchanged"}
    docs = _cycle(crawled["documents"], "c0002")
    assert set(docs["url"].to_list()) == changed
    events = _cycle(crawled["events"], "c0002")
    assert set(events["url"].to_list()) == changed


def test_changed_pages_get_new_versions_and_events(crawled: dict[str, Any]) -> None:
    changed = changing.changed_between(0, 1, crawled["port"])
    docs = crawled["documents"].filter(pl.col("url").is_in(list(changed)))
    versions = docs.group_by("url").agg(pl.col("text_hash").n_unique().alias("n"))
    assert set(versions["n"].to_list()) == {2}
    events = crawled["events"].filter(pl.col("url").is_in(list(changed)))
    assert events["event_id"].n_unique() == 2 * len(changed)
    second = _cycle(crawled["fetches"], "c0002").filter(pl.col("url").is_in(list(changed)))
    assert set(second["status"].to_list()) == {200}
    assert set(second["reason"].to_list()) == {"fetched"}


def test_misleading_validators_make_an_origin_unconditional(crawled: dict[str, Any]) -> None:
    schedule = _cycle(crawled["schedule"], "c0002")
    trusted = dict(schedule.group_by("origin").agg(pl.col("validators_trusted").all()).iter_rows())
    assert {o.split("//")[1].split(":")[0]: t for o, t in trusted.items()} == {
        changing.RATES: True, changing.ETAG_CHURN: False, changing.NO_CONDITIONAL: False,
    }  # fmt: skip
    third = _page_requests(crawled["third_requests"])
    misled = [e for e in third if e["host"] != changing.RATES]
    honest = [e for e in third if e["host"] == changing.RATES]
    assert misled and honest
    assert all(e["headers"]["if-none-match"] is None for e in misled)
    assert all(e["headers"]["if-modified-since"] is None for e in misled)
    assert all(e["headers"]["if-none-match"] for e in honest)


def test_the_schedule_gives_every_checked_url_a_due_time_and_a_reason(
    crawled: dict[str, Any],
) -> None:
    schedule = _cycle(crawled["schedule"], "c0002")
    assert set(schedule["url"].to_list()) >= _pages(crawled["port"])
    assert schedule["next_due_at"].null_count() == 0
    assert set(schedule["reason"].to_list()) <= {
        "first_visit", "adaptive", "growth_limited", "clamped_min", "clamped_max",
    }  # fmt: skip
    volatile = schedule.filter(pl.col("url").str.contains("/volatile/"))
    assert (volatile["changes"] == 1).all() and (volatile["checks"] == 2).all()
    static = schedule.filter(pl.col("url").str.contains("/static/"))
    assert (static["changes"] == 0).all()


def test_the_freshness_check_passes_when_met_and_fails_when_broken(
    crawled: dict[str, Any],
) -> None:
    _, second, third = crawled["results"]
    met = _check(second, "freshness_by_class")
    assert met.passed, met.metadata
    broken = _check(third, "freshness_by_class")
    assert not broken.passed
    assert broken.metadata["failing_classes"].value == ["low"]


def test_table_recency_checks_pass_when_fresh_and_fail_when_stale(
    crawled: dict[str, Any],
) -> None:
    def run(max_age_s: float, name: str) -> list[dg.AssetCheckEvaluation]:
        path = _config(crawled["tmp"], crawled["server"], name,
                       freshness={"table_max_age_s": max_age_s})  # fmt: skip
        cfg = load_config(path)
        job = build_definitions(cfg, str(path), None).resolve_job_def(FRESHNESS_JOB)
        result = job.execute_in_process(instance=crawled["instance"], raise_on_error=False)
        assert result.success
        return result.get_asset_check_evaluations()

    fresh = run(3600.0, "fresh.yaml")
    assert len(fresh) == len(TABLES) and all(e.passed for e in fresh)
    time.sleep(0.2)
    stale = run(0.1, "stale.yaml")
    assert len(stale) == len(TABLES) and not any(e.passed for e in stale)


def test_an_operator_revisit_bound_holds_for_its_origin_only(crawled: dict[str, Any]) -> None:
    schedule = _cycle(crawled["schedule"], "c0002")
    churn = schedule.filter(pl.col("origin").str.contains(changing.ETAG_CHURN))
    rest = schedule.filter(pl.col("origin").str.contains(changing.RATES))
    assert churn.height and (churn["interval_s"] >= 7200.0).all()
    assert (rest["interval_s"] < 7200.0).all()


def test_each_partition_gets_a_report_linked_from_its_metadata(crawled: dict[str, Any]) -> None:
    _, second, _ = crawled["results"]
    (event,) = [e for e in second.get_asset_materialization_events()
                if e.asset_key == dg.AssetKey(["crawl", "report"])]  # fmt: skip
    meta = event.materialization.metadata
    html = Path(meta["report"].value).read_text()
    assert "<svg" in html and "c0002" in html
    for host in HOSTS:
        assert host in html and host in meta["requests_over_time"].value
    assert meta["origins_over_limit"].value == 0
