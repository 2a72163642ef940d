"""Atlas crawl engine: plain Python, no dagster import. Dagster wires these calls."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

# The names below are imported when first asked for: an extraction worker imports
# atlas_pipeline.parsing, and eager re-exports loaded the whole engine into every worker
# (polars, pyarrow, deltalake, SQLAlchemy, aiohttp: about 150 MiB of each worker's RSS).
_HOME = {
    "CrawlConfig": "config", "load_config": "config",
    "Engine": "crawl", "FetchResult": "crawl", "export_urls": "crawl", "fetch_shard": "crawl",
    "plan_frontier": "crawl",
    "AtlasError": "errors", "ConfigError": "errors", "CoordinationError": "errors",
    "EgressRefused": "errors", "LakeError": "errors", "StaleAttempt": "errors",
    "Lake": "lake", "Reason": "reasons",
    "normalize": "urls", "origin_of": "urls", "shard_key": "urls", "shard_of": "urls",
}  # fmt: skip


def __getattr__(name: str) -> Any:
    if name in _HOME:
        return getattr(importlib.import_module(f".{_HOME[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
