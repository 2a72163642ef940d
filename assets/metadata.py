"""Asset metadata that makes the Dagster UI useful: row counts, tables, previews, schemas."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

import dagster as dg
import polars as pl

from atlas_pipeline.lake import SCHEMAS, TS, Lake, Written
from atlas_pipeline.lake_columns import COLUMN_DESCRIPTIONS

_DG_TYPES = {
    pl.String: "string",
    pl.Int32: "int",
    pl.Int64: "int",
    pl.Float64: "float",
    pl.Boolean: "bool",
}


def column_schema(table: str) -> dg.TableSchema:
    """The table's columns with their types and meanings, as the asset page lists them."""
    described = COLUMN_DESCRIPTIONS[table]
    return dg.TableSchema(
        columns=[
            dg.TableColumn(name, _dg_type(dtype), description=described[name])
            for name, dtype in SCHEMAS[table].items()
        ]
    )


def _dg_type(dtype: Any) -> str:
    if dtype == TS:
        return "timestamp"
    if isinstance(dtype, pl.List):
        return f"list<{_dg_type(dtype.inner)}>"
    return _DG_TYPES.get(dtype, "string")


def frame_table(df: pl.DataFrame, limit: int = 50) -> dg.TableMetadataValue:
    """A small polars frame as a Dagster table (rendered as a grid in the UI)."""
    head = df.head(limit)
    schema = dg.TableSchema(
        columns=[dg.TableColumn(c, _DG_TYPES.get(t, "string")) for c, t in head.schema.items()]
    )
    records = [
        dg.TableRecord({k: _plain(v) for k, v in row.items()}) for row in head.iter_rows(named=True)
    ]
    return dg.MetadataValue.table(records, schema)


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


def preview(df: pl.DataFrame, columns: list[str], limit: int = 10) -> dg.MarkdownMetadataValue:
    head = df.select([c for c in columns if c in df.columns]).head(limit)
    lines = ["| " + " | ".join(head.columns) + " |", "|" + "---|" * len(head.columns)]
    for row in head.iter_rows():
        cells = [
            str(v if v is not None else "").replace("|", "\\|").replace("\n", " ")[:80] for v in row
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return dg.MetadataValue.md("\n".join(lines))


def counts(values: list[str | None]) -> dict[str, int]:
    return dict(Counter(v or "(none)" for v in values).most_common())


def table_metadata(
    lake: Lake, written: Written, extra: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The UI's table metadata: the partition's rows (dagster/partition_row_count) and the
    whole table's (dagster/row_count, from the Delta log), its URI, schema and version."""
    total = lake.total_rows(written.table)
    return {
        "dagster/partition_row_count": written.rows,
        **({"dagster/row_count": total} if total is not None else {}),
        "dagster/uri": dg.MetadataValue.path(written.uri),
        "dagster/column_schema": column_schema(written.table),
        # a version is an id to time-travel to, not a measure: text, so the UI does not plot it
        "delta_version": dg.MetadataValue.text(str(written.version)),
        **(extra or {}),
    }
