"""The lake on object storage (issue 17, part 3): with `lake_root: s3://...` and its storage
options in the crawl config, a cycle run by `atlas crawl` writes every table to a real S3
endpoint on loopback (moto's server) and nothing to a local folder; `atlas inspect` and the
dbt models read the tables from there."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import duckdb
import polars as pl
import pytest
from deltalake import DeltaTable
from pyarrow import fs

from atlas_pipeline.config import load_config
from atlas_pipeline.lake import SCHEMAS
from atlas_sandbox import normalize_url
from resources.dbt import build_dbt_defs
from tests.conftest import SandboxProcess, running_s3, sandbox_config, write_config

ATLAS = str(Path(sys.executable).parent / "atlas")
ROOT = Path(__file__).resolve().parents[2]
BUCKET = "atlas-lake"
WRITTEN = ("frontier", "fetches", "documents", "document_texts", "links", "dedupe_clusters",
           "index_ready", "urls", "origins", "render_classes", "recrawl_schedule")  # fmt: skip


def test_a_cycle_writes_every_table_to_the_bucket_and_dbt_and_inspect_read_it(
    sandbox: SandboxProcess, tmp_path: Path
) -> None:
    with running_s3() as port:
        options = {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_REGION": "us-east-1",
                   "AWS_ALLOW_HTTP": "true", "AWS_ACCESS_KEY_ID": "test",
                   "AWS_SECRET_ACCESS_KEY": "test"}  # fmt: skip
        fs.S3FileSystem(access_key="test", secret_key="test", region="us-east-1", scheme="http",
                        endpoint_override=f"127.0.0.1:{port}",
                        allow_bucket_creation=True).create_dir(BUCKET)  # fmt: skip
        root = f"s3://{BUCKET}/atlas"
        cfg_path = write_config(tmp_path / "atlas.yaml", sandbox_config(
            sandbox, tmp_path / "data", shards=1, lake_root=root, lake_storage_options=options))  # fmt: skip
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("AWS_") and k != "ATLAS_FAILPOINTS"}  # fmt: skip
        res = subprocess.run([ATLAS, "crawl", "--config", str(cfg_path)], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=600)  # fmt: skip
        assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
        for table in WRITTEN:
            assert DeltaTable.is_deltatable(f"{root}/crawl/{table}", storage_options=options), table
        assert f"{root}/crawl/documents" in res.stdout  # the summary names the bucket's tables
        local = [p for p in tmp_path.rglob("*") if p.name in ("s3:", "lake", "crawl")]
        assert local == [], local  # no folder named after the URI, no local lake
        docs = pl.read_delta(f"{root}/crawl/documents", storage_options=options)
        assert set(docs["url"]) == {normalize_url(u) for u in sandbox.web.crawlable(50)}

        url = sorted(docs["url"])[0]
        shown = subprocess.run([ATLAS, "inspect", url, "--config", str(cfg_path), "--json"],
                               cwd=tmp_path, env=env, capture_output=True, text=True,
                               timeout=300)  # fmt: skip
        assert shown.returncode == 0, shown.stderr[-2000:]
        assert '"documents"' in shown.stdout and url in shown.stdout

        cfg = load_config(cfg_path)
        warehouse = tmp_path / "warehouse.duckdb"
        defs = build_dbt_defs(cfg.lake_uri, str(warehouse), storage_options=cfg.lake_options)
        saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("AWS_")}
        try:  # the options reach dbt through the crawl config alone
            built = dg.materialize(list(defs.assets or []), resources=dict(defs.resources or {}))
        finally:
            os.environ.update(saved)
        assert built.success
        with duckdb.connect(str(warehouse), read_only=True) as con:
            for table in WRITTEN:
                if table not in SCHEMAS:
                    continue
                (rows,) = con.execute(f"select count(*) from main.stg_{table}").fetchone() or (0,)
                lake_rows = pl.read_delta(f"{root}/crawl/{table}", storage_options=options).height
                # the sandbox web's pages have no script: no page class to decide
                assert rows == lake_rows and (lake_rows > 0 or table == "render_classes"), table


@pytest.mark.parametrize(
    ("root", "message"),
    [
        ("ftp://bucket/atlas", "unknown scheme 'ftp'"),
        ("s3:///atlas", "names no bucket"),
        ("s3://bucket/atlas?region=eu", "put them in lake_storage_options"),
    ],
)
def test_a_bad_lake_root_fails_in_one_line(root: str, message: str, tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "atlas.yaml", {"lake_root": root})
    res = subprocess.run([ATLAS, "config", "--config", str(cfg)], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)  # fmt: skip
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert "lake_root" in res.stderr and message in res.stderr
