"""DuckDB over the lake, offline: each Delta table as a view on deltalake's Arrow dataset.

DuckDB's own `delta_scan` needs an extension it downloads on first use, which a machine
without that network never gets, and `read_parquet` on a table's folder counts the files a
Delta log has removed too (silently over-counting). A view over `DeltaTable.to_pyarrow_dataset()`
reads exactly the table's current files, with partition pruning and filter pushdown, and
needs nothing but the packages Atlas already pins.
"""

from __future__ import annotations

from typing import Any

from deltalake import DeltaTable

from .lake import LAYER, SCHEMAS


def register_lake(
    con: Any, lake_root: str, storage_options: dict[str, str] | None = None
) -> list[str]:
    """Register every table of the lake at `lake_root` on the DuckDB connection `con`, under
    its own name (`fetches`, `documents`, ...); returns the names registered."""
    names = []
    for table in SCHEMAS:
        uri = f"{lake_root.rstrip('/')}/{LAYER}/{table}"
        if not DeltaTable.is_deltatable(uri, storage_options=storage_options):
            continue
        dataset = DeltaTable(uri, storage_options=storage_options).to_pyarrow_dataset()
        con.register(table, dataset)
        names.append(table)
    return names
