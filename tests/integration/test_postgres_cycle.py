"""A crawl cycle with PostgreSQL underneath both the coordination store and the Dagster
instance (dagster-postgres), judged like the SQLite cycle: from the server's request log."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import polars as pl
import psycopg
import pytest
import yaml

from assets.definitions import CRAWL_JOB, build_definitions
from assets.partitions import CYCLE_PARTITIONS, partition_key
from atlas_pipeline.config import load_config
from atlas_sandbox import normalize_url
from tests.conftest import PG_URL, SandboxProcess, private_pg_database, sandbox_config, write_config

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture()
def dagster_pg_db() -> Iterator[str]:
    with private_pg_database("atlas_dagster") as name:
        yield name


def test_cycle_on_postgres_store_and_postgres_instance(
    sandbox: SandboxProcess,
    tmp_path: Path,
    pg_schema_url: str,
    dagster_pg_db: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cfg_path = write_config(
        tmp_path / "atlas.yaml", sandbox_config(sandbox, tmp_path, coordination_url=pg_schema_url)
    )
    cfg = load_config(cfg_path)
    job = build_definitions(cfg, str(cfg_path), None).resolve_job_def(CRAWL_JOB)
    # the shipped example, filled in from the environment like on a real machine
    example = yaml.safe_load((ROOT / "examples" / "dagster-postgres.yaml").read_text())
    for key, value in {"ATLAS_PG_HOST": "127.0.0.1", "ATLAS_PG_PORT": "5432",
                       "ATLAS_PG_USER": "postgres", "ATLAS_PG_PASSWORD": "",
                       "ATLAS_PG_DAGSTER_DB": dagster_pg_db}.items():  # fmt: skip
        monkeypatch.setenv(key, value)
    sandbox.log.clear()
    with dg.instance_for_test(overrides=example) as instance:
        instance.add_dynamic_partitions(CYCLE_PARTITIONS, ["c0001"])
        for shard in range(cfg.shards):
            res = job.execute_in_process(
                instance=instance, partition_key=str(partition_key("c0001", shard))
            )
            assert res.success
            assert all(e.passed for e in res.get_asset_check_evaluations())
        assert len(instance.get_runs()) == cfg.shards
    with psycopg.connect(PG_URL.rsplit("/", 1)[0] + f"/{dagster_pg_db}") as conn:
        assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == cfg.shards
    log = [e for e in sandbox.log.entries() if e["path"] != "/robots.txt"]
    assert max(Counter((e["host"], e["path"]) for e in log).values()) == 1
    fetched = {normalize_url(e["origin"] + e["path"]) for e in log if e["status"] == 200}
    assert fetched == sandbox.web.crawlable(50) | sandbox.web.sitemap_urls()
    pages = fetched - sandbox.web.sitemap_urls()
    docs = pl.read_delta(str(cfg.lake_path / "crawl" / "documents"))
    assert docs.height == len(pages) and docs["url"].n_unique() == docs.height
    with psycopg.connect(pg_schema_url) as conn:
        states = dict(conn.execute("SELECT state, count(*) FROM urls GROUP BY state").fetchall())
    assert states["fetched"] == len(fetched) + 1  # + the redirecting URL
    assert set(states) <= {"fetched", "blocked"}
