"""DuckDB reads the lake offline (issue 21, part 2): the README's snippet runs as written
against a crawled lake and counts what polars counts, and a table whose files the Delta log
removed is counted as the log says, not as its folder holds."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import duckdb
import polars as pl
from deltalake import write_deltalake

from atlas_pipeline.config import load_config
from atlas_pipeline.crawl import Engine, fetch_shard, plan_frontier
from atlas_pipeline.duckdb_lake import register_lake
from tests.conftest import SandboxProcess, sandbox_config, write_config

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def test_the_readme_snippet_counts_what_polars_counts(
    sandbox: SandboxProcess, tmp_path: Path
) -> None:
    cfg = load_config(write_config(tmp_path / "atlas.yaml",
                                   sandbox_config(sandbox, tmp_path, shards=1)))  # fmt: skip
    engine = Engine.from_config(cfg)
    try:
        plan_frontier(engine, "c0001", 0)
        fetch_shard(engine, "c0001", 0)
    finally:
        engine.close()
    (snippet,) = [
        b for b in re.findall(r"```python\n(.*?)```", README, re.S) if "register_lake" in b
    ]
    tree = ast.parse(snippet.replace("atlas_data/demo/lake", str(cfg.lake_path)))
    *setup, first, second = tree.body  # the imports and the registration; two queries
    scope: dict[str, object] = {}
    exec(compile(ast.Module(setup, type_ignores=[]), "README", "exec"), scope)
    per_origin, by_reason = (
        eval(compile(ast.Expression(q.value), "README", "eval"), scope)  # type: ignore[attr-defined]
        for q in (first, second)
    )  # the README's own queries
    docs = pl.read_delta(str(cfg.lake_path / "crawl" / "documents"))
    assert dict(per_origin) == dict(docs.group_by("origin").len().iter_rows()) != {}
    links = pl.read_delta(str(cfg.lake_path / "crawl" / "links"))
    assert dict(by_reason) == dict(links.group_by("reason").len().iter_rows())


def test_files_the_log_removed_are_not_counted(tmp_path: Path) -> None:
    uri = str(tmp_path / "crawl" / "urls")
    write_deltalake(uri, pl.DataFrame({"url": ["a", "b", "c"]}).to_arrow())
    write_deltalake(uri, pl.DataFrame({"url": ["d", "e"]}).to_arrow(), mode="overwrite")
    con = duckdb.connect()
    assert register_lake(con, str(tmp_path)) == ["urls"]
    assert con.execute("select count(*) from urls").fetchone() == (2,)
    folder = con.execute(f"select count(*) from read_parquet('{uri}/*.parquet')").fetchone()
    assert folder == (5,)  # what reading the folder would have said
