"""One crawl cycle as engine calls: plan the frontier, fetch a shard, export the catalogue.

Dagster assets and the CLI call these; each writes exactly its own Delta partition, derived
from the coordination store, so any step can be re-run after a crash with the same result.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from .batch import BatchStats, run_batch
from .bodies import BodyStore
from .config import CrawlConfig
from .coordination import CoordinationStore, OriginPolicy, open_store
from .lake import Lake, Written
from .parsing import ExtractorPool
from .scope import ScopeGuard
from .urls import shard_key


@dataclass
class Engine:
    """The engine objects one crawl config builds."""

    cfg: CrawlConfig
    store: CoordinationStore
    bodies: BodyStore
    lake: Lake

    @classmethod
    def from_config(cls, cfg: CrawlConfig) -> Engine:
        politeness = cfg.politeness
        policy = OriginPolicy(
            politeness.min_gap_s, politeness.max_in_flight, politeness.gap_guard_s
        )
        store = open_store(cfg.coordination, policy, cfg.scope.max_pages_per_origin)
        return cls(cfg, store, BodyStore(cfg.bodies_path), Lake(cfg.lake_path))

    def close(self) -> None:
        self.store.close()


def plan_frontier(engine: Engine, cycle: str, shard: int) -> tuple[list[dict[str, Any]], Written]:
    """Offer the seeds, queue this shard's due URLs for `cycle`, write the frontier snapshot."""
    # Every shard offers all seeds (insert-if-absent, so cheap): a seed must be known at
    # depth 0 before another shard's batch can discover it as a link.
    engine.store.discover(ScopeGuard(engine.cfg).seed_candidates(), cycle)
    now = time.time()
    rows = engine.store.select_frontier(cycle, shard, now)
    for row in rows:
        row["selected_at"] = now
    written = engine.lake.write_partition("frontier", rows, cycle, shard_key(shard))
    return rows, written


@dataclass(frozen=True)
class FetchResult:
    stats: BatchStats
    fetches: Written
    documents: Written
    links: Written
    fetch_rows: list[dict[str, Any]]


def fetch_shard(
    engine: Engine, cycle: str, shard: int, pool: ExtractorPool | None = None
) -> FetchResult:
    """Drain the (cycle, shard) queue, then write its fetches, documents and links."""
    if pool is None:
        # The pool lives exactly as long as the batch: a pool left running inside a worker
        # process (a run launcher's, a ProcessPoolExecutor's) keeps that process from exiting.
        with ExtractorPool(engine.cfg.extraction_workers) as own:
            stats = run_batch(engine.cfg, engine.store, engine.bodies, own, cycle, shard)
    else:
        stats = run_batch(engine.cfg, engine.store, engine.bodies, pool, cycle, shard)
    fetch_rows, docs, links = partition_rows(engine.store, cycle, shard)
    key = shard_key(shard)
    return FetchResult(
        stats=stats,
        fetches=engine.lake.write_partition("fetches", fetch_rows, cycle, key),
        documents=engine.lake.write_partition("documents", docs, cycle, key),
        links=engine.lake.write_partition("links", links, cycle, key),
        fetch_rows=fetch_rows,
    )


def partition_rows(
    store: CoordinationStore, cycle: str, shard: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """Fetch, document and link rows of one partition, from committed store records."""
    fetches, docs, links = [], [], []
    for rec in store.fetch_records(cycle, shard):
        fetch = rec["record"]
        fetches.append(fetch)
        if rec["document"]:
            docs.append(rec["document"])
        for link in rec["links"]:
            links.append(
                {"kind": "link", **link, "fetch_id": fetch["fetch_id"], "source_url": fetch["url"]}
            )
    return fetches, docs, links


def export_urls(engine: Engine, cycle: str, shard: int) -> Written:
    """Write this shard's slice of the URL catalogue as it stands after `cycle`."""
    rows = [{**r, "queued_cycle": r.pop("cycle")} for r in engine.store.url_rows(shard)]
    return engine.lake.write_shard("urls", rows, shard_key(shard), cycle)
