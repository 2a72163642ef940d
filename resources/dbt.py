"""The dbt side of the pipeline: the `dbt/` project (dbt-duckdb over the crawl lake) as Dagster assets.

How the lake path reaches dbt: `dbt/models/sources.yml` builds each source's
`meta.delta_table_path` from `{{ env_var('ATLAS_LAKE_ROOT') }}`, which the dbt-duckdb `delta`
plugin (the deltalake package; duckdb's own delta extension cannot be installed offline) opens.
The models are built into the DuckDB file named by `ATLAS_DBT_DUCKDB_PATH`. dagster-dbt starts dbt
with a copy of `os.environ`, so the dbt asset sets both variables around the `dbt.cli(...)` call.

The manifest: dbt renders `env_var()` at parse time, so `dbt/target/manifest.json` records the
lake root it was parsed with. Dagster only reads it for the asset graph (models, tests, the
`["crawl", <table>]` source keys), never for paths; every `dbt build` re-parses with the variables
of its own run (dbt tracks env vars used in schema files, and Dagster gives each invocation a fresh
target path). So one manifest serves every lake root, and `ensure_manifest` only re-parses when it
is missing or older than a file of the project.
"""

import contextlib
import io
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import dagster as dg
from dagster import AssetExecutionContext
from dagster_dbt import DagsterDbtTranslator, DbtCliResource, DbtProject, dbt_assets

DBT_PROJECT_DIR = Path(__file__).resolve().parent.parent / "dbt"
DBT_GROUP = "dbt"
DBT_RESOURCE_KEY = "dbt"
LAKE_ROOT_ENV = "ATLAS_LAKE_ROOT"
DUCKDB_PATH_ENV = "ATLAS_DBT_DUCKDB_PATH"
PARSE_TIMEOUT_S = 300
# Files and folders whose change makes a parsed manifest stale.
_PARSE_INPUTS = ("dbt_project.yml", "packages.yml", "dependencies.yml", "selectors.yml",
                 "models", "macros", "tests", "seeds", "snapshots", "analyses")  # fmt: skip
_ENV_LOCK = threading.Lock()


class DbtManifestError(RuntimeError):
    """`dbt parse` failed, so there is no manifest to build the dbt assets from."""


def dbt_project() -> DbtProject:
    """The `dbt/` project of this repository; profiles.yml lives in the same folder."""
    return DbtProject(project_dir=DBT_PROJECT_DIR, profiles_dir=DBT_PROJECT_DIR)


def dbt_executable() -> str:
    """The `dbt` of this interpreter's environment (works without an activated venv)."""
    beside = Path(sys.executable).parent / "dbt"
    if beside.exists():
        return str(beside)
    return shutil.which("dbt") or "dbt"


def normalize_lake_root(lake_root: str | os.PathLike[str]) -> str:
    """An absolute local path (dbt runs in `dbt/`, so relative paths would break) or a URI."""
    root = os.fspath(lake_root)
    if "://" in root:
        return root.rstrip("/")
    return str(Path(root).expanduser().resolve())


def default_duckdb_path(lake_root: str | os.PathLike[str]) -> str:
    """Where the models go by default: `<lake_root>/warehouse/atlas.duckdb` (local lakes only)."""
    root = normalize_lake_root(lake_root)
    if "://" in root:
        return str(DBT_PROJECT_DIR / "target" / "atlas.duckdb")
    return str(Path(root) / "warehouse" / "atlas.duckdb")


def dbt_env(lake_root: str | os.PathLike[str], duckdb_path: str | None = None) -> dict[str, str]:
    """The environment variables the dbt project reads."""
    env = {LAKE_ROOT_ENV: normalize_lake_root(lake_root), "DBT_SEND_ANONYMOUS_USAGE_STATS": "false"}
    if duckdb_path is not None:
        env[DUCKDB_PATH_ENV] = duckdb_path
    return env


def _newest_input_mtime(project_dir: Path) -> float:
    newest = 0.0
    for name in _PARSE_INPUTS:
        path = project_dir / name
        files = path.rglob("*") if path.is_dir() else [path]
        for f in files:
            if f.is_file():
                newest = max(newest, f.stat().st_mtime)
    return newest


def manifest_is_current(project: DbtProject | None = None) -> bool:
    """True if `target/manifest.json` exists and is newer than every file of the project."""
    project = project or dbt_project()
    path = Path(project.manifest_path)
    return path.exists() and path.stat().st_mtime >= _newest_input_mtime(Path(project.project_dir))


def ensure_manifest(
    lake_root: str | os.PathLike[str], project: DbtProject | None = None, *, force: bool = False
) -> Path:
    """Return `dbt/target/manifest.json`, running `dbt parse` first if it is missing or stale.

    The parse writes into a private temporary target folder and the manifest is moved into place
    atomically, so concurrent callers (parallel tests, several code servers) never see half a file.
    """
    project = project or dbt_project()
    manifest = Path(project.manifest_path)
    if not force and manifest_is_current(project):
        return manifest
    manifest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".parse-", dir=manifest.parent) as tmp:
        env = {**os.environ, **dbt_env(lake_root), "DBT_TARGET_PATH": tmp, "DBT_LOG_PATH": tmp}
        cmd = [dbt_executable(), "parse", "--quiet", "--no-partial-parse",
               "--project-dir", str(project.project_dir),
               "--profiles-dir", str(project.profiles_dir)]  # fmt: skip
        try:
            proc = subprocess.run(
                cmd, env=env, capture_output=True, text=True, timeout=PARSE_TIMEOUT_S, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise DbtManifestError(f"cannot run {' '.join(cmd)}: {exc}") from exc
        parsed = Path(tmp) / "manifest.json"
        if proc.returncode != 0 or not parsed.exists():
            tail = (proc.stdout + proc.stderr).strip()[-2000:]
            raise DbtManifestError(f"dbt parse failed (exit {proc.returncode}): {tail}")
        os.replace(parsed, manifest)
    return manifest


@contextmanager
def _environ(values: Mapping[str, str]) -> Iterator[None]:
    """Set `values` in os.environ for the block; dagster-dbt copies os.environ into dbt's process."""
    with _ENV_LOCK:
        saved = {key: os.environ.get(key) for key in values}
        os.environ.update(values)
        try:
            yield
        finally:
            for key, old in saved.items():
                if old is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = old


DBT_JOB = "dbt_models_job"


class _LogLines(io.TextIOBase):
    """A text stream whose lines become debug messages of a Dagster log."""

    def __init__(self, log: Any) -> None:
        self._log, self._rest = log, ""

    def write(self, text: str) -> int:
        *lines, self._rest = (self._rest + text).split("\n")
        for line in lines:
            if line.strip():
                self._log.debug(line)
        return len(text)


class AtlasDbtTranslator(DagsterDbtTranslator):
    """Default dagster-dbt keys (model name; sources keyed by `meta.dagster.asset_key`), group "dbt"."""

    def get_group_name(self, dbt_resource_props: Mapping[str, Any]) -> str | None:
        return super().get_group_name(dbt_resource_props) or DBT_GROUP


def build_dbt_defs(
    lake_root: str, duckdb_path: str | None = None, storage_options: Mapping[str, str] | None = None
) -> dg.Definitions:
    """The dbt models and tests over the lake at `lake_root`, as assets and asset checks.

    `dbt build` runs with ATLAS_LAKE_ROOT=lake_root and ATLAS_DBT_DUCKDB_PATH=duckdb_path
    (default `default_duckdb_path(lake_root)`). The resource is under key "dbt".
    """
    root = normalize_lake_root(lake_root)
    target_db = duckdb_path or default_duckdb_path(root)
    project = dbt_project()
    manifest = ensure_manifest(root, project)
    # the dbt-duckdb delta plugin opens each table with deltalake, which reads an object
    # store's options (AWS_ENDPOINT_URL, ...) from the environment dbt runs in
    env = {**dbt_env(root, target_db), **{k.upper(): v for k, v in (storage_options or {}).items()}}

    @dbt_assets(
        manifest=manifest,
        project=project,
        name="atlas_dbt",
        dagster_dbt_translator=AtlasDbtTranslator(),
    )
    def atlas_dbt(context: AssetExecutionContext, dbt: DbtCliResource) -> Iterator[Any]:
        if "://" not in target_db:
            Path(target_db).parent.mkdir(parents=True, exist_ok=True)
        with _environ(env):  # dbt's subprocess is started inside cli()
            invocation = dbt.cli(["build"], context=context)
        # dagster-dbt re-prints every dbt log line on stdout, which a run's terminal shows:
        # they go to the run's log at debug level instead (the UI shows them there)
        with contextlib.redirect_stdout(_LogLines(context.log)):
            yield from invocation.stream()

    resource = DbtCliResource(project_dir=project, dbt_executable=dbt_executable())
    job = dg.define_asset_job(
        DBT_JOB,
        selection=dg.AssetSelection.assets(atlas_dbt),
        description="dbt build: every model over the lake's tables, with its tests.",
        executor_def=dg.in_process_executor,
    )
    return dg.Definitions(assets=[atlas_dbt], jobs=[job], resources={DBT_RESOURCE_KEY: resource})
