"""Sensors and schedules: the indexer outbox leaves the lake here, cycles start on a cadence
(a sensor, so that the cycle's partition and its runs are requested together), and the table
freshness checks are evaluated."""

from __future__ import annotations

import datetime
import json
import time
from dataclasses import dataclass
from typing import Any

import dagster as dg

from atlas_pipeline.crawl import unfinished_partitions
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


CYCLE_SENSOR_INTERVAL_S = 60
IN_PROGRESS = [  # a run in any of these may still change its partition
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
]


def latest_tick(cron: str, now: float) -> float:
    """The newest tick of `cron` (UTC) at or before `now`."""
    # Dagster's own cron arithmetic, the one its schedules use (croniter is not a dependency)
    from dagster._utils.schedules import get_latest_completed_cron_tick

    moment = datetime.datetime.fromtimestamp(now, datetime.UTC)
    return get_latest_completed_cron_tick(cron, moment, "UTC").timestamp()


@dataclass(frozen=True)
class CycleCursor:
    """The last cron tick a cycle was started for, and the tick whose unfinished partitions
    were already sent again (so a partition that keeps failing delays one tick, not all)."""

    handled: float
    finishing: float | None = None

    @classmethod
    def parse(cls, raw: str | None) -> CycleCursor | None:
        if not raw:
            return None
        data = json.loads(raw)
        return cls(float(data["handled"]), data.get("finishing"))

    def dump(self) -> str:
        return json.dumps({"handled": self.handled, "finishing": self.finishing})


def build_cycle_sensor(job_name: str) -> dg.SensorDefinition:
    """At each tick of freshness.cycle_cron: finish the partitions an earlier cycle left
    unfinished, then add the next cycle and request a run of every shard of it, together."""

    @dg.sensor(
        name="crawl_cycle_sensor",
        job_name=job_name,
        minimum_interval_seconds=CYCLE_SENSOR_INTERVAL_S,
        description="On the freshness.cycle_cron cadence: re-runs every (cycle, shard) an earlier "
        "run left unfinished, then adds the next crawl cycle partition and requests a run of "
        "each of its shards in the same evaluation. A cycle waits while runs of the last one "
        "are still going.",
    )
    def crawl_cycle_sensor(
        context: dg.SensorEvaluationContext, atlas: AtlasCrawl
    ) -> dg.SensorResult | dg.SkipReason:
        cfg = atlas.crawl_config()
        tick = latest_tick(cfg.freshness.cycle_cron, time.time())
        cursor = CycleCursor.parse(context.cursor)
        if cursor is None:  # like a schedule turned on: the first cycle waits for the next tick
            return dg.SensorResult(
                skip_reason=f"first evaluation: cycles start at the ticks of "
                f"{cfg.freshness.cycle_cron!r} from now on",
                cursor=CycleCursor(tick).dump(),
            )
        if tick <= cursor.handled:
            return dg.SkipReason("no tick of freshness.cycle_cron since the last cycle")
        active = context.instance.get_runs(
            dg.RunsFilter(job_name=job_name, statuses=IN_PROGRESS), limit=1
        )
        if active:
            return dg.SkipReason(f"run {active[0].run_id} of an earlier cycle is still going")
        stamp = time.strftime("%Y%m%dT%H%M", time.gmtime(tick))
        existing = context.instance.get_dynamic_partitions(CYCLE_PARTITIONS)
        if cursor.finishing != tick:
            with atlas.open() as engine:
                pending = unfinished_partitions(engine, existing)
            if pending:
                return dg.SensorResult(
                    run_requests=[_request(stamp, c, s, "finish") for c, s in pending],
                    cursor=CycleCursor(cursor.handled, tick).dump(),
                )
        cycle = next_cycle_key(existing)
        return dg.SensorResult(
            run_requests=[_request(stamp, cycle, s, "cycle") for s in range(cfg.shards)],
            dynamic_partitions_requests=[dg.AddDynamicPartitionsRequest(CYCLE_PARTITIONS, [cycle])],
            cursor=CycleCursor(tick).dump(),
        )

    return crawl_cycle_sensor


def _request(stamp: str, cycle: str, shard: int, why: str) -> dg.RunRequest:
    # the run key carries the tick: an evaluation Dagster repeats starts no second run
    return dg.RunRequest(
        run_key=f"{stamp}|{why}|{cycle}|{shard}",
        partition_key=crawl_partition_key(cycle, shard),
        tags={"atlas/cycle": cycle, "atlas/source": f"crawl_cycle_sensor ({why})"},
    )


def build_freshness_schedule(job_name: str) -> dg.ScheduleDefinition:
    """Runs the table recency checks at the top of every hour."""
    return dg.ScheduleDefinition(
        name="freshness_checks_schedule",
        job_name=job_name,
        cron_schedule="0 * * * *",
        description="Evaluates every lake table's table_recency check once an hour.",
    )
