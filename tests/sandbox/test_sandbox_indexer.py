"""The test indexer (`atlas indexer`) in its own process on loopback, posted to with http.client:
events stored and read back, duplicates counted, restarts, torn and corrupt stores, and the
delivery cut (--fail-after, in both modes). One test runs it in process under concurrent posts.
"""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from atlas_sandbox import IndexerServer
from tests.conftest import ROOT, running_indexer

Answer = tuple[int, dict[str, str], Any]
Stats = Callable[[], dict[str, int]]


def request(port: int, method: str, path: str, body: bytes | None = None) -> Answer:
    """One request; the JSON answer decoded (None for an empty body)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        headers = {"Content-Type": "application/json"} if body is not None else {}
        conn.request(method, path, body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, json.loads(data or "null")
    finally:
        conn.close()


def post(port: int, events: list[dict[str, Any]]) -> Answer:
    return request(port, "POST", "/events", json.dumps({"events": events}).encode())


def ev(event_id: str, **fields: Any) -> dict[str, Any]:
    return {"event_id": event_id, **fields}


def stored(port: int, unique: bool = False) -> list[dict[str, Any]]:
    status, _, body = request(port, "GET", "/events?unique=1" if unique else "/events")
    assert status == 200
    return list(body["events"])


def store_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_stores_every_event_and_counts_duplicates(tmp_path: Path) -> None:
    store = tmp_path / "events.jsonl"
    first = [ev("a", action="upsert", doc={"title": "Zürich", "n": [1, 2]}), ev("b"), ev("a")]
    with running_indexer(store) as (port, stats):
        assert stats() == {"events": 0, "unique": 0, "duplicates": 0, "batches": 0, "refused": 0}
        status, _, body = post(port, first)
        assert (status, body) == (200, {"received": 3, "duplicates": 1})  # a twice in one batch
        status, _, body = post(port, [ev("b"), ev("c", action="delete")])
        assert (status, body) == (200, {"received": 2, "duplicates": 1})
        assert post(port, [])[2] == {"received": 0, "duplicates": 0}
        assert stats() == {"events": 5, "unique": 3, "duplicates": 2, "batches": 3, "refused": 0}
        everything = [*first, ev("b"), ev("c", action="delete")]
        assert stored(port) == everything
        assert stored(port, unique=True) == [first[0], ev("b"), ev("c", action="delete")]
    assert store_lines(store) == everything  # each event as it was sent, one a line


@pytest.fixture(scope="module")
def refusing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, Stats, Path]]:
    """One indexer for every bad batch: none of them may leave a trace, so they can share it."""
    store = tmp_path_factory.mktemp("indexer") / "events.jsonl"
    with running_indexer(store) as (port, stats):
        yield port, stats, store


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"\xff\xfe",
        b"[]",
        b'{"events": {}}',
        b'{"batch": []}',
        b'{"events": [1]}',
        b'{"events": [{"id": "a"}]}',
        b'{"events": [{"event_id": ""}]}',
        b'{"events": [{"event_id": 7}]}',
        b'{"events": [{"event_id": "ok"}, {"event_id": null}]}',  # one bad event spoils it all
    ],
)
def test_a_bad_batch_stores_nothing(refusing: tuple[int, Stats, Path], body: bytes) -> None:
    port, stats, store = refusing
    status, _, answer = request(port, "POST", "/events", body)
    assert status == 400 and answer["error"]
    assert stats() == {"events": 0, "unique": 0, "duplicates": 0, "batches": 0, "refused": 0}
    assert store.read_bytes() == b""


def test_a_batch_over_a_mebibyte_is_accepted(tmp_path: Path) -> None:
    """aiohttp refuses bodies over 1 MiB unless told: batches carrying text need more."""
    events = [ev(f"doc-{i}", text="word " * 2000) for i in range(600)]  # ~6 MB
    with running_indexer(tmp_path / "events.jsonl") as (port, stats):
        assert post(port, events)[:1] == (200,)
        assert stats()["unique"] == 600


def test_counts_survive_a_restart(tmp_path: Path) -> None:
    store = tmp_path / "events.jsonl"
    with running_indexer(store) as (port, _):
        post(port, [ev("a"), ev("b")])
        post(port, [ev("b")])
    with running_indexer(store) as (port, stats):
        assert stats() == {"events": 3, "unique": 2, "duplicates": 1, "batches": 0, "refused": 0}
        assert post(port, [ev("a"), ev("c")])[2] == {"received": 2, "duplicates": 1}
        assert [e["event_id"] for e in stored(port)] == ["a", "b", "b", "a", "c"]
    assert [e["event_id"] for e in store_lines(store)] == ["a", "b", "b", "a", "c"]


def test_a_torn_last_line_is_cut_on_start(tmp_path: Path) -> None:
    """A kill mid-write leaves half a line, never acknowledged: dropped, and the next event
    starts a line of its own."""
    store = tmp_path / "events.jsonl"
    store.write_bytes(b'{"event_id":"a"}\n{"event_id":"b","te')
    with running_indexer(store) as (port, stats):
        assert stats()["events"] == 1
        assert post(port, [ev("b")])[2] == {"received": 1, "duplicates": 0}
    assert store_lines(store) == [ev("a"), ev("b")]


def test_a_corrupt_store_stops_the_start(tmp_path: Path) -> None:
    store = tmp_path / "events.jsonl"
    store.write_bytes(b'{"event_id":"a"}\nnot an event\n{"event_id":"b"}\n')
    cmd = [sys.executable, "-m", "assets.cli", "indexer", "--port", "0", "--store", str(store)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert f"{store}:2: not a stored event" in done.stderr
    assert store.read_bytes().startswith(b'{"event_id":"a"}\nnot an event\n')  # left as it was


def test_cli_refuses_fail_mode_without_fail_after(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "assets.cli", "indexer", "--port", "0",
           "--store", str(tmp_path / "e.jsonl"), "--fail-mode", "close"]  # fmt: skip
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--fail-mode only means something" in done.stderr


# ---------------------------------------------------------------------- delivery cut


def test_fail_after_refuses_later_batches_with_503(tmp_path: Path) -> None:
    store = tmp_path / "events.jsonl"
    batches = [[ev(f"{n}-{i}") for i in range(3)] for n in range(4)]
    with running_indexer(store, fail_after=2) as (port, stats):
        assert [post(port, b)[0] for b in batches[:2]] == [200, 200]
        status, headers, body = post(port, batches[2])
        assert status == 503 and headers["retry-after"] == "1" and "--fail-after" in body["error"]
        assert post(port, batches[3])[0] == 503  # cut until restarted
        assert request(port, "POST", "/events", b"{}")[0] == 400  # bad is still bad
        assert stats() == {"events": 6, "unique": 6, "duplicates": 0, "batches": 2, "refused": 2}
    # The sender's retry after the cut: from its last acknowledged batch on, or from the start.
    with running_indexer(store) as (port, stats):
        for batch in batches:
            assert post(port, batch)[0] == 200
        assert stats() == {"events": 18, "unique": 12, "duplicates": 6, "batches": 4, "refused": 0}
        assert sorted(e["event_id"] for e in stored(port, unique=True)) == sorted(
            e["event_id"] for b in batches for e in b
        )


def test_fail_after_close_stores_then_drops_the_answer(tmp_path: Path) -> None:
    store = tmp_path / "events.jsonl"
    with running_indexer(store, fail_after=1, fail_mode="close") as (port, stats):
        assert post(port, [ev("a")])[0] == 200
        with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
            post(port, [ev("b"), ev("c")])
        assert stats() == {"events": 3, "unique": 3, "duplicates": 0, "batches": 1, "refused": 1}
    with running_indexer(store) as (port, stats):
        # The sender never heard back, so it sends b and c again: stored twice, counted.
        assert post(port, [ev("b"), ev("c")])[2] == {"received": 2, "duplicates": 2}
        assert stats()["unique"] == 3 and stats()["duplicates"] == 2


def test_fail_after_zero_refuses_the_first_batch(tmp_path: Path) -> None:
    with running_indexer(tmp_path / "events.jsonl", fail_after=0) as (port, stats):
        assert post(port, [ev("a")])[0] == 503
        assert stats()["events"] == 0 and stats()["refused"] == 1


# ---------------------------------------------------------------------- in process


def test_concurrent_batches_never_interleave(tmp_path: Path) -> None:
    """Eight senders at once, 25 batches each, every id sent twice: every line of the store
    parses and the counts add up."""
    store = tmp_path / "events.jsonl"
    errors: list[BaseException] = []
    with IndexerServer(store) as server:

        def sender(k: int) -> None:
            try:
                for n in range(25):
                    batch = [ev(f"{k}-{n}-{i}", pad="x" * 500) for i in range(10)]
                    for _ in range(2):
                        assert post(server.port, batch)[0] == 200
            except BaseException as exc:  # reported below, in the test's thread
                errors.append(exc)

        threads = [threading.Thread(target=sender, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not errors
        assert server.store.counts() == {"events": 4000, "unique": 2000, "duplicates": 2000}
        assert server.url() == f"http://127.0.0.1:{server.port}/events"
    lines = store_lines(store)
    assert len(lines) == 4000 and len({e["event_id"] for e in lines}) == 2000


def test_in_process_rejects_bad_fail_settings(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        IndexerServer(tmp_path / "e.jsonl", fail_after=-1)
    with pytest.raises(ValueError):
        IndexerServer(tmp_path / "e.jsonl", fail_mode="drop")
    assert not (tmp_path / "e.jsonl").exists()  # refused before the store is opened
