"""The indexer outbox (seed 001 ch. 13): no transaction spans the body store, the lake and the
indexer, so documents reach the indexer as events written with them, in the same partition
and under the same fence, and are delivered at least once afterwards. Event ids are
deterministic (document, version, action), so a re-delivery is a duplicate the indexer can
drop by id: exactly once in effect.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from .errors import AtlasError

UPSERT, DELETE = "upsert", "delete"  # a deletion travels the same way, as a tombstone


class DeliveryError(AtlasError):
    """The sink did not take a batch; nothing after it was sent."""


def event_id(url: str, document_id: str, version: str, action: str) -> str:
    key = "\x1f".join((url, document_id, version, action))
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:32]


NOINDEX = "noindex"  # documents.index_reason / index_ready.reason: the page said noindex
WITHHELD_PREFIX = "noindex:"  # a URL's document id in the store while it is kept out of the index


def withheld_id(text_hash: str) -> str:
    """The document id the store keeps for a URL whose document is withheld (noindex): other
    than the text hash, so the same text turning indexable again (or a delivered one turning
    noindex) counts as a change, and a URL never delivered is never deleted."""
    return WITHHELD_PREFIX + text_hash


def delivered_id(document_id: str | None) -> str | None:
    """The text hash an earlier upsert gave the indexer for a URL (None: none, or withheld)."""
    if document_id is None or document_id.startswith(WITHHELD_PREFIX):
        return None
    return document_id


def upsert_events(documents: Iterable[Mapping[str, Any]]) -> Iterator[dict[str, Any]]:
    """The index events of document rows: an upsert per indexable document (a URL and the
    content it holds); none for a withheld one (`index_reason` set, e.g. noindex), which
    instead withdraws, as a delete event, the document an earlier upsert delivered for its
    URL (`withdrawn_document_id`), if any."""
    for d in documents:
        version = str(d["extraction_version"])
        reason = d.get("index_reason")
        if reason:
            withdrawn = d.get("withdrawn_document_id")
            if withdrawn:
                yield {
                    "event_id": event_id(d["url"], withdrawn, version, DELETE),
                    "action": DELETE,
                    "url": d["url"],
                    "document_id": withdrawn,
                    "fetch_id": d["fetch_id"],
                    "title": None,
                    "language": None,
                    "extraction_version": version,
                    "fetched_at": d.get("fetched_at"),
                    "reason": reason,
                }
            continue
        yield {
            "event_id": event_id(d["url"], d["text_hash"], version, UPSERT),
            "action": UPSERT,
            "url": d["url"],
            "document_id": d["text_hash"],
            "fetch_id": d["fetch_id"],
            "title": d.get("title"),
            "language": d.get("language"),
            "extraction_version": version,
            "fetched_at": d.get("fetched_at"),
            "reason": None,
        }


class Sink(Protocol):
    def send(self, events: Sequence[Mapping[str, Any]]) -> None: ...


class HttpSink:
    """POST {"events": [...]} to an indexer endpoint; any non-2xx answer is a failure."""

    def __init__(self, url: str, timeout_s: float = 30.0) -> None:
        self.url, self.timeout_s = url, timeout_s

    def send(self, events: Sequence[Mapping[str, Any]]) -> None:
        body = json.dumps({"events": list(events)}, default=str).encode()
        req = urllib.request.Request(
            self.url, body, {"Content-Type": "application/json"}, method="POST"
        )
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                resp.read()
        except (urllib.error.URLError, OSError) as exc:
            raise DeliveryError(f"indexer {self.url} did not take the batch: {exc}") from None


class FolderSink:
    """One JSON-lines file per batch, named by its first event: a re-delivery rewrites the
    same file, and a reader never sees half a file (written aside, then renamed)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def send(self, events: Sequence[Mapping[str, Any]]) -> None:
        if not events:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        final = self.folder / f"events-{events[0]['event_id']}.jsonl"
        fd, tmp = tempfile.mkstemp(dir=self.folder, suffix=".part")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.writelines(json.dumps(e, default=str) + "\n" for e in events)
        os.replace(tmp, final)


def sink_for(target: str) -> Sink:
    """`http(s)://...` posts batches; `file:///folder` or a plain path writes files."""
    scheme = urlsplit(target).scheme
    if scheme in ("http", "https"):
        return HttpSink(target)
    if scheme in ("file", ""):
        return FolderSink(Path(target.removeprefix("file://")))
    raise DeliveryError(f"indexer sink {target!r}: use http(s)://host/path or file:///folder")


def deliver(events: Sequence[Mapping[str, Any]], sink: Sink, batch_size: int) -> int:
    """Send `events` in order, `batch_size` at a time; stops at the first failed batch."""
    sent = 0
    for i in range(0, len(events), batch_size):
        batch = events[i : i + batch_size]
        sink.send(batch)
        sent += len(batch)
    return sent
