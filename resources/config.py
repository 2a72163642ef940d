"""The crawl config as a Dagster resource: one YAML file (plus env overrides) configures all."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import dagster as dg
from pydantic import Field

from atlas_pipeline.config import ENV_DATA_DIR, CrawlConfig, load_config
from atlas_pipeline.crawl import Engine


class AtlasCrawl(dg.ConfigurableResource):  # type: ignore[misc]
    """Loads the crawl config and opens the engine (coordination store, body store, lake)."""

    config_path: str | None = Field(
        default=None,
        description="Crawl config YAML; unset = $ATLAS_CONFIG, else built-in defaults.",
    )
    data_dir: str | None = Field(
        default=None, description="Overrides the config's data_dir (like $ATLAS_DATA_DIR)."
    )

    def crawl_config(self) -> CrawlConfig:
        env = dict(os.environ)
        if self.data_dir:
            env[ENV_DATA_DIR] = self.data_dir
        return load_config(self.config_path, env)

    @contextmanager
    def open(self) -> Iterator[Engine]:
        engine = Engine.from_config(self.crawl_config())
        try:
            yield engine
        finally:
            engine.close()
