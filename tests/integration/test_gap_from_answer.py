"""The politeness gap holds as the origin sees it, even when the origin queues a request before
starting on it (politeness.gap_from = answer, the default).

Seen in CI: with the gap run from each request's send, the sandbox's busy server dated one
request 12 ms late against the next and logged 0.198 s for a 0.2 s gap that Atlas had kept on
its own clock. Here a real loopback origin queues every other page request 0.4 s before it
starts on it, and logs when it starts. From the answer on, the next request waits a full gap,
so every two starts the origin logs are at least a gap apart: it started on the first before
it answered, and the second cannot reach it before it was sent. The store's clock moves from
the answer too, before the request's slot goes back, so another run could not claim the
origin sooner. These hold by causality, not by a margin, whatever the machine's load. With
gap_from = send the same origin logs starts closer than the gap while Atlas's own send times
keep it (that test needs the next request out within 0.3 s of an answer: `timing`)."""

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

GAP_S = 0.5
QUEUED_S = 0.4
PAGES = 8


class QueueingOrigin:
    """Pages /p0../p7, each linking to the next; every odd page request (in arrival order)
    waits `QUEUED_S` before the origin starts on it. `starts` holds every page request's start."""

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


def _crawl(port: int, tmp_path: Path, gap_from: str | None) -> tuple[pl.DataFrame, float]:
    """The batch's page fetches, and the origin's clock in the store after it."""
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
    # the clock itself: an attempt to claim now would be vacuous, the batch's end being later
    (clock,) = engine.store._select("SELECT next_eligible_at FROM origins").fetchall()  # type: ignore[attr-defined]
    engine.close()
    fetches = pl.read_delta(result.fetches.uri).filter(pl.col("kind") == "page")
    assert fetches.height == PAGES and fetches["status"].to_list() == [200] * PAGES
    return fetches.sort("started_at"), float(clock[0])


def _gaps(starts: list[float]) -> list[float]:
    return [b - a for a, b in itertools.pairwise(sorted(starts))]


def test_the_origin_sees_the_gap_though_it_queues_requests(
    origin: tuple[QueueingOrigin, int], tmp_path: Path
) -> None:
    site, port = origin
    fetches, clock = _crawl(port, tmp_path, None)  # the default
    starts = sorted(t for t, _ in site.starts)
    assert len(starts) == PAGES
    assert min(_gaps(starts)) >= GAP_S, _gaps(starts)
    # Atlas held each request after a queued one back by the queueing as well as the gap
    # (one in flight: its sends and the origin's starts are in the same order)
    sent = [t.timestamp() for t in fetches["started_at"].to_list()]
    after_queued = [b - a for i, (a, b) in enumerate(itertools.pairwise(sent)) if i % 2 == 1]
    assert min(after_queued) >= GAP_S + QUEUED_S, after_queued
    # and the store's clock for other runs: a gap after the last answer, which came after
    # the origin started on the last (queued) request
    assert clock >= starts[-1] + GAP_S, (clock, starts[-1])


@pytest.mark.timing
def test_gap_from_send_keeps_the_gap_on_atlas_clock_only(
    origin: tuple[QueueingOrigin, int], tmp_path: Path
) -> None:
    site, port = origin
    fetches, _ = _crawl(port, tmp_path, "send")
    sent = [t.timestamp() for t in fetches["started_at"].to_list()]
    assert min(_gaps(sent)) >= GAP_S
    # the origin started on a queued request late, and on the next one a gap after the send
    assert min(_gaps([t for t, _ in site.starts])) < GAP_S - QUEUED_S / 2
