"""A fetch partition whose first attempt fails mid-batch is retried by Dagster's RetryPolicy
(same run, new batch fence) and ends with the same tables as one clean run of the partition."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from assets.definitions import CRAWL_JOB, build_definitions
from assets.partitions import CYCLE_PARTITIONS, partition_key
from atlas_pipeline import failpoints
from atlas_pipeline.config import load_config
from atlas_pipeline.lake import Lake
from tests.conftest import SandboxProcess, sandbox_config, write_config


def _materialize(sandbox: SandboxProcess, data_dir: Path) -> tuple[dg.ExecuteInProcessResult, Lake]:
    data_dir.mkdir(parents=True, exist_ok=True)
    cfg_path = write_config(data_dir / "atlas.yaml", sandbox_config(
        sandbox, data_dir, shards=1, politeness={"min_gap_s": 0.05},
        limits={"total_timeout_s": 2, "lease_margin_s": 1},
    ))  # fmt: skip
    cfg = load_config(cfg_path)
    job = build_definitions(cfg, str(cfg_path), None).resolve_job_def(CRAWL_JOB)
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(CYCLE_PARTITIONS, ["c0001"])
        result = job.execute_in_process(
            instance=instance, partition_key=str(partition_key("c0001", 0)), raise_on_error=False
        )
    return result, Lake(cfg.lake_path)


def _tables(lake: Lake) -> dict[str, list[tuple[Any, ...]]]:
    # Columns that do not depend on timing or on which page happened to discover a URL first
    # (not depth: generated origins link across origins, so a page can be reached through
    # another origin's page before its own home page commits, one hop deeper).
    cols = {
        "fetches": ["kind", "url", "status", "reason", "bytes", "body_key"],
        "documents": ["url", "title", "text_hash", "text", "links_out", "body_key"],
        "links": ["source_url", "href", "url", "kind", "nofollow"],
        "urls": ["url", "state", "last_status", "content_hash"],
        "document_texts": ["document_id", "text", "text_chars"],
    }
    frames = {t: lake.read(t) for t in cols}
    frames["documents"] = lake.with_text(frames["documents"])
    return {t: sorted(frames[t].select(c).rows()) for t, c in cols.items()}


def test_a_dagster_retried_fetch_partition_equals_one_clean_run(
    sandbox: SandboxProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clean, clean_lake = _materialize(sandbox, tmp_path / "clean")
    assert clean.success
    monkeypatch.setattr(failpoints, "_SPECS", failpoints._parse("after_commit=5:raise"))
    monkeypatch.setattr(failpoints, "_hits", failpoints.Counter())
    monkeypatch.setenv(failpoints.DIR_ENV, str(tmp_path / "failpoints"))  # fire once
    retried, retried_lake = _materialize(sandbox, tmp_path / "retried")
    assert retried.success
    events = {e.event_type_value for e in retried.all_events}
    assert "STEP_UP_FOR_RETRY" in events, "the first attempt should have failed and been retried"
    assert (tmp_path / "failpoints" / "after_commit").exists()
    want, got = _tables(clean_lake), _tables(retried_lake)
    for table in want:
        assert got[table] == want[table], table
    docs = retried_lake.read("documents")
    assert docs.height == docs["url"].n_unique()
    assert set(docs["batch_fence"]) == {2}  # written by the retry, the second batch lease
