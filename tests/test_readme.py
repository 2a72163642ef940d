"""The README's config and lake column references stay in step with their sources."""

from __future__ import annotations

from pathlib import Path

from atlas_pipeline.config import config_reference
from atlas_pipeline.lake_reference import COLUMNS_BEGIN, COLUMNS_END, column_reference

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def test_every_config_key_has_a_documented_row_with_its_default() -> None:
    for key, default, doc in config_reference():
        assert doc, f"{key} has no docstring"
        assert f"| `{key}` | `{default}` | {doc} |" in README, key


def test_readme_names_the_two_setup_commands() -> None:
    assert "make demo" in README and "make test" in README


def test_the_lake_column_reference_is_the_generated_one() -> None:
    """Exactly what scripts/column_table.py writes: a column added, renamed or re-described
    in lake_columns fails here until the README is regenerated."""
    assert README.count(COLUMNS_BEGIN) == 1 and README.count(COLUMNS_END) == 1
    block = README.split(COLUMNS_BEGIN, 1)[1].split(COLUMNS_END, 1)[0]
    assert block == f"\n{column_reference()}\n"
