"""Partitions: crawl cycle (dynamic, sortable keys c0001...) x origin shard (static shard_000...)."""

from __future__ import annotations

import re

import dagster as dg

from atlas_pipeline.urls import shard_index, shard_key

CYCLE_PARTITIONS = "crawl_cycle"
CYCLES = dg.DynamicPartitionsDefinition(name=CYCLE_PARTITIONS)
CYCLE_DIM = "crawl_cycle"
SHARD_DIM = "origin_shard"
_CYCLE_KEY = re.compile(r"c\d{4,}")


def crawl_partitions(shards: int) -> dg.MultiPartitionsDefinition:
    shard_keys = dg.StaticPartitionsDefinition([shard_key(i) for i in range(shards)])
    return dg.MultiPartitionsDefinition({CYCLE_DIM: CYCLES, SHARD_DIM: shard_keys})


def cycle_key(n: int) -> str:
    return f"c{n:04d}"


def next_cycle_key(existing: list[str]) -> str:
    numbers = [int(k[1:]) for k in existing if _CYCLE_KEY.fullmatch(k)]
    return cycle_key(max(numbers, default=0) + 1)


def partition_key(cycle: str, shard: int) -> dg.MultiPartitionKey:
    return dg.MultiPartitionKey({CYCLE_DIM: cycle, SHARD_DIM: shard_key(shard)})


def cycle_and_shard(context: dg.AssetExecutionContext) -> tuple[str, int]:
    """The (cycle, shard) of a run; direct invocation gives a plain 'c0001|shard_000' string."""
    key = context.partition_key
    if isinstance(key, dg.MultiPartitionKey):
        dims = key.keys_by_dimension
    else:
        cycle, shard = str(key).split("|")  # str() orders by dimension name: cycle, then shard
        dims = {CYCLE_DIM: cycle, SHARD_DIM: shard}
    return dims[CYCLE_DIM], shard_index(dims[SHARD_DIM])
