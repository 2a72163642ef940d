"""A small indexer for tests and the demo: it stores every delivered event and counts the
duplicates (`atlas indexer --store FILE [--port N] [--fail-after N [--fail-mode M]]`).

Delivery to an indexer is at-least-once: a sender that does not hear back sends again, so
the indexer sees some events twice and has to tell. This one keeps everything it is sent, so a
test can check both that nothing was lost and how much was sent twice.

  POST /events    body {"events": [{"event_id": "<non-empty string>", ...any fields}, ...]}
                  200 {"received": n, "duplicates": d}: all n events appended to the store, d
                  of them with an event_id already stored (earlier in the same batch included)
                  400 {"error": ...}: not such a batch (bad JSON, no "events" list, an event
                  that is not an object or has no string event_id); nothing is stored
                  413 for a body over 64 MiB
  GET  /events    200 {"events": [...]}: every stored event in arrival order, duplicates kept;
                  with ?unique=1, only the first copy of each event_id
  GET  /stats     200 {"events": stored, "unique": distinct event_ids, "duplicates": stored
                  minus unique, "batches": batches accepted, "refused": batches cut}

The store is a JSON-lines file, one event per line exactly as received. A batch is written and
fsynced before its 200 goes out, so an acknowledged event survives a kill. On start the store
is read back: counts and duplicate detection carry over a restart. A last line without its
newline (the process died mid-write) is cut off; any other unreadable line stops the start.

Delivery cut, for tests of a sender's retries (`--fail-after N`): the first N batches are
accepted as usual; every later batch, until the process restarts, is
  --fail-mode 503    refused with 503 and a Retry-After: nothing stored (the default)
  --fail-mode close  stored, then the connection is dropped without an answer: the events
                     arrived but the sender cannot know, so its retry makes duplicates
Batches answered 400 count towards neither N nor "refused".
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

from aiohttp import web as aio_web

from .server import (
    _SHUTDOWN_TIMEOUT,
    LoopThread,
    _base_url,
    _bind,
    _cleanup_app,
    _loopback,
    _nothing,
    _serve_app,
    _stop_on_signals,
)

DEFAULT_INDEXER_PORT = 8090
"""Port `atlas indexer` listens on unless told otherwise."""

MAX_BATCH_BYTES = 64 * 1024 * 1024  # 64 MiB: events may carry document text
RETRY_AFTER_S = 1  # Retry-After on a 503 cut, in seconds

FailMode = Literal["503", "close"]
FAIL_MODES: tuple[FailMode, ...] = ("503", "close")


class StoreError(Exception):
    """The store file holds a line that is not a stored event (not one torn by a crash)."""


class BadBatch(ValueError):
    """A POST /events body that is not a batch of events; the message says why."""


def parse_batch(body: bytes) -> list[dict[str, Any]]:
    """The events of a POST /events body, or BadBatch. All are checked before any is stored,
    so a bad batch stores nothing."""
    try:
        doc = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadBatch(f"body is not JSON: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("events"), list):
        raise BadBatch('body must be an object with an "events" list')
    events: list[dict[str, Any]] = doc["events"]
    for i, event in enumerate(events):
        if not isinstance(event, dict):
            raise BadBatch(f"events[{i}] is not an object")
        event_id = event.get("event_id")
        if not isinstance(event_id, str) or not event_id:
            raise BadBatch(f"events[{i}] has no event_id (a non-empty string)")
    return events


class EventStore:
    """Events in a JSON-lines file, with their ids counted; thread-safe (a test may read it
    while the server thread writes)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._events: list[dict[str, Any]] = []
        self._ids: set[str] = set()
        self.torn_bytes = 0  # bytes of a torn last line cut off when the store was read back
        path.parent.mkdir(parents=True, exist_ok=True)
        self._load()
        self._file = path.open("a", encoding="utf-8")

    def _load(self) -> None:
        if not self.path.exists():
            return
        data = self.path.read_bytes()
        complete = data.rfind(b"\n") + 1
        if complete < len(data):
            # A write cut short by a kill: that batch was never acknowledged, so its sender
            # sends it again. Cutting the tail keeps the next append on a line of its own.
            self.torn_bytes = len(data) - complete
            with self.path.open("r+b") as fh:
                fh.truncate(complete)
                fh.flush()
                os.fsync(fh.fileno())
        for number, line in enumerate(data[:complete].splitlines(), start=1):
            try:
                event = json.loads(line)
                event_id = event["event_id"]
                if not isinstance(event_id, str):
                    raise TypeError("event_id is not a string")
            except (ValueError, TypeError, KeyError) as exc:
                raise StoreError(f"{self.path}:{number}: not a stored event ({exc})") from None
            self._events.append(event)
            self._ids.add(event_id)

    def append(self, events: list[dict[str, Any]]) -> tuple[int, int]:
        """Store a batch (durably, before returning); (received, duplicates)."""
        lines = "".join(json.dumps(e, separators=(",", ":")) + "\n" for e in events)
        with self._lock:
            duplicates = 0
            for event in events:
                if event["event_id"] in self._ids:
                    duplicates += 1
                self._ids.add(event["event_id"])
            self._file.write(lines)
            self._file.flush()
            # The 200 that follows tells the sender it may move its cursor on: make it true
            # even if this machine goes down next.
            os.fsync(self._file.fileno())
            self._events.extend(events)
        return len(events), duplicates

    def events(self, unique: bool = False) -> list[dict[str, Any]]:
        """Stored events in arrival order; ``unique``: each event_id's first copy only."""
        with self._lock:
            if not unique:
                return list(self._events)
            seen: set[str] = set()
            first = []
            for event in self._events:
                if event["event_id"] not in seen:
                    seen.add(event["event_id"])
                    first.append(event)
            return first

    def counts(self) -> dict[str, int]:
        """``{"events": stored, "unique": distinct ids, "duplicates": stored - unique}``."""
        with self._lock:
            total, unique = len(self._events), len(self._ids)
        return {"events": total, "unique": unique, "duplicates": total - unique}

    def close(self) -> None:
        with self._lock:
            self._file.close()


def check_fail(fail_after: int | None, fail_mode: str) -> FailMode:
    """``fail_mode`` as a FailMode if the pair is usable, else ValueError."""
    if fail_after is not None and fail_after < 0:
        raise ValueError(f"fail_after must be >= 0, not {fail_after}")
    for mode in FAIL_MODES:
        if fail_mode == mode:
            return mode
    raise ValueError(f"fail_mode must be one of {', '.join(FAIL_MODES)}, not {fail_mode!r}")


def make_indexer_app(
    store: EventStore, fail_after: int | None = None, fail_mode: str = "503"
) -> aio_web.Application:
    """The indexer's aiohttp app over ``store``; see the module docstring for the protocol."""
    mode = check_fail(fail_after, fail_mode)
    batches = {"accepted": 0, "refused": 0}

    async def post_events(request: aio_web.Request) -> aio_web.StreamResponse:
        try:
            events = parse_batch(await request.read())
        except BadBatch as exc:
            return aio_web.json_response({"error": str(exc)}, status=400)
        if fail_after is not None and batches["accepted"] >= fail_after:
            batches["refused"] += 1
            if mode == "503":
                headers = {"Retry-After": str(RETRY_AFTER_S)}
                body = {"error": f"delivery cut after {fail_after} batches (--fail-after)"}
                return aio_web.json_response(body, status=503, headers=headers)
            store.append(events)
            if request.transport is not None:
                request.transport.abort()  # the answer is lost; aiohttp writes nothing more
            return aio_web.Response(status=500)
        received, duplicates = store.append(events)
        batches["accepted"] += 1
        return aio_web.json_response({"received": received, "duplicates": duplicates})

    async def get_events(request: aio_web.Request) -> aio_web.StreamResponse:
        unique = request.query.get("unique", "") not in ("", "0", "false")
        return aio_web.json_response({"events": store.events(unique)})

    async def get_stats(request: aio_web.Request) -> aio_web.StreamResponse:
        return aio_web.json_response({**store.counts(), "batches": batches["accepted"],
                                      "refused": batches["refused"]})  # fmt: skip

    app = aio_web.Application(client_max_size=MAX_BATCH_BYTES)
    app.router.add_post("/events", post_events)
    app.router.add_get("/events", get_events)
    app.router.add_get("/stats", get_stats)
    return app


class IndexerServer:
    """The indexer in a background thread (for tests in one process); ``store`` is readable
    from the caller's thread. Port 0 binds any free port; ``port`` then holds the real one."""

    def __init__(
        self,
        store_path: Path,
        port: int = 0,
        host: str = "127.0.0.1",
        fail_after: int | None = None,
        fail_mode: str = "503",
    ) -> None:
        check_fail(fail_after, fail_mode)  # before the store opens
        self.host = _loopback(host)
        self.port = port
        self.fail_after, self.fail_mode = fail_after, fail_mode
        self.store = EventStore(store_path)
        self._server = LoopThread("atlas-indexer", _nothing, _cleanup_app)

    def url(self, path: str = "/events") -> str:
        """``http://127.0.0.1:PORT/path``."""
        return _base_url(self.host, self.port) + path

    def start(self) -> IndexerServer:
        """Bind and serve in a daemon thread; returns once the indexer accepts requests."""
        if self._server.running:
            raise RuntimeError("indexer already started")
        sock = _bind(self.host, self.port)
        self.port = sock.getsockname()[1]
        app = make_indexer_app(self.store, self.fail_after, self.fail_mode)
        self._server = LoopThread("atlas-indexer", lambda: _serve_app(app, sock), _cleanup_app,
                                  sock.close)  # fmt: skip
        self._server.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the store. Idempotent."""
        self._server.stop()
        self.store.close()

    def __enter__(self) -> IndexerServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def serve_indexer_forever(
    store_path: Path,
    port: int = DEFAULT_INDEXER_PORT,
    host: str = "127.0.0.1",
    fail_after: int | None = None,
    fail_mode: str = "503",
) -> None:
    """Run the indexer in the foreground until Ctrl-C or SIGTERM (for ``atlas indexer``)."""
    check_fail(fail_after, fail_mode)  # a bad flag fails before binding or opening the store
    address = _loopback(host)
    store = EventStore(store_path)
    sock = _bind(address, port)

    async def main() -> None:
        runner = aio_web.AppRunner(make_indexer_app(store, fail_after, fail_mode),
                                   access_log=None, shutdown_timeout=_SHUTDOWN_TIMEOUT)  # fmt: skip
        await runner.setup()
        await aio_web.SockSite(runner, sock).start()
        stop = asyncio.Event()
        _stop_on_signals(stop)
        counts = store.counts()
        torn = f", a torn last line of {store.torn_bytes} bytes cut" if store.torn_bytes else ""
        cut = (
            f"; delivery cut after {fail_after} batches (mode {fail_mode})"
            if fail_after is not None
            else ""
        )
        print(
            f"Atlas indexer: POST batches to {_base_url(address, sock.getsockname()[1])}/events; "
            f"store: {store_path} ({counts['events']} events, {counts['unique']} unique read "
            f"back{torn}){cut}",
            flush=True,
        )
        try:
            await stop.wait()
        finally:
            await runner.cleanup()

    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()
        store.close()
