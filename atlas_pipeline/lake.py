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
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from deltalake.exceptions import CommitFailedError, DeltaError

from . import failpoints
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
        "last_modified": pl.String, "content_hash": pl.String, "document_id": pl.String,
        "last_checked_at": TS, "checks": pl.Int64, "changes": pl.Int64,
        "revisit_interval_s": pl.Float64, "revisit_reason": pl.String, "change_rate": pl.Float64,
    },
    "origins": {
        **KEYS, "origin": pl.String, "registrable_domain": pl.String, "fair_class": pl.String,
        "bucket": pl.String, "min_gap_s": pl.Float64, "adapt_gap_s": pl.Float64,
        "max_in_flight": pl.Int32, "backoff_until": TS, "robots_status": pl.String,
        "robots_version": pl.Int64, "robots_fetched_at": TS, "validators_trusted": pl.Boolean,
        "validator_checks": pl.Int64, "validator_misses": pl.Int64, "paused": pl.Boolean,
    },
    "recrawl_schedule": {
        **KEYS, "url": pl.String, "origin": pl.String, "priority": pl.Float64,
        "freshness_class": pl.String, "state": pl.String, "last_checked_at": TS,
        "next_due_at": TS, "interval_s": pl.Float64, "reason": pl.String,
        "changes_per_day": pl.Float64, "checks": pl.Int64, "changes": pl.Int64,
        "validators_trusted": pl.Boolean, "staleness_s": pl.Float64, "target_s": pl.Float64,
        "stale": pl.Boolean,
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
        "original_url": pl.String, "redirect_chain": pl.List(pl.String), "batch_fence": pl.Int64,
        "conditional": pl.Boolean,
    },
    "documents": {
        **KEYS, "fetch_id": pl.String, "url": pl.String, "origin": pl.String, "title": pl.String,
        "author": pl.String, "published": pl.String, "description": pl.String,
        "language": pl.String, "text_hash": pl.String, "text_chars": pl.Int64,
        "canonical_hint": pl.String, "charset": pl.String, "body_key": pl.String,
        "links_out": pl.Int32, "extraction_version": pl.String, "fetched_at": TS,
        "batch_fence": pl.Int64,
        # why the document was kept out of the index (null: indexed), e.g. noindex; and the
        # document id an earlier upsert gave the indexer for the URL, withdrawn by a delete
        "index_reason": pl.String, "withdrawn_document_id": pl.String,
    },
    # The extracted text, stored once per document id (the text hash) however many URLs hold
    # it; `documents` rows map each URL fetch to it with their own provenance.
    "document_texts": {
        **KEYS, "document_id": pl.String, "text": pl.String, "text_chars": pl.Int64,
        "extraction_version": pl.String,
    },
    "links": {
        **KEYS, "fetch_id": pl.String, "source_url": pl.String, "href": pl.String,
        "url": pl.String, "target_origin": pl.String, "anchor": pl.String, "nofollow": pl.Boolean,
        "depth": pl.Int32, "reason": pl.String, "kind": pl.String, "batch_fence": pl.Int64,
        "session_id_stripped": pl.Boolean,  # a session-token parameter was dropped from it
    },
    "index_ready": {
        **KEYS, "event_id": pl.String, "action": pl.String, "url": pl.String,
        "document_id": pl.String, "fetch_id": pl.String, "title": pl.String,
        "language": pl.String, "extraction_version": pl.String, "fetched_at": TS,
        "batch_fence": pl.Int64,
        "reason": pl.String,  # why a delete was emitted (noindex); null for an upsert
    },
    "dedupe_clusters": {
        **KEYS, "url": pl.String, "fetch_id": pl.String, "document_id": pl.String,
        "cluster_id": pl.String, "similarity": pl.Float64, "threshold": pl.Float64,
        "method": pl.String, "canonical_url": pl.String, "canonical_confirmed": pl.Boolean,
    },
}  # fmt: skip
# Columns that name a URL or an origin, per table: what an opt-out purge matches on.
URL_COLUMNS: dict[str, tuple[str, ...]] = {
    "urls": ("url", "discovered_url"), "frontier": ("url",),
    "fetches": ("url", "original_url", "final_url"), "documents": ("url",),
    "links": ("url", "source_url"), "index_ready": ("url",), "document_texts": (),
    "dedupe_clusters": ("url", "canonical_url"), "recrawl_schedule": ("url",), "origins": (),
}  # fmt: skip
ORIGIN_COLUMNS: dict[str, tuple[str, ...]] = {
    "urls": ("origin",), "frontier": ("origin",), "fetches": ("origin",),
    "documents": ("origin",), "links": ("target_origin",), "index_ready": (),
    "document_texts": (),
    "dedupe_clusters": (), "recrawl_schedule": ("origin",), "origins": ("origin",),
}  # fmt: skip
PARTITION_BY: dict[str, list[str]] = {
    "urls": ["origin_shard"], "origins": ["origin_shard"], "document_texts": [],
}  # fmt: skip
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
    fence: int | None = None  # the batch fence the rows carry
    superseded_by: int | None = None  # set when a newer fence had written: nothing was written


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

    def last_write_at(self, table: str) -> float | None:
        """Epoch seconds of the table's latest commit; None if it was never written."""
        if not self.exists(table):
            return None
        latest = DeltaTable(self.uri(table), storage_options=self.storage_options).history(1)
        return float(latest[0]["timestamp"]) / 1000.0 if latest else None

    def add_texts(self, rows: Sequence[Mapping[str, Any]], cycle: str, shard: str) -> Written:
        """Insert the texts whose document id the table lacks (a Delta merge: idempotent, and
        safe against a concurrent writer of the same id, which makes this commit retry)."""
        table, uri = "document_texts", self.uri("document_texts")
        unique = list({r["document_id"]: r for r in rows}.values())
        source = frame(table, [{**r, "crawl_cycle": cycle, "origin_shard": shard}
                               for r in unique]).to_arrow()  # fmt: skip
        for attempt in range(COMMIT_RETRIES):
            try:
                if not self.exists(table):
                    DeltaTable.create(uri, source.schema, mode="ignore", partition_by=None,
                                      storage_options=self.storage_options)  # fmt: skip
                dt = DeltaTable(uri, storage_options=self.storage_options)
                metrics = (
                    dt.merge(source, "t.document_id = s.document_id", source_alias="s",
                             target_alias="t")
                    .when_not_matched_insert_all()
                    .execute()
                )  # fmt: skip
                inserted = int(metrics.get("num_target_rows_inserted", 0))
                version = DeltaTable(uri, storage_options=self.storage_options).version()
                return Written(table, uri, inserted, version)
            except (CommitFailedError, DeltaError) as exc:
                if attempt == COMMIT_RETRIES - 1:
                    raise LakeError(f"cannot write {uri}: {exc}") from exc
                time.sleep(0.05 * (attempt + 1))
        raise AssertionError("unreachable")

    def texts(self, document_ids: Iterable[str]) -> dict[str, str]:
        """document id -> text, for the ids given (those the table holds)."""
        wanted = list(set(document_ids))
        if not wanted or not self.exists("document_texts"):
            return {}
        found = (
            pl.scan_delta(self.uri("document_texts"), storage_options=self.storage_options)
            .filter(pl.col("document_id").is_in(wanted))
            .select("document_id", "text")
            .collect()
        )
        return dict(zip(found["document_id"].to_list(), found["text"].to_list(), strict=True))

    def with_text(self, documents: pl.DataFrame) -> pl.DataFrame:
        """`documents` rows with their text joined in (by document id, the text hash)."""
        texts = self.texts(documents["text_hash"].drop_nulls().to_list())
        return documents.with_columns(
            text=pl.col("text_hash").replace_strict(texts, default=None, return_dtype=pl.String)
        )

    def prune_texts(self) -> int:
        """Delete the texts no `documents` row maps to any more (after an opt-out purge or a
        retention pass removed the last URL of a document)."""
        if not self.exists("document_texts"):
            return 0
        held = set(self.read("documents")["text_hash"].drop_nulls().to_list())
        ids = self.read("document_texts")["document_id"].to_list()
        orphans = sorted(set(ids) - held)
        deleted = 0
        for i in range(0, len(orphans), 500):
            listed = ", ".join("'" + d.replace("'", "''") + "'" for d in orphans[i : i + 500])
            deleted += self.delete("document_texts", f"document_id IN ({listed})")
        return deleted

    def delete(self, table: str, predicate: str) -> int:
        """Delete the rows matching a SQL predicate, then vacuum the files that held them, so
        no older table version can bring them back (an opt-out is not undone by time travel).
        Returns the rows deleted."""
        if not self.exists(table):
            return 0
        uri = self.uri(table)
        for attempt in range(COMMIT_RETRIES):
            try:
                dt = DeltaTable(uri, storage_options=self.storage_options)
                deleted = int(dt.delete(predicate).get("num_deleted_rows", 0))
                if deleted:
                    DeltaTable(uri, storage_options=self.storage_options).vacuum(
                        retention_hours=0, dry_run=False, enforce_retention_duration=False
                    )
                return deleted
            except (CommitFailedError, DeltaError) as exc:
                if attempt == COMMIT_RETRIES - 1:
                    raise LakeError(f"cannot delete from {uri}: {exc}") from exc
                time.sleep(0.05 * (attempt + 1))
        raise AssertionError("unreachable")

    def _replace(
        self,
        table: str,
        rows: RowSource,
        fixed: dict[str, Any],
        predicate: str,
        app_id: str | None = None,
        fence: int | None = None,
    ) -> Written:
        """Write `rows` (with the `fixed` columns) in place of `predicate`'s rows, streamed in
        chunks as one Delta commit. With a fence, the commit records it as a Delta transaction
        id (`app_id`, fence); a writer whose fence is below the recorded one writes nothing,
        and a concurrent newer commit makes this one conflict and re-check."""
        uri = self.uri(table)
        parts = PARTITION_BY.get(table, ["crawl_cycle", "origin_shard"])
        props = None
        if app_id is not None and fence is not None:
            props = CommitProperties(app_transactions=[Transaction(app_id, fence)])
        for attempt in range(COMMIT_RETRIES):
            counter = [0]
            reader = _batches(table, rows, fixed, counter)
            try:
                if not self.exists(table):
                    # Created empty first, so every data write below is a predicate overwrite
                    # pinned to a read version: concurrent first writers conflict, not append.
                    DeltaTable.create(uri, frame(table, []).to_arrow().schema, mode="ignore",
                                      partition_by=parts, storage_options=self.storage_options)  # fmt: skip
                dt = DeltaTable(uri, storage_options=self.storage_options)
                newer = dt.transaction_version(app_id) if app_id else None
                if newer is not None and fence is not None and newer > fence:
                    return Written(table, uri, 0, dt.version(), fence, superseded_by=newer)
                # dt pins the version read above: a newer writer's commit since then makes
                # this one conflict (and re-check) instead of overwriting it
                write_deltalake(dt, reader, mode="overwrite", partition_by=parts,
                                predicate=predicate, target_file_size=TARGET_FILE_BYTES,
                                schema_mode="merge", commit_properties=props,
                                storage_options=self.storage_options)  # fmt: skip
                version = DeltaTable(uri, storage_options=self.storage_options).version()
                return Written(table, uri, counter[0], version, fence)
            except (CommitFailedError, DeltaError) as exc:
                # Shards write disjoint partitions, but two first writers race to create the
                # table, and a newer run of this partition may have committed meanwhile; a row
                # source (a sequence, or a function returning an iterable) can be replayed.
                if attempt == COMMIT_RETRIES - 1:
                    raise LakeError(f"cannot write {uri}: {exc}") from exc
                time.sleep(0.05 * (attempt + 1))
        raise AssertionError("unreachable")

    def write_partition(
        self, table: str, rows: RowSource, cycle: str, shard: str, fence: int | None = None
    ) -> Written:
        """Replace partition (cycle, shard) of `table` with `rows` (a sequence, or a function
        returning an iterable, which is streamed and may be called again on a retry). With a
        batch `fence`, rows carry it in `batch_fence` and an older fence never overwrites."""
        pred = f"crawl_cycle = '{_lit(cycle)}' AND origin_shard = '{_lit(shard)}'"
        fixed: dict[str, Any] = {"crawl_cycle": cycle, "origin_shard": shard}
        if fence is None:
            return self._replace(table, rows, fixed, pred)
        fixed["batch_fence"] = fence
        return self._replace(table, rows, fixed, pred, f"atlas/{table}/{cycle}/{shard}", fence)

    def write_shard(self, table: str, rows: RowSource, shard: str, cycle: str) -> Written:
        """Replace shard `shard` of a catalogue table (partitioned by shard only)."""
        pred = f"origin_shard = '{_lit(shard)}'"
        return self._replace(table, rows, {"crawl_cycle": cycle, "origin_shard": shard}, pred)

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
                failpoints.hit("mid_delta_write")  # files being written, nothing committed
                chunk = []
        counter[0] += len(chunk)
        if chunk:
            yield from frame(table, chunk).to_arrow().cast(schema).to_batches()
            failpoints.hit("mid_delta_write")

    return pa.RecordBatchReader.from_batches(schema, gen())
