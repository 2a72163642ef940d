"""Stop conditions of one crawl (`atlas crawl --max-pages/--max-seconds/--max-errors`), like
Scrapy's CLOSESPIDER_PAGECOUNT, _TIMEOUT and _ERRORCOUNT: the rule is pure; the counts come
from what the crawl's partitions committed, in the store and in the lake.

A crawl that meets one stops its runs the way Ctrl-C does (requests in flight finish and are
committed, the rest goes back to the queue) and starts no further cycle; the next `atlas
crawl` finishes the partitions it left, as after any interrupt.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import polars as pl

from .urls import shard_key

if TYPE_CHECKING:
    from .crawl import Engine


@dataclass(frozen=True)
class StopLimits:
    max_pages: int | None = None  # fetches committed (pages, robots.txt, sitemaps)
    max_seconds: float | None = None  # since the crawl started
    max_errors: int | None = None  # fetches that failed: no response, or a 5xx

    def __bool__(self) -> bool:
        return any(v is not None for v in (self.max_pages, self.max_seconds, self.max_errors))


@dataclass(frozen=True)
class CrawlCounts:
    fetches: int
    errors: int
    elapsed_s: float


def stop_reason(limits: StopLimits, counts: CrawlCounts) -> str | None:
    """Why the crawl stops now, or None: the first limit reached, in the order pages, time,
    errors."""
    if limits.max_pages is not None and counts.fetches >= limits.max_pages:
        return f"--max-pages {limits.max_pages} reached ({counts.fetches} fetches)"
    if limits.max_seconds is not None and counts.elapsed_s >= limits.max_seconds:
        return f"--max-seconds {limits.max_seconds:g} reached ({counts.elapsed_s:.1f} s)"
    if limits.max_errors is not None and counts.errors >= limits.max_errors:
        return f"--max-errors {limits.max_errors} reached ({counts.errors} failed fetches)"
    return None


def is_error(status: Any) -> bool:
    return status is None or int(status) >= 500


def crawl_counts(
    engine: Engine,
    partitions: Collection[tuple[str, int]],
    elapsed_s: float,
    count_errors: bool = True,
) -> CrawlCounts:
    """Fetches and failed fetches committed by `partitions` so far: the records still in the
    store, plus the lake rows of those whose write is recorded (a write moves them out).
    Without `count_errors` the store's records are counted, not read (errors reported 0)."""
    fetches = errors = 0
    written: set[tuple[str, str]] = set()
    for cycle, shard in partitions:
        if count_errors:
            for row in engine.store.fetch_records(cycle, shard, ("record",)):
                fetches += 1
                errors += is_error(row["record"].get("status"))
        else:
            fetches += engine.store.fetch_record_count(cycle, shard)
        if engine.store.lake_write(cycle, shard) is not None:
            written.add((cycle, shard_key(shard)))
    if written and engine.lake.exists("fetches"):
        cycles = sorted({c for c, _ in written})
        rows = (
            pl.scan_delta(engine.lake.uri("fetches"), storage_options=engine.lake.storage_options)
            .filter(pl.col("crawl_cycle").is_in(cycles))
            .select("crawl_cycle", "origin_shard", "status")
            .collect()
        )
        keys = pl.DataFrame(sorted(written), schema=["crawl_cycle", "origin_shard"], orient="row")
        rows = rows.join(keys, on=["crawl_cycle", "origin_shard"], how="semi")
        fetches += rows.height
        errors += int((rows["status"].is_null() | (rows["status"] >= 500)).sum())
    return CrawlCounts(fetches, errors, elapsed_s)
