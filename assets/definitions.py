"""The Definitions that workspace.yaml, `dagster dev` and the `atlas` CLI load."""

from __future__ import annotations

import os

import dagster as dg

from atlas_pipeline.config import ENV_CONFIG, ENV_DATA_DIR, CrawlConfig, load_config
from resources.config import AtlasCrawl

from .checks import build_checks
from .crawl import build_crawl_assets
from .partitions import crawl_partitions
from .sensors import index_delivery

CRAWL_JOB = "crawl_cycle_job"


def build_definitions(
    cfg: CrawlConfig, config_path: str | None, data_dir: str | None
) -> dg.Definitions:
    partitions = crawl_partitions(cfg.shards)
    crawl_assets = build_crawl_assets(partitions)
    job = dg.define_asset_job(
        CRAWL_JOB,
        selection=dg.AssetSelection.assets(*crawl_assets),
        description="One crawl cycle for one origin shard: frontier, fetch batch, URL catalogue.",
        executor_def=dg.in_process_executor,
    )
    return dg.Definitions(
        assets=crawl_assets,
        asset_checks=build_checks(partitions),
        jobs=[job],
        sensors=[index_delivery],
        resources={"atlas": AtlasCrawl(config_path=config_path, data_dir=data_dir)},
    )


@dg.definitions
def defs() -> dg.Definitions:
    """Read the environment once, here, never at import time."""
    config_path = os.environ.get(ENV_CONFIG) or None
    data_dir = os.environ.get(ENV_DATA_DIR) or None
    cfg = load_config(config_path, dict(os.environ))
    from resources.dbt import build_dbt_defs

    return dg.Definitions.merge(
        build_definitions(cfg, config_path, data_dir), build_dbt_defs(str(cfg.lake_path))
    )
