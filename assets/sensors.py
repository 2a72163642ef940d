"""Sensors: the indexer outbox leaves the lake here."""

from __future__ import annotations

import dagster as dg

from atlas_pipeline.outbox import DeliveryError, deliver, sink_for
from resources.config import AtlasCrawl

from .crawl import INDEX_READY
from .partitions import CYCLE_DIM, SHARD_DIM, crawl_partitions

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
    if after == int(context.cursor or 0):
        return dg.SkipReason("no new index_ready partition delivered")
    context.log.info(f"{sent} events delivered")
    return dg.SensorResult(cursor=str(after))
