"""A worker is fed one document ahead: the next one waits in its pipe while it parses, so it
never idles waiting for the pool's thread. A document behind one that kills, overruns or
outgrows its worker was never begun: it goes to the next worker and parses."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

import pytest

from atlas_pipeline.extractor_pool import ExtractorPool, ParserFailure
from tests.engine.test_parser_isolation import SMALL, page

URL = "http://a.example.test/"


# A CPU cap far above what these documents take, even on a machine loaded by other tests
# (CI's parallel run took page(5000) past a 1 s cap); the overrun case has a pool of its own.
@pytest.fixture(scope="module")
def pool() -> Iterator[ExtractorPool]:
    with ExtractorPool(1, cpu_s=60.0, memory_mb=0) as p:
        assert p.wait_warm(120)
        yield p


def _submit(pool: ExtractorPool, body: bytes) -> Future[dict[str, Any]]:
    return pool.submit(body, URL, None, True)


def _most_out(pool: ExtractorPool, until: Future[dict[str, Any]]) -> int:
    """The most jobs out to the pool's one worker at once while `until` runs."""
    most = 0
    while not until.done():
        most = max(most, pool._slots[0].out)
        time.sleep(0.005)
    return most


def test_the_next_document_waits_in_the_workers_pipe(pool: ExtractorPool) -> None:
    _submit(pool, SMALL).result(timeout=60)
    first = _submit(pool, page(5000))  # a parse of a few hundred ms
    second = _submit(pool, page(12))
    assert _most_out(pool, first) == 2
    assert len(first.result(timeout=60)["links"]) == 5000
    assert len(second.result(timeout=60)["links"]) == 12


def test_a_large_document_waits_for_the_worker_instead(pool: ExtractorPool) -> None:
    big = page(3000)
    assert len(big) > 128 * 1024  # over what may go out ahead
    first = _submit(pool, page(5000))
    second = _submit(pool, big)
    assert _most_out(pool, first) == 1
    assert len(second.result(timeout=60)["links"]) == 3000


def test_a_document_behind_a_killed_worker_goes_to_the_next(pool: ExtractorPool) -> None:
    _submit(pool, SMALL).result(timeout=60)
    (pid,) = pool.worker_pids()
    first = _submit(pool, page(40_000))
    second = _submit(pool, page(11))
    threading.Timer(0.3, os.kill, (pid, signal.SIGKILL)).start()
    with pytest.raises(ParserFailure) as info:
        first.result(timeout=60)
    assert info.value.reason == "parse_crashed"
    assert len(second.result(timeout=60)["links"]) == 11
    assert pool.worker_pids() not in ([], [pid])


def test_a_document_behind_an_overrun_goes_to_the_next() -> None:
    with ExtractorPool(1, cpu_s=1.0, memory_mb=0) as capped:
        first = _submit(capped, page(40_000))  # several CPU seconds: over the 1 s cap
        second = _submit(capped, page(13))
        with pytest.raises(ParserFailure) as info:
            first.result(timeout=60)
        assert info.value.reason == "parse_timeout" and "CPU" in info.value.detail
        assert len(second.result(timeout=60)["links"]) == 13


def test_a_document_behind_an_outgrown_worker_goes_to_the_next() -> None:
    with ExtractorPool(1, cpu_s=60.0, memory_mb=64) as small:
        first = _submit(small, page(60_000))  # its parse trees need far more than 64 MiB
        second = _submit(small, page(14))
        with pytest.raises(ParserFailure) as info:
            first.result(timeout=120)
        assert info.value.reason == "parse_memory"
        assert len(second.result(timeout=120)["links"]) == 14
