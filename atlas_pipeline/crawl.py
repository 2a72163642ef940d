"""One crawl cycle as engine calls: plan the frontier, fetch a shard, export the catalogue.

Dagster assets and the CLI call these; each writes exactly its own Delta partition, derived
from the coordination store, so any step can be re-run after a crash with the same result.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import polars as pl

from . import dedupe, failpoints, outbox, recrawl
from .batch import BatchStats, run_batch
from .bodies import Bodies, open_bodies
from .config import CrawlConfig
from .coordination import BatchLease, CoordinationStore, OriginPolicy, TrapCaps, open_store
from .errors import BatchInterrupted
from .extractor_pool import ExtractorPool, ParserFailure, shared_pool
from .heap import start_heap_frozen
from .lake import Lake, Written
from .reasons import Reason
from .regions.audit import ownership_rows
from .robots import RobotsStatus
from .scope import ScopeGuard
from .urls import BadUrl, normalize, shard_key


@dataclass
class Engine:
    """The engine objects one crawl config builds."""

    cfg: CrawlConfig
    store: CoordinationStore
    bodies: Bodies
    lake: Lake

    @classmethod
    def from_config(cls, cfg: CrawlConfig) -> Engine:
        politeness = cfg.politeness
        policy = OriginPolicy(
            politeness.min_gap_s, politeness.max_in_flight, politeness.gap_guard_s,
            politeness.adaptive_max_gap_s, politeness.bucket,
            classes=tuple((m, k) for k, members in politeness.classes.items() for m in members),
            class_quota=politeness.class_quota, class_window_s=politeness.class_window_s,
            starvation_bound_s=politeness.starvation_bound_s,
            aging_per_hour=politeness.aging_per_hour, resolve=tuple(cfg.resolve.items()),
            discovery_share=cfg.recrawl.discovery_share,
            untrusted_after=cfg.recrawl.untrusted_after,
            overload_share=politeness.overload_share, recover_steps=politeness.recover_steps,
            region=cfg.regions.name, owner_margin_s=cfg.regions.dispatch_margin_s,
        )  # fmt: skip
        scope = cfg.scope
        caps = TrapCaps(scope.max_query_variants, scope.max_pattern_urls, scope.max_calendar_urls,
                        scope.bloom_prefilter, scope.max_path_variants,
                        scope.novelty_window)  # fmt: skip
        store = open_store(cfg.coordination, policy, scope.max_pages_per_origin, caps)
        bodies = open_bodies(cfg.bodies_url, cfg.bodies_path)
        return cls(cfg, store, bodies, Lake(cfg.lake_uri, cfg.lake_options))

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
    lease: BatchLease
    fetches: Written
    documents: Written
    links: Written
    index_ready: Written
    document_texts: Written

    @property
    def superseded_by(self) -> int | None:
        """The newer batch fence that owns the partition, if this run's write was ignored."""
        written = (self.fetches, self.documents, self.links, self.index_ready)
        return next((w.superseded_by for w in written if w.superseded_by), None)


def fetch_shard(
    engine: Engine,
    cycle: str,
    shard: int,
    pool: ExtractorPool | None = None,
    holder: str | None = None,
    on_progress: Callable[[BatchStats], None] | None = None,
) -> FetchResult:
    """Take the partition's batch lease, drain the (cycle, shard) queue, then write its
    fetches, documents and links under the lease's fence. `holder` names the run (a Dagster
    run id); several runs may drain one partition together, the newest writes it."""
    lease = engine.store.acquire_batch(cycle, shard, holder or f"pid-{os.getpid()}", time.time())
    if pool is None:
        limits = engine.cfg.limits
        pool = shared_pool(engine.cfg.extraction_workers, limits.parser_cpu_s,
                           limits.parser_memory_mb)  # fmt: skip
    stats = run_batch(engine.cfg, engine.store, engine.bodies, pool, cycle, shard, on_progress)
    if stats.interrupted:
        # Stopping was asked for: the lake write (seconds, for a large partition) waits for
        # the partition's re-run, which finds every committed record in the store.
        raise BatchInterrupted(cycle, shard, sum(stats.outcomes.values()), stats.given_back)
    failpoints.hit("before_lake_write")
    # Frozen here, not around the batch as well: the batch freezes it for itself once it
    # holds Ctrl-C (a collection before that left a Ctrl-C to whoever had SIGINT then)
    with start_heap_frozen():
        written = write_fetch_partitions(engine, cycle, shard, lease.fence)
    return FetchResult(stats, lease, *written)


def write_fetch_partitions(
    engine: Engine, cycle: str, shard: int, fence: int | None = None
) -> tuple[Written, Written, Written, Written, Written]:
    """fetches, documents, links and the indexer outbox (index_ready) of one partition,
    streamed from committed store records, with the rows an earlier write of the partition
    put in the lake from records that have left the store since. With a batch fence, a
    newer run's write of the partition is never overwritten, and once every table is
    written under it the records this write took leave the store (`partition_written`): a
    crash before that leaves them there, and the next write takes them again in place of
    their lake rows, so nothing is written twice."""
    store, lake, key = engine.store, engine.lake, shard_key(shard)
    # The records this write takes: listed once, so every table holds the same ones and the
    # texts of their documents are in the lake before any of it (a record committed after
    # this, by a cooperating run, waits in the store for the partition's next write).
    taken: set[str] = set()
    # text id -> (body key, extraction version) of each document holding it, in record order
    texts_of: dict[str, list[tuple[str, str]]] = {}
    for rec in store.fetch_records(cycle, shard, ("document",)):
        taken.add(rec["fetch_id"])
        if doc := rec["document"]:
            held = texts_of.setdefault(doc["text_hash"], [])
            held.append((doc["body_key"], doc["extraction_version"]))

    def texts() -> Iterator[dict[str, Any]]:
        # The text of a fetch lives in the body store's extraction cache, not in the store;
        # the lake keeps it once per document id, however many URLs hold it. Streamed: a
        # partition's texts can run to gigabytes.
        for text_id, holders in texts_of.items():
            for body_key, version in holders:  # the first whose extraction is still kept
                cached = engine.bodies.get_extraction(body_key, version)
                if cached is not None:
                    yield {"document_id": text_id, "text": cached["text"],
                           "text_chars": len(cached["text"]),
                           "extraction_version": version}  # fmt: skip
                    break

    def merged(
        table: str,
        parts: tuple[str, ...],
        rows_of: Callable[[dict[str, Any]], Iterable[dict[str, Any]]],
    ) -> Callable[[], Iterator[dict[str, Any]]]:
        # Read before the write (Delta cannot be read from inside a Delta write). Safe while
        # only the newest batch fence moves records out: a write of the partition committed
        # after this read either is that newest one's (then this write is superseded) or
        # left its records in the store, where this write finds them.
        earlier = _lake_rows(lake, table, cycle, key)

        def rows() -> Iterator[dict[str, Any]]:  # called again on a commit retry
            fresh: set[str] = set()
            for rec in store.fetch_records(cycle, shard, parts):  # only what the table needs
                if (fetch_id := rec["fetch_id"]) in taken:
                    fresh.add(fetch_id)
                    yield from rows_of(rec)
            yield from (r for r in earlier if r["fetch_id"] is None or r["fetch_id"] not in fresh)

        return rows

    def links_of(rec: dict[str, Any]) -> Iterator[dict[str, Any]]:
        fetch = rec["record"]
        for link in rec["links"]:
            yield {
                "kind": "link",
                **link,
                "fetch_id": fetch["fetch_id"],
                "source_url": fetch["url"],
            }

    def documents_of(rec: dict[str, Any]) -> list[dict[str, Any]]:
        return [rec["document"]] if rec["document"] else []

    # texts before the documents that map to them: a document never names a missing text
    document_texts = lake.add_texts(texts, cycle, key, texts_of.keys())
    doc = ("document",)
    written = (
        lake.write_partition("fetches", merged("fetches", ("record",), lambda r: [r["record"]]),
                             cycle, key, fence),
        lake.write_partition("documents", merged("documents", doc, documents_of), cycle, key,
                             fence),
        lake.write_partition("links", merged("links", ("record", "links"), links_of), cycle, key,
                             fence),
        # after the documents: an event never points at a document the lake lacks
        lake.write_partition("index_ready", merged("index_ready", doc, lambda r: outbox.upsert_events(
            documents_of(r))), cycle, key, fence),
    )  # fmt: skip
    if fence is not None and not any(w.superseded_by for w in written):
        store.partition_written(cycle, shard, fence, taken, written[0].rows, time.time())
    return (*written, document_texts)


def _lake_rows(lake: Lake, table: str, cycle: str, key: str) -> list[dict[str, Any]]:
    """The partition's rows in the lake, as the writer takes rows: epoch-second timestamps,
    without the partition and fence columns it sets itself."""
    old = lake.read_partition(table, cycle, key)
    if old.is_empty():
        return []
    stamps = [c for c, t in old.schema.items() if isinstance(t, pl.Datetime)]
    old = old.with_columns(pl.col(c).dt.epoch("us") / 1_000_000 for c in stamps)
    return old.drop("crawl_cycle", "origin_shard", "batch_fence", strict=False).to_dicts()


def export_urls(engine: Engine, cycle: str, shard: int) -> Written:
    """Write this shard's slice of the URL catalogue as it stands after `cycle`."""

    def rows() -> Iterator[dict[str, Any]]:  # streamed, and read again on a commit retry
        for r in engine.store.iter_url_rows(shard):
            r["queued_cycle"] = r.pop("cycle")
            yield r

    return engine.lake.write_shard("urls", rows, shard_key(shard), cycle)


def export_origins(engine: Engine, cycle: str, shard: int) -> Written:
    """Write this shard's origins (pacing, fairness class, robots, validators, pause) as
    they stand after `cycle`."""
    return engine.lake.write_shard("origins", engine.store.origin_rows(shard), shard_key(shard),
                                   cycle)  # fmt: skip


def export_render_classes(engine: Engine, cycle: str, shard: int) -> Written:
    """Write the render lane's decisions for this shard's origins as they stand after
    `cycle`."""
    return engine.lake.write_shard("render_classes", engine.store.render_class_rows(shard),
                                   shard_key(shard), cycle)  # fmt: skip


def export_ownership(engine: Engine, cycle: str, shard: int) -> Written:
    """The ownership partition: the control plane's answers about the shard's origins from a
    lease before the partition's first request on (none for a single region)."""
    rows: list[dict[str, Any]] = []
    if engine.cfg.regions.name:
        first = (engine.lake.read_partition("fetches", cycle, shard_key(shard))
                 .select(pl.col("started_at").min()).item())  # fmt: skip
        since = first.timestamp() - engine.cfg.regions.lease_s if first is not None else time.time()
        # a lease is on a politeness bucket: the origin, or its domain or address
        keys = sorted({r["bucket"] or r["origin"] for r in engine.store.origin_rows(shard)})
        rows = ownership_rows(engine.cfg, keys, since)
    return engine.lake.write_partition("ownership", rows, cycle, shard_key(shard))


def export_schedule(engine: Engine, cycle: str, shard: int, now: float | None = None) -> Written:
    """The recrawl_schedule partition: every URL of the shard that was ever checked, with
    its next due time, why then, its estimated change rate and its staleness against its
    freshness class's target."""
    now = time.time() if now is None else now

    def rows() -> Iterator[dict[str, Any]]:  # streamed, as export_urls
        for r in engine.store.iter_url_rows(shard):
            if (row := schedule_row(r, engine.cfg, now)) is not None:
                yield row

    return engine.lake.write_partition("recrawl_schedule", rows, cycle, shard_key(shard))


def schedule_row(url: dict[str, Any], cfg: CrawlConfig, now: float) -> dict[str, Any] | None:
    """One URL's schedule; None for a URL never checked (it has no copy to be stale)."""
    if url["last_checked_at"] is None:
        return None
    targets = cfg.freshness.classes
    name = recrawl.freshness_class(
        float(url["priority"]),
        [recrawl.FreshnessClass(k, t.min_priority, t.target_s) for k, t in targets.items()],
    )
    staleness = now - float(url["last_checked_at"])
    rate = url["change_rate"]
    return {
        "url": url["url"], "origin": url["origin"], "priority": url["priority"],
        "freshness_class": name, "state": url["state"],
        "last_checked_at": url["last_checked_at"], "next_due_at": url["due_at"],
        "interval_s": url["revisit_interval_s"], "reason": _schedule_reason(url),
        "changes_per_day": None if rate is None else float(rate) * 86400.0,
        "checks": url["checks"], "changes": url["changes"],
        "validators_trusted": bool(url["validators_trusted"]),
        "staleness_s": staleness, "target_s": targets[name].target_s,
        "stale": staleness > targets[name].target_s,
    }  # fmt: skip


def _schedule_reason(url: dict[str, Any]) -> str:
    """The revisit reason, unless the URL's state overrides it (a retry, a dead end)."""
    if url["state"] in ("failed_retryable", "terminal"):
        return f"{url['state']}:{url['reason']}"
    return str(url["revisit_reason"] or recrawl.FIRST_VISIT)


def _canonical(hint: str | None, url: str) -> str | None:
    """A page's rel=canonical as a canonical URL; None when absent, unusable or itself."""
    if not hint:
        return None
    try:
        target = normalize(hint, url)
    except BadUrl:
        return None
    return None if target == url else target


def cluster_documents(engine: Engine, cycle: str, shard: int) -> Written:
    """Label this partition's documents with their content id and near-duplicate cluster.
    The texts stream from the lake a row group at a time: a partition's texts, read whole,
    were the crawl's largest allocation (about 2 GB for 4,500 pages of 56 kB)."""
    docs = engine.lake.read_partition("documents", cycle, shard_key(shard))
    cfg = engine.cfg.dedupe
    settings = dedupe.Settings(cfg.threshold, cfg.num_perm, cfg.shingle_words,
                               cfg.volatile_words, frozenset(cfg.split_urls))  # fmt: skip
    rows = dedupe.cluster_stream(
        [dedupe.Entry(r["url"], r["fetch_id"], r["text_hash"],
                      _canonical(r["canonical_hint"], r["url"]))
         for r in docs.select("url", "fetch_id", "text_hash", "canonical_hint").iter_rows(named=True)],
        engine.lake.iter_texts,
        settings,
    )  # fmt: skip
    return engine.lake.write_partition("dedupe_clusters", rows, cycle, shard_key(shard))


@dataclass(frozen=True)
class Reextracted:
    documents: Written
    index_ready: Written
    failed: int  # documents whose parse failed again: their previous row is kept
    expired: int = 0  # documents whose body retention deleted: their previous row is kept


def reextract(
    engine: Engine,
    cycle: str,
    shard: int,
    pool: ExtractorPool | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> Reextracted:
    """Rebuild a partition's documents and outbox events from the stored bodies with the
    current extractor: no request goes out. The partition keeps its batch fence."""
    key = shard_key(shard)
    old = engine.lake.read_partition("documents", cycle, key)
    fence = int(old["batch_fence"].max()) if old.height else None  # type: ignore[arg-type]
    limits = engine.cfg.limits
    if pool is None:
        pool = shared_pool(engine.cfg.extraction_workers, limits.parser_cpu_s,
                           limits.parser_memory_mb)  # fmt: skip
    rows, failed = [], 0
    # timestamps back to epoch seconds, as the lake writer takes them
    kept = [{**r, "fetched_at": r["fetched_at"].timestamp() if r["fetched_at"] else None}
            for r in old.drop("crawl_cycle", "origin_shard", "batch_fence").iter_rows(named=True)]  # fmt: skip
    gone = [r for r in kept if not engine.bodies.has(r["body_key"])]  # past retention
    rows += gone
    jobs = [
        (r, pool.submit(engine.bodies.get(r["body_key"]), r["url"], r["charset"], True))
        for r in kept
        if engine.bodies.has(r["body_key"])
    ]
    for done, (row, job) in enumerate(jobs, 1):
        if on_progress is not None:
            on_progress(done, len(jobs))
        try:
            parsed = job.result()
        except ParserFailure:
            failed += 1
            rows.append(row)
            continue
        ext = parsed["extraction"]
        engine.bodies.put_extraction(row["body_key"], ext["extraction_version"], ext)
        rows.append({**row, "title": ext["title"], "author": ext["author"],
                     "published": ext["date"], "description": ext["description"],
                     "language": parsed["language"], "text": ext["text"],
                     "text_hash": ext["text_hash"], "text_chars": len(ext["text"]),
                     "canonical_hint": parsed["canonical"], "charset": parsed["charset"],
                     "extraction_version": ext["extraction_version"]})  # fmt: skip
    lake = engine.lake
    lake.add_texts([{"document_id": r["text_hash"], "text": r["text"], "text_chars": len(r["text"]),
                     "extraction_version": r["extraction_version"]}
                    for r in rows if r.get("text") is not None], cycle, key)  # fmt: skip
    documents = lake.write_partition("documents", rows, cycle, key, fence)
    lake.prune_texts()  # the old extraction's texts, if no other document holds them
    return Reextracted(
        documents,
        lake.write_partition("index_ready", list(outbox.upsert_events(rows)), cycle, key, fence),
        failed,
        len(gone),
    )


def unreached_seeds(engine: Engine) -> list[tuple[str, str]]:
    """(seed, why) for every seed when none of them was ever fetched (the scope guard refused
    it, or every attempt failed); empty as soon as one seed was. A crawl that reached none of
    its seeds fetched nothing it was asked for, whatever its runs reported."""
    guard = ScopeGuard(engine.cfg)
    out = []
    for seed in engine.cfg.seeds:
        judged = guard.judge(seed, seed, 0, None)
        if judged.candidate is None or judged.url is None:
            out.append((seed, f"refused: {judged.reason}"))
            continue
        row = engine.store.url_row(judged.url)
        if row is None:
            out.append((seed, NEVER_QUEUED))
        elif row["state"] == "fetched" or 200 <= (row["last_status"] or 0) < 400:
            return []
        elif (robots := engine.store.robots(row["origin"])) is not None and robots.status in (
            RobotsStatus.UNREACHABLE,
            RobotsStatus.THROTTLED,
        ):
            # RFC 9309: while robots.txt cannot be read, nothing of the origin is fetched
            out.append((seed, f"robots.txt {robots.status}, so nothing of its origin was fetched"))
        elif row["state"] in ("eligible", "failed_retryable") and (
            not row["attempts"] or row["reason"] == Reason.INTERRUPTED.value
        ):
            out.append((seed, UNTRIED))  # never tried, or its try cut short by an interrupt
        else:
            status = f"HTTP {row['last_status']}, " if row["last_status"] else ""
            out.append((seed, f"{status}{row['reason'] or row['state']}"))
    return out


UNTRIED = "queued, not fetched yet"
NEVER_QUEUED = "never queued"


def unfinished_partitions(engine: Engine, cycles: Iterable[str]) -> list[tuple[str, int]]:
    """(cycle, shard) of `cycles` not all in the lake: a batch lease with no lake write at its
    fence (a run killed, or failed, between its claim and its write), or committed records
    still waiting in the store; or no batch lease at all while URLs wait queued for the
    partition (its run stopped or cancelled before its fetch step took the lease, or never
    submitted, after another shard's frontier had queued the cycle's seeds and links for it).
    Re-running the partition finishes it: its write takes the waiting records, nothing is
    fetched twice."""
    out = []
    for cycle in cycles:
        for shard in range(engine.cfg.shards):
            lease = engine.store.batch_lease(cycle, shard)
            if lease is None:
                if engine.store.open_url_count(cycle, shard):
                    out.append((cycle, shard))
                continue
            written = engine.store.lake_write(cycle, shard)
            if (written is None or written < lease.fence
                    or engine.store.fetch_record_count(cycle, shard)):  # fmt: skip
                out.append((cycle, shard))
    return out
