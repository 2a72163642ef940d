"""Materialize crawl cycles on a persistent Dagster instance: one fat run per (cycle, shard).

A Dagster run costs 0.6-9 s of overhead, so a run covers a whole shard of a cycle (frontier,
fetch batch, catalogue, checks), and the shards of a cycle run side by side in worker processes.
Politeness never depends on that parallelism: it lives in the coordination store.
"""

from __future__ import annotations

import functools
import multiprocessing
import os
import sys
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import dagster as dg

from atlas_pipeline.config import CrawlConfig, load_config
from atlas_pipeline.crawl import Engine, unfinished_partitions

from .definitions import CRAWL_JOB, build_definitions
from .partitions import CYCLE_PARTITIONS, next_cycle_key, partition_key

# Events still go to the instance (and the UI); the terminal gets warnings only.
QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
DAGSTER_YAML = """\
telemetry:
  enabled: false
"""


def ensure_dagster_home(cfg: CrawlConfig) -> Path:
    """$DAGSTER_HOME if set, else <data_dir>/dagster_home (SQLite storage, telemetry off)."""
    home = Path(os.environ.get("DAGSTER_HOME") or cfg.data_dir / "dagster_home").resolve()
    home.mkdir(parents=True, exist_ok=True)
    yaml_path = home / "dagster.yaml"
    if not yaml_path.exists():
        yaml_path.write_text(DAGSTER_YAML)
    os.environ["DAGSTER_HOME"] = str(home)
    return home


@dataclass(frozen=True)
class ShardRun:
    cycle: str
    shard: int
    run_id: str
    success: bool
    error: str | None


@functools.cache
def _job(config_path: str | None) -> dg.JobDefinition:
    cfg = load_config(config_path, dict(os.environ))
    return build_definitions(cfg, config_path, None).resolve_job_def(CRAWL_JOB)


def run_shard(config_path: str | None, cycle: str, shard: int) -> ShardRun:
    """One Dagster run: the whole crawl job for partition (cycle, shard), in this process."""
    instance = dg.DagsterInstance.get()
    res = _job(config_path).execute_in_process(
        instance=instance,
        partition_key=str(partition_key(cycle, shard)),
        raise_on_error=False,
        run_config=QUIET,
    )
    error = None
    if not res.success:
        failures = [e for e in res.all_events if e.is_failure]
        error = failures[0].message if failures else "run failed"
    return ShardRun(cycle, shard, res.run_id, res.success, error)


def run_cycles(
    cfg: CrawlConfig,
    config_path: str | None,
    cycles: int,
    instance: dg.DagsterInstance,
    parallel: int = 0,
    on_cycle: Callable[[str, list[ShardRun]], None] | None = None,
    on_start: Callable[[str], None] | None = None,
    on_unfinished: Callable[[list[tuple[str, int]]], None] | None = None,
) -> list[ShardRun]:
    """Finish every partition an earlier crawl left unfinished (killed or failed between its
    claim and its lake write), then add `cycles` new cycle partitions and materialize every
    shard of each, in order.

    Shards of one cycle run side by side in worker processes (as a run launcher would run
    them), reused across cycles so Python and Dagster start once per worker.
    """
    workers = min(parallel or cfg.shards, cfg.shards)
    results: list[ShardRun] = []
    engine = Engine.from_config(cfg)
    try:
        pending = unfinished_partitions(engine, instance.get_dynamic_partitions(CYCLE_PARTITIONS))
    finally:
        engine.close()
    if on_unfinished is not None:
        on_unfinished(pending)
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        plan = [(cycle, [s for c, s in pending if c == cycle])
                for cycle in dict.fromkeys(c for c, _ in pending)]  # fmt: skip
        for n in range(len(plan) + cycles):
            if n < len(plan):
                cycle, shards = plan[n]
            else:
                cycle = next_cycle_key(instance.get_dynamic_partitions(CYCLE_PARTITIONS))
                instance.add_dynamic_partitions(CYCLE_PARTITIONS, [cycle])
                shards = list(range(cfg.shards))
            if on_start is not None:
                on_start(cycle)
            batch = _run_shards(pool, config_path, cycle, shards)
            results.extend(batch)
            if on_cycle is not None:
                on_cycle(cycle, batch)
    return results


def _run_shards(
    pool: ProcessPoolExecutor, config_path: str | None, cycle: str, shards: list[int]
) -> list[ShardRun]:
    futures = [pool.submit(run_shard, config_path, cycle, s) for s in shards]
    try:
        return [f.result() for f in futures]
    except KeyboardInterrupt:
        # The shard runs got the Ctrl-C too (one process group) and stop gracefully: wait
        # for them to commit what they fetched; start no shard still queued.
        print("interrupted: the shard runs are committing what they fetched "
              "(Ctrl-C again stops at once)", file=sys.stderr, flush=True)  # fmt: skip
        pool.shutdown(wait=True, cancel_futures=True)
        raise
