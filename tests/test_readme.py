"""The README's config reference stays in step with the config model."""

from __future__ import annotations

from pathlib import Path

from atlas_pipeline.config import config_reference

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def test_every_config_key_has_a_documented_row_with_its_default() -> None:
    for key, default, doc in config_reference():
        assert doc, f"{key} has no docstring"
        assert f"| `{key}` | `{default}` | {doc} |" in README, key


def test_readme_names_the_two_setup_commands() -> None:
    assert "make demo" in README and "make test" in README
