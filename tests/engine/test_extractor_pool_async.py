"""The extraction pool driven from event loops: a batch's loop writes the job to the worker
and reads its answer itself, with no thread of the pool carrying it; loops in several
threads share the workers; a parse cancelled mid-document costs that worker, not the pool."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest

from atlas_pipeline.extractor_pool import ExtractorPool, ParserFailure
from tests.engine.test_parser_isolation import SMALL, page

URL = "http://a.example.test/"


@pytest.fixture(scope="module")
def pool() -> Iterator[ExtractorPool]:
    with ExtractorPool(1, cpu_s=60.0, memory_mb=0) as p:
        assert p.wait_warm(120)
        yield p


def test_a_loop_parses_with_no_thread_of_the_pool_in_between(pool: ExtractorPool) -> None:
    seen: list[str] = []

    async def go() -> list[dict[str, object]]:
        first = asyncio.ensure_future(pool.parse(page(3000), URL, None, True))
        await asyncio.sleep(0.05)  # in the worker now
        seen.extend(t.name for t in threading.enumerate())
        return [await first] + [await pool.parse(SMALL, URL, None, True) for _ in range(3)]

    outs = asyncio.run(go())
    assert [len(o["links"]) for o in outs] == [3000, 10, 10, 10]  # type: ignore[arg-type]
    # the one thread the pool keeps spawns workers; none carries a job (submit's loop
    # thread is started only by a caller without a loop)
    ours = sorted(n for n in seen if n.startswith("extractor"))
    assert ours == ["extractor-spawn_0"], seen


def test_loops_in_two_threads_share_one_worker(pool: ExtractorPool) -> None:
    results: dict[int, list[int]] = {}

    def batch(i: int) -> None:
        async def go() -> list[int]:
            outs = await asyncio.gather(
                *(pool.parse(page(5 + i * 10 + k), URL, None, True) for k in range(4))
            )
            return [len(o["links"]) for o in outs]  # type: ignore[arg-type]

        results[i] = asyncio.run(go())

    threads = [threading.Thread(target=batch, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert results == {0: [5, 6, 7, 8], 1: [15, 16, 17, 18]}
    assert len(pool.worker_pids()) == 1


def test_a_parse_cancelled_mid_document_costs_its_worker_only(pool: ExtractorPool) -> None:
    async def go() -> tuple[list[int], list[int], int]:
        await pool.parse(SMALL, URL, None, True)
        before = pool.worker_pids()
        long = asyncio.ensure_future(pool.parse(page(100_000), URL, None, True))
        await asyncio.sleep(0.5)  # well into a parse of seconds
        long.cancel()
        with pytest.raises(asyncio.CancelledError):
            await long
        after = pool.worker_pids()
        # the next document gets a fresh worker, not the old one's late answer
        out = await asyncio.wait_for(pool.parse(page(7), URL, None, True), 120)
        return before, after, len(out["links"])  # type: ignore[arg-type]

    before, after, links = asyncio.run(go())
    assert len(before) == 1 and after == []  # the worker busy with it was stopped
    assert links == 7
    assert pool.worker_pids() not in ([], before)


def test_a_closed_pool_tells_its_callers() -> None:
    pool = ExtractorPool(1, cpu_s=60.0, memory_mb=0)
    pool.close()
    with pytest.raises(ParserFailure) as info:
        asyncio.run(pool.parse(SMALL, URL, None, True))
    assert info.value.reason == "parse_crashed" and "closed" in info.value.detail
    assert pool.submit(SMALL, URL, None, True).cancelled()
    assert pool.worker_pids() == []
