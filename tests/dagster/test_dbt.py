"""The dbt project over a real crawl lake, run through Dagster (dagster-dbt + dbt-duckdb)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import duckdb
import pytest
import yaml

from atlas_pipeline.config import config_from_mapping
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
from atlas_pipeline.dedupe import METHODS
from atlas_pipeline.lake import SCHEMAS, Lake
from atlas_pipeline.lake_reference import dbt_sources
from atlas_pipeline.outbox import DELETE, UPSERT
from atlas_pipeline.reasons import Reason
from atlas_pipeline.regions.ownership import Action
from atlas_pipeline.render_policy import RenderState
from atlas_pipeline.robots import RobotsStatus
from atlas_sandbox import SandboxServer, SandboxWeb
from resources.dbt import (
    DBT_GROUP,
    DBT_PROJECT_DIR,
    LAKE_ROOT_ENV,
    build_dbt_defs,
    default_duckdb_path,
    ensure_manifest,
)

TABLES = ("urls", "frontier", "fetches", "documents", "links", "dedupe_clusters", "index_ready",
          "recrawl_schedule", "origins", "document_texts", "render_classes", "ownership")  # fmt: skip
SCHEMA_YML = DBT_PROJECT_DIR / "models" / "staging" / "schema.yml"
SOURCES_YML = DBT_PROJECT_DIR / "models" / "sources.yml"
CYCLE = "c0001"


def _values(enum: Any) -> list[str]:
    return [member.value for member in enum]


# (model, column, where) -> the enum its accepted_values list must equal, in enum order.
EXPECTED_ACCEPTED_VALUES = {
    ("stg_urls", "state", None): _values(UrlState),
    ("stg_urls", "reason", None): _values(Reason),
    ("stg_frontier", "state", None): _values(UrlState),
    ("stg_frontier", "reason", None): _values(Reason),
    ("stg_fetches", "reason", "kind <> 'robots'"): _values(Reason),
    ("stg_fetches", "reason", "kind = 'robots'"): _values(RobotsStatus),
    ("stg_render_classes", "state", None): _values(RenderState),
    ("stg_ownership", "action", None): _values(Action),
    ("stg_links", "reason", None): _values(Reason),
    ("stg_dedupe_clusters", "method", None): list(METHODS),
    ("stg_index_ready", "action", None): [UPSERT, DELETE],
}


def _accepted_values_in_yml() -> dict[tuple[str, str, str | None], list[str]]:
    found: dict[tuple[str, str, str | None], list[str]] = {}
    for model in yaml.safe_load(SCHEMA_YML.read_text())["models"]:
        for column in model.get("columns", []):
            for test in column.get("data_tests", []):
                if isinstance(test, dict) and "accepted_values" in test:
                    spec = test["accepted_values"]
                    where = spec.get("config", {}).get("where")
                    key = (model["name"], column["name"], where)
                    assert key not in found, f"duplicate accepted_values test {key}"
                    found[key] = list(spec["arguments"]["values"])
    return found


def test_accepted_values_equal_the_enums() -> None:
    assert _accepted_values_in_yml() == EXPECTED_ACCEPTED_VALUES


def test_the_sources_file_is_the_generated_one() -> None:
    """The sources carry the lake's own table and column descriptions (lake_columns), exactly
    as scripts/dbt_sources.py writes them: re-run it after changing a description."""
    assert SOURCES_YML.read_text() == dbt_sources()


def test_sources_point_at_the_crawl_assets() -> None:
    assert set(SCHEMAS) == set(TABLES)
    (source,) = yaml.safe_load(SOURCES_YML.read_text())["sources"]
    assert source["name"] == "lake"
    assert source["meta"]["plugin"] == "delta"
    tables = {t["name"]: t["meta"] for t in source["tables"]}
    assert set(tables) == set(TABLES)
    for name, meta in tables.items():
        assert meta["delta_table_path"] == "{{ env_var('ATLAS_LAKE_ROOT') }}/crawl/" + name
        assert meta["dagster"]["asset_key"] == ["crawl", name]


@pytest.fixture(scope="module")
def lake_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A lake written by the real engine: one cycle over a sandbox web, two shards."""
    tmp = tmp_path_factory.mktemp("crawl")
    web = SandboxWeb(seed=7, generated_origins=1, pages_per_origin=12)
    with SandboxServer(web):
        cfg = config_from_mapping(
            {
                "seeds": web.seed_urls(),
                "data_dir": str(tmp),
                "shards": 2,
                "politeness": {"min_gap_s": 0.0},
                "resolve": {h: "127.0.0.1" for h in web.hosts},
                "resolve_only": True,
            },
            base_dir=tmp,
        )
        eng = Engine.from_config(cfg)
        try:
            for shard in range(cfg.shards):
                plan_frontier(eng, CYCLE, shard)
                fetch_shard(eng, CYCLE, shard)
                export_urls(eng, CYCLE, shard)
                cluster_documents(eng, CYCLE, shard)
                export_schedule(eng, CYCLE, shard)
                export_origins(eng, CYCLE, shard)
                export_render_classes(eng, CYCLE, shard)
                export_ownership(eng, CYCLE, shard)
        finally:
            eng.close()
    return Path(cfg.lake_path)


@pytest.fixture(scope="module")
def dbt_defs(lake_root: Path, tmp_path_factory: pytest.TempPathFactory) -> dg.Definitions:
    # Parse the manifest against ANOTHER lake root first: the manifest records the root it was
    # parsed with, and building must still read the lake of this run.
    ensure_manifest(tmp_path_factory.mktemp("other-lake"), force=True)
    return build_dbt_defs(str(lake_root))


@pytest.fixture(scope="module")
def build(dbt_defs: dg.Definitions) -> Iterator[dg.ExecuteInProcessResult]:
    before = os.environ.get(LAKE_ROOT_ENV)
    assets = list(dbt_defs.assets or [])
    result = dg.materialize(assets, resources=dict(dbt_defs.resources or {}))
    assert os.environ.get(LAKE_ROOT_ENV) == before  # the variable was set for dbt only
    yield result


def _dbt_assets(defs: dg.Definitions) -> dg.AssetsDefinition:
    (assets,) = list(defs.assets or [])
    assert isinstance(assets, dg.AssetsDefinition)
    return assets


def test_manifest_was_parsed_against_another_lake(
    dbt_defs: dg.Definitions, lake_root: Path
) -> None:
    text = (DBT_PROJECT_DIR / "target" / "manifest.json").read_text()
    assert str(lake_root) not in text


def test_sources_are_the_crawl_assets(dbt_defs: dg.Definitions) -> None:
    graph = dbt_defs.resolve_asset_graph()
    for table in TABLES:
        node = graph.get(dg.AssetKey(f"stg_{table}"))
        assert node.parent_keys == {dg.AssetKey(["crawl", table])}
        assert node.group_name == DBT_GROUP
    staging = {k for k in _dbt_assets(dbt_defs).keys if k.path[0].startswith("stg_")}
    assert staging == {dg.AssetKey(f"stg_{t}") for t in TABLES}  # marts: test_dbt_marts.py


def test_dbt_build_succeeds(build: dg.ExecuteInProcessResult) -> None:
    assert build.success
    materialized = {e.asset_key for e in build.get_asset_materialization_events()}
    assert {k for k in materialized if k.path[0].startswith("stg_")} == {
        dg.AssetKey(f"stg_{t}") for t in TABLES
    }


def test_models_are_tables_with_the_lake_rows(
    build: dg.ExecuteInProcessResult, lake_root: Path
) -> None:
    lake = Lake(lake_root)
    with duckdb.connect(default_duckdb_path(lake_root), read_only=True) as con:
        kinds = dict(
            con.execute(
                "select table_name, table_type from information_schema.tables"
                " where table_schema = 'main'"
            ).fetchall()
        )
        for table in TABLES:
            model = f"stg_{table}"
            assert kinds[model] == "BASE TABLE"
            (rows,) = con.execute(f"select count(*) from main.{model}").fetchone() or (None,)
            assert rows == lake.read(table).height
            columns = [c[0] for c in con.execute(f"describe main.{model}").fetchall()]
            assert columns == list(SCHEMAS[table])
        # real crawl data, not empty tables
        for table in ("urls", "fetches", "documents", "links", "dedupe_clusters", "index_ready",
                      "recrawl_schedule", "origins", "document_texts"):  # fmt: skip
            (rows,) = con.execute(f"select count(*) from main.stg_{table}").fetchone() or (0,)
            assert rows > 0, table
        kinds_fetched = con.execute("select distinct kind from main.stg_fetches").fetchall()
        assert {k for (k,) in kinds_fetched} == {"page", "robots", "sitemap"}


def test_dbt_tests_are_passing_asset_checks(
    build: dg.ExecuteInProcessResult, dbt_defs: dg.Definitions
) -> None:
    evaluations = build.get_asset_check_evaluations()
    declared = set(_dbt_assets(dbt_defs).check_keys)
    assert {e.asset_check_key for e in evaluations} == declared
    assert len(declared) >= 30
    failed = [e.asset_check_key for e in evaluations if not e.passed]
    assert failed == []
    names = {key.name for key in declared}
    assert {
        "unique_stg_fetches_fetch_id",
        "unique_stg_documents_fetch_id",
        "unique_stg_urls_url",
        "stg_fetches_page_reason_is_reason",
        "stg_fetches_robots_reason_is_robots_status",
        "stg_links_reason_is_reason",
        "stg_urls_state_is_url_state",
        "stg_urls_reason_is_reason",
    } <= names
