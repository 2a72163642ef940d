"""Parser isolation: each document is parsed in a worker process under a CPU-time and a
memory limit; a document that loops, balloons or kills its worker is quarantined alone and
the pool goes on with the next one."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator

import pytest

from atlas_pipeline.extractor_pool import ExtractorPool, ParserFailure


def page(paragraphs: int) -> bytes:
    rows = "".join(
        f"<div><p>Paragraph {i} with some words to extract here and there.</p>"
        f"<a href='/x{i}'>link {i}</a></div>"
        for i in range(paragraphs)
    )
    return f"<html><body>{rows}</body></html>".encode()


SMALL = page(10)


# One worker each, so every case also shows a replacement worker taking the next document.
@pytest.fixture(scope="module")
def pool() -> Iterator[ExtractorPool]:
    with ExtractorPool(1, cpu_s=1.0, memory_mb=0) as p:
        yield p


@pytest.fixture(scope="module")
def small_pool() -> Iterator[ExtractorPool]:
    with ExtractorPool(1, cpu_s=60.0, memory_mb=64) as p:
        yield p


def parse(pool: ExtractorPool, body: bytes) -> dict[str, object]:
    return pool.submit(body, "http://a.example.test/", None, True).result(timeout=120)


def failure(pool: ExtractorPool, body: bytes) -> ParserFailure:
    with pytest.raises(ParserFailure) as info:
        parse(pool, body)
    return info.value


def test_an_ordinary_page_is_parsed(pool: ExtractorPool) -> None:
    out = parse(pool, SMALL)
    assert len(out["links"]) == 10  # type: ignore[arg-type]


def test_a_document_over_its_cpu_time_is_quarantined_alone(pool: ExtractorPool) -> None:
    started = time.monotonic()
    err = failure(pool, page(40_000))  # 4 MB: several CPU seconds of extraction
    assert err.reason == "parse_timeout" and "CPU" in err.detail
    assert time.monotonic() - started < 10
    assert len(parse(pool, SMALL)["links"]) == 10  # type: ignore[arg-type]


def test_a_document_over_its_memory_is_quarantined_alone(small_pool: ExtractorPool) -> None:
    err = failure(small_pool, page(60_000))  # its parse trees need far more than 64 MiB
    assert err.reason == "parse_memory"
    assert len(parse(small_pool, SMALL)["links"]) == 10  # type: ignore[arg-type]


def test_a_worker_killed_mid_document_costs_only_that_document(pool: ExtractorPool) -> None:
    parse(pool, SMALL)  # a live worker
    (pid,) = pool.worker_pids()
    fut = pool.submit(page(40_000), "http://a.example.test/", None, True)
    threading.Timer(0.3, os.kill, (pid, signal.SIGKILL)).start()
    with pytest.raises(ParserFailure) as info:
        fut.result(timeout=60)
    assert info.value.reason == "parse_crashed" and str(-signal.SIGKILL) in info.value.detail
    assert len(parse(pool, SMALL)["links"]) == 10  # type: ignore[arg-type]
    assert pool.worker_pids() != [pid]


def test_without_limits_the_same_documents_parse() -> None:
    """The control: the failures above come from the limits, not from broken documents."""
    with ExtractorPool(1, cpu_s=120.0, memory_mb=0) as free:
        assert len(parse(free, page(40_000))["links"]) == 40_000  # type: ignore[arg-type]


_ORPHAN_PARENT = """
import sys, time
from atlas_pipeline.extractor_pool import ExtractorPool
from tests.engine.test_parser_isolation import page
pool = ExtractorPool(1, cpu_s=120.0, memory_mb=0)
fut = pool.submit(page(200_000), "http://a.example.test/", None, True)  # a long parse
while not pool.worker_pids():
    time.sleep(0.01)
print(pool.worker_pids()[0], flush=True)
fut.result()
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as f:
            return not any(line.startswith("State:") and "Z" in line.split()[1] for line in f)
    except FileNotFoundError:
        return False


def _ignores_sigint(pid: int) -> bool:
    with open(f"/proc/{pid}/status") as f:
        mask = next(int(line.split()[1], 16) for line in f if line.startswith("SigIgn:"))
    return bool(mask & (1 << (signal.SIGINT - 1)))


def test_a_worker_dies_with_its_parent_even_mid_document() -> None:
    """`kill -9` of the crawl leaves no extraction worker behind, not even one busy with a
    long document (an idle one would see its pipe close; a busy one never looks)."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    parent = subprocess.Popen([sys.executable, "-c", _ORPHAN_PARENT], cwd=root,
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert parent.stdout is not None
    worker = int(parent.stdout.readline())
    deadline = time.monotonic() + 60
    while not _ignores_sigint(worker) and time.monotonic() < deadline:
        time.sleep(0.02)  # until the worker runs its own code (spawning imports first)
    time.sleep(0.5)  # into the parse, which takes minutes
    assert _alive(worker)
    os.kill(worker, signal.SIGINT)  # a Ctrl-C to the process group is the parent's to handle
    time.sleep(0.2)
    assert _alive(worker)
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 3
    while _alive(worker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(worker), "the worker outlived its parent"
