"""The dbt marts (dbt/models/marts) over a real two-cycle crawl, built through Dagster.

The crawl: the sandbox web (4 origins) plus the duplicate-content origin on loopback, two
shards, two cycles. Between the cycles the web bumps its generation (about a quarter of its
pages change) and the recrawl bounds are tiny, so cycle 2 revisits every page: conditional
requests, 304s, changed pages and (on the duplicate-content origin, which sends no validators)
content_unchanged 200s. Every mart is checked against a figure computed independently, from
the sandbox's ground truth or from the raw Delta tables with polars.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import dagster as dg
import duckdb
import polars as pl
import pytest
import yaml

from atlas_pipeline.config import CrawlConfig, config_from_mapping
from atlas_pipeline.coordination.base import UrlState
from atlas_pipeline.crawl import (
    Engine,
    cluster_documents,
    export_origins,
    export_ownership,
    export_render_classes,
    export_schedule,
    export_urls,
    fetch_shard,
    plan_frontier,
)
from atlas_pipeline.extractor_pool import ExtractorPool
from atlas_pipeline.lake import Lake
from atlas_pipeline.reasons import Reason
from atlas_sandbox import SandboxServer, SandboxWeb, dupes
from atlas_sandbox.site import EXTERNAL_HOST, normalize_url
from resources.dbt import DBT_GROUP, DBT_PROJECT_DIR, build_dbt_defs, default_duckdb_path

pytestmark = pytest.mark.slow

MARTS_YML = DBT_PROJECT_DIR / "models" / "marts" / "schema.yml"
C1, C2 = "c0001", "c0002"
MIN_GAP_S = 0.05
NEWS_CLASS = "news"  # a fairness class of two origins; the others share "example.test"
NEWS_CLASS_HOSTS = ("news-a.example.test", dupes.DUPES)
FRESHNESS = {"important": (0.8, 1.0), "normal": (0.0, 2.0)}  # class: (min_priority, target_s)

# mart -> the staging models it reads (its parents in the Dagster asset graph)
MARTS: dict[str, set[str]] = {
    "mart_origin_rate": {"stg_fetches", "stg_origins"},
    "mart_fetch_share_by_class": {"stg_fetches", "stg_origins"},
    "mart_frontier_age": {"stg_frontier", "stg_urls"},
    "mart_frontier_oldest_eligible": {"stg_frontier", "stg_urls"},
    "mart_blocked_shares": {"stg_links", "stg_urls"},
    "mart_parse_yield": {"stg_fetches", "stg_documents"},
    "mart_recrawl": {"stg_fetches", "stg_documents"},
    "mart_dedupe_ratio": {"stg_dedupe_clusters", "stg_documents"},
    "mart_freshness_gap": {"stg_recrawl_schedule"},
    "mart_reason_counts": {"stg_links", "stg_fetches", "stg_urls"},
}
SCOPE_REASONS = {Reason.BAD_URL, Reason.SCHEME_NOT_ALLOWED, Reason.HOST_NOT_ALLOWED,
                 Reason.MAX_DEPTH, Reason.URL_TOO_LONG, Reason.NOFOLLOW, Reason.EGRESS_REFUSED}  # fmt: skip


def _values(enum: Any) -> list[str]:
    return [member.value for member in enum]


EXPECTED_ACCEPTED_VALUES = {
    ("mart_reason_counts", "reason"): _values(Reason),
    ("mart_reason_counts", "source_table"): ["links", "fetches", "urls"],
    ("mart_frontier_oldest_eligible", "current_state"): _values(UrlState),
    ("mart_frontier_age", "priority_bucket"): ["high", "normal", "low"],
}


@dataclass(frozen=True)
class Crawl:
    lake_root: Path
    cfg: CrawlConfig
    web: SandboxWeb
    port: int
    changed: frozenset[str]  # sandbox page URLs whose content changed between the cycles


def _cycle(eng: Engine, cycle: str, pool: ExtractorPool) -> None:
    for shard in range(eng.cfg.shards):
        plan_frontier(eng, cycle, shard)
        fetch_shard(eng, cycle, shard, pool=pool)
        export_urls(eng, cycle, shard)
        cluster_documents(eng, cycle, shard)
        export_schedule(eng, cycle, shard)
        export_origins(eng, cycle, shard)
        export_render_classes(eng, cycle, shard)
        export_ownership(eng, cycle, shard)


def _until_every_page_is_due(lake: Lake) -> float:
    """Seconds until the last checked page's revisit falls due (the class targets of 1 s and
    2 s cap every interval, so this is at most a few seconds)."""
    checked = lake.read("urls").filter(pl.col("last_checked_at").is_not_null())
    due = checked["due_at"].max()
    assert isinstance(due, datetime)
    return max(0.0, due.timestamp() - time.time()) + 0.05


@pytest.fixture(scope="module")
def crawl(tmp_path_factory: pytest.TempPathFactory) -> Crawl:
    """Two cycles of the real engine over the sandbox web + the duplicate-content origin."""
    tmp = tmp_path_factory.mktemp("marts-crawl")
    web = SandboxWeb(seed=7, generated_origins=1, pages_per_origin=12)
    with SandboxServer(web, dupes=True):
        hosts = [*web.hosts, *dupes.DUPES_HOSTS]
        cfg = config_from_mapping(
            {
                "seeds": web.seed_urls() + dupes.seed_urls(web.port),
                "data_dir": str(tmp),
                "shards": 2,
                "extraction_workers": 1,
                "politeness": {
                    "min_gap_s": MIN_GAP_S,
                    "classes": {NEWS_CLASS: list(NEWS_CLASS_HOSTS)},
                },
                "recrawl": {"min_interval_s": 0.5},
                "freshness": {
                    "classes": {
                        name: {"min_priority": low, "target_s": target}
                        for name, (low, target) in FRESHNESS.items()
                    }
                },
                "resolve": {h: "127.0.0.1" for h in hosts},
                "resolve_only": True,
            },
            base_dir=tmp,
        )
        eng = Engine.from_config(cfg)
        try:
            # one extractor pool for both cycles: a worker process starts once, not per shard
            limits = cfg.limits
            with ExtractorPool(1, limits.parser_cpu_s, limits.parser_memory_mb) as pool:
                _cycle(eng, C1, pool)
                web.bump_generation()
                time.sleep(_until_every_page_is_due(Lake(cfg.lake_path)))
                _cycle(eng, C2, pool)
        finally:
            eng.close()
        return Crawl(Path(cfg.lake_path), cfg, web, web.port, frozenset(web.changed_pages(0)))


@pytest.fixture(scope="module")
def dbt_defs(crawl: Crawl) -> dg.Definitions:
    return build_dbt_defs(str(crawl.lake_root))


@pytest.fixture(scope="module")
def build(dbt_defs: dg.Definitions) -> dg.ExecuteInProcessResult:
    assets = list(dbt_defs.assets or [])
    return dg.materialize(assets, resources=dict(dbt_defs.resources or {}), raise_on_error=False)


@pytest.fixture(scope="module")
def marts(build: dg.ExecuteInProcessResult, crawl: Crawl) -> Iterator[dict[str, pl.DataFrame]]:
    """Every mart table as a polars frame, read from the DuckDB file dbt built."""
    assert build.success
    with duckdb.connect(default_duckdb_path(crawl.lake_root), read_only=True) as con:
        yield {name: con.sql(f"select * from main.{name}").pl() for name in MARTS}


@pytest.fixture(scope="module")
def lake(crawl: Crawl) -> dict[str, pl.DataFrame]:
    tables = ("urls", "frontier", "fetches", "documents", "links", "dedupe_clusters",
              "recrawl_schedule", "origins")  # fmt: skip
    return {t: Lake(crawl.lake_root).read(t) for t in tables}


def _host(url: str) -> str:
    return urlsplit(url).hostname or ""


def _row(frame: pl.DataFrame, **keys: Any) -> dict[str, Any]:
    (row,) = frame.filter(**keys).to_dicts()
    return row


def _sandbox_pages(crawl: Crawl, cycle: str, lake: dict[str, pl.DataFrame]) -> list[str]:
    """The sandbox-web (not dupes) pages that made a document in `cycle`: their links count."""
    docs = lake["documents"].filter(pl.col("crawl_cycle") == cycle)
    return [u for u in docs["url"].to_list() if crawl.web.is_sandbox_host(_host(u))]


def _robots_blocked_truth(crawl: Crawl, pages: list[str]) -> set[str]:
    """Distinct same-web URLs the crawled pages link to that robots.txt forbids AtlasBot."""
    out = set()
    for page in pages:
        for link in crawl.web.links(page):
            norm = normalize_url(link)
            parts = urlsplit(norm)
            host = parts.hostname or ""
            if crawl.web.is_sandbox_host(host):
                path_qs = parts.path + (f"?{parts.query}" if parts.query else "")
                if crawl.web.disallowed(host, path_qs):
                    out.add(norm)
    return out


def _external_links_truth(crawl: Crawl, pages: list[str]) -> int:
    """Links out of the sandbox (one row per page and distinct target): host_not_allowed."""
    return sum(
        len({normalize_url(u) for u in crawl.web.links(page) if _host(u) == EXTERNAL_HOST})
        for page in pages
    )


# ---------------------------------------------------------------------------- the project


def test_accepted_values_equal_the_enums() -> None:
    found: dict[tuple[str, str], list[str]] = {}
    for model in yaml.safe_load(MARTS_YML.read_text())["models"]:
        for column in model.get("columns", []):
            for test in column.get("data_tests", []):
                if isinstance(test, dict) and "accepted_values" in test:
                    key = (model["name"], column["name"])
                    assert key not in found, f"duplicate accepted_values test {key}"
                    found[key] = list(test["accepted_values"]["arguments"]["values"])
    assert found == EXPECTED_ACCEPTED_VALUES


def test_every_mart_is_documented_with_a_tested_grain() -> None:
    models = {m["name"]: m for m in yaml.safe_load(MARTS_YML.read_text())["models"]}
    assert set(models) == set(MARTS)
    for name, model in models.items():
        sql = (DBT_PROJECT_DIR / "models" / "marts" / f"{name}.sql").read_text()
        assert model["description"].strip(), name
        (grain,) = [
            t["unique_combination_of_columns"]
            for t in model["data_tests"]
            if "unique_combination_of_columns" in t
        ]
        keys = grain["arguments"]["combination_of_columns"]
        columns = {c["name"]: c for c in model["columns"]}
        for key in keys:
            assert "not_null" in columns[key]["data_tests"], (name, key)
        for column in columns.values():
            assert column["name"] in sql, (name, column["name"])


def test_marts_are_dbt_assets_downstream_of_staging(dbt_defs: dg.Definitions) -> None:
    graph = dbt_defs.resolve_asset_graph()
    (assets,) = list(dbt_defs.assets or [])
    assert isinstance(assets, dg.AssetsDefinition)
    assert {dg.AssetKey(m) for m in MARTS} <= assets.keys
    for mart, parents in MARTS.items():
        node = graph.get(dg.AssetKey(mart))
        assert node.parent_keys == {dg.AssetKey(p) for p in parents}, mart
        assert node.group_name == DBT_GROUP
        # ... and so, two hops up, downstream of the crawl assets
        grandparents = set().union(*(graph.get(k).parent_keys for k in node.parent_keys))
        assert grandparents == {dg.AssetKey(["crawl", p.removeprefix("stg_")]) for p in parents}


def test_dbt_build_succeeds_with_the_marts_as_tables(
    build: dg.ExecuteInProcessResult, crawl: Crawl
) -> None:
    assert build.success
    materialized = {e.asset_key for e in build.get_asset_materialization_events()}
    assert {dg.AssetKey(m) for m in MARTS} <= materialized
    with duckdb.connect(default_duckdb_path(crawl.lake_root), read_only=True) as con:
        kinds = dict(
            con.execute(
                "select table_name, table_type from information_schema.tables"
                " where table_schema = 'main'"
            ).fetchall()
        )
    assert {m: kinds.get(m) for m in MARTS} == dict.fromkeys(MARTS, "BASE TABLE")


def test_every_mart_dbt_test_passed(
    build: dg.ExecuteInProcessResult, dbt_defs: dg.Definitions
) -> None:
    (assets,) = list(dbt_defs.assets or [])
    assert isinstance(assets, dg.AssetsDefinition)
    declared = {k for k in assets.check_keys if k.asset_key.path[0] in MARTS}
    evaluations = [e for e in build.get_asset_check_evaluations() if e.asset_check_key in declared]
    assert {e.asset_check_key for e in evaluations} == declared
    assert [e.asset_check_key for e in evaluations if not e.passed] == []
    per_mart = {m: {k.name for k in declared if k.asset_key == dg.AssetKey(m)} for m in MARTS}
    for mart, names in per_mart.items():
        assert any(n.startswith("unique_combination_of_columns_") for n in names), mart
        assert any(n.startswith("not_null_") for n in names), mart
    assert "mart_reason_counts_reason_is_reason" in per_mart["mart_reason_counts"]
    assert (
        "mart_frontier_oldest_eligible_current_state_is_url_state"
        in (per_mart["mart_frontier_oldest_eligible"])
    )
    shares = {n for names in per_mart.values() for n in names if n.startswith("between_zero")}
    assert shares == {
        f"between_zero_and_one_{model['name']}_{column['name']}"
        for model in yaml.safe_load(MARTS_YML.read_text())["models"]
        for column in model["columns"]
        if "between_zero_and_one" in column.get("data_tests", [])
    }
    assert len(shares) == 14


# ---------------------------------------------------------------------------- the figures


def test_origin_rate(
    marts: dict[str, pl.DataFrame], crawl: Crawl, lake: dict[str, pl.DataFrame]
) -> None:
    mart = marts["mart_origin_rate"]
    truth = lake["fetches"].group_by("crawl_cycle", "origin").agg(pl.len().alias("n"))
    got = mart.select("crawl_cycle", "origin", n="requests")
    assert sorted(got.rows()) == sorted(truth.rows())
    assert mart["share_429"].to_list() == [0.0] * mart.height  # the plain sandbox never throttles
    assert mart["limit_per_s"].to_list() == [pytest.approx(1 / MIN_GAP_S)] * mart.height
    # polite by construction: every gap >= min_gap_s, so the mean rate is within the limit
    assert mart["rate_vs_limit"].null_count() == 0
    assert mart["rate_vs_limit"].max() <= 1.0
    dupes_c2 = _row(mart, crawl_cycle=C2, origin=f"http://{dupes.DUPES}:{crawl.port}")
    assert dupes_c2["requests"] == len(dupes.page_urls(0)) + 1  # every page and the index


def test_fetch_share_by_class(
    marts: dict[str, pl.DataFrame], lake: dict[str, pl.DataFrame]
) -> None:
    mart = marts["mart_fetch_share_by_class"]
    assert set(mart["fair_class"]) == {NEWS_CLASS, "example.test"}
    fetches = lake["fetches"].with_columns(
        news=pl.col("origin").map_elements(lambda o: _host(o) in NEWS_CLASS_HOSTS, pl.Boolean)
    )
    for cycle in (C1, C2):
        in_cycle = fetches.filter(pl.col("crawl_cycle") == cycle)
        news = _row(mart, crawl_cycle=cycle, fair_class=NEWS_CLASS)
        assert news["fetches"] == in_cycle["news"].sum()
        assert news["origins"] == len(NEWS_CLASS_HOSTS)
        assert news["fetch_share"] == pytest.approx(in_cycle["news"].sum() / in_cycle.height)
        shares = mart.filter(pl.col("crawl_cycle") == cycle)["fetch_share"]
        assert shares.sum() == pytest.approx(1.0)


def _frontier_ages(lake: dict[str, pl.DataFrame]) -> pl.DataFrame:
    discovered = lake["urls"].select("url", "discovered_at")
    return (
        lake["frontier"]
        .join(discovered, on="url", how="left")
        .with_columns(
            age_s=(pl.col("selected_at") - pl.col("discovered_at")).dt.total_microseconds() / 1e6,
            bucket=pl.when(pl.col("priority") >= 0.8)
            .then(pl.lit("high"))
            .when(pl.col("priority") >= 0.3)
            .then(pl.lit("normal"))
            .otherwise(pl.lit("low")),
        )
    )


def test_frontier_age(marts: dict[str, pl.DataFrame], lake: dict[str, pl.DataFrame]) -> None:
    mart = marts["mart_frontier_age"]
    ages = _frontier_ages(lake)
    truth = ages.group_by("crawl_cycle", "bucket").agg(
        pl.len().alias("n"),
        pl.col("age_s").mean().alias("mean"),
        pl.col("age_s").max().alias("max"),
    )
    assert mart.height == truth.height
    for row in truth.to_dicts():
        got = _row(mart, crawl_cycle=row["crawl_cycle"], priority_bucket=row["bucket"])
        assert got["queued_urls"] == row["n"]
        assert got["mean_age_s"] == pytest.approx(row["mean"])
        assert got["max_age_s"] == pytest.approx(row["max"])
    # cycle 1 selects the seeds (every origin's home page); cycle 2 revisits every page
    assert _row(mart, crawl_cycle=C1, priority_bucket="high")["queued_urls"] == len(
        lake["urls"].filter(pl.col("source") == "seed")
    )
    assert mart.filter(pl.col("crawl_cycle") == C2)["queued_urls"].sum() == len(
        lake["fetches"].filter((pl.col("crawl_cycle") == C2) & (pl.col("kind") == "page"))
    )


def test_frontier_oldest_eligible(
    marts: dict[str, pl.DataFrame], lake: dict[str, pl.DataFrame]
) -> None:
    mart = marts["mart_frontier_oldest_eligible"]
    ages = _frontier_ages(lake).filter(pl.col("state") == "eligible")
    assert sorted(mart["crawl_cycle"]) == [C1, C2]
    for cycle in (C1, C2):
        in_cycle = ages.filter(pl.col("crawl_cycle") == cycle)
        oldest = in_cycle.sort(
            ["discovered_at", "priority", "url"], descending=[False, True, False]
        )
        got = _row(mart, crawl_cycle=cycle)
        assert got["url"] == oldest["url"][0]
        assert got["age_s"] == pytest.approx(oldest["age_s"][0])
        assert got["eligible_urls"] == in_cycle.height
        current = _row(lake["urls"], url=got["url"])["state"]
        assert got["current_state"] == current == "fetched"


def test_blocked_shares(
    marts: dict[str, pl.DataFrame], lake: dict[str, pl.DataFrame], crawl: Crawl
) -> None:
    mart = marts["mart_blocked_shares"]
    c1 = _row(mart, crawl_cycle=C1)
    # robots: every disallowed page the sandbox links is blocked once, where first found
    blocked = _robots_blocked_truth(crawl, _sandbox_pages(crawl, C1, lake))
    assert len(blocked) == sum(
        crawl.web.disallowed(h, p) for h in crawl.web.hosts for p in crawl.web.pages(h)
    )
    assert c1["robots_blocked_links"] == len(blocked) > 0
    assert c1["urls_blocked"] == len(blocked)
    assert c1["urls_discovered"] == lake["urls"].filter(pl.col("discovered_cycle") == C1).height
    links_c1 = lake["links"].filter(pl.col("crawl_cycle") == C1).height
    assert c1["links"] == links_c1
    assert c1["robots_blocked_share"] == pytest.approx(len(blocked) / links_c1)
    # scope: the sandbox's links out to external.example.org, per cycle
    for cycle in (C1, C2):
        row = _row(mart, crawl_cycle=cycle)
        assert row["scope_blocked_links"] == _external_links_truth(
            crawl, _sandbox_pages(crawl, cycle, lake)
        )
        assert row["trap_capped_links"] == 0
    c2 = _row(mart, crawl_cycle=C2)
    assert c2["robots_blocked_links"] == 0  # nothing new to block in a revisit cycle
    assert c2["urls_discovered"] == 0
    assert c2["urls_blocked_share"] is None


def test_parse_yield(
    marts: dict[str, pl.DataFrame], crawl: Crawl, lake: dict[str, pl.DataFrame]
) -> None:
    mart = marts["mart_parse_yield"]
    web, port = crawl.web, crawl.port
    for host in web.hosts:
        allowed = [p for p in web.pages(host) if not web.disallowed(host, p)]
        row = _row(mart, crawl_cycle=C1, origin=web.origin_url(host))
        assert row["html_200_fetches"] == row["documents_with_text"] == len(allowed)
        assert row["parse_yield"] == 1.0
    dupes_origin = f"http://{dupes.DUPES}:{port}"
    pages = len(dupes.page_urls(port)) + 1  # and the index
    c1 = _row(mart, crawl_cycle=C1, origin=dupes_origin)
    assert (c1["html_200_fetches"], c1["documents_with_text"], c1["parse_yield"]) == (
        pages,
        pages,
        1.0,
    )
    # cycle 2: the duplicate-content origin sends no validators and never changes, so every
    # 200 is content_unchanged, nothing is parsed and the yield is undefined
    c2 = _row(mart, crawl_cycle=C2, origin=dupes_origin)
    assert (c2["content_unchanged"], c2["parsed_fetches"], c2["documents"]) == (pages, 0, 0)
    assert c2["parse_yield"] is None
    for host in web.hosts:
        row = _row(mart, crawl_cycle=C2, origin=web.origin_url(host))
        changed = {
            u
            for u in crawl.changed
            if _host(u) == host and not web.disallowed(host, urlsplit(u).path)
        }
        assert row["documents"] == row["parsed_fetches"] == len(changed)


def test_recrawl(
    marts: dict[str, pl.DataFrame], crawl: Crawl, lake: dict[str, pl.DataFrame]
) -> None:
    mart = marts["mart_recrawl"]
    c1 = _row(mart, crawl_cycle=C1)
    assert (c1["revisits"], c1["conditional_requests"], c1["not_modified"]) == (0, 0, 0)
    assert c1["changed_page_yield"] is None and c1["not_modified_rate"] is None
    pages_c2 = lake["fetches"].filter((pl.col("crawl_cycle") == C2) & (pl.col("kind") == "page"))
    revisited = set(pages_c2["url"])
    sandbox = {u for u in revisited if crawl.web.is_sandbox_host(_host(u))}
    changed = crawl.changed & revisited
    dupes_pages = len(dupes.page_urls(crawl.port)) + 1
    c2 = _row(mart, crawl_cycle=C2)
    assert c2["revisits"] == c2["page_fetches"] == len(revisited) == len(sandbox) + dupes_pages
    # the sandbox honours validators: an unchanged page answers 304, a changed one 200
    assert c2["conditional_requests"] == len(sandbox)
    assert c2["not_modified"] == len(sandbox - changed)
    assert c2["content_unchanged"] == dupes_pages
    assert c2["revisit_documents"] == len(changed) > 0
    assert c2["not_modified_rate"] == pytest.approx(len(sandbox - changed) / len(sandbox))
    assert c2["changed_page_yield"] == pytest.approx(len(changed) / len(revisited))


def test_dedupe_ratio(
    marts: dict[str, pl.DataFrame], crawl: Crawl, lake: dict[str, pl.DataFrame]
) -> None:
    mart = marts["mart_dedupe_ratio"]
    truth = (
        lake["dedupe_clusters"]
        .group_by("crawl_cycle")
        .agg(
            pl.len().alias("docs"),
            pl.col("document_id").n_unique().alias("ids"),
            pl.col("cluster_id").n_unique().alias("clusters"),
        )
    )
    assert mart.height == truth.height == 2
    for row in truth.to_dicts():
        got = _row(mart, crawl_cycle=row["crawl_cycle"])
        assert got["documents"] == got["labelled_documents"] == row["docs"]
        assert (got["distinct_document_ids"], got["distinct_cluster_ids"]) == (
            row["ids"],
            row["clusters"],
        )
        assert got["dedupe_ratio"] == pytest.approx(row["docs"] / row["ids"])
        assert got["exact_duplicate_share"] == pytest.approx(1 - row["ids"] / row["docs"])
        assert got["near_duplicate_share"] == pytest.approx(1 - row["clusters"] / row["docs"])
    # the sandbox's only exact duplicates are the print twins: one content, two URLs each
    c1 = _row(mart, crawl_cycle=C1)
    assert c1["documents"] - c1["distinct_document_ids"] == len(dupes.print_twins(crawl.port))


def test_freshness_gap(marts: dict[str, pl.DataFrame], lake: dict[str, pl.DataFrame]) -> None:
    mart = marts["mart_freshness_gap"]
    truth = (
        lake["recrawl_schedule"]
        .group_by("crawl_cycle", "freshness_class")
        .agg(
            pl.len().alias("n"),
            pl.col("stale").sum().alias("stale"),
            pl.col("staleness_s").mean().alias("mean_s"),
            pl.col("staleness_s").max().alias("max_s"),
        )
    )
    assert mart.height == truth.height
    for row in truth.to_dicts():
        got = _row(mart, crawl_cycle=row["crawl_cycle"], freshness_class=row["freshness_class"])
        assert (got["urls"], got["stale_urls"]) == (row["n"], row["stale"])
        assert got["stale_share"] == pytest.approx(row["stale"] / row["n"])
        assert got["mean_staleness_h"] == pytest.approx(row["mean_s"] / 3600)
        assert got["max_staleness_h"] == pytest.approx(row["max_s"] / 3600)
        assert got["target_h"] == pytest.approx(FRESHNESS[row["freshness_class"]][1] / 3600)
    # every document's URL was checked, so each has a schedule row in its cycle
    for cycle in (C1, C2):
        checked = lake["urls"].filter(pl.col("last_checked_at").is_not_null()).height
        assert mart.filter(pl.col("crawl_cycle") == cycle)["urls"].sum() == checked


def test_reason_counts(
    marts: dict[str, pl.DataFrame], crawl: Crawl, lake: dict[str, pl.DataFrame]
) -> None:
    mart = marts["mart_reason_counts"]
    frames = {
        "links": lake["links"],
        "fetches": lake["fetches"].filter(pl.col("kind") != "robots"),
        "urls": lake["urls"].filter(pl.col("reason").is_not_null()),
    }
    truth = sorted(
        (cycle, table, reason, n)
        for table, frame in frames.items()
        for cycle, reason, n in frame.group_by("crawl_cycle", "reason").len().rows()
    )
    assert sorted(mart.select("crawl_cycle", "source_table", "reason", "n").rows()) == truth
    links_c1 = dict(
        mart.filter((pl.col("crawl_cycle") == C1) & (pl.col("source_table") == "links"))
        .select("reason", "n")
        .rows()
    )
    pages = _sandbox_pages(crawl, C1, lake)
    assert links_c1[Reason.ROBOTS_DISALLOWED] == len(_robots_blocked_truth(crawl, pages))
    assert links_c1[Reason.HOST_NOT_ALLOWED] == _external_links_truth(crawl, pages)
    assert set(links_c1) & SCOPE_REASONS == {Reason.HOST_NOT_ALLOWED}
    for (_cycle, _table), group in mart.group_by("crawl_cycle", "source_table"):
        assert group["share"].sum() == pytest.approx(1.0)
