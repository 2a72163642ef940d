"""Crawl cycles as Dagster runs: finish what an earlier crawl left unfinished, then add each new
cycle partition and submit one run per (cycle, shard) through the instance (`launcher.py`).

The shards of a cycle go side by side, as the run queue's limits allow; a cycle starts once
the one before it has finished, because its frontier reads what the last cycle committed.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import dagster as dg

from atlas_pipeline.config import CrawlConfig
from atlas_pipeline.crawl import Engine, unfinished_partitions

from .definitions import CRAWL_JOB
from .launcher import Launcher, ShardRun, ensure_dagster_home
from .partitions import CYCLE_PARTITIONS, next_cycle_key

__all__ = ["ShardRun", "ensure_dagster_home", "run_cycles"]


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
) -> list[ShardRun]:
    """Finish every partition an earlier crawl left unfinished (killed or failed between its
    claim and its lake write), then add `cycles` new cycle partitions and run every shard of
    each, in order. `parallel` caps this crawl's runs in flight at once (0: every shard)."""
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
    with Launcher(instance, home, cfg) as launcher:
        for n in range(len(plan) + cycles):
            if n < len(plan):
                cycle, shards = plan[n]
            else:
                cycle = next_cycle_key(instance.get_dynamic_partitions(CYCLE_PARTITIONS))
                instance.add_dynamic_partitions(CYCLE_PARTITIONS, [cycle])
                shards = list(range(cfg.shards))
            if on_start is not None:
                on_start(cycle)
            batch = _run_shards(launcher, cycle, shards, parallel or len(shards), on_submitted)
            results.extend(batch)
            if on_cycle is not None:
                on_cycle(cycle, batch)
    return results


def _run_shards(
    launcher: Launcher,
    cycle: str,
    shards: list[int],
    parallel: int,
    on_submitted: Callable[[str, int, str], None] | None,
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
                if on_submitted is not None:
                    on_submitted(cycle, shard, run_id)
            run = next(launcher.wait(list(running)))
            done.append(launcher.outcome(run, cycle, running.pop(run.run_id)))
    except KeyboardInterrupt:
        # The started runs got the Ctrl-C too (one process group) and stop gracefully: wait
        # for them to commit what they fetched; queued ones are taken off the queue.
        print("interrupted: the shard runs are committing what they fetched "
              "(Ctrl-C again stops at once)", file=sys.stderr, flush=True)  # fmt: skip
        launcher.cancel(list(running))
        for _ in launcher.wait(list(running)):
            pass
        raise
    return sorted(done, key=lambda r: r.shard)
