"""The lake: Delta tables under one root, `<root>/crawl/<table>`, written per partition.

Every partitioned table starts with `crawl_cycle`, `origin_shard` and is partitioned by them;
writing a partition replaces exactly that partition, so re-materializing is idempotent.
`urls` is the current catalogue, partitioned by `origin_shard` only.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from deltalake.exceptions import CommitFailedError, DeltaError

from .errors import LakeError

LAYER = "crawl"
TS = pl.Datetime("us", "UTC")
KEYS = {"crawl_cycle": pl.String, "origin_shard": pl.String}

SCHEMAS: dict[str, dict[str, Any]] = {
    "urls": {
        **KEYS, "url": pl.String, "discovered_url": pl.String, "origin": pl.String,
        "depth": pl.Int32, "priority": pl.Float64, "state": pl.String, "reason": pl.String,
        "queued_cycle": pl.String, "due_at": TS, "attempts": pl.Int32, "fence": pl.Int64,
        "robots_version": pl.Int64, "source": pl.String, "discovered_cycle": pl.String,
        "discovered_at": TS, "last_fetch_at": TS, "last_status": pl.Int32, "etag": pl.String,
        "last_modified": pl.String, "content_hash": pl.String,
    },
    "frontier": {
        **KEYS, "url": pl.String, "origin": pl.String, "depth": pl.Int32, "priority": pl.Float64,
        "state": pl.String, "reason": pl.String, "due_at": TS, "attempts": pl.Int32,
        "selected_at": TS,
    },
    "fetches": {
        **KEYS, "fetch_id": pl.String, "kind": pl.String, "url": pl.String, "origin": pl.String,
        "depth": pl.Int32, "status": pl.Int32, "reason": pl.String, "content_type": pl.String,
        "bytes": pl.Int64, "started_at": TS, "elapsed_s": pl.Float64, "etag": pl.String,
        "last_modified": pl.String, "location": pl.String, "final_url": pl.String,
        "lease_id": pl.String, "fence": pl.Int64, "attempt": pl.Int32,
        "robots_version": pl.Int64, "error": pl.String, "body_key": pl.String,
    },
    "documents": {
        **KEYS, "fetch_id": pl.String, "url": pl.String, "origin": pl.String, "title": pl.String,
        "author": pl.String, "published": pl.String, "description": pl.String,
        "language": pl.String, "text": pl.String, "text_hash": pl.String, "text_chars": pl.Int64,
        "canonical_hint": pl.String, "charset": pl.String, "body_key": pl.String,
        "links_out": pl.Int32, "extraction_version": pl.String, "fetched_at": TS,
    },
    "links": {
        **KEYS, "fetch_id": pl.String, "source_url": pl.String, "href": pl.String,
        "url": pl.String, "target_origin": pl.String, "anchor": pl.String, "nofollow": pl.Boolean,
        "depth": pl.Int32, "reason": pl.String, "kind": pl.String,
    },
}  # fmt: skip
PARTITION_BY = {"urls": ["origin_shard"]}
CHUNK_ROWS = 2000  # rows converted at a time when streaming a partition into Delta
# deltalake buffers a streamed write until a file reaches this size; smaller files, less RSS
TARGET_FILE_BYTES = 32 * 1024 * 1024
RowSource = Sequence[Mapping[str, Any]] | Callable[[], Iterable[Mapping[str, Any]]]
COMMIT_RETRIES = 8


@dataclass(frozen=True, slots=True)
class Written:
    table: str
    uri: str
    rows: int
    version: int


def frame(table: str, rows: Sequence[Mapping[str, Any]]) -> pl.DataFrame:
    """Rows (epoch-second floats for timestamps) -> a frame with the table's exact schema."""
    schema = SCHEMAS[table]
    raw = {
        col: [r.get(col) for r in rows] for col in schema
    }  # missing keys are nulls, extra keys are dropped
    cols = []
    for col, dtype in schema.items():
        if dtype == TS:
            s = pl.Series(col, raw[col], dtype=pl.Float64, strict=False)
            cols.append((s * 1_000_000).round().cast(pl.Int64).cast(TS))
        else:
            cols.append(pl.Series(col, raw[col], dtype=dtype, strict=False))
    return pl.DataFrame(cols)


class Lake:
    """Delta tables of one crawl, rooted at a local folder (or object-store URI)."""

    def __init__(self, root: Path | str, storage_options: dict[str, str] | None = None) -> None:
        self.root = str(root).rstrip("/")
        self.storage_options = storage_options

    def uri(self, table: str) -> str:
        return f"{self.root}/{LAYER}/{table}"

    def exists(self, table: str) -> bool:
        return bool(DeltaTable.is_deltatable(self.uri(table), storage_options=self.storage_options))

    def _replace(
        self, table: str, rows: RowSource, fixed: dict[str, str], predicate: str
    ) -> tuple[int, int]:
        """Write `rows` (with the `fixed` key columns) in place of `predicate`'s rows, streamed
        in chunks as one Delta commit; returns (rows, version)."""
        uri = self.uri(table)
        parts = PARTITION_BY.get(table, ["crawl_cycle", "origin_shard"])
        for attempt in range(COMMIT_RETRIES):
            counter = [0]
            reader = _batches(table, rows, fixed, counter)
            try:
                if not self.exists(table):
                    write_deltalake(uri, reader, mode="append", partition_by=parts,
                                    target_file_size=TARGET_FILE_BYTES,
                                    storage_options=self.storage_options)  # fmt: skip
                else:
                    write_deltalake(uri, reader, mode="overwrite", partition_by=parts,
                                    predicate=predicate, target_file_size=TARGET_FILE_BYTES,
                                    storage_options=self.storage_options)  # fmt: skip
                return counter[0], DeltaTable(uri, storage_options=self.storage_options).version()
            except (CommitFailedError, DeltaError) as exc:
                # Shards write disjoint partitions, but two first writers race to create the table;
                # a row source (a sequence, or a function returning an iterable) can be replayed.
                if attempt == COMMIT_RETRIES - 1:
                    raise LakeError(f"cannot write {uri}: {exc}") from exc
                time.sleep(0.05 * (attempt + 1))
        raise AssertionError("unreachable")

    def write_partition(self, table: str, rows: RowSource, cycle: str, shard: str) -> Written:
        """Replace partition (cycle, shard) of `table` with `rows` (a sequence, or a function
        returning an iterable, which is streamed and may be called again on a retry)."""
        pred = f"crawl_cycle = '{_lit(cycle)}' AND origin_shard = '{_lit(shard)}'"
        n, version = self._replace(table, rows, {"crawl_cycle": cycle, "origin_shard": shard}, pred)
        return Written(table, self.uri(table), n, version)

    def write_shard(self, table: str, rows: RowSource, shard: str, cycle: str) -> Written:
        """Replace shard `shard` of a catalogue table (partitioned by shard only)."""
        pred = f"origin_shard = '{_lit(shard)}'"
        n, version = self._replace(table, rows, {"crawl_cycle": cycle, "origin_shard": shard}, pred)
        return Written(table, self.uri(table), n, version)

    def read_partition(self, table: str, cycle: str, shard: str) -> pl.DataFrame:
        if not self.exists(table):
            return frame(table, [])
        scan = pl.scan_delta(self.uri(table), storage_options=self.storage_options)
        return scan.filter(
            (pl.col("crawl_cycle") == cycle) & (pl.col("origin_shard") == shard)
        ).collect()

    def read(self, table: str) -> pl.DataFrame:
        if not self.exists(table):
            return frame(table, [])
        return pl.read_delta(self.uri(table), storage_options=self.storage_options)


def _lit(value: str) -> str:
    if "'" in value:
        raise LakeError(f"partition value {value!r} must not contain quotes")
    return value


def _batches(
    table: str, rows: RowSource, fixed: dict[str, str], counter: list[int]
) -> pa.RecordBatchReader:
    """Rows -> a stream of Arrow record batches of at most CHUNK_ROWS rows (bounded memory)."""
    schema = frame(table, []).to_arrow().schema

    def gen() -> Iterator[pa.RecordBatch]:
        chunk: list[Mapping[str, Any]] = []
        for row in rows() if callable(rows) else rows:
            chunk.append({**row, **fixed})
            if len(chunk) >= CHUNK_ROWS:
                counter[0] += len(chunk)
                yield from frame(table, chunk).to_arrow().cast(schema).to_batches()
                chunk = []
        counter[0] += len(chunk)
        if chunk:
            yield from frame(table, chunk).to_arrow().cast(schema).to_batches()

    return pa.RecordBatchReader.from_batches(schema, gen())
