"""Asset metadata that makes the Dagster UI useful: where the links partition cut traps, which
numbers it plots (rounded measures, never constants), and the columns it describes."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import dagster as dg
import polars as pl
import pytest

from assets.crawl import _dedupe_meta, _fetch_meta, _link_meta, _schedule_meta
from assets.definitions import build_definitions
from assets.metadata import column_schema, table_metadata
from atlas_pipeline.batch import BatchStats
from atlas_pipeline.config import CrawlConfig, load_config
from atlas_pipeline.coordination import BatchLease
from atlas_pipeline.crawl import Engine, FetchResult
from atlas_pipeline.lake_columns import COLUMN_DESCRIPTIONS
from atlas_pipeline.lake_schema import SCHEMAS
from resources.config import AtlasCrawl
from tests.conftest import write_config


def test_link_metadata_counts_reasons_and_trap_cuts_per_host() -> None:
    links = pl.DataFrame(
        {
            "url": [f"http://calendar.example.test:8080/calendar/2030/{m}" for m in range(1, 6)]
            + ["http://shop.example.test:8080/shop?color=red&size=m", "http://a.test/x"],
            "reason": ["calendar_cap"] * 5 + ["query_variant_cap", "admitted"],
        }
    )
    meta = _link_meta(links)
    assert meta["reasons"].data == {"calendar_cap": 5, "query_variant_cap": 1, "admitted": 1}
    table = meta["trap_cuts"]
    assert isinstance(table, dg.TableMetadataValue)
    rows = [r.data for r in table.records]
    assert rows[0] == {"host": "calendar.example.test:8080", "reason": "calendar_cap",
                       "links_cut": 5}  # fmt: skip
    assert _link_meta(links.filter(pl.col("reason") == "admitted"))["trap_cuts"].text == "none"


# Every numeric metadata entry becomes a plot over time in the Dagster UI. The rule: a number
# is either a count or a measure that varies from run to run (one of MEASURES), and a float
# has at most 3 decimals; configured limits and ids are text (CONSTANTS), never numbers.
MEASURES = frozenset({
    # checks
    "age_s", "origins", "violations", "pages", "without_robots_policy", "documents", "empty",
    "text_yield", "origins_over_bound",
    # table metadata
    "dagster/partition_row_count", "dagster/row_count",
    # fetch batch
    "store_outages", "requests", "stale_commits", "deferred_urls", "batch_seconds",
    "pages_per_second", "conditional_requests", "not_modified_304", "urls_per_claim",
    # dedupe, schedule
    "urls", "near_duplicate_clusters", "dedupe_ratio", "untrusted_validator_urls",
})  # fmt: skip
CONSTANTS = frozenset({"max_age_s", "min_gap_s", "max_stale_share", "min_text_yield",
                       "batch_fence", "superseded_by_fence", "delta_version"})  # fmt: skip


def _number(value: Any) -> float | None:
    if isinstance(value, dg.IntMetadataValue | dg.FloatMetadataValue):
        value = value.value
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value


def plotting_mistakes(metadata: Mapping[str, Any]) -> list[str]:
    out = []
    for key, value in metadata.items():
        number = _number(value)
        if key in CONSTANTS and not isinstance(value, dg.TextMetadataValue):
            out.append(f"{key}: a constant or id must be text, not {value!r}")
        if number is None:
            continue
        if key not in MEASURES:
            out.append(f"{key}: numeric but not a count or varying measure ({number!r})")
        if isinstance(number, float) and round(number, 3) != number:
            out.append(f"{key}: {number!r} has more than 3 decimals")
    return out


def test_the_plotting_rule_catches_constants_and_long_floats() -> None:
    assert plotting_mistakes({"max_age_s": 3600.0, "text_yield": 0.66667, "limit": 5}) == [
        "max_age_s: a constant or id must be text, not 3600.0",
        "max_age_s: numeric but not a count or varying measure (3600.0)",
        "text_yield: 0.66667 has more than 3 decimals",
        "limit: numeric but not a count or varying measure (5)",
    ]
    assert plotting_mistakes({"max_age_s": dg.MetadataValue.text("3600 s"), "urls": 3}) == []


def _fetch_rows() -> list[dict[str, Any]]:
    return [{"fetch_id": f"f{i}", "kind": "page", "url": f"http://a.test/{i}",
             "origin": "http://a.test", "status": 200, "reason": "fetched",
             "started_at": 1_700_000_000.0 + 1.2345 * i, "elapsed_s": 0.1234567,
             "robots_version": 1, "conditional": False, "bytes": 7} for i in range(3)]  # fmt: skip


@pytest.fixture()
def lake_partition(tmp_path: Path) -> tuple[CrawlConfig, Path]:
    """One partition of fetches, documents and schedule rows whose shares do not round."""
    path = write_config(tmp_path / "atlas.yaml", {"seeds": ["http://a.test/"],
                                                  "data_dir": str(tmp_path), "shards": 1})  # fmt: skip
    cfg = load_config(path)
    lake = Engine.from_config(cfg).lake
    lake.write_partition("fetches", _fetch_rows(), "c0001", "shard_000", fence=1)
    lake.write_partition("documents", [
        {"fetch_id": f"f{i}", "url": f"http://a.test/{i}", "origin": "http://a.test",
         "text_hash": f"h{i}", "text_chars": 5 * i, "extraction_version": "1"}
        for i in range(3)], "c0001", "shard_000", fence=1)  # fmt: skip
    lake.write_partition("recrawl_schedule", [
        {"url": f"http://a.test/{i}", "freshness_class": "default", "staleness_s": 1000.0 * i,
         "target_s": 1500.0, "stale": i == 2, "interval_s": 7.0 / 3, "validators_trusted": True,
         "reason": "adaptive"}
        for i in range(3)], "c0001", "shard_000")  # fmt: skip
    return cfg, path


def test_check_results_plot_only_rounded_measures(lake_partition: tuple[CrawlConfig, Path]) -> None:
    cfg, path = lake_partition
    d = build_definitions(cfg, str(path), None)
    atlas = AtlasCrawl(config_path=str(path))
    context = dg.build_asset_context(partition_key="c0001|shard_000")
    results: dict[str, dg.AssetCheckResult] = {}
    for check in d.asset_checks or []:
        assert isinstance(check, dg.AssetChecksDefinition)
        (spec,) = check.check_specs
        # direct invocation: the partitioned ones take the partition from the context
        result = check(context, atlas=atlas) if check.partitions_def else check(atlas=atlas)
        assert isinstance(result, dg.AssetCheckResult)
        results[spec.name] = result
    assert {"politeness_audit", "robots_respected", "documents_have_text",
            "freshness_by_class", "table_recency"} <= set(results)  # fmt: skip
    mistakes = [(name, m) for name, r in results.items() for m in plotting_mistakes(r.metadata)]
    assert mistakes == []
    assert results["documents_have_text"].metadata["text_yield"].value == 0.667  # 2 of 3


def test_asset_metadata_plots_only_rounded_measures(
    lake_partition: tuple[CrawlConfig, Path],
) -> None:
    cfg, _ = lake_partition
    engine = Engine.from_config(cfg)
    written = engine.lake.write_partition("fetches", _fetch_rows(), "c0001", "shard_000", fence=4)
    fetches = engine.lake.read_partition("fetches", "c0001", "shard_000")
    stats = BatchStats("c0001", 0, started_at=0.0, finished_at=7.0, requests=3)
    lease = BatchLease("c0001", 0, 4, "run")
    result = FetchResult(stats, lease, written, written, written, written, written)
    schedule = engine.lake.read_partition("recrawl_schedule", "c0001", "shard_000")
    clusters = pl.DataFrame({"url": ["a", "b", "c"], "document_id": ["x", "x", "y"],
                             "cluster_id": ["x", "x", "y"]})  # fmt: skip
    for metadata in (table_metadata(engine.lake, written, _fetch_meta(fetches, stats, result)),
                     _schedule_meta(schedule), _dedupe_meta(clusters)):  # fmt: skip
        assert plotting_mistakes(metadata) == []
    assert _dedupe_meta(clusters)["dedupe_ratio"] == 0.333


def test_the_column_schema_carries_every_columns_description() -> None:
    for table, columns in SCHEMAS.items():
        schema = column_schema(table)
        assert [c.name for c in schema.columns] == list(columns)
        assert all(c.description == COLUMN_DESCRIPTIONS[table][c.name] for c in schema.columns)
    types = {c.name: c.type for c in column_schema("fetches").columns}
    assert (types["started_at"], types["redirect_chain"], types["bytes"]) == (
        "timestamp",
        "list<string>",
        "int",
    )
