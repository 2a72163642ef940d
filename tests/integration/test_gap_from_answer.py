"""The politeness gap holds as the origin sees it, even when the origin queues a request before
starting on it (politeness.gap_from = answer, the default).

Seen in CI: with the gap run from each request's send, the sandbox's busy server dated one
request 12 ms late against the next and logged 0.198 s for a 0.2 s gap that Atlas had kept on
its own clock. Here a real loopback origin queues every other page request 0.15 s before it
starts on it and logs when it starts. From the answer on, the next request waits a full gap,
so every two starts the origin logs are at least a gap apart: it started on the first before
it answered, and the second cannot reach it before it was sent. This holds by causality, not
by a margin, so the test does not depend on how loaded the machine is. With gap_from = send
the same origin logs starts closer than the gap while Atlas's own send times keep it."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from aiohttp import web

from atlas_pipeline.config import config_from_mapping
from atlas_pipeline.crawl import Engine, fetch_shard, plan_frontier
from tests.conftest import serving_app

GAP_S = 0.2
QUEUED_S = 0.15
PAGES = 8


class QueueingOrigin:
    """Pages /p0../p7, each linking to the next; every odd page request waits `QUEUED_S`
    before the origin starts on it. `starts` holds the start of every page request."""

    def __init__(self) -> None:
        self.starts: list[tuple[float, str]] = []
        self._lock = threading.Lock()
        self._seen = 0
        self.app = web.Application()
        self.app.router.add_get("/robots.txt", self._robots)
        self.app.router.add_get("/{page}", self._page)

    async def _robots(self, _: web.Request) -> web.Response:
        return web.Response(text="User-agent: *\nAllow: /\n")

    async def _page(self, request: web.Request) -> web.Response:
        with self._lock:
            queued = self._seen % 2 == 1
            self._seen += 1
        if queued:
            await asyncio.sleep(QUEUED_S)
        with self._lock:
            self.starts.append((time.time(), request.path))
        n = int(request.match_info["page"].removeprefix("p"))
        link = f"<a href='/p{n + 1}'>next</a>" if n + 1 < PAGES else ""
        body = (
            f"<html><head><title>Page {n}</title></head><body><p>page {n}</p>{link}</body></html>"
        )
        return web.Response(text=body, content_type="text/html")


@pytest.fixture()
def origin() -> Iterator[tuple[QueueingOrigin, int]]:
    site = QueueingOrigin()
    with serving_app(site.app) as port:
        yield site, port


def _crawl(port: int, tmp_path: Path, gap_from: str | None) -> pl.DataFrame:
    politeness: dict[str, Any] = {"min_gap_s": GAP_S, "max_in_flight": 1}
    if gap_from is not None:
        politeness["gap_from"] = gap_from
    cfg = config_from_mapping(
        {"seeds": [f"http://queueing.example.test:{port}/p0"], "data_dir": str(tmp_path),
         "shards": 1, "politeness": politeness,
         "resolve": {"queueing.example.test": "127.0.0.1"}, "resolve_only": True},
        base_dir=tmp_path,
    )  # fmt: skip
    engine = Engine.from_config(cfg)
    plan_frontier(engine, "c0001", 0)
    result = fetch_shard(engine, "c0001", 0)
    fetches = pl.read_delta(result.fetches.uri).filter(pl.col("kind") == "page")
    assert fetches.height == PAGES and fetches["status"].to_list() == [200] * PAGES
    return fetches


def _gaps(starts: list[float]) -> list[float]:
    return [b - a for a, b in itertools.pairwise(sorted(starts))]


def test_the_origin_sees_the_gap_though_it_queues_requests(
    origin: tuple[QueueingOrigin, int], tmp_path: Path
) -> None:
    site, port = origin
    _crawl(port, tmp_path, None)  # the default
    assert len(site.starts) == PAGES
    gaps = _gaps([t for t, _ in site.starts])
    assert min(gaps) >= GAP_S, gaps
    # each queued request held the next one back by its queueing, not only by the gap
    assert max(gaps) >= GAP_S + QUEUED_S, gaps


def test_gap_from_send_keeps_the_gap_on_atlas_clock_only(
    origin: tuple[QueueingOrigin, int], tmp_path: Path
) -> None:
    site, port = origin
    fetches = _crawl(port, tmp_path, "send")
    sent = [t.timestamp() for t in fetches["started_at"].to_list()]
    assert min(_gaps(sent)) >= GAP_S
    # the origin started on a queued request late, and on the next one a gap after the send
    assert min(_gaps([t for t, _ in site.starts])) < GAP_S - QUEUED_S / 2
