"""The lake column reference rendered for its readers: the README's tables and the dbt
sources file, both made from `lake_columns` and held to it by tests (tests/test_readme.py,
tests/dagster/test_dbt.py); scripts/column_table.py and scripts/dbt_sources.py rewrite them."""

from __future__ import annotations

import json

from .lake_columns import COLUMN_DESCRIPTIONS, TABLE_DESCRIPTIONS
from .lake_schema import SCHEMAS

# The README's generated column reference sits between these lines (scripts/column_table.py
# rewrites it).
COLUMNS_BEGIN = "<!-- lake columns: generated from atlas_pipeline/lake_columns.py -->"
COLUMNS_END = "<!-- end of lake columns -->"


def column_reference() -> str:
    """The README's column reference: one table per lake table, in a <details> block each."""
    blocks = []
    for table, columns in SCHEMAS.items():
        rows = [f"| `{c}` | {_type_name(t)} | {COLUMN_DESCRIPTIONS[table][c]} |"
                for c, t in columns.items()]  # fmt: skip
        blocks.append("\n".join([
            f"<details><summary><code>{table}</code>: {TABLE_DESCRIPTIONS[table]}</summary>",
            "", "| column | type | meaning |", "|---|---|---|", *rows, "", "</details>",
        ]))  # fmt: skip
    return "\n\n".join(blocks)


def _type_name(dtype: object) -> str:
    """A dtype as the README shows it: String, Int64, Datetime(us, UTC), List(String)."""
    name = str(dtype)
    return name.replace("time_unit='us', time_zone='UTC'", "us, UTC")


_SOURCES_HEADER = """\
version: 2

# Generated from atlas_pipeline/lake_columns.py by scripts/dbt_sources.py: edit the
# descriptions there and re-run it (tests/dagster/test_dbt.py fails while this file differs).
#
# The crawl lake: Delta tables at <ATLAS_LAKE_ROOT>/crawl/<table>, written by the crawl assets
# (atlas_pipeline/lake.py). dbt renders env_var() in source properties at PARSE time, so the
# path ends up in manifest.json; dbt re-parses on every `dbt build` (Dagster gives each
# invocation a fresh target path), which is why a manifest parsed against one lake root still
# builds against another. The dagster asset_key links each source to the crawl asset.
sources:
  - name: lake
    description: Delta tables of the crawl layer, read with the dbt-duckdb delta plugin.
    meta:
      plugin: delta
    tables:
"""


def dbt_sources() -> str:
    """dbt/models/sources.yml: every lake table as a source of the delta plugin, with the
    table's and each column's description (JSON strings, which YAML reads as they are)."""
    lines = [_SOURCES_HEADER.rstrip("\n")]
    for table, columns in SCHEMAS.items():
        lines += [
            f"      - name: {table}",
            f"        description: {json.dumps(TABLE_DESCRIPTIONS[table])}",
            "        meta:",
            f"          delta_table_path: \"{{{{ env_var('ATLAS_LAKE_ROOT') }}}}/crawl/{table}\"",
            "          dagster:",
            f'            asset_key: ["crawl", "{table}"]',
            "        columns:",
        ]
        for column in columns:
            lines += [
                f"          - name: {column}",
                f"            description: {json.dumps(COLUMN_DESCRIPTIONS[table][column])}",
            ]
    return "\n".join(lines) + "\n"
