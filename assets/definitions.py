"""The crawl's Definitions (code location `atlas`), which workspace.yaml, `dagster dev` and the
`atlas` CLI load; the dbt models are their own location (`dbt_definitions.py`)."""

from __future__ import annotations

import os

import dagster as dg

from atlas_pipeline.config import ENV_CONFIG, ENV_DATA_DIR, CrawlConfig, load_config
from resources.config import AtlasCrawl

from .checks import build_checks, build_recency_checks
from .crawl import TABLES, build_crawl_assets
from .operator import OPERATOR_JOBS, retention_schedule
from .partitions import crawl_partitions
from .sensors import build_cycle_sensor, build_freshness_schedule, index_delivery
from .warc import build_warc_asset

CRAWL_JOB = "crawl_cycle_job"
FRESHNESS_JOB = "freshness_checks_job"
WARC_JOB = "warc_export_job"


def build_definitions(
    cfg: CrawlConfig, config_path: str | None, data_dir: str | None
) -> dg.Definitions:
    partitions = crawl_partitions(cfg.shards)
    crawl_assets = build_crawl_assets(partitions)
    recency = build_recency_checks(TABLES)
    job = dg.define_asset_job(
        CRAWL_JOB,
        # the table checks judge whole tables, not a partition: they run on their own job
        selection=dg.AssetSelection.assets(*crawl_assets) - dg.AssetSelection.checks(*recency),
        description="One crawl cycle for one origin shard: frontier, fetch batch, URL catalogue.",
        executor_def=dg.in_process_executor,
    )
    freshness_job = dg.define_asset_job(
        FRESHNESS_JOB,
        selection=dg.AssetSelection.checks(*recency),
        description="Every lake table's table_recency check.",
        executor_def=dg.in_process_executor,
    )
    warc = build_warc_asset(partitions)
    warc_job = dg.define_asset_job(
        WARC_JOB,
        selection=dg.AssetSelection.assets(warc),
        description="WARC/1.1 files of a crawl partition's fetches (not part of a crawl).",
        executor_def=dg.in_process_executor,
    )
    return dg.Definitions(
        # warc_files is not in crawl_assets, so not in the crawl job: crawls never pay for it
        assets=[*crawl_assets, warc],
        asset_checks=[*build_checks(partitions), *recency],
        jobs=[job, freshness_job, warc_job, *OPERATOR_JOBS],
        schedules=[build_freshness_schedule(FRESHNESS_JOB), retention_schedule(cfg.retention.cron)],
        sensors=[index_delivery, build_cycle_sensor(CRAWL_JOB)],
        resources={"atlas": AtlasCrawl(config_path=config_path, data_dir=data_dir)},
    )


@dg.definitions
def defs() -> dg.Definitions:
    """Read the environment once, here, never at import time."""
    config_path = os.environ.get(ENV_CONFIG) or None
    data_dir = os.environ.get(ENV_DATA_DIR) or None
    cfg = load_config(config_path, dict(os.environ))
    return build_definitions(cfg, config_path, data_dir)
