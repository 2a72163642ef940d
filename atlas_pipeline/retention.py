"""Retention per data class (seed 000 ch. 15): nothing is kept forever by default.

- Raw bodies: the body references of fetch records older than `retention.body_days` expire;
  the orphan sweep then deletes each body nobody references (a newer fetch, a URL's current
  content) and nobody put during the grace period, with the rename-and-recheck that keeps a
  body a worker is committing right now (seed 001 ch. 13).
- Document versions older than `retention.document_days` that a newer version of the same URL
  superseded go from the lake, with their links, cluster labels and outbox events.
- Suppressions are purged again: whatever in-flight work left since the opt-out goes too.
  Suppression records themselves are never removed here: an opt-out outlives its data.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import polars as pl

from .coordination import Suppression
from .crawl import Engine
from .optout import purge_again

DAY_S = 86_400.0
_DELETE_CHUNK = 500  # fetch ids per Delta delete predicate


@dataclass
class RetentionReport:
    body_refs_expired: int = 0
    bodies_deleted: int = 0
    bytes_freed: int = 0
    documents_deleted: int = 0
    lake_rows: dict[str, int] = field(default_factory=dict)
    suppressions_repurged: int = 0


def run_retention(
    engine: Engine, who: str = "retention", now: float | None = None
) -> RetentionReport:
    now = time.time() if now is None else now
    cfg, store = engine.cfg, engine.store
    report = RetentionReport()
    for s in store.suppressions():
        purge_again(engine, Suppression(s["scope"], s["value"]), who)
        report.suppressions_repurged += 1
    report.body_refs_expired = store.expire_bodies(now - cfg.retention.body_days * DAY_S)
    # the grace covers a body put by a batch whose commit has not landed yet
    swept = engine.bodies.sweep_orphans(store.referenced_bodies, 2 * cfg.lease_s, now)
    report.bodies_deleted, report.bytes_freed = swept.deleted, swept.bytes
    old = superseded_documents(engine, now - cfg.retention.document_days * DAY_S)
    report.documents_deleted = len(old)
    for table in ("documents", "links", "dedupe_clusters", "index_ready"):
        report.lake_rows[table] = _delete_fetches(engine, table, old)
    report.lake_rows["document_texts"] = engine.lake.prune_texts() if old else 0
    store.audit("retention", "all", "*",
                f"{report.body_refs_expired} body references expired, {report.bodies_deleted} "
                f"bodies deleted, {report.documents_deleted} superseded documents deleted "
                f"({report.lake_rows})", who, now)  # fmt: skip
    return report


def superseded_documents(engine: Engine, before: float) -> list[str]:
    """Fetch ids of document versions older than `before` with a newer version of their URL."""
    docs = engine.lake.read("documents").select("fetch_id", "url", "fetched_at")
    if docs.is_empty():
        return []
    cutoff = pl.lit(before * 1_000_000).cast(pl.Int64).cast(pl.Datetime("us", "UTC"))
    old = docs.with_columns(newest=pl.col("fetched_at").max().over("url")).filter(
        (pl.col("fetched_at") < cutoff) & (pl.col("fetched_at") < pl.col("newest"))
    )
    return sorted(old["fetch_id"].to_list())


def _delete_fetches(engine: Engine, table: str, fetch_ids: list[str]) -> int:
    deleted = 0
    for i in range(0, len(fetch_ids), _DELETE_CHUNK):
        listed = ", ".join(
            "'" + f.replace("'", "''") + "'" for f in fetch_ids[i : i + _DELETE_CHUNK]
        )
        deleted += engine.lake.delete(table, f"fetch_id IN ({listed})")
    return deleted
