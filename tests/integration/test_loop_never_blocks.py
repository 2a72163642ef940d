"""The fetch loop never waits on the store (issue: the fetch hot path, item 1).

A coordination store whose every call takes 200 ms (a busy SQLite file, a far PostgreSQL)
must not stall the event loop: asyncio's debug mode reports each callback that ran longer
than 20 ms, and none may. The requests still keep their gap and in-flight cap as the
sandbox server saw them. (Before the store calls went to the batch's store thread, every
claim, commit and clock push ran on the loop: each showed up here as a 200 ms callback.)"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from atlas_pipeline.batch import BatchStats, FetchBatch
from atlas_pipeline.config import config_from_mapping
from atlas_pipeline.crawl import Engine, plan_frontier
from atlas_pipeline.extractor_pool import ExtractorPool
from tests.conftest import SandboxProcess, sandbox_config

STORE_CALL_S = 0.2
SLOW_CALLBACK_S = 0.02
GAP_S = 0.3
SERVER_JITTER_S = 0.02  # the server logs a request when it reads it, a moment after it left


class SlowStore:
    """A real store whose every call first sleeps (in the calling thread)."""

    def __init__(self, store: Any, delay_s: float) -> None:
        self._store, self._delay_s = store, delay_s
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._store, name)
        if name.startswith("_") or not callable(attr):
            return attr

        def slow(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            time.sleep(self._delay_s)
            return attr(*args, **kwargs)

        return slow


def test_a_slow_store_never_stalls_the_loop(
    sandbox: SandboxProcess, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cfg = config_from_mapping(sandbox_config(
        sandbox, tmp_path, shards=1, politeness={"min_gap_s": GAP_S, "max_in_flight": 1},
        scope={"max_pages_per_origin": 4},
    ), base_dir=tmp_path)  # fmt: skip
    engine = Engine.from_config(cfg)
    plan_frontier(engine, "c0001", 0)
    sandbox.log.clear()
    store = SlowStore(engine.store, STORE_CALL_S)

    async def batch(pool: ExtractorPool) -> BatchStats:
        asyncio.get_running_loop().slow_callback_duration = SLOW_CALLBACK_S
        return await FetchBatch(cfg, store, engine.bodies, pool, "c0001", 0).run()  # type: ignore[arg-type]

    limits = cfg.limits
    with (
        ExtractorPool(cfg.extraction_workers, limits.parser_cpu_s, limits.parser_memory_mb) as pool,
        caplog.at_level(logging.WARNING, logger="asyncio"),
    ):
        stats = asyncio.run(batch(pool), debug=True)
    slow = [r.getMessage() for r in caplog.records
            if r.name == "asyncio" and r.getMessage().startswith("Executing")]  # fmt: skip
    assert slow == [], slow
    assert store.calls > 20  # the store was in the way all along
    pages = [e for e in sandbox.log.entries() if e["path"] != "/robots.txt"]
    assert stats.requests >= len(pages) >= 10
    by_host: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for e in sorted(sandbox.log.entries(), key=lambda e: e["start"]):
        by_host[e["host"]].append(e)
    for host, entries in by_host.items():
        for a, b in itertools.pairwise(entries):
            assert b["start"] >= a["end"], (host, a["path"], b["path"])  # one in flight
            assert b["start"] - a["start"] >= GAP_S - SERVER_JITTER_S, (host, b["path"])
    engine.close()
