"""The Definitions load, validate and resolve; partition keys round-trip."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest

from assets import dbt_definitions
from assets.definitions import CRAWL_JOB, defs
from assets.partitions import cycle_and_shard, next_cycle_key, partition_key
from tests.conftest import write_config

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture()
def config_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = write_config(tmp_path / "atlas.yaml", {"seeds": ["http://news-a.example.test:8080/"],
                                                  "data_dir": str(tmp_path), "shards": 3})  # fmt: skip
    monkeypatch.setenv("ATLAS_CONFIG", str(path))
    return path


def test_definitions_load_with_crawl_assets_checks_and_job(config_env: Path) -> None:
    d = defs()
    dg.Definitions.validate_loadable(d)
    keys = {k.to_user_string() for k in d.resolve_asset_graph().get_all_asset_keys()}
    assert {
        "crawl/frontier",
        "crawl/fetches",
        "crawl/documents",
        "crawl/links",
        "crawl/urls",
    } <= keys
    assert d.resolve_job_def(CRAWL_JOB).partitions_def is not None
    graph = d.resolve_asset_graph()  # lineage follows the data: events come from documents
    assert graph.get(dg.AssetKey(["crawl", "index_ready"])).parent_keys == {
        dg.AssetKey(["crawl", "documents"])
    }
    # the report shows the render lane's decisions: it runs after they are written
    assert dg.AssetKey(["crawl", "render_classes"]) in graph.get(
        dg.AssetKey(["crawl", "report"])).parent_keys  # fmt: skip
    checks = {c.name for c in d.resolve_asset_graph().asset_check_keys}
    assert {"politeness_audit", "robots_respected", "documents_have_text"} <= checks
    # the WARC export is defined, downstream of the fetches, and never part of a crawl
    warc = dg.AssetKey(["crawl", "warc_files"])
    assert graph.get(warc).parent_keys == {dg.AssetKey(["crawl", "fetches"])}
    assert warc not in d.resolve_job_def(CRAWL_JOB).asset_layer.executable_asset_keys
    assert (
        dg.AssetKey(["crawl", "fetches"])
        in d.resolve_job_def(CRAWL_JOB).asset_layer.executable_asset_keys
    )


def test_the_dbt_location_loads_its_models_over_the_crawl_tables(config_env: Path) -> None:
    """The dbt models are their own code location (a crawl run never imports dbt) and read the
    crawl location's tables by their asset keys."""
    d = dbt_definitions.defs()
    dg.Definitions.validate_loadable(d)
    graph = d.resolve_asset_graph()
    models = {
        k.to_user_string() for k in graph.get_all_asset_keys() if graph.get(k).is_materializable
    }
    assert {"stg_fetches", "stg_documents"} <= models
    upstream = {p.to_user_string() for k in graph.get_all_asset_keys()
                for p in graph.get(k).parent_keys}  # fmt: skip
    assert {"crawl/fetches", "crawl/documents"} <= upstream
    crawl_keys = {k.to_user_string() for k in defs().resolve_asset_graph().get_all_asset_keys()}
    assert upstream - models <= crawl_keys  # every source is a table the crawl location makes


def test_a_crawl_run_imports_no_dbt(config_env: Path) -> None:
    code = "import sys, assets.definitions as d; d.defs(); print('dbt' in sys.modules)"
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip() == "False"


def test_shard_count_comes_from_the_config(config_env: Path) -> None:
    job = defs().resolve_job_def(CRAWL_JOB)
    multi = job.partitions_def
    assert isinstance(multi, dg.MultiPartitionsDefinition)
    shard_dim = next(d for d in multi.partitions_defs if d.name == "origin_shard")
    assert shard_dim.partitions_def.get_partition_keys() == ["shard_000", "shard_001", "shard_002"]


def test_dagster_definitions_validate_passes() -> None:
    dagster = Path(sys.executable).parent / "dagster"
    res = subprocess.run([str(dagster), "definitions", "validate", "-w", "workspace.yaml"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    assert "All code locations passed validation" in res.stderr + res.stdout


def test_partition_keys_round_trip_under_direct_invocation() -> None:
    key = partition_key("c0007", 2)
    assert str(key) == "c0007|shard_002"
    context = dg.build_asset_context(partition_key=str(key))
    assert cycle_and_shard(context) == ("c0007", 2)  # type: ignore[arg-type]


def test_next_cycle_key_is_sortable_and_ignores_foreign_keys() -> None:
    assert next_cycle_key([]) == "c0001"
    assert next_cycle_key(["c0001", "c0009", "manual"]) == "c0010"
    assert next_cycle_key([f"c{n:04d}" for n in range(1, 10)]) == "c0010"  # sorts after c0009


# What a user reading the UI cannot act on: design-document chapters, issue numbers, private
# function names, our source files.
INTERNAL = re.compile(r"\bseed 00\d|\bch\. \d|\bissue \d|\b_[a-z][a-z_]*\b|\.py\b|first round",
                      re.I)  # fmt: skip


def ui_descriptions(d: dg.Definitions) -> Iterator[tuple[str, str]]:
    """(where, text) for every description the UI shows: assets and their columns, checks,
    jobs, their ops and op config fields, schedules, sensors, resources and their fields."""
    for assets_def in d.assets or []:
        assert isinstance(assets_def, dg.AssetsDefinition)
        for spec in assets_def.specs:
            yield f"asset {spec.key.to_user_string()}", spec.description or ""
            schema = spec.metadata.get("dagster/column_schema")
            for col in schema.columns if isinstance(schema, dg.TableSchema) else []:
                yield f"column {spec.key.to_user_string()}.{col.name}", col.description or ""
    for checks_def in d.asset_checks or []:
        assert isinstance(checks_def, dg.AssetChecksDefinition)
        for check in checks_def.check_specs:
            yield f"check {check.name}", check.description or ""
    for job in d.resolve_all_job_defs():
        yield f"job {job.name}", job.description or ""
        for node in job.graph.node_defs:
            yield f"op {node.name}", node.description or ""
            config = node.config_schema.config_type if node.config_schema else None
            for name, field in getattr(config, "fields", {}).items():
                yield f"op {node.name} config {name}", field.description or ""
    for schedule in d.schedules or []:
        yield f"schedule {schedule.name}", schedule.description or ""
    for sensor in d.sensors or []:
        yield f"sensor {sensor.name}", sensor.description or ""
    for key, resource in (d.resources or {}).items():
        yield f"resource {key}", type(resource).__doc__ or ""
        for name, info in type(resource).model_fields.items():
            yield f"resource {key}.{name}", info.description or ""


def test_ui_descriptions_name_nothing_internal(config_env: Path) -> None:
    found = list(ui_descriptions(defs()))
    # the walk reaches every kind of description, so a pattern cannot hide in a kind it skips
    kinds = {where.split()[0] for where, _ in found}
    assert {"asset", "column", "check", "job", "op", "schedule", "sensor", "resource"} <= kinds
    assert any(" config " in where for where, _ in found)
    found += [(f"dbt {where}", text) for where, text in ui_descriptions(dbt_definitions.defs())]
    internal = [(where, m.group(0)) for where, text in found if (m := INTERNAL.search(text))]
    assert internal == []


def test_the_internal_pattern_catches_what_it_is_for() -> None:
    for text in ("see seed 001 ch. 13", "issue 42", "done in _commit_rest()", "_commit_rest does", "crawl.py does",
                 "in the first round"):  # fmt: skip
        assert INTERNAL.search(text), text
    assert not INTERNAL.search("An HTML report: 1.0 s gaps, robots.txt, min_gap_s, target_s, ch.")
