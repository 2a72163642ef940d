"""Crawl cycles as Dagster runs: finish what an earlier crawl left unfinished, then add each new
cycle partition and submit one run per (cycle, shard) through the instance (`launcher.py`).

The shards of a cycle go side by side, as the run queue's limits allow; a cycle starts once
the one before it has finished, because its frontier reads what the last cycle committed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import time
from collections.abc import Callable
from pathlib import Path

import dagster as dg

from atlas_pipeline.config import CrawlConfig
from atlas_pipeline.crawl import Engine, unfinished_partitions
from atlas_pipeline.stop import StopLimits, crawl_counts, stop_reason

from .definitions import CRAWL_JOB
from .launcher import Launcher, ShardRun, StopRequested, ensure_dagster_home
from .partitions import CYCLE_PARTITIONS, next_cycle_key

__all__ = ["CrawlStopped", "ShardRun", "ensure_dagster_home", "run_cycles"]
CHECK_EVERY_S = 1.0


def run_cycles(
    cfg: CrawlConfig,
    home: Path,
    cycles: int,
    instance: dg.DagsterInstance,
    parallel: int = 0,
    on_cycle: Callable[[str, list[ShardRun]], None] | None = None,
    on_start: Callable[[str], None] | None = None,
    on_unfinished: Callable[[list[tuple[str, int]]], None] | None = None,
    on_submitted: Callable[[str, int, str], None] | None = None,
    stop: StopLimits | None = None,
    on_stop: Callable[[str], None] | None = None,
) -> list[ShardRun]:
    """Finish every partition an earlier crawl left unfinished (killed or failed between its
    claim and its lake write, or stopped before its claim), then add `cycles` new cycle
    partitions and run every shard of each, in order. `parallel` caps this crawl's runs in
    flight at once (0: every shard). When a `stop` limit is met the runs going are stopped
    like a Ctrl-C and no further cycle starts (`on_stop` hears why)."""
    results: list[ShardRun] = []
    engine = Engine.from_config(cfg)
    try:
        pending = unfinished_partitions(engine, instance.get_dynamic_partitions(CYCLE_PARTITIONS))
    finally:
        engine.close()
    if on_unfinished is not None:
        on_unfinished(pending)
    plan = [(cycle, [s for c, s in pending if c == cycle])
            for cycle in dict.fromkeys(c for c, _ in pending)]  # fmt: skip
    with contextlib.ExitStack() as stack:
        checker = _StopCheck(cfg, stop) if stop else None
        if checker is not None:
            stack.callback(checker.close)
        launcher = stack.enter_context(Launcher(instance, home, cfg))
        for n in range(len(plan) + cycles):
            if n < len(plan):
                cycle, shards = plan[n]
            else:
                cycle = next_cycle_key(instance.get_dynamic_partitions(CYCLE_PARTITIONS))
                instance.add_dynamic_partitions(CYCLE_PARTITIONS, [cycle])
                shards = list(range(cfg.shards))
            if on_start is not None:
                on_start(cycle)
            try:
                batch = _run_shards(launcher, cycle, shards, parallel or len(shards),
                                    on_submitted, checker)  # fmt: skip
            except CrawlStopped as stopped:
                results.extend(stopped.runs)
                if on_cycle is not None:
                    on_cycle(cycle, stopped.runs)
                if on_stop is not None:
                    on_stop(stopped.reason)
                break
            results.extend(batch)
            if on_cycle is not None:
                on_cycle(cycle, batch)
    return results


class CrawlStopped(Exception):
    def __init__(self, reason: str, runs: list[ShardRun]) -> None:
        super().__init__(reason)
        self.reason = reason
        self.runs = runs


class _StopCheck:
    """Evaluates the crawl's stop limits every CHECK_EVERY_S against what its partitions
    committed."""

    def __init__(self, cfg: CrawlConfig, limits: StopLimits) -> None:
        self.limits = limits
        self.started = time.monotonic()
        self.partitions: list[tuple[str, int]] = []
        self.engine: Engine | None = Engine.from_config(cfg)
        self._next = 0.0

    def __call__(self) -> str | None:
        now = time.monotonic()
        if now < self._next or self.engine is None:
            return None
        self._next = now + CHECK_EVERY_S
        # the records are parsed only when an error limit needs their statuses
        counts = crawl_counts(self.engine, self.partitions, now - self.started,
                              count_errors=self.limits.max_errors is not None)  # fmt: skip
        return stop_reason(self.limits, counts)

    def close(self) -> None:
        if self.engine is not None:
            self.engine.close()
            self.engine = None


def _run_shards(
    launcher: Launcher,
    cycle: str,
    shards: list[int],
    parallel: int,
    on_submitted: Callable[[str, int, str], None] | None,
    checker: _StopCheck | None = None,
) -> list[ShardRun]:
    queue = list(shards)
    running: dict[str, int] = {}
    done: list[ShardRun] = []
    try:
        while queue or running:
            while queue and len(running) < parallel:
                shard = queue.pop(0)
                run_id = launcher.submit(CRAWL_JOB, cycle, shard)
                running[run_id] = shard
                if checker is not None:
                    checker.partitions.append((cycle, shard))
                if on_submitted is not None:
                    on_submitted(cycle, shard, run_id)
            try:
                run = next(launcher.wait(list(running), tick=checker))
            except StopRequested as stop:
                # like a Ctrl-C: the started runs commit what they fetched and end
                launcher.cancel(list(running), started_too=True)
                for run in launcher.wait(list(running)):
                    ended = launcher.outcome(run, cycle, running[run.run_id])
                    done.append(dataclasses.replace(ended, stopped=not ended.success))
                raise CrawlStopped(stop.reason, sorted(done, key=lambda r: r.shard)) from None
            done.append(launcher.outcome(run, cycle, running.pop(run.run_id)))
    except KeyboardInterrupt:
        launcher.ctrl_c.handled()  # a second Ctrl-C, even one a finalizer swallows, stops at once
        # The started runs got the Ctrl-C too (one process group) and stop gracefully: wait
        # for them to commit what they fetched; queued ones are taken off the queue.
        print("interrupted: the shard runs are committing what they fetched "
              "(Ctrl-C again stops at once)", file=sys.stderr, flush=True)  # fmt: skip
        launcher.cancel(list(running))
        for _ in launcher.wait(list(running)):
            pass
        raise
    return sorted(done, key=lambda r: r.shard)
