"""The indexer outbox: deterministic event ids, idempotent sinks, delivery that stops at the
first refused batch (a real loopback endpoint, no mocks)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from atlas_pipeline.outbox import (
    DeliveryError,
    FolderSink,
    HttpSink,
    deliver,
    event_id,
    sink_for,
    upsert_events,
)
from tests.conftest import serving_app

DOCS = [
    {"url": f"https://a.test/{i}", "text_hash": f"h{i % 3}", "fetch_id": f"f{i}",
     "extraction_version": "3", "title": f"T{i}", "language": "en", "fetched_at": 1.0}
    for i in range(7)
]  # fmt: skip


def test_event_ids_are_deterministic_and_distinguish_what_matters() -> None:
    a = [e["event_id"] for e in upsert_events(DOCS)]
    assert a == [e["event_id"] for e in upsert_events(DOCS)]  # a re-run sends the same ids
    assert len(set(a)) == len(DOCS)  # one per URL, though contents repeat
    base = event_id("u", "d", "3", "upsert")
    assert len({base, event_id("u", "d", "4", "upsert"), event_id("u", "d", "3", "delete"),
                event_id("u", "e", "3", "upsert")}) == 4  # fmt: skip


def test_a_folder_sink_rewrites_a_redelivered_batch_in_place(tmp_path: Path) -> None:
    events = list(upsert_events(DOCS))
    sink = FolderSink(tmp_path / "out")
    assert deliver(events, sink, 3) == 7
    assert deliver(events, sink, 3) == 7  # at least once: the same files again
    files = sorted((tmp_path / "out").glob("*.jsonl"))
    assert len(files) == 3 and not list((tmp_path / "out").glob("*.part"))
    lines = [json.loads(line) for f in files for line in f.read_text().splitlines()]
    assert sorted(e["event_id"] for e in lines) == sorted(e["event_id"] for e in events)


@pytest.fixture
def endpoint() -> Iterator[tuple[str, list[list[dict[str, Any]]]]]:
    """A loopback indexer that takes two batches, then answers 503."""
    batches: list[list[dict[str, Any]]] = []

    async def take(request: web.Request) -> web.Response:
        if len(batches) >= 2:
            return web.Response(status=503)
        batches.append((await request.json())["events"])
        return web.json_response({"received": len(batches[-1])})

    app = web.Application()
    app.router.add_post("/events", take)
    with serving_app(app) as port:
        yield f"http://127.0.0.1:{port}/events", batches


def test_http_delivery_stops_at_the_first_refused_batch(
    endpoint: tuple[str, list[list[dict[str, Any]]]],
) -> None:
    url, batches = endpoint
    sink = sink_for(url)
    assert isinstance(sink, HttpSink)
    with pytest.raises(DeliveryError, match="did not take"):
        deliver(list(upsert_events(DOCS)), sink, 3)
    assert [len(b) for b in batches] == [3, 3]  # the third batch was refused, nothing after


def test_sink_targets_are_checked() -> None:
    assert isinstance(sink_for("file:///tmp/x"), FolderSink)
    with pytest.raises(DeliveryError, match="http"):
        sink_for("ftp://indexer.test/")
