"""Back-pressure (issue: durable frontier, item 7): the coordination store (a real PostgreSQL)
becomes unreachable mid-batch. The batch stops taking leases, holds finished results, and
commits them once the store is back: no crash, no lost result, no page fetched twice."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import polars as pl
import pytest

from atlas_pipeline.config import config_from_mapping
from atlas_pipeline.crawl import Engine, FetchResult, fetch_shard, plan_frontier
from atlas_sandbox import normalize_url
from tests.conftest import SandboxProcess, sandbox_config
from tests.tcpproxy import TcpProxy

OUTAGE_S = 3.0


@pytest.fixture()
def proxied_store_url(pg_schema_url: str) -> Iterator[tuple[str, TcpProxy]]:
    parts = urlsplit(pg_schema_url)
    proxy = TcpProxy(parts.hostname or "127.0.0.1", parts.port or 5432)
    try:
        yield (
            pg_schema_url.replace(f"{parts.hostname}:{parts.port}", f"127.0.0.1:{proxy.port}"),
            proxy,
        )
    finally:
        proxy.close()


def _pages(sandbox: SandboxProcess) -> list[dict[str, Any]]:
    return [e for e in sandbox.log.entries(settle_s=0) if e["path"] != "/robots.txt"]


def test_a_store_outage_mid_batch_holds_results_and_loses_nothing(
    sandbox: SandboxProcess, tmp_path: Path, proxied_store_url: tuple[str, TcpProxy]
) -> None:
    url, proxy = proxied_store_url
    cfg = config_from_mapping(sandbox_config(
        sandbox, tmp_path, shards=1, coordination_url=url,
        politeness={"min_gap_s": 0.05, "max_in_flight": 1},
        limits={"total_timeout_s": 5, "lease_margin_s": 10, "store_outage_s": 60},
    ), base_dir=tmp_path)  # fmt: skip
    engine = Engine.from_config(cfg)
    plan_frontier(engine, "c0001", 0)
    sandbox.log.clear()
    result: list[FetchResult] = []
    crawl = threading.Thread(target=lambda: result.append(fetch_shard(engine, "c0001", 0)))
    crawl.start()
    deadline = time.time() + 60
    while len(_pages(sandbox)) < 15 and time.time() < deadline:
        time.sleep(0.01)
    proxy.cut()
    cut_at = time.time()
    time.sleep(OUTAGE_S)
    restored_at = time.time()
    proxy.restore()
    crawl.join(timeout=120)
    assert not crawl.is_alive() and result, "the batch did not finish after the store came back"
    stats = result[0].stats
    pages = _pages(sandbox)
    # no new lease while the store was away (requests already claimed may still leave at once)
    during = [e for e in pages if cut_at + 0.5 < e["start"] < restored_at]
    assert during == [], during
    assert stats.store_outages >= 1 and stats.store_outage_s >= OUTAGE_S - 1
    assert stats.max_held >= 1  # results were held through the outage, then committed
    repeated = sum(n - 1 for n in Counter((e["host"], e["path"]) for e in pages).values())
    assert repeated == 0 and stats.stale_commits == 0  # nothing fetched twice, nothing lost
    fetched = {normalize_url(e["origin"] + e["path"]) for e in pages if e["status"] == 200}
    assert fetched == sandbox.web.crawlable(50) | sandbox.web.sitemap_urls()
    states = Counter(r["state"] for r in engine.store.url_rows(0))
    assert set(states) <= {"fetched", "blocked"}, states
    docs = pl.read_delta(result[0].documents.uri)
    assert docs.height == docs["url"].n_unique() == len(fetched - sandbox.web.sitemap_urls())
    print(f"outage {stats.store_outage_s:.1f} s, results held {stats.max_held}")
    engine.close()


def test_the_crawl_progress_bar_survives_a_store_outage(
    tmp_path: Path,
    proxied_store_url: tuple[str, TcpProxy],
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`atlas crawl`'s progress thread reads the store twice a second: through a cut it says
    the store is unreachable and keeps asking, and once the store is back it counts again."""
    from assets.cli.crawl import CycleProgress
    from atlas_pipeline.config import config_from_mapping
    from atlas_pipeline.crawl import Engine, plan_frontier

    url, proxy = proxied_store_url
    cfg = config_from_mapping({"seeds": ["http://a.example.test/"], "data_dir": str(tmp_path),
                               "coordination_url": url, "shards": 1}, base_dir=tmp_path)  # fmt: skip
    engine = Engine.from_config(cfg)
    plan_frontier(engine, "c0001", 0)
    engine.close()
    monkeypatch.setenv("ATLAS_PROGRESS", "1")
    died: list[BaseException] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: died.append(args.exc_value))
    progress = CycleProgress(cfg)
    progress.start("c0001")
    time.sleep(1.5)
    proxy.cut()
    time.sleep(2.5)
    thread = progress._thread
    assert thread is not None and thread.is_alive() and died == []
    proxy.restore()
    time.sleep(2.0)
    progress.stop()
    err = capfd.readouterr().err
    assert "store unreachable, retrying" in err, err[-2000:]
    assert died == [] and "Traceback" not in err
    # after the cut the bar counted again: its last frame has the URL count and no warning
    last = err.replace("\r", "\n").strip().splitlines()[-1]
    assert "cycle c0001" in last and "/1 " in last and "unreachable" not in last, last


def test_an_outage_past_its_limit_fails_the_fetch_step_once_with_its_own_message(
    sandbox: SandboxProcess, tmp_path: Path, proxied_store_url: tuple[str, TcpProxy]
) -> None:
    """Through Dagster: past limits.store_outage_s the fetch step fails with the readable
    message, and its RetryPolicy does not start it again (a retry would meet the same
    outage, and its connect errors would bury the message)."""
    import dagster as dg

    from assets.definitions import CRAWL_JOB, build_definitions
    from assets.partitions import CYCLE_PARTITIONS, partition_key
    from atlas_pipeline.config import load_config
    from tests.conftest import write_config

    url, proxy = proxied_store_url
    cfg_path = write_config(tmp_path / "atlas.yaml", sandbox_config(
        sandbox, tmp_path, shards=1, coordination_url=url,
        politeness={"min_gap_s": 0.05, "max_in_flight": 1},
        limits={"total_timeout_s": 5, "lease_margin_s": 10, "store_outage_s": 1},
    ))  # fmt: skip
    cfg = load_config(cfg_path)
    job = build_definitions(cfg, str(cfg_path), None).resolve_job_def(CRAWL_JOB)
    sandbox.log.clear()
    done: list[dg.ExecuteInProcessResult] = []
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(CYCLE_PARTITIONS, ["c0001"])
        run = threading.Thread(target=lambda: done.append(job.execute_in_process(
            instance=instance, partition_key=str(partition_key("c0001", 0)),
            raise_on_error=False)))  # fmt: skip
        run.start()
        deadline = time.time() + 60
        while len(_pages(sandbox)) < 15 and time.time() < deadline:
            time.sleep(0.01)
        proxy.cut()
        try:
            run.join(timeout=120)
        finally:
            proxy.restore()
        assert not run.is_alive() and done, "the run did not end after the outage"
    result = done[0]
    assert not result.success
    events = [e.event_type_value for e in result.all_events]
    assert "STEP_UP_FOR_RETRY" not in events, events
    failures = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    assert len(failures) == 1 and failures[0].step_key == "fetch_batch", failures
    failure = failures[0].step_failure_data.user_failure_data  # raised as a dg.Failure
    assert failure is not None, failures[0].step_failure_data
    message = failure.description or ""
    assert "was unreachable for" in message and "re-run this partition" in message, message


def test_atlas_crawl_after_an_outage_past_its_limit_says_so_and_one_rerun_finishes(
    sandbox: SandboxProcess, tmp_path: Path, proxied_store_url: tuple[str, TcpProxy]
) -> None:
    """The CLI path end to end: `atlas crawl` through a PostgreSQL store cut for longer than
    limits.store_outage_s ends non-zero with the outage's own message on the run's line; once
    the store is back, one `atlas crawl --resume` finishes the partition: every page in
    `documents` and `index_ready`, none twice, none left leased."""
    import os
    import subprocess
    import sys

    from atlas_pipeline.config import load_config
    from tests.conftest import write_config

    url, proxy = proxied_store_url
    cfg_path = write_config(tmp_path / "atlas.yaml", sandbox_config(
        sandbox, tmp_path, shards=1, coordination_url=url,
        politeness={"min_gap_s": 0.05, "max_in_flight": 1},
        limits={"total_timeout_s": 5, "lease_margin_s": 10, "store_outage_s": 1},
    ))  # fmt: skip
    atlas = str(Path(sys.executable).parent / "atlas")
    env = {k: v for k, v in os.environ.items() if k != "ATLAS_FAILPOINTS"}
    env["DAGSTER_HOME"] = str(tmp_path / "dagster_home")
    sandbox.log.clear()
    crawl = subprocess.Popen([atlas, "crawl", "--config", str(cfg_path)], env=env, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    try:
        deadline = time.time() + 120
        while len(_pages(sandbox)) < 15 and time.time() < deadline and crawl.poll() is None:
            time.sleep(0.01)
        proxy.cut()
        try:
            out, err = crawl.communicate(timeout=300)
        finally:
            proxy.restore()
    finally:
        if crawl.poll() is None:
            crawl.kill()
    assert crawl.returncode == 1, out[-2000:] + err[-3000:]
    (line,) = [ln for ln in out.splitlines() if "c0001 shard_000" in ln]
    assert "FAILED" in line and "was unreachable for" in line, line
    assert "Traceback" not in out

    again = subprocess.run([atlas, "crawl", "--config", str(cfg_path), "--resume"], env=env,
                           capture_output=True, text=True, timeout=600)  # fmt: skip
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-3000:]
    assert "Finishing 1 partition(s)" in again.stdout and "0 new cycle(s)" in again.stdout
    cfg = load_config(cfg_path)
    docs = pl.read_delta(str(cfg.lake_path / "crawl" / "documents"))
    ready = pl.read_delta(str(cfg.lake_path / "crawl" / "index_ready"))
    assert set(docs["url"]) == {normalize_url(u) for u in sandbox.web.crawlable(50)}
    assert docs.height == docs["url"].n_unique()
    assert set(ready["url"]) >= set(docs["url"]) and ready.height == ready["event_id"].n_unique()
    engine = Engine.from_config(cfg)
    try:
        states = Counter(r["state"] for r in engine.store.url_rows(0))
    finally:
        engine.close()
    assert "leased" not in states, states
