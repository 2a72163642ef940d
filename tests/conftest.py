"""Shared fixtures: a real sandbox web on loopback and crawl configs pointed at it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from atlas_pipeline.sandbox import SandboxServer, SandboxWeb

os.environ.setdefault("DBT_SEND_ANONYMOUS_USAGE_STATS", "false")


@pytest.fixture(scope="session")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SandboxServer]:
    """Three publishers plus two generated origins, 15 pages each, with a request log."""
    web = SandboxWeb(seed=7, generated_origins=2, pages_per_origin=15)
    log = tmp_path_factory.mktemp("sandbox") / "requests.jsonl"
    with SandboxServer(web, log_path=log) as server:
        yield server


def sandbox_config(server: SandboxServer, data_dir: Path, **overrides: Any) -> dict[str, Any]:
    """A crawl config for `server`: every sandbox host mapped to loopback, nothing else reachable."""
    web = server.web
    cfg: dict[str, Any] = {
        "seeds": web.seed_urls(),
        "data_dir": str(data_dir),
        "shards": 2,
        "politeness": {"min_gap_s": 0.0, "max_in_flight": 1},
        "scope": {"max_depth": 50, "max_pages_per_origin": 1000},
        "limits": {"total_timeout_s": 10, "batch_max_idle_s": 20},
        "resolve": {h: "127.0.0.1" for h in web.hosts},
        "resolve_only": True,
    }
    for key, value in overrides.items():
        if isinstance(value, dict):
            cfg[key] = {**cfg.get(key, {}), **value}
        else:
            cfg[key] = value
    return cfg


def write_config(path: Path, cfg: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


# PostgreSQL ------------------------------------------------------------------------------
PG_URL = os.environ.get("ATLAS_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")


def postgres_available() -> str | None:
    """None when PostgreSQL answers, else why not. In CI a missing server fails the tests:
    PostgreSQL tests are never skipped silently there (`make test` starts the server)."""
    import psycopg

    try:
        psycopg.connect(PG_URL, connect_timeout=3).close()
        return None
    except psycopg.Error as exc:
        if os.environ.get("CI"):
            raise
        return f"PostgreSQL at {PG_URL} is not reachable ({exc}); run scripts/ensure_postgres.sh"


@pytest.fixture()
def pg_schema_url() -> Iterator[str]:
    """A coordination URL on a fresh, private PostgreSQL schema, dropped afterwards."""
    import uuid

    import psycopg

    why = postgres_available()
    if why:
        pytest.skip(why)
    schema = f"atlas_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    sep = "&" if "?" in PG_URL else "?"
    try:
        yield f"{PG_URL}{sep}options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
