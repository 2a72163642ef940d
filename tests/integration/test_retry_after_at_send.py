"""A request claimed before a 429 arrived waits out its Retry-After before it leaves
(issue: the fetch hot path, item 2; seen in the field: one request started 0.47 s after a
429 with Retry-After: 5 had ended).

The lab's throttling origin answers every 4th page request 429 with Retry-After: 2. Two
URLs of it are claimed together (gap 0, two in flight); the first gets the 429; the second,
claimed before the 429 existed, must not reach the server inside the window. Each fetch runs
through the batch's own code (claim, send gate, fetch, classification) on a real store and
the real lab server; only the order of the two fetches is fixed by the test. With a lease
too short to wait the window out, the URL goes back untried instead."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from atlas_pipeline.batch import BatchStats, FetchBatch
from atlas_pipeline.config import config_from_mapping
from atlas_pipeline.coordination import Lease, RobotsTask
from atlas_pipeline.crawl import Engine, plan_frontier
from atlas_pipeline.extractor_pool import ExtractorPool
from atlas_pipeline.reasons import Reason
from atlas_sandbox import lab
from tests.conftest import SandboxProcess, running_sandbox, sandbox_config

# make test runs `timing` tests after the others, one at a time: it times a request against a
# Retry-After window
pytestmark = pytest.mark.timing

SERVER_JITTER_S = 0.05


@pytest.fixture()
def lab_web(tmp_path: Path) -> Iterator[SandboxProcess]:
    with running_sandbox(tmp_path / "requests.jsonl", origins=6, pages=15, lab=True) as web:
        yield web  # a fresh server: its per-origin request count starts at 0


def _pages(web: SandboxProcess) -> list[dict[str, Any]]:
    return sorted((e for e in web.log.entries() if e["host"] == lab.THROTTLED
                   and e["path"] not in ("/robots.txt", "/sitemap.xml")),
                  key=lambda e: e["start"])  # fmt: skip


async def _claim(batch: FetchBatch, room: int) -> list[Lease | RobotsTask]:
    for _ in range(100):
        got = await batch._claim(time.time(), room)
        if isinstance(got, list) and got:
            return got
        await asyncio.sleep(0.05)
    raise AssertionError(f"nothing to claim: {got}")


async def _fetch(batch: FetchBatch, claim: Lease | RobotsTask) -> None:
    batch._net_active += 1  # as _start counts a claim
    if isinstance(claim, RobotsTask):
        await batch._fetch_robots(claim)
    else:
        await asyncio.gather(batch._fetch_url(claim), _commits(batch))


async def _commits(batch: FetchBatch) -> None:
    """The loop's store pump, for fetches the test drives itself."""
    while batch._net_active or batch._parsing or batch._spool:
        await batch._flush(time.time())
        await asyncio.sleep(0.01)


def _run(
    web: SandboxProcess, tmp_path: Path, margin_s: float
) -> tuple[list[Any], BatchStats, dict[str, Any]]:
    cfg = config_from_mapping(sandbox_config(
        web, tmp_path, shards=1, seeds=[web.url(lab.THROTTLED)],
        politeness={"min_gap_s": 0.0, "max_in_flight": 2},
        limits={"total_timeout_s": 2, "lease_margin_s": margin_s},
        discovery={"robots_sitemaps": False},
    ), base_dir=tmp_path)  # fmt: skip
    engine = Engine.from_config(cfg)
    plan_frontier(engine, "c0001", 0)

    async def crawl(pool: ExtractorPool) -> list[Any]:
        batch = FetchBatch(cfg, engine.store, engine.bodies, pool, "c0001", 0)
        async with batch.running():
            while len(_pages(web)) < 3:  # requests 1-3 answer; the 4th is throttled
                for claim in await _claim(batch, 1):
                    await _fetch(batch, claim)
            pair = await _claim(batch, 2)
            assert len(pair) == 2 and all(isinstance(c, Lease) for c in pair), pair
            for claim in pair:
                await _fetch(batch, claim)
            return [pair, batch.stats]  # the stats as they stand once the pair is done

    limits = cfg.limits
    with ExtractorPool(1, limits.parser_cpu_s, limits.parser_memory_mb) as pool:
        pair, stats = asyncio.run(crawl(pool))
    rows = {r["url"]: r for r in engine.store.url_rows(0)}
    engine.close()
    return pair, stats, rows


def test_a_request_claimed_before_a_429_waits_out_its_retry_after(
    lab_web: SandboxProcess, tmp_path: Path
) -> None:
    pair, _, _ = _run(lab_web, tmp_path, margin_s=10)
    pages = _pages(lab_web)
    throttled = [e for e in pages if e["status"] == 429]
    assert len(throttled) == 1 and len(pages) == 5, pages
    first, second = throttled[0], pages[-1]
    assert first["path"] in pair[0].url and second["path"] in pair[1].url
    assert second["start"] >= first["end"] + lab.RETRY_AFTER_S - SERVER_JITTER_S, (first, second)


def test_a_backoff_that_outlasts_the_lease_gives_the_url_back_untried(
    lab_web: SandboxProcess, tmp_path: Path
) -> None:
    # a lease of 2 + 1 s cannot wait out a 2 s Retry-After and still leave a 1 s margin
    pair, stats, rows = _run(lab_web, tmp_path, margin_s=1)
    pages = _pages(lab_web)
    assert [e["status"] for e in pages].count(429) == 1 and len(pages) == 4, pages
    untried = rows[pair[1].url]
    assert (untried["state"], untried["reason"]) == (
        "failed_retryable",
        Reason.DEFERRED_BACKOFF.value,
    )
    assert untried["due_at"] >= time.time() - lab.RETRY_AFTER_S  # due when the backoff ends
    assert stats.outcomes[Reason.DEFERRED_BACKOFF.value] == 1
