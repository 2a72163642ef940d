"""A lease outlives the wait for a parse (the CI run of 53130bf: under a loaded machine, the
first 20 pages of a crash test waited for a worker longer than their 3 s lease, and were
fetched again while the first fetch was still on its way to a commit).

Two real waits, each made certain with a real process: an extraction worker stopped with
SIGSTOP once it is ready (the page waits in the parse backlog while its lease runs), and a
pool whose worker cannot start yet (the module's start lock held: the batch must lease no
page before a worker can take it). Real store, real loopback server, real batch code."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from atlas_pipeline import extractor_pool
from atlas_pipeline.batch import FetchBatch
from atlas_pipeline.config import CrawlConfig, config_from_mapping
from atlas_pipeline.coordination import Lease
from atlas_pipeline.crawl import Engine, plan_frontier
from atlas_pipeline.extractor_pool import ExtractorPool
from tests.conftest import SandboxProcess, running_sandbox, sandbox_config

LEASE_S = 4.0  # total_timeout_s + lease_margin_s below
SWEEP_S = 1.0  # batch.SWEEP_EVERY_S: an expired lease is back in the queue within this


@pytest.fixture()
def web(tmp_path: Path) -> Iterator[SandboxProcess]:
    with running_sandbox(tmp_path / "requests.jsonl", 1, 12) as server:
        yield server


def _config(web: SandboxProcess, tmp_path: Path) -> CrawlConfig:
    seed = web.web.seed_urls()[0]
    return config_from_mapping(sandbox_config(
        web, tmp_path, shards=1, seeds=[seed],
        politeness={"min_gap_s": 0.0, "max_in_flight": 1},
        scope={"max_pages_per_origin": 3},
        limits={"total_timeout_s": LEASE_S / 2, "lease_margin_s": LEASE_S / 2},
        discovery={"robots_sitemaps": False},
    ), base_dir=tmp_path)  # fmt: skip


def _lease_row(db: Path, url: str) -> dict[str, Any]:
    with sqlite3.connect(db) as conn:
        conn.row_factory = sqlite3.Row
        row = conn.execute(
            "SELECT state, fence, extended, lease_expires_at FROM urls WHERE url = ?", (url,)
        ).fetchone()
    return dict(row)


def _pages(web: SandboxProcess) -> list[dict[str, Any]]:
    return [e for e in web.log.entries(settle_s=0) if e["path"] != "/robots.txt"]


async def _page_lease(batch: FetchBatch) -> Lease:
    """Claim until a page's lease comes (robots.txt first, fetched by the batch's own code)."""
    for _ in range(200):
        got = await batch._claim(time.time(), 1)
        for claim in got if isinstance(got, list) else []:
            batch._net_active += 1  # as _start counts a claim
            if isinstance(claim, Lease):
                return claim
            await batch._fetch_robots(claim)
        await asyncio.sleep(0.05)
    raise AssertionError("no page was leased")


async def _pump(batch: FetchBatch) -> None:
    """The loop's store pump (commits, clock pushes, the lease sweep) for a fetch the test
    drives itself."""
    while batch._net_active or batch._parsing or batch._spool:
        await batch._flush(time.time())
        await asyncio.sleep(0.01)


def test_a_page_waiting_for_its_parse_keeps_its_lease_and_commits(
    web: SandboxProcess, tmp_path: Path
) -> None:
    cfg = _config(web, tmp_path)
    engine = Engine.from_config(cfg)
    plan_frontier(engine, "c0001", 0)
    db = tmp_path / "coordination.db"

    async def crawl(pool: ExtractorPool) -> tuple[Lease, dict[str, Any], Any]:
        batch = FetchBatch(cfg, engine.store, engine.bodies, pool, "c0001", 0)
        async with batch.running():
            lease = await _page_lease(batch)
            (worker,) = pool.worker_pids()
            os.kill(worker, signal.SIGSTOP)  # the page will wait for its parse
            try:
                fetching = asyncio.gather(batch._fetch_url(lease), _pump(batch))
                # past the lease as claimed and a sweep after it, the page still unparsed
                await asyncio.sleep(lease.expires_at + SWEEP_S + 0.5 - time.time())
                assert batch._parsing == 1 and not fetching.done()
                waiting = await asyncio.to_thread(_lease_row, db, lease.url)
            finally:
                os.kill(worker, signal.SIGCONT)
            await fetching
            return lease, waiting, batch.stats

    limits = cfg.limits
    with ExtractorPool(1, limits.parser_cpu_s, limits.parser_memory_mb) as pool:
        assert pool.wait_warm(60)
        lease, waiting, stats = asyncio.run(crawl(pool))
    assert len(_pages(web)) == 1  # answered at once: the wait was the parse's
    assert waiting["state"] == "leased" and waiting["fence"] == lease.fence, waiting
    assert waiting["extended"] == 1 and waiting["lease_expires_at"] > lease.expires_at, waiting
    assert stats.stale_commits == 0 and stats.extracted == 1, stats
    done = _lease_row(db, lease.url)
    engine.close()
    assert done["state"] == "fetched", done


def test_no_page_is_leased_before_a_worker_is_ready(web: SandboxProcess, tmp_path: Path) -> None:
    cfg = _config(web, tmp_path)
    engine = Engine.from_config(cfg)
    plan_frontier(engine, "c0001", 0)
    limits = cfg.limits
    held = extractor_pool._STARTING  # a worker starts under it: held, none can start
    held.acquire()
    released = False
    pool = None
    try:
        pool = ExtractorPool(1, limits.parser_cpu_s, limits.parser_memory_mb)

        async def crawl() -> Any:
            batch = FetchBatch(cfg, engine.store, engine.bodies, pool, "c0001", 0)
            running = asyncio.create_task(batch.run())
            await asyncio.sleep(LEASE_S / 2)
            nonlocal released
            assert not pool.warmed.is_set() and not running.done()
            assert _pages(web) == [], "a page was requested before any worker could parse it"
            leased = await asyncio.to_thread(
                lambda: [r for r in engine.store.url_rows(0) if r["state"] == "leased"]
            )
            assert leased == []
            held.release()
            released = True
            return await running

        stats = asyncio.run(crawl())
    finally:
        if not released:
            held.release()
        if pool is not None:
            pool.close()
    rows = engine.store.url_rows(0)
    engine.close()
    assert stats.requests >= 3 and stats.stale_commits == 0, stats
    assert sum(r["state"] == "fetched" for r in rows) == 3, rows
