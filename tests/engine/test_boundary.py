"""The engine is plain Python: importing it must not pull in Dagster."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]

EVERY_MODULE = """
import importlib, pkgutil, sys
import atlas_pipeline
for m in pkgutil.walk_packages(atlas_pipeline.__path__, "atlas_pipeline."):
    importlib.import_module(m.name)
print(len(sys.modules) > 0 and 'atlas_pipeline.coordination.sqlite' in sys.modules)
print('dagster' in sys.modules)
"""


def run(code: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def test_importing_atlas_pipeline_does_not_import_dagster() -> None:
    assert run("import atlas_pipeline, sys; print('dagster' in sys.modules)") == ["False"]


def test_no_engine_module_imports_dagster() -> None:
    walked, dagster = run(EVERY_MODULE)
    assert walked == "True"
    assert dagster == "False"


def test_the_probe_detects_dagster() -> None:
    # the checks above mean something only if the probe can see a dagster import
    assert run("import dagster, sys; print('dagster' in sys.modules)") == ["True"]
