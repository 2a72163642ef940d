"""The typed records a fetch produces, as the lake keeps them: a `fetches` row and a
`documents` row, without the partition keys and the batch fence the lake write adds.

The batch builds them, the coordination store serializes each once (JSON, in the commit's
transaction) and the lake write reads them back as rows. tests/engine/test_records.py holds
their fields to `lake_schema.SCHEMAS`, so a column added on one side fails until it is
added on the other.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field, fields
from typing import Any

import orjson

# columns the lake write adds to every row of a partition (not known when a fetch is made)
WRITE_COLUMNS = frozenset({"crawl_cycle", "origin_shard", "batch_fence"})


def _new_id() -> str:
    """A UUIDv7 (RFC 9562) as 32 hex digits: the Unix time in milliseconds, then 74 random
    bits. Ids made later sort later, so the fetch records a commit inserts land at the end of
    the store's primary-key index rather than on a random page each (a page written to the
    WAL per record at commit: 10% of a claim+commit pair on SQLite)."""
    ms = time.time_ns() // 1_000_000 & 0xFFFF_FFFF_FFFF
    rand = int.from_bytes(os.urandom(10), "big")  # 80 bits; 6 give way to version and variant
    value = (
        ms << 80 | (7 << 76) | (rand >> 68 & 0xFFF) << 64 | (0b10 << 62) | (rand & (1 << 62) - 1)
    )
    return f"{value:032x}"


@dataclass(slots=True, kw_only=True)
class FetchRecord:
    """One request and what it established (a row of `fetches`). `final_reason` (the reason
    a URL that ran out of attempts is left with) and `entries` (a sitemap's entry count) are
    kept with the record in the store, not in the lake."""

    fetch_id: str = field(default_factory=_new_id)
    kind: str = "page"  # page, sitemap, robots or subresource (asked for by a rendered page)
    url: str = ""
    origin: str = ""
    depth: int = 0
    status: int | None = None
    reason: str = ""
    content_type: str | None = None
    bytes: int = 0
    started_at: float = 0.0
    elapsed_s: float = 0.0
    etag: str | None = None
    last_modified: str | None = None
    location: str | None = None  # credentials redacted
    final_url: str | None = None  # where a redirect pointed, normalized
    lease_id: str | None = None
    fence: int = 0
    attempt: int = 1
    robots_version: int | None = None
    error: str | None = None
    body_key: str | None = None
    original_url: str | None = None  # the first URL of a redirect chain
    redirect_chain: list[str] = field(default_factory=list)
    conditional: bool = False
    final_reason: str | None = None
    entries: int | None = None

    def to_json(self) -> str:
        return to_json(_row(self, FETCH_FIELDS))


@dataclass(slots=True, kw_only=True)
class Document:
    """A page's extracted document (a row of `documents`); its text travels separately,
    stored once per text hash (`document_texts`)."""

    fetch_id: str
    url: str
    origin: str
    title: str | None = None
    author: str | None = None
    published: str | None = None
    description: str | None = None
    language: str | None = None
    text_hash: str = ""
    text_chars: int = 0
    canonical_hint: str | None = None
    charset: str | None = None
    body_key: str | None = None
    links_out: int = 0
    extraction_version: str = ""
    fetched_at: float = 0.0
    index_reason: str | None = None  # why it is kept out of the index (noindex), else None
    withdrawn_document_id: str | None = None  # an earlier upsert's id a delete withdraws
    render_reason: str | None = None  # render_needed, render_not_needed, ...; None: lane off

    def to_json(self) -> str:
        return to_json(_row(self, DOCUMENT_FIELDS))


FETCH_FIELDS = tuple(f.name for f in fields(FetchRecord))
DOCUMENT_FIELDS = tuple(f.name for f in fields(Document))
STORE_ONLY_FIELDS = frozenset({"final_reason", "entries"})


def _row(record: Any, names: tuple[str, ...]) -> dict[str, Any]:
    return {name: getattr(record, name) for name in names}


def to_json(value: Any) -> str:
    """JSON text of a record or a page's link rows, as the store keeps them: orjson, 5-8x
    json.dumps's speed, a call or three a page on the fetch path. Non-ASCII is written as
    UTF-8, not escaped; anything else not JSON by nature becomes its str(), as before."""
    return orjson.dumps(value, default=str, option=_AS_BEFORE).decode("utf-8")


# datetimes and dataclasses go to default=str as json.dumps sent them (orjson would spell
# them its own way)
_AS_BEFORE = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
