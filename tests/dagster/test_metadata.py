"""Asset metadata that makes the Dagster UI useful: where the links partition cut traps, and
the columns it describes."""

from __future__ import annotations

import dagster as dg
import polars as pl

from assets.crawl import _link_meta
from assets.metadata import column_schema
from atlas_pipeline.lake_columns import COLUMN_DESCRIPTIONS
from atlas_pipeline.lake_schema import SCHEMAS


def test_link_metadata_counts_reasons_and_trap_cuts_per_host() -> None:
    links = pl.DataFrame(
        {
            "url": [f"http://calendar.example.test:8080/calendar/2030/{m}" for m in range(1, 6)]
            + ["http://shop.example.test:8080/shop?color=red&size=m", "http://a.test/x"],
            "reason": ["calendar_cap"] * 5 + ["query_variant_cap", "admitted"],
        }
    )
    meta = _link_meta(links)
    assert meta["reasons"].data == {"calendar_cap": 5, "query_variant_cap": 1, "admitted": 1}
    table = meta["trap_cuts"]
    assert isinstance(table, dg.TableMetadataValue)
    rows = [r.data for r in table.records]
    assert rows[0] == {"host": "calendar.example.test:8080", "reason": "calendar_cap",
                       "links_cut": 5}  # fmt: skip
    assert _link_meta(links.filter(pl.col("reason") == "admitted"))["trap_cuts"].text == "none"


def test_the_column_schema_carries_every_columns_description() -> None:
    for table, columns in SCHEMAS.items():
        schema = column_schema(table)
        assert [c.name for c in schema.columns] == list(columns)
        assert all(c.description == COLUMN_DESCRIPTIONS[table][c.name] for c in schema.columns)
    types = {c.name: c.type for c in column_schema("fetches").columns}
    assert (types["started_at"], types["redirect_chain"], types["bytes"]) == (
        "timestamp",
        "list<string>",
        "int",
    )
