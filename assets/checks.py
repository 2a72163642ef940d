"""Safety checks on each fetch partition, evaluated from the data (not from the code's intent)."""

import time
import warnings

import dagster as dg
import polars as pl
from dagster._utils.warnings import PreviewWarning

from atlas_pipeline.audit import politeness_violations
from atlas_pipeline.lake import Lake
from atlas_pipeline.regions.audit import handoff_overshoot as overshoot_report
from atlas_pipeline.robots import RobotsPolicy, RobotsStatus
from atlas_pipeline.urls import shard_key
from resources.config import AtlasCrawl

from .crawl import DOCUMENTS, FETCHES, OWNERSHIP, RECRAWL_SCHEDULE
from .metadata import frame_table
from .partitions import cycle_and_shard

__all__ = ["politeness_violations"]  # the audit's rule, re-exported for its tests

_MIN_TEXT_YIELD = 0.9  # share of documents with text below which extraction is suspect


def _setting(value: float, unit: str = "") -> dg.TextMetadataValue:
    """A configured limit as text: the UI plots every numeric entry over time, and a
    constant's plot is a flat line that only hides the measures beside it."""
    return dg.MetadataValue.text(f"{value:g} {unit}".strip())


def staleness_by_class(schedule: pl.DataFrame, max_stale_share: float) -> pl.DataFrame:
    """Per freshness class: URLs, how many are stale (not checked within the class target)
    and whether that share is within `max_stale_share`."""
    out = (
        schedule.group_by("freshness_class")
        .agg(urls=pl.len(), stale=pl.col("stale").sum().cast(pl.Int64),
             target_h=(pl.col("target_s").first() / 3600).round(2),
             oldest_check_h=(pl.col("staleness_s").max() / 3600).round(2))
        .with_columns(stale_share=(pl.col("stale") / pl.col("urls")).round(4))
        .sort("freshness_class")
    )  # fmt: skip
    return out.with_columns(ok=pl.col("stale_share") <= max_stale_share)


def build_recency_checks(tables: dict[str, dg.AssetKey]) -> list[dg.AssetChecksDefinition]:
    """One `table_recency` check per lake table: its last write is at most
    `freshness.table_max_age_s` old. Not partitioned: it judges the table as analysts see it."""
    return [_recency_check(table, key) for table, key in tables.items()]


def _recency_check(table: str, key: dg.AssetKey) -> dg.AssetChecksDefinition:
    @dg.asset_check(asset=key, name="table_recency", blocking=False)
    def table_recency(atlas: AtlasCrawl) -> dg.AssetCheckResult:
        """The table was written within `freshness.table_max_age_s`."""
        cfg = atlas.crawl_config()
        with atlas.open() as engine:
            written_at = engine.lake.last_write_at(table)
        age = None if written_at is None else time.time() - written_at
        limit = cfg.freshness.table_max_age_s
        return dg.AssetCheckResult(
            passed=age is not None and age <= limit,
            # no age for a table never written: a made-up -1 would be a point on its plot
            metadata={**({} if age is None else {"age_s": round(age, 1)}),
                      "max_age_s": _setting(limit, "s"), "never_written": age is None},
        )  # fmt: skip

    return table_recency


def build_checks(partitions: dg.MultiPartitionsDefinition) -> list[dg.AssetChecksDefinition]:
    # Partitioned asset checks are a Dagster preview feature; we rely on it knowingly (one
    # check result per crawl partition), so it need not warn on every code-location load.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=PreviewWarning)
        return _build_checks(partitions)


def _build_checks(partitions: dg.MultiPartitionsDefinition) -> list[dg.AssetChecksDefinition]:
    @dg.asset_check(asset=FETCHES, partitions_def=partitions, blocking=False)
    def politeness_audit(
        context: dg.AssetCheckExecutionContext, atlas: AtlasCrawl
    ) -> dg.AssetCheckResult:
        """No origin got two request starts closer than its own gap, or more in flight than its
        own cap (Crawl-delay and operator floors included, as the store applied them)."""
        cycle, shard = cycle_and_shard(context)  # type: ignore[arg-type]
        cfg = atlas.crawl_config()
        with atlas.open() as engine:
            fetches = engine.lake.read_partition("fetches", cycle, shard_key(shard))
            # each origin's own limits as the store held them (Crawl-delay, operator floor)
            limits = pl.DataFrame(engine.store.origin_rows(shard)) if fetches.height else None
        report = politeness_violations(
            fetches, cfg.politeness.min_gap_s, cfg.politeness.max_in_flight, limits
        )
        bad = report.filter(~pl.col("ok"))
        return dg.AssetCheckResult(
            passed=bad.height == 0,
            metadata={"origins": report.height, "violations": bad.height,
                      "min_gap_s": _setting(cfg.politeness.min_gap_s, "s"),
                      "per_origin": frame_table(report)},
        )  # fmt: skip

    @dg.asset_check(asset=FETCHES, partitions_def=partitions, blocking=False)
    def robots_respected(
        context: dg.AssetCheckExecutionContext, atlas: AtlasCrawl
    ) -> dg.AssetCheckResult:
        """Every page request came after its origin's robots.txt and was allowed by the policy
        version recorded on it (checked against the stored rules of that version)."""
        cycle, shard = cycle_and_shard(context)  # type: ignore[arg-type]
        cfg = atlas.crawl_config()
        with atlas.open() as engine:
            fetches = engine.lake.read_partition("fetches", cycle, shard_key(shard))
            pages = fetches.filter(pl.col("kind").is_in(["page", "sitemap"]))
            unversioned = pages.filter(pl.col("robots_version").is_null()).height
            disallowed: list[str] = []
            for origin in pages["origin"].unique().to_list():
                rec = engine.store.robots(origin)
                if rec is None:
                    continue
                policy = RobotsPolicy(origin, rec.version, RobotsStatus(rec.status), rec.text)
                same = pages.filter(
                    (pl.col("origin") == origin) & (pl.col("robots_version") == rec.version)
                )
                disallowed += [
                    u for u in same["url"].to_list() if not policy.allows(u, cfg.robots_token)
                ]
        return dg.AssetCheckResult(
            passed=unversioned == 0 and not disallowed,
            metadata={"pages": pages.height, "without_robots_policy": unversioned,
                      "disallowed_fetched": dg.MetadataValue.json(disallowed[:50])},
        )  # fmt: skip

    @dg.asset_check(asset=DOCUMENTS, partitions_def=partitions, blocking=False)
    def documents_have_text(
        context: dg.AssetCheckExecutionContext, atlas: AtlasCrawl
    ) -> dg.AssetCheckResult:
        """Extraction yield: at least 90% of the partition's documents have non-empty text
        (a warning below that)."""
        cycle, shard = cycle_and_shard(context)  # type: ignore[arg-type]
        with atlas.open() as engine:
            docs = engine.lake.read_partition("documents", cycle, shard_key(shard))
        empty = docs.filter(pl.col("text_chars") == 0).height
        share = 1.0 - empty / docs.height if docs.height else 1.0
        return dg.AssetCheckResult(
            passed=share >= _MIN_TEXT_YIELD,
            severity=dg.AssetCheckSeverity.WARN,
            metadata={"documents": docs.height, "empty": empty, "text_yield": round(share, 3),
                      "min_text_yield": _setting(_MIN_TEXT_YIELD)},
        )  # fmt: skip

    @dg.asset_check(asset=RECRAWL_SCHEDULE, partitions_def=partitions, blocking=False)
    def freshness_by_class(
        context: dg.AssetCheckExecutionContext, atlas: AtlasCrawl
    ) -> dg.AssetCheckResult:
        """In every freshness class, at most `freshness.max_stale_share` of the checked URLs
        went unchecked for longer than the class target: judged per class, because one
        average over all URLs can hide neglected sites."""
        cycle, shard = cycle_and_shard(context)  # type: ignore[arg-type]
        cfg = atlas.crawl_config()
        with atlas.open() as engine:
            schedule = engine.lake.read_partition("recrawl_schedule", cycle, shard_key(shard))
        report = staleness_by_class(schedule, cfg.freshness.max_stale_share)
        failing = report.filter(~pl.col("ok"))["freshness_class"].to_list()
        return dg.AssetCheckResult(
            passed=not failing,
            metadata={"max_stale_share": _setting(cfg.freshness.max_stale_share),
                      "failing_classes": dg.MetadataValue.json(failing),
                      "per_class": frame_table(report)},
        )  # fmt: skip

    @dg.asset_check(asset=OWNERSHIP, partitions_def=partitions, blocking=False)
    def handoff_overshoot(
        context: dg.AssetCheckExecutionContext, atlas: AtlasCrawl
    ) -> dg.AssetCheckResult:
        """Regions: every origin judged on the requests of all regions (this lake's and those
        of regions.peer_lakes): an exclusive origin got no more requests beyond its gap than
        the handoff bound atlas config prints, a split origin none beyond each region's
        share. Passes with nothing to judge for a single region."""
        cycle, shard = cycle_and_shard(context)  # type: ignore[arg-type]
        cfg = atlas.crawl_config()
        key = shard_key(shard)
        with atlas.open() as engine:
            fetches = {cfg.regions.name or "-": engine.lake.read_partition("fetches", cycle, key)}
            gaps = {r["origin"]: float(r["min_gap_s"]) for r in engine.store.origin_rows(shard)}
        for region, root in cfg.regions.peer_lakes.items():
            fetches[region] = Lake(root, cfg.lake_options).read_partition("fetches", cycle, key)
        report = overshoot_report(fetches, cfg, gaps) if cfg.regions.name else None
        bad = report.filter(~pl.col("ok")) if report is not None else None
        return dg.AssetCheckResult(
            passed=bad is None or bad.height == 0,
            metadata={"regions": dg.MetadataValue.json(sorted(fetches)),
                      "origins_over_bound": 0 if bad is None else bad.height,
                      **({"per_origin": frame_table(report)} if report is not None else {})},
        )  # fmt: skip

    return [politeness_audit, robots_respected, documents_have_text, freshness_by_class,
            handoff_overshoot]  # fmt: skip
