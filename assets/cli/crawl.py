"""`atlas crawl`: submit the cycles' shard runs to the Dagster instance, show their progress,
and sum up what the crawl holds."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from atlas_pipeline.config import CrawlConfig, load_config
from atlas_pipeline.errors import AtlasError
from atlas_pipeline.stop import StopLimits

from .common import _check_store, bar, show_progress


@dataclass(frozen=True, slots=True)
class Crawled:
    ok: bool  # every run succeeded or was stopped
    cycles: list[str]  # the cycles it ran
    stopped: bool  # a stop condition ended it


def _crawl(cfg: CrawlConfig, config_path: str, cycles: int, parallel: int,
           stop: StopLimits | None = None) -> Crawled:  # fmt: skip
    """Run the crawl, through the Dagster instance."""
    import dagster as dg

    from ..runner import ensure_dagster_home, run_cycles

    _check_store(cfg)
    home = ensure_dagster_home(cfg)
    os.environ["ATLAS_CONFIG"] = config_path  # the code location and its runs load this config
    print(f"Dagster instance: {home}")
    ok, stopped = True, False

    def report(cycle: str, runs: list) -> None:  # type: ignore[type-arg]
        nonlocal ok
        for run in runs:
            status = "ok" if run.success else f"FAILED: {run.error}"
            if run.stopped:
                status = "stopped (a stop condition): its partition is finished by the next crawl"
            ok = ok and (run.success or run.stopped)
            print(f"  {cycle} shard_{run.shard:03d}  run {run.run_id[:8]}  {status}")

    def on_stop(why: str) -> None:
        nonlocal stopped
        stopped = True  # whether or not the runs it stopped ended as a success
        print(f"stopped: {why}")

    def unfinished(pending: list[tuple[str, int]]) -> None:
        if pending:
            names = ", ".join(f"{c} shard_{s:03d}" for c, s in pending)
            print(f"Finishing {len(pending)} partition(s) an earlier crawl left unfinished "
                  f"first: {names}")  # fmt: skip

    with dg.DagsterInstance.get() as instance, CycleProgress(cfg) as progress:
        started = time.time()
        runs = run_cycles(cfg, home, cycles, instance, parallel, on_cycle=report,
                          on_start=progress.start, on_unfinished=unfinished, stop=stop,
                          on_stop=on_stop)  # fmt: skip
        progress.stop()
        print(f"{cycles} new cycle(s) x {cfg.shards} shard(s), {len(runs)} run(s) in "
              f"{time.time() - started:.1f} s")  # fmt: skip
    return Crawled(ok, sorted({r.cycle for r in runs}), stopped)


class CycleProgress:
    """A bar per cycle: URLs of the cycle done against URLs queued for it (the total grows as
    links come in) and their answers (statuses, errors), read from the coordination store
    twice a second, with rate and ETA."""

    def __init__(self, cfg: CrawlConfig) -> None:
        self.cfg = cfg
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> CycleProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self, cycle: str) -> None:
        self.stop()
        if not show_progress():
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, args=(cycle,), daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join(5)
            self._thread = None

    def _run(self, cycle: str) -> None:
        from atlas_pipeline.crawl import Engine

        engine: Engine | None = None
        progress = bar(0, f"cycle {cycle}", "url")
        try:
            while True:
                # A store that stops answering stops the bar, not the crawl's own runs (they
                # have their own outage rules): say so and keep asking.
                try:
                    engine = engine or Engine.from_config(self.cfg)
                    done, total = engine.store.cycle_progress(cycle)
                    statuses = engine.store.cycle_statuses(cycle)
                except AtlasError as exc:
                    progress.set_postfix_str(f"store unreachable, retrying ({exc})"[:120])
                    if engine is not None:
                        with contextlib.suppress(Exception):
                            engine.close()
                    engine = None
                else:
                    progress.total = max(total, done)
                    progress.n = done
                    progress.set_description_str(f"cycle {cycle}: {status_summary(statuses)}")
                    progress.set_postfix_str("")
                progress.refresh()
                if self._stop.wait(0.5):
                    break
        finally:
            progress.close()
            if engine is not None:
                engine.close()


def status_summary(statuses: dict[str, int]) -> str:
    """The bar's answers so far: "200=40 304=3, 2 errors" (no response, or a 5xx)."""
    from atlas_pipeline.stop import is_error

    shown = " ".join(f"{k}={n}" for k, n in sorted(statuses.items())) or "no answers yet"
    errors = sum(n for k, n in statuses.items() if is_error(None if k == "none" else k))
    return f"{shown}, {errors} errors"


def cmd_crawl(args: argparse.Namespace) -> int:
    cfg = load_config(args.config, dict(os.environ))
    config_path = (
        str(Path(args.config).resolve()) if args.config else os.environ.get("ATLAS_CONFIG")
    )
    if config_path is None:
        raise AtlasError("atlas crawl needs --config FILE (or $ATLAS_CONFIG)")
    stop = StopLimits(args.max_pages, args.max_seconds, args.max_errors)
    crawled = _crawl(cfg, config_path, 0 if args.resume else args.cycles, args.parallel, stop)
    print_summary(cfg, crawled.cycles)
    if not crawled.ok:
        return 1
    return _seeds_reached(cfg, crawled.stopped)


def _seeds_reached(cfg: CrawlConfig, stopped: bool = False) -> int:
    """1, with one line saying why, when the runs succeeded but no seed was ever fetched; 0
    when a stop condition came first and no seed was tried yet (queued, or not even that)."""
    from atlas_pipeline.crawl import NEVER_QUEUED, UNTRIED, Engine, unreached_seeds

    engine = Engine.from_config(cfg)
    try:
        unreached = unreached_seeds(engine)
    finally:
        engine.close()
    if not unreached:
        return 0
    if stopped and all(why in (UNTRIED, NEVER_QUEUED) for _, why in unreached):
        print("No seed was fetched before the stop; `atlas crawl --resume` goes on from here.")
        return 0
    shown = "; ".join(f"{seed} ({why})" for seed, why in unreached[:5])
    more = f"; and {len(unreached) - 5} more" if len(unreached) > 5 else ""
    print(f"atlas: no seed could be fetched: {shown}{more}. Check the seeds, the network and "
          "the sites' robots.txt (atlas inspect URL shows each attempt)", file=sys.stderr)  # fmt: skip
    return 1


def print_summary(cfg: CrawlConfig, cycles: list[str] | None = None) -> None:
    import polars as pl

    from atlas_pipeline.lake import SCHEMAS, Lake
    from atlas_pipeline.stats import render_dump, run_dump

    lake = Lake(cfg.lake_uri, cfg.lake_options)
    if cycles and lake.exists("fetches"):
        print("\n" + render_dump(run_dump(lake, cycles)), end="")
    fetches, docs, links, urls = (lake.read(t) for t in ("fetches", "documents", "links", "urls"))
    pages = fetches.filter(pl.col("kind") == "page")
    print("\nPages fetched per origin (all cycles):")
    per_origin = pages.group_by("origin").agg(
        pl.len().alias("requests"), (pl.col("reason") == "fetched").sum().alias("documents")
    )
    for row in per_origin.sort("origin").iter_rows(named=True):
        print(
            f"  {row['origin']:<42} {row['requests']:>5} requests  {row['documents']:>5} documents"
        )
    print(f"\nDocuments: {docs.height}   links: {links.height}   URLs known: {urls.height}")
    for name, df in (("fetches", fetches), ("links", links), ("urls", urls)):
        counts = df.group_by("reason").len().sort("len", descending=True)
        text = ", ".join(f"{r}={n}" for r, n in counts.iter_rows())
        print(f"Reason codes ({name}): {text}")
    print("\nDelta tables (read with polars.read_delta):")
    for table in SCHEMAS:
        if lake.exists(table):
            print(f"  {lake.uri(table)}")
    if lake.exists("fetches"):
        from .reports import write_crawl_reports

        index = write_crawl_reports(cfg, cycles or None)[-1]
        print(f"Crawl report (HTML, each cycle across its shards, per-shard pages linked): {index}")
