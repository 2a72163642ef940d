"""The lake: Delta tables under one root, `<root>/crawl/<table>`, written per partition.

Every partitioned table starts with `crawl_cycle`, `origin_shard` and is partitioned by them;
writing a partition replaces exactly that partition, so re-materializing is idempotent.
`urls` is the current catalogue, partitioned by `origin_shard` only.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from deltalake.exceptions import CommitFailedError, DeltaError

from . import delta_files, failpoints
from .errors import LakeError
from .lake_schema import KEYS, LAYER, PARTITION_BY, SCHEMAS, TS

__all__ = ["KEYS", "LAYER", "SCHEMAS", "TS", "Lake", "Written", "frame"]

CHUNK_ROWS = 2000  # rows converted at a time when streaming a partition into Delta
TEXT_CHUNK_ROWS = 32  # texts run to tens of kilobytes each: smaller chunks of them
# a Parquet file is closed once it reaches this size (see delta_files: what a write holds)
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

    def total_rows(self, table: str) -> int | None:
        """The table's row count from its Delta log (the files' own counts: no data read)."""
        if not self.exists(table):
            return None
        actions = DeltaTable(self.uri(table), storage_options=self.storage_options).get_add_actions(
            flatten=True
        )
        counts = pa.table(actions).column("num_records").to_pylist()
        return int(sum(n or 0 for n in counts))

    def exists(self, table: str) -> bool:
        return bool(DeltaTable.is_deltatable(self.uri(table), storage_options=self.storage_options))

    def last_write_at(self, table: str) -> float | None:
        """Epoch seconds of the table's latest commit; None if it was never written."""
        if not self.exists(table):
            return None
        latest = DeltaTable(self.uri(table), storage_options=self.storage_options).history(1)
        return float(latest[0]["timestamp"]) / 1000.0 if latest else None

    def add_texts(
        self, rows: RowSource, cycle: str, shard: str, ids: Collection[str] | None = None
    ) -> Written:
        """Insert the texts whose document id the table lacks: idempotent, at most one row
        per id. `rows` is a sequence, or a function returning an iterable (called again on a
        retry) together with `ids`, the document ids it yields: then the texts stream into
        Parquet files and one commit, so memory follows a file, not the partition (a
        partition's texts are the largest thing Atlas writes)."""
        table, uri = "document_texts", self.uri("document_texts")
        if ids is None:
            rows = list(rows() if callable(rows) else rows)
            ids = [r["document_id"] for r in rows]
        schema = frame(table, []).to_arrow().schema
        folder = delta_files.local_path(uri)
        for attempt in range(COMMIT_RETRIES):
            try:
                if not self.exists(table):
                    DeltaTable.create(uri, schema, mode="ignore", partition_by=None,
                                      storage_options=self.storage_options)  # fmt: skip
                dt = DeltaTable(uri, storage_options=self.storage_options)
                if folder is None or not _same_columns(dt, schema):
                    return self._merge_texts(_text_frame(rows, cycle, shard))
                read_at = dt.version()
                held = self._held_texts(ids)
                counter = [0]
                source = _batches(table, _new_texts(rows, held),
                                  {"crawl_cycle": cycle, "origin_shard": shard}, counter,
                                  TEXT_CHUNK_ROWS)  # fmt: skip
                actions = delta_files.write_files(folder, source, {}, TARGET_FILE_BYTES,
                                                  plain=frozenset({"text"}))  # fmt: skip
                if not actions:
                    return Written(table, uri, 0, read_at)
                try:
                    dt.create_write_transaction(actions, "append", schema)
                except BaseException:
                    delta_files.remove(delta_files.paths_of(folder, actions))
                    raise
                version = DeltaTable(uri, storage_options=self.storage_options).version()
                if version > read_at + 1:
                    # Appends do not conflict: a writer that added one of these ids between
                    # the read above and this commit left it twice. Keep one copy.
                    self._dedupe_texts(set(ids) - held)
                    version = DeltaTable(uri, storage_options=self.storage_options).version()
                return Written(table, uri, counter[0], version)
            except (CommitFailedError, DeltaError) as exc:
                if attempt == COMMIT_RETRIES - 1:
                    raise LakeError(f"cannot write {uri}: {exc}") from exc
                time.sleep(0.05 * (attempt + 1))
        raise AssertionError("unreachable")

    def _held_texts(self, ids: Collection[str]) -> set[str]:
        """The ids among `ids` the table holds (only the id column is read)."""
        wanted = list(set(ids))
        if not wanted:
            return set()
        found = (
            pl.scan_delta(self.uri("document_texts"), storage_options=self.storage_options)
            .select("document_id")
            .filter(pl.col("document_id").is_in(wanted))
            .collect()
        )
        return set(found["document_id"].to_list())

    def _dedupe_texts(self, ids: set[str]) -> None:
        """Leave one row of each of these ids that the table holds more than once."""
        if not ids:
            return
        rows = (
            pl.scan_delta(self.uri("document_texts"), storage_options=self.storage_options)
            .filter(pl.col("document_id").is_in(list(ids)))
            .collect()
        )
        doubled = rows.filter(pl.col("document_id").is_duplicated())
        if doubled.is_empty():
            return
        keep = doubled.unique("document_id", keep="first").to_arrow()
        listed = ", ".join(
            "'" + i.replace("'", "''") + "'" for i in sorted(set(doubled["document_id"]))
        )
        # No vacuum here, unlike an opt-out's delete: these rows are copies, nothing to
        # erase, and a vacuum would take the files another writer has not yet committed.
        self.delete("document_texts", f"document_id IN ({listed})", vacuum=False)
        self._merge_texts(keep)

    def _merge_texts(self, source: pa.Table) -> Written:
        """deltalake's merge of `source` (one row per id) into the texts: it holds the source
        in memory, so it takes what the bounded path cannot (an object store, a schema to
        merge) and the few rows a repair puts back."""
        table, uri = "document_texts", self.uri("document_texts")
        dt = DeltaTable(uri, storage_options=self.storage_options)
        metrics = (
            dt.merge(source, "t.document_id = s.document_id", source_alias="s", target_alias="t")
            .when_not_matched_insert_all()
            .execute()
        )  # fmt: skip
        inserted = int(metrics.get("num_target_rows_inserted", 0))
        return Written(
            table, uri, inserted, DeltaTable(uri, storage_options=self.storage_options).version()
        )

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

    def iter_texts(
        self,
        document_ids: Collection[str],
        batch_rows: int = TEXT_CHUNK_ROWS,
        memory_pool: pa.MemoryPool | None = None,
    ) -> Iterator[tuple[str, str | None]]:
        """(document id, text) for the ids given that the table holds, read a batch of rows
        at a time (a row group, as `add_texts` writes them, is one batch): memory follows
        the batch, where `texts` holds every text asked for at once. `memory_pool`: where
        the scan allocates (Arrow's default pool unless given: a test measures its own)."""
        wanted = sorted(set(document_ids))
        if not wanted or not self.exists("document_texts"):
            return
        dataset = DeltaTable(
            self.uri("document_texts"), storage_options=self.storage_options
        ).to_pyarrow_dataset()
        batches = dataset.to_batches(
            columns=["document_id", "text"], filter=pc.field("document_id").isin(wanted),
            batch_size=batch_rows, batch_readahead=1, fragment_readahead=1,
            use_threads=False,  # with threads the scan decoded six row groups ahead
            memory_pool=memory_pool,
            # pre-buffering read most of a file's row groups at once in some scans (half of
            # a 55 MB file of texts asked for, 10 scans: peaks of 4-37 MB with it, 4-13
            # without); a read per column chunk costs more requests on an object store
            fragment_scan_options=ds.ParquetFragmentScanOptions(pre_buffer=False),
        )  # fmt: skip
        for batch in batches:
            yield from zip(batch.column(0).to_pylist(), batch.column(1).to_pylist(), strict=True)

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

    def delete(self, table: str, predicate: str, vacuum: bool = True) -> int:
        """Delete the rows matching a SQL predicate, then (`vacuum`) delete the files that
        held them, so no older table version can bring them back (an opt-out is not undone
        by time travel). Returns the rows deleted."""
        if not self.exists(table):
            return 0
        uri = self.uri(table)
        for attempt in range(COMMIT_RETRIES):
            try:
                dt = DeltaTable(uri, storage_options=self.storage_options)
                deleted = int(dt.delete(predicate).get("num_deleted_rows", 0))
                if deleted and vacuum:
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
                folder = delta_files.local_path(uri)
                schema = reader.schema
                if folder is not None and _same_columns(dt, schema):
                    actions = delta_files.write_files(
                        folder, reader, {k: str(fixed[k]) for k in parts}, TARGET_FILE_BYTES
                    )
                    try:
                        dt.create_write_transaction(
                            actions, "overwrite", schema, partition_by=parts,
                            partition_filters=[(k, "=", str(fixed[k])) for k in parts],
                            commit_properties=props,
                        )  # fmt: skip
                    except BaseException:
                        delta_files.remove(delta_files.paths_of(folder, actions))
                        raise
                else:  # an object store, or a table that lacks columns (schema merge)
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

    def read_cycle(self, table: str, cycle: str) -> pl.DataFrame:
        """One cycle's rows of every shard (the scan prunes the other cycles' files)."""
        if not self.exists(table):
            return frame(table, [])
        scan = pl.scan_delta(self.uri(table), storage_options=self.storage_options)
        return scan.filter(pl.col("crawl_cycle") == cycle).collect()

    def cycles(self, table: str) -> list[str]:
        """The cycles the table holds rows of, in order."""
        if not self.exists(table):
            return []
        scan = pl.scan_delta(self.uri(table), storage_options=self.storage_options)
        return sorted(scan.select("crawl_cycle").unique().collect()["crawl_cycle"].to_list())

    def read(self, table: str) -> pl.DataFrame:
        if not self.exists(table):
            return frame(table, [])
        return pl.read_delta(self.uri(table), storage_options=self.storage_options)


def _text_frame(rows: RowSource, cycle: str, shard: str) -> pa.Table:
    """Texts as one Arrow table, one row per id (what deltalake's merge takes)."""
    unique = {r["document_id"]: r for r in (rows() if callable(rows) else rows)}
    return frame("document_texts", [{**r, "crawl_cycle": cycle, "origin_shard": shard}
                                    for r in unique.values()]).to_arrow()  # fmt: skip


def _new_texts(rows: RowSource, held: set[str]) -> Callable[[], Iterator[Mapping[str, Any]]]:
    """The rows whose id is neither held nor seen before (one row per id)."""

    def gen() -> Iterator[Mapping[str, Any]]:
        seen = set(held)
        for row in rows() if callable(rows) else rows:
            if row["document_id"] not in seen:
                seen.add(row["document_id"])
                yield row

    return gen


def _same_columns(dt: DeltaTable, schema: pa.Schema) -> bool:
    """Whether the table has exactly these columns (else its schema must be merged first)."""
    held: list[str] = [f.name for f in pa.schema(dt.schema())]
    return held == list(schema.names)


def _lit(value: str) -> str:
    if "'" in value:
        raise LakeError(f"partition value {value!r} must not contain quotes")
    return value


def _batches(
    table: str,
    rows: RowSource,
    fixed: dict[str, str],
    counter: list[int],
    chunk_rows: int | None = None,
) -> pa.RecordBatchReader:
    """Rows -> a stream of Arrow record batches of at most `chunk_rows` rows (CHUNK_ROWS by
    default): bounded memory."""
    schema = frame(table, []).to_arrow().schema
    size = chunk_rows or CHUNK_ROWS

    def gen() -> Iterator[pa.RecordBatch]:
        chunk: list[Mapping[str, Any]] = []
        for row in rows() if callable(rows) else rows:
            chunk.append({**row, **fixed})
            if len(chunk) >= size:
                counter[0] += len(chunk)
                yield from frame(table, chunk).to_arrow().cast(schema).to_batches()
                failpoints.hit("mid_delta_write")  # files being written, nothing committed
                chunk = []
        counter[0] += len(chunk)
        if chunk:
            yield from frame(table, chunk).to_arrow().cast(schema).to_batches()
            failpoints.hit("mid_delta_write")

    return pa.RecordBatchReader.from_batches(schema, gen())
