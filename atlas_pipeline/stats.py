"""The crawl-db summary (`atlas stats`), like `nutch readdb -stats`: what the lake holds, counted.

Read from the Delta tables only, so it answers for any crawl whose lake it can open (local or
object storage) without touching the coordination store: URLs by state and reason (the
catalogue after the latest cycle), per-origin counts, fetch statuses and MIME types, documents,
dedupe clusters and the age of the open queue. With a cycle, the fetch, document and cluster
counts are that cycle's; the catalogue is always the latest.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

import polars as pl

from .lake import Lake

OPEN_STATES = ("discovered", "eligible", "failed_retryable", "leased")


@dataclass
class CrawlStats:
    cycle: str | None
    cycles: list[str]
    urls: int = 0
    url_states: dict[str, int] = field(default_factory=dict)
    url_reasons: dict[str, int] = field(default_factory=dict)
    fetches: int = 0
    fetch_kinds: dict[str, int] = field(default_factory=dict)
    fetch_statuses: dict[str, int] = field(default_factory=dict)
    fetch_reasons: dict[str, int] = field(default_factory=dict)
    mime_types: dict[str, int] = field(default_factory=dict)
    bytes: int = 0
    documents: int = 0
    clusters: int = 0
    duplicate_documents: int = 0  # documents in a cluster with another, besides its first
    origins: list[dict[str, Any]] = field(default_factory=list)
    open_urls: int = 0
    oldest_open_discovered_at: float | None = None
    queue_age_s: float | None = None  # how long the oldest open URL has waited

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def _counts(df: pl.DataFrame, column: str) -> dict[str, int]:
    if df.is_empty():
        return {}
    counted = df.group_by(column).len().sort(["len", column], descending=[True, False])
    return {str(k): int(n) for k, n in counted.iter_rows()}


def _read(lake: Lake, table: str, cycle: str | None) -> pl.DataFrame:
    if not lake.exists(table):
        return pl.DataFrame()
    df = lake.read(table)
    return df.filter(pl.col("crawl_cycle") == cycle) if cycle is not None else df


def crawl_stats(lake: Lake, cycle: str | None = None, now: float | None = None) -> CrawlStats:
    now = time.time() if now is None else now
    fetches = _read(lake, "fetches", None)
    cycles = sorted(set(fetches["crawl_cycle"])) if not fetches.is_empty() else []
    if cycle is not None:
        fetches = fetches.filter(pl.col("crawl_cycle") == cycle)
    urls = _read(lake, "urls", None)
    docs = _read(lake, "documents", cycle)
    clusters = _read(lake, "dedupe_clusters", cycle)
    out = CrawlStats(cycle=cycle, cycles=cycles)
    if not urls.is_empty():
        out.urls = urls.height
        out.url_states = _counts(urls, "state")
        out.url_reasons = _counts(urls, "reason")
        open_urls = urls.filter(pl.col("state").is_in(OPEN_STATES))
        out.open_urls = open_urls.height
        if open_urls.height and open_urls["discovered_at"].drop_nulls().len():
            oldest = open_urls["discovered_at"].drop_nulls().min()
            out.oldest_open_discovered_at = float(oldest.timestamp())  # type: ignore[union-attr]
            out.queue_age_s = round(now - out.oldest_open_discovered_at, 1)
    if not fetches.is_empty():
        out.fetches = fetches.height
        out.fetch_kinds = _counts(fetches, "kind")
        out.fetch_statuses = _counts(fetches.with_columns(pl.col("status").cast(pl.Utf8)
                                                          .fill_null("none")), "status")  # fmt: skip
        out.fetch_reasons = _counts(fetches, "reason")
        mime = fetches.filter(pl.col("content_type").is_not_null()).with_columns(
            pl.col("content_type").str.split(";").list.first().str.strip_chars().str.to_lowercase()
        )
        out.mime_types = _counts(mime, "content_type")
        out.bytes = int(fetches["bytes"].fill_null(0).sum())
    out.documents = docs.height
    if not clusters.is_empty():
        sizes = clusters.group_by("cluster_id").agg(pl.col("document_id").n_unique().alias("n"))
        out.clusters = sizes.height
        out.duplicate_documents = int((sizes["n"] - 1).clip(lower_bound=0).sum())
    out.origins = _per_origin(urls, fetches, docs)
    return out


def _per_origin(
    urls: pl.DataFrame, fetches: pl.DataFrame, docs: pl.DataFrame
) -> list[dict[str, Any]]:
    frames = []
    if not urls.is_empty():
        frames.append(urls.group_by("origin").agg(pl.len().alias("urls")))
    if not fetches.is_empty():
        frames.append(fetches.group_by("origin").agg(
            pl.len().alias("fetches"), (pl.col("status") == 200).sum().alias("ok"),
            pl.col("bytes").fill_null(0).sum().alias("bytes")))  # fmt: skip
    if not docs.is_empty():
        frames.append(docs.group_by("origin").agg(pl.len().alias("documents")))
    if not frames:
        return []
    table = frames[0]
    for other in frames[1:]:
        table = table.join(other, on="origin", how="full", coalesce=True)
    columns = ("urls", "fetches", "ok", "bytes", "documents")
    table = table.with_columns([pl.col(c).fill_null(0) for c in columns if c in table.columns])
    return [{k: (int(v) if k != "origin" else v) for k, v in row.items()}
            for row in table.sort("origin").iter_rows(named=True)]  # fmt: skip


def render_stats(s: CrawlStats) -> str:
    def block(title: str, counts: dict[str, int]) -> list[str]:
        lines = [title]
        lines += [f"  {k:<32} {v:>9,}" for k, v in counts.items()] or ["  none"]
        return [*lines, ""]

    scope = f"cycle {s.cycle}" if s.cycle else f"all cycles ({', '.join(s.cycles) or 'none'})"
    out = [f"Crawl stats, {scope}", ""]
    out.append(f"URLs known {s.urls:,} (catalogue after the latest cycle), open {s.open_urls:,}"
               + (f", oldest open waiting {s.queue_age_s / 3600:.1f} h" if s.queue_age_s else ""))  # fmt: skip
    out.append(f"Fetches {s.fetches:,} ({s.bytes / 1e6:.1f} MB), documents {s.documents:,}, "
               f"clusters {s.clusters:,} ({s.duplicate_documents:,} duplicate documents)")  # fmt: skip
    out.append("")
    out += block("URLs by state", s.url_states)
    out += block("URLs by reason", s.url_reasons)
    out += block("Fetches by kind", s.fetch_kinds)
    out += block("Fetch statuses", s.fetch_statuses)
    out += block("Fetch reasons", s.fetch_reasons)
    out += block("MIME types", s.mime_types)
    out.append(f"{'Origin':<44} {'URLs':>7} {'fetches':>8} {'200s':>7} {'MB':>8} {'documents':>10}")
    for o in s.origins:
        out.append(f"{o['origin']:<44} {o.get('urls', 0):>7,} {o.get('fetches', 0):>8,} "
                   f"{o.get('ok', 0):>7,} {o.get('bytes', 0) / 1e6:>8.2f} {o.get('documents', 0):>10,}")  # fmt: skip
    return "\n".join(out) + "\n"


BLOCK_REASONS = ("robots_disallowed", "host_not_allowed", "url_rule_denied", "max_depth",
                 "nofollow", "meta_nofollow", "url_too_long", "scheme_not_allowed",
                 "egress_refused")  # fmt: skip


@dataclass
class RunDump:
    """The end-of-crawl stats of some cycles (Scrapy's stats dump at close)."""

    cycles: list[str]
    fetches: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    bytes: int = 0
    retries: int = 0  # fetches of a URL's second or later attempt
    latency_s: dict[str, dict[str, float]] = field(default_factory=dict)  # class -> p50/p90/p99
    reasons: dict[str, int] = field(default_factory=dict)
    blocked_links: dict[str, int] = field(default_factory=dict)  # robots and scope blocks
    documents: int = 0
    duplicates: int = 0


def run_dump(lake: Lake, cycles: list[str]) -> RunDump:
    out = RunDump(cycles=cycles)
    if not cycles:
        return out
    wanted = pl.col("crawl_cycle").is_in(cycles)
    fetches = lake.read("fetches").filter(wanted) if lake.exists("fetches") else pl.DataFrame()
    if not fetches.is_empty():
        out.fetches = fetches.height
        out.statuses = _counts(fetches.with_columns(pl.col("status").cast(pl.Utf8)
                                                    .fill_null("none")), "status")  # fmt: skip
        out.bytes = int(fetches["bytes"].fill_null(0).sum())
        out.retries = int((fetches["attempt"].fill_null(1) > 1).sum())
        out.reasons = _counts(fetches, "reason")
        classes = pl.DataFrame(schema={"origin": pl.String, "fair_class": pl.String})
        if lake.exists("origins"):
            classes = lake.read("origins").select("origin", "fair_class").unique("origin")
        timed = fetches.join(classes, on="origin", how="left").with_columns(
            pl.col("fair_class").fill_null("default")
        )
        for group in (timed, *[g for _, g in timed.group_by("fair_class")]):
            name = "all" if group is timed else str(group["fair_class"][0])
            elapsed = group["elapsed_s"].drop_nulls()
            if elapsed.len():
                out.latency_s[name] = {
                    f"p{q}": round(float(elapsed.quantile(q / 100, "nearest") or 0.0), 3)
                    for q in (50, 90, 99)
                }
    if lake.exists("links"):
        links = lake.read("links").filter(wanted & pl.col("reason").is_in(BLOCK_REASONS))
        out.blocked_links = _counts(links, "reason")
    if lake.exists("documents"):
        out.documents = lake.read("documents").filter(wanted).height
    if lake.exists("dedupe_clusters"):
        clusters = lake.read("dedupe_clusters").filter(wanted)
        sizes = clusters.group_by("cluster_id").agg(pl.col("document_id").n_unique().alias("n"))
        out.duplicates = int((sizes["n"] - 1).clip(lower_bound=0).sum()) if sizes.height else 0
    return out


def render_dump(d: RunDump) -> str:
    def pairs(counts: dict[str, int]) -> str:
        return ", ".join(f"{k}={v}" for k, v in counts.items()) or "none"

    lines = [f"Crawl stats ({', '.join(d.cycles)}):",
             f"  fetches {d.fetches} ({d.bytes / 1e6:.1f} MB), retries {d.retries}, "
             f"documents {d.documents}, duplicates {d.duplicates}",
             f"  statuses: {pairs(d.statuses)}",
             f"  reasons: {pairs(d.reasons)}",
             f"  robots and scope blocks (links): {pairs(d.blocked_links)}"]  # fmt: skip
    for name, q in d.latency_s.items():
        lines.append(f"  latency {name}: p50 {q['p50']:.3f} s, p90 {q['p90']:.3f} s, "
                     f"p99 {q['p99']:.3f} s")  # fmt: skip
    return "\n".join(lines) + "\n"
