"""A fetch batch and its lake write run with the start-up heap frozen out of full collections
and the youngest generation collected less often, and give both back as they were when they
end."""

from __future__ import annotations

import gc
import signal
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from aiohttp import web

from atlas_pipeline.batch import BatchStats
from atlas_pipeline.config import config_from_mapping
from atlas_pipeline.crawl import Engine, FetchResult, fetch_shard, plan_frontier
from atlas_pipeline.errors import BatchInterrupted
from atlas_pipeline.heap import YOUNG_OBJECTS, start_heap_frozen
from tests.conftest import serving_app


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def _cycle() -> weakref.ref[_Node]:
    """A reference cycle nothing else holds: only a collection frees it."""
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    return weakref.ref(a)


@pytest.fixture()
def unfrozen() -> Iterator[None]:
    assert gc.get_freeze_count() == 0, "a test left the heap frozen"
    yield
    gc.unfreeze()


def test_the_heap_is_frozen_inside_and_collected_again_after(unfrozen: None) -> None:
    before = _cycle()
    with start_heap_frozen():
        # garbage of before the block is collected, not kept frozen for its length
        assert before() is None
        assert gc.get_freeze_count() > 0
        inside = _cycle()
        gc.collect()
        assert inside() is None  # what the block allocates stays collectable
    assert gc.get_freeze_count() == 0


def test_garbage_that_was_frozen_is_collected_after_the_block(unfrozen: None) -> None:
    with start_heap_frozen():
        probe = _cycle()
        gc.freeze()  # the cycle, garbage already, is in the permanent generation now
        gc.collect()
        assert probe() is not None  # frozen: no collection sees it
    gc.collect()
    assert probe() is None  # back with the collector once the block is over


def test_the_young_generation_waits_longer_inside_and_as_before_after(unfrozen: None) -> None:
    before = gc.get_threshold()
    with start_heap_frozen():
        assert gc.get_threshold() == (YOUNG_OBJECTS, *before[1:])
        assert before[0] < YOUNG_OBJECTS
    assert gc.get_threshold() == before
    with pytest.raises(RuntimeError), start_heap_frozen():
        raise RuntimeError("the batch failed")
    assert gc.get_threshold() == before


def test_a_heap_frozen_by_the_caller_stays_frozen(unfrozen: None) -> None:
    gc.freeze()
    frozen = gc.get_freeze_count()
    with start_heap_frozen():
        assert gc.get_freeze_count() == frozen
    assert gc.get_freeze_count() == frozen  # the caller's to undo


def test_an_error_in_the_block_still_gives_the_heap_back(unfrozen: None) -> None:
    with pytest.raises(RuntimeError), start_heap_frozen():
        assert gc.get_freeze_count() > 0
        raise RuntimeError("the batch failed")
    assert gc.get_freeze_count() == 0


def six_pages_crawled(
    tmp_path: Path,
    on_progress: Callable[[BatchStats], None] | None = None,
) -> FetchResult:
    """One fetch_shard of a loopback site of six linked pages."""
    app = web.Application()

    async def page(request: web.Request) -> web.Response:
        n = int(request.match_info["n"])
        links = "".join(f"<a href='/p/{k}'>page {k}</a>" for k in (n + 1, n + 2) if k < 6)
        text = f"<p>Page {n} of six, about the harbour's {n + 1} cranes and their tolls.</p>"
        return web.Response(text=f"<html><body><article>{text * 20}</article>{links}</body></html>",
                            content_type="text/html")  # fmt: skip

    async def robots(_: web.Request) -> web.Response:
        return web.Response(text="User-agent: *\nAllow: /\n")

    app.router.add_get("/robots.txt", robots)
    app.router.add_get("/p/{n}", page)
    with serving_app(app) as port:
        cfg = config_from_mapping(
            {"seeds": [f"http://six.example.test:{port}/p/0"], "data_dir": str(tmp_path),
             "shards": 1, "politeness": {"min_gap_s": 0.0},
             "resolve": {"six.example.test": "127.0.0.1"}, "resolve_only": True},
            base_dir=tmp_path,
        )  # fmt: skip
        engine = Engine.from_config(cfg)
        try:
            plan_frontier(engine, "c0001", 0)
            return fetch_shard(engine, "c0001", 0, on_progress=on_progress)
        finally:
            engine.close()


def test_a_batch_runs_with_its_heap_frozen_and_leaves_it_unfrozen(
    unfrozen: None, tmp_path: Path
) -> None:
    seen: list[tuple[int, int]] = []

    def progress(stats: BatchStats) -> None:
        seen.append((sum(stats.outcomes.values()), gc.get_freeze_count()))

    result = six_pages_crawled(tmp_path, progress)
    assert result.stats.outcomes.get("fetched", 0) == 6
    assert seen and seen[-1][0] >= 6
    assert all(frozen > 0 for _, frozen in seen)  # every report came from a frozen heap
    assert gc.get_freeze_count() == 0


def test_a_ctrl_c_while_the_heap_is_collected_interrupts_the_batch(
    unfrozen: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The heap is collected once the batch holds SIGINT: a Ctrl-C that comes then is the
    batch's, which stops at once with nothing fetched, never the handler's before it (a
    Dagster run worker's notes it for later, and the batch ran to its end: CI saw a shard
    run of `atlas crawl` go on fetching seconds after a Ctrl-C)."""
    before: list[int] = []  # what the handler in place before the batch got (Dagster's)
    previous = signal.signal(signal.SIGINT, lambda signum, frame: before.append(signum))
    collect = gc.collect
    signalled: list[bool] = []

    def ctrl_c_while_collecting(*args: int) -> int:
        if not signalled:  # the first collection: the batch's own, as it starts
            signalled.append(True)
            signal.raise_signal(signal.SIGINT)
        return collect(*args)

    monkeypatch.setattr(gc, "collect", ctrl_c_while_collecting)
    try:
        with pytest.raises(BatchInterrupted, match="0 results committed") as stopped:
            six_pages_crawled(tmp_path)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert signalled, "the batch collected no garbage"
    assert before == []  # the batch took it
    assert stopped.value.committed == 0
    assert gc.get_freeze_count() == 0


def test_a_second_ctrl_c_while_the_batch_is_set_up_stops_it_at_once(
    unfrozen: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As during a batch: the second one raises KeyboardInterrupt there and then, and the
    handler in place before is back afterwards, having got neither."""
    before: list[int] = []
    handler = lambda signum, frame: before.append(signum)  # noqa: E731
    previous = signal.signal(signal.SIGINT, handler)
    collect = gc.collect
    signalled: list[bool] = []

    def two_ctrl_c_while_collecting(*args: int) -> int:
        if not signalled:
            signalled.append(True)
            signal.raise_signal(signal.SIGINT)
            signal.raise_signal(signal.SIGINT)
        return collect(*args)

    monkeypatch.setattr(gc, "collect", two_ctrl_c_while_collecting)
    try:
        with pytest.raises(KeyboardInterrupt):
            six_pages_crawled(tmp_path)
        assert signal.getsignal(signal.SIGINT) is handler
    finally:
        signal.signal(signal.SIGINT, previous)
    assert signalled and before == []
    assert gc.get_freeze_count() == 0


def test_a_ctrl_c_after_the_batch_goes_on_to_the_handler_before(
    unfrozen: None, tmp_path: Path
) -> None:
    """One that comes once the batch is over (here: while it reports its end) was not the
    batch's: the handler in place before gets it."""
    before: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: before.append(signum))

    def progress(stats: BatchStats) -> None:
        if stats.finished_at:  # the report at the end, after the loop gave SIGINT back
            signal.raise_signal(signal.SIGINT)

    try:
        result = six_pages_crawled(tmp_path, progress)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert result.stats.outcomes.get("fetched", 0) == 6 and not result.stats.interrupted
    assert before == [signal.SIGINT]
