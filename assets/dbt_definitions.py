"""The dbt models and tests over the lake, as their own code location (`atlas_dbt` in
workspace.yaml). Apart from the crawl's location because importing dbt costs every process
that loads a location about 1.2 s, and every crawl run loads the crawl's; the models still
read the crawl's tables by their asset keys, so the lineage crosses locations in the UI."""

from __future__ import annotations

import os

import dagster as dg

from atlas_pipeline.config import ENV_CONFIG, load_config


@dg.definitions
def defs() -> dg.Definitions:
    """Read the environment once, here, never at import time."""
    from resources.dbt import build_dbt_defs

    cfg = load_config(os.environ.get(ENV_CONFIG) or None, dict(os.environ))
    return build_dbt_defs(cfg.lake_uri, storage_options=cfg.lake_options)
