"""The sandbox web is test tooling outside the product, and an independent oracle: no engine
or Dagster module imports it, and it imports nothing from the engine."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]

WALK = """
import importlib, pkgutil, sys
for package in {packages!r}:
    root = importlib.import_module(package)
    for m in pkgutil.walk_packages(root.__path__, package + "."):
        if m.name not in {skip!r} and not m.name.endswith(".__main__"):  # those run
            importlib.import_module(m.name)
print(sorted(n for n in sys.modules if n.split(".")[0] in {watch!r}))
"""


def loaded(packages: list[str], watch: list[str], skip: tuple[str, ...] = ()) -> str:
    code = WALK.format(packages=packages, watch=watch, skip=skip)
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True,
                         text=True, timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.strip()


def test_no_engine_or_dagster_module_imports_the_sandbox() -> None:
    # the CLI (assets.cli) serves the sandbox for `atlas web` and `atlas demo`, lazily
    assert loaded(["atlas_pipeline", "assets", "resources"], ["atlas_sandbox"]) == "[]"


def test_the_sandbox_imports_nothing_from_the_engine() -> None:
    assert loaded(["atlas_sandbox"], ["atlas_pipeline", "assets", "resources"]) == "[]"


def test_the_probe_sees_an_import() -> None:
    assert "atlas_sandbox.site" in loaded(["atlas_sandbox"], ["atlas_sandbox"])
