"""Sensors and schedules: the indexer outbox leaves the lake here, cycles start on a cadence,
and the table freshness checks are evaluated."""

from __future__ import annotations

import time
from typing import Any

import dagster as dg

from atlas_pipeline.outbox import DeliveryError, deliver, sink_for
from resources.config import AtlasCrawl

from .crawl import INDEX_READY
from .partitions import CYCLE_DIM, CYCLE_PARTITIONS, SHARD_DIM, crawl_partitions, next_cycle_key
from .partitions import partition_key as crawl_partition_key

PARTITIONS_PER_TICK = 20


@dg.sensor(
    name="index_delivery",
    minimum_interval_seconds=30,
    description="Sends each newly materialized index_ready partition to the indexer sink; "
    "the cursor moves past a partition only once all of it was taken (at least once; the "
    "indexer drops repeats by event id).",
)
def index_delivery(
    context: dg.SensorEvaluationContext, atlas: AtlasCrawl
) -> dg.SensorResult | dg.SkipReason:
    cfg = atlas.crawl_config()
    if not cfg.indexer.sink:
        return dg.SkipReason("no indexer.sink in the crawl config")
    sink = sink_for(cfg.indexer.sink)
    partitions = crawl_partitions(cfg.shards)
    after = int(context.cursor or 0)
    found = context.instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=INDEX_READY, after_storage_id=after),
        limit=PARTITIONS_PER_TICK,
        ascending=True,
    )
    sent = 0
    with atlas.open() as engine:
        for record in found.records:
            keys = partitions.get_partition_key_from_str(
                record.partition_key or ""
            ).keys_by_dimension
            cycle, shard = keys[CYCLE_DIM], keys[SHARD_DIM]
            events = engine.lake.read_partition("index_ready", cycle, shard).drop(
                "crawl_cycle", "origin_shard", "batch_fence"
            )
            try:
                sent += deliver(events.to_dicts(), sink, cfg.indexer.batch_size)
            except DeliveryError as exc:
                context.log.warning(f"{cycle}/{shard}: {exc}; retried next tick")
                break
            context.log.info(f"{cycle}/{shard}: {events.height} events delivered")
            after = record.storage_id
        deleted = _deliver_tombstones(engine, sink, cfg.indexer.batch_size, context)
    if after == int(context.cursor or 0):
        if deleted:
            return dg.SkipReason(f"{deleted} tombstones delivered; no new index_ready partition")
        return dg.SkipReason("no new index_ready partition delivered")
    context.log.info(f"{sent} events delivered")
    return dg.SensorResult(cursor=str(after))


def _deliver_tombstones(
    engine: Any, sink: Any, batch_size: int, context: dg.SensorEvaluationContext
) -> int:
    """Deletions (opt-outs) wait in the store's tombstone outbox, not in a lake partition:
    each batch the sink takes is marked delivered; the rest waits for the next tick."""
    sent = 0
    while pending := engine.store.pending_tombstones(batch_size):
        try:
            deliver(pending, sink, batch_size)
        except DeliveryError as exc:
            context.log.warning(f"tombstones: {exc}; retried next tick")
            break
        engine.store.tombstones_delivered([e["event_id"] for e in pending], time.time())
        sent += len(pending)
    if sent:
        context.log.info(f"{sent} tombstones delivered")
    return sent


def build_crawl_schedule(job_name: str, cron: str, shards: int) -> dg.ScheduleDefinition:
    """Each tick adds the next crawl cycle and runs every shard of it."""

    @dg.schedule(
        name="crawl_cycle_schedule",
        cron_schedule=cron,
        job_name=job_name,
        description="Starts a new crawl cycle (every shard) on the freshness.cycle_cron cadence.",
    )
    def crawl_cycle_schedule(context: dg.ScheduleEvaluationContext) -> list[dg.RunRequest]:
        # Schedules cannot return partition requests, so the cycle is added here; the run
        # keys carry the tick, so a re-evaluated tick starts no second set of runs.
        tick = context.scheduled_execution_time
        stamp = tick.strftime("%Y%m%dT%H%M") if tick else "manual"
        instance = context.instance
        cycle = next_cycle_key(instance.get_dynamic_partitions(CYCLE_PARTITIONS))
        instance.add_dynamic_partitions(CYCLE_PARTITIONS, [cycle])
        return [
            dg.RunRequest(
                run_key=f"{stamp}|{shard}",
                partition_key=crawl_partition_key(cycle, shard),
                tags={"atlas/cycle": cycle},
            )
            for shard in range(shards)
        ]

    return crawl_cycle_schedule


def build_freshness_sensor(job_name: str) -> dg.SensorDefinition:
    """Runs the table recency checks about once an hour."""

    @dg.sensor(
        name="freshness_checks_sensor",
        job_name=job_name,
        minimum_interval_seconds=3600,
        description="Evaluates every lake table's table_recency check once an hour.",
    )
    def freshness_checks_sensor(context: dg.SensorEvaluationContext) -> dg.RunRequest:
        hour = int(time.time() // 3600)
        return dg.RunRequest(run_key=f"freshness-{hour}")

    return freshness_checks_sensor
