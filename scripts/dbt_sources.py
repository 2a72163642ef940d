"""Rewrite dbt/models/sources.yml from lake_columns (keeps the dbt sources' descriptions in
step with the lake's)."""

from __future__ import annotations

from pathlib import Path

from atlas_pipeline.lake_reference import dbt_sources

SOURCES = Path(__file__).resolve().parents[1] / "dbt" / "models" / "sources.yml"

if __name__ == "__main__":
    SOURCES.write_text(dbt_sources())
    print(f"dbt sources written to {SOURCES}")
