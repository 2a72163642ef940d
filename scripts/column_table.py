"""Rewrite the README's lake column reference from lake_columns (keeps it in step)."""

from __future__ import annotations

from pathlib import Path

from atlas_pipeline.lake_reference import COLUMNS_BEGIN, COLUMNS_END, column_reference

README = Path(__file__).resolve().parents[1] / "README.md"

if __name__ == "__main__":
    text = README.read_text()
    head, rest = text.split(COLUMNS_BEGIN, 1)
    _, tail = rest.split(COLUMNS_END, 1)
    README.write_text(f"{head}{COLUMNS_BEGIN}\n{column_reference()}\n{COLUMNS_END}{tail}")
    print(f"lake column reference written to {README}")
