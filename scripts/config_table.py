"""Rewrite the README's config reference rows from the config model (keeps them in step)."""

from __future__ import annotations

from pathlib import Path

from atlas_pipeline.config import config_reference

README = Path(__file__).resolve().parents[1] / "README.md"

if __name__ == "__main__":
    rows = [f"| `{k}` | `{d}` | {doc} |" for k, d, doc in config_reference()]
    lines = README.read_text().split("\n")
    at = [i for i, line in enumerate(lines) if line.startswith("| `") and "` | `" in line]
    lines[at[0] : at[-1] + 1] = rows
    README.write_text("\n".join(lines))
    print(f"{len(rows)} config rows written to {README}")
