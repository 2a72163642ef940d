"""Atlas crawl engine: plain Python, no dagster import. Dagster wires these calls."""

from __future__ import annotations

from .config import CrawlConfig, load_config
from .crawl import Engine, FetchResult, export_urls, fetch_shard, plan_frontier
from .errors import (
    AtlasError,
    ConfigError,
    CoordinationError,
    EgressRefused,
    LakeError,
    StaleAttempt,
)
from .lake import Lake
from .reasons import Reason
from .urls import normalize, origin_of, shard_key, shard_of

__all__ = [
    "AtlasError",
    "ConfigError",
    "CoordinationError",
    "CrawlConfig",
    "EgressRefused",
    "Engine",
    "FetchResult",
    "Lake",
    "LakeError",
    "Reason",
    "StaleAttempt",
    "export_urls",
    "fetch_shard",
    "load_config",
    "normalize",
    "origin_of",
    "plan_frontier",
    "shard_key",
    "shard_of",
]
