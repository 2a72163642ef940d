"""WARC/1.1 export of one (cycle, shard) partition (`atlas export-warc`, the `warc_files` asset).

Every fetch that got a response becomes a `request` record and a `response` or `revisit`
record, written with warcio from the lake's `fetches` rows and the stored bodies:

- a 304 is a `revisit` (profile server-not-modified) referring to the capture it confirms: the
  URL's latest earlier 200 whose payload was archived (any cycle);
- a 200 whose body (`body_key`) is that of an earlier 200 of the same URL is a `revisit`
  (profile identical-payload-digest) referring to the response that holds the payload;
- any other answer is a `response`, its payload the stored body. Robots.txt, sitemaps,
  redirects and error pages keep no body in the store: their responses carry the header block
  only, with `WARC-Truncated: unspecified` when the answer had bytes.

What the block holds is rebuilt, not recorded: the fetcher keeps a few response headers and
stores the body decoded (Content-Encoding removed). So a response's header block is the status
line, Content-Type, ETag, Last-Modified, Location and a Content-Length of the stored payload
(no Content-Encoding: the payload is decoded), and each such record says so in
`WARC-Atlas-Header-Block: rebuilt`. A request record holds what the fetcher sends: Host,
User-Agent, Accept, Accept-Encoding and, for a conditional fetch, If-None-Match /
If-Modified-Since. Those validators are the ones the coordination store held for the URL when
it was leased: its `urls` row takes each validator from the latest 200 or 304 that carried it
(commits.py `COALESCE(:etag, etag)`, set by content checks only), which is what `_validators`
reconstructs from the lake.

Fetches without a response (network errors, egress refusals: status null) have no record, and
a 200 whose body the store no longer holds (retention) is left out: both are counted. Record
ids are uuid5 of the fetch id, so a revisit may refer to a record in another cycle's file and
a re-export writes the same bytes.
"""

from __future__ import annotations

import hashlib
import io
import os
import tempfile
import uuid
from base64 import b32encode
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http import HTTPStatus
from importlib.metadata import version
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import polars as pl
from warcio.statusandheaders import StatusAndHeaders
from warcio.timeutils import datetime_to_iso_date
from warcio.warcwriter import WARCWriter

from .bodies import Bodies
from .lake import Lake
from .reasons import Reason
from .urls import shard_key

WARC_VERSION = "WARC/1.1"
NOT_MODIFIED = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"
IDENTICAL_PAYLOAD = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "https://github.com/atlas-crawler/warc")
# What the fetcher sends (fetcher.make_session; batch._request_headers for pages and sitemaps;
# robots.txt goes out with aiohttp's default Accept).
ACCEPT_PAGE = "text/html,application/xhtml+xml;q=0.9,*/*;q=0.1"
ACCEPT_ROBOTS = "*/*"
ACCEPT_ENCODING = "gzip, deflate"
# reasons whose answer was cut short by a bound: the WARC-Truncated value that says why
_TRUNCATED = {Reason.TOO_LARGE.value: "length", Reason.BODY_TIMEOUT.value: "time"}
# what a content check (outcomes._checked) answers: the answers whose validators the store keeps
_CHECKS = (Reason.FETCHED.value, Reason.CONTENT_UNCHANGED.value, Reason.NOT_MODIFIED.value)


@dataclass(frozen=True, slots=True)
class Capture:
    """A response record holding a payload: what a revisit refers to."""

    record_id: str
    uri: str
    date: str
    digest: str  # sha1:BASE32 of the payload, as warcio writes it


@dataclass(slots=True)
class WarcFile:
    """One written file and what it holds."""

    cycle: str
    shard: int
    path: Path
    bytes: int = 0
    records: dict[str, int] = field(default_factory=dict)  # by WARC-Type
    revisits: dict[str, int] = field(default_factory=dict)  # by profile (its last segment)
    no_response: int = 0  # fetches without an answer (network error, egress refused)
    missing_bodies: int = 0  # 200s whose body the store no longer holds

    def count(self, kind: str) -> None:
        self.records[kind] = self.records.get(kind, 0) + 1

    def summary(self) -> str:
        kinds = ", ".join(f"{n} {k}" for k, n in sorted(self.records.items()))
        profiles = ", ".join(f"{n} {p}" for p, n in sorted(self.revisits.items()))
        return (f"{self.cycle} shard {self.shard}: {self.path} ({self.bytes:,} bytes): {kinds}"
                + (f" ({profiles})" if profiles else "")
                + f"; skipped {self.no_response} without a response, "
                  f"{self.missing_bodies} with their body gone from the store")  # fmt: skip


def record_id(fetch_id: str, part: str = "") -> str:
    """The WARC-Record-ID of a fetch's response/revisit record (or its `part`, e.g. request)."""
    return f"<urn:uuid:{uuid.uuid5(_NAMESPACE, fetch_id + part)}>"


def warc_date(when: datetime) -> str:
    """WARC/1.1 date, microseconds kept: two fetches of a URL within a second stay apart."""
    naive = when.astimezone(UTC).replace(tzinfo=None)
    return str(datetime_to_iso_date(naive, use_micros=True))


def sha1_digest(payload: bytes) -> str:
    """`sha1:` and the base32 SHA-1, the form warcio writes and verifies."""
    return "sha1:" + b32encode(hashlib.sha1(payload).digest()).decode("ascii")


def file_name(cycle: str, shard: int) -> str:
    return f"atlas-{cycle}-shard{shard}.warc.gz"


def status_line(status: int) -> str:
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = "Unknown"
    return f"{status} {phrase}"


def response_headers(fetch: dict[str, Any], payload_length: int | None) -> list[tuple[str, str]]:
    """The header block the lake lets us rebuild; Content-Length is that of the stored payload
    (None: no Content-Length, as for a 304)."""
    headers = [(name, fetch[col]) for name, col in (("Content-Type", "content_type"),
               ("ETag", "etag"), ("Last-Modified", "last_modified"), ("Location", "location"))
               if fetch.get(col)]  # fmt: skip
    if payload_length is not None:
        headers.append(("Content-Length", str(payload_length)))
    return headers


def request_headers(fetch: dict[str, Any], user_agent: str,
                    validators: tuple[str | None, str | None]) -> list[tuple[str, str]]:  # fmt: skip
    """The request as the fetcher sent it: aiohttp's Host (port only when not the default)."""
    parts = urlsplit(fetch["url"])
    default = {"http": 80, "https": 443}.get(parts.scheme)
    host = parts.hostname or ""
    if parts.port is not None and parts.port != default:
        host = f"{host}:{parts.port}"
    accept = ACCEPT_ROBOTS if fetch["kind"] == "robots" else ACCEPT_PAGE
    headers = [("Host", host), ("User-Agent", user_agent), ("Accept", accept),
               ("Accept-Encoding", ACCEPT_ENCODING)]  # fmt: skip
    etag, modified = validators
    if fetch.get("conditional"):
        if etag:
            headers.append(("If-None-Match", etag))
        if modified:
            headers.append(("If-Modified-Since", modified))
    return headers


def request_target(url: str) -> str:
    parts = urlsplit(url)
    return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")


def _validators(history: list[dict[str, Any]]) -> tuple[str | None, str | None]:
    """ETag and Last-Modified the store held after these earlier fetches of a URL (oldest
    first): each the latest a content check (a 200 or 304 of a page) carried."""
    etag = modified = None
    for fetch in history:
        if fetch["status"] in (200, 304) and fetch["reason"] in _CHECKS:
            etag = fetch["etag"] or etag
            modified = fetch["last_modified"] or modified
    return etag, modified


class _Payloads:
    """Stored bodies and their digests, each read at most once per export."""

    def __init__(self, bodies: Bodies) -> None:
        self.bodies = bodies
        self._digests: dict[str, str | None] = {}

    def get(self, key: str) -> bytes | None:
        try:
            body = self.bodies.get(key)
        except OSError:
            if self.bodies.has(key):  # there but unreadable (an outage): not ours to hide
                raise
            self._digests[key] = None  # deleted by retention
            return None
        self._digests[key] = sha1_digest(body)
        return body

    def digest(self, key: str) -> str | None:
        if key not in self._digests:
            self.get(key)
        return self._digests[key]


def partition_fetches(lake: Lake, cycle: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(this cycle's fetches, every fetch of the lake), oldest first."""
    order = ["started_at", "fetch_id"]
    every = lake.read("fetches").sort(order) if lake.exists("fetches") else pl.DataFrame()
    if every.is_empty():
        return every, every
    return every.filter(pl.col("crawl_cycle") == cycle), every


def export_warc(lake: Lake, bodies: Bodies, user_agent: str, cycle: str, shard: int,
                out_dir: Path, every: pl.DataFrame | None = None) -> WarcFile:  # fmt: skip
    """Write `out_dir/atlas-<cycle>-shard<N>.warc.gz` (atomically) for one partition."""
    if every is None:
        _, every = partition_fetches(lake, cycle)
    mine = every.filter(
        (pl.col("crawl_cycle") == cycle) & (pl.col("origin_shard") == shard_key(shard))
    ) if not every.is_empty() else every  # fmt: skip
    urls = set(mine["url"].to_list()) if not mine.is_empty() else set()
    history: dict[str, list[dict[str, Any]]] = {}
    if urls:
        for row in every.filter(pl.col("url").is_in(list(urls))).iter_rows(named=True):
            history.setdefault(row["url"], []).append(row)
    out_dir.mkdir(parents=True, exist_ok=True)
    result = WarcFile(cycle, shard, out_dir / file_name(cycle, shard))
    fd, tmp = tempfile.mkstemp(dir=out_dir, prefix=".tmp-", suffix=".warc.gz")
    try:
        with os.fdopen(fd, "wb") as fh:
            writer = _Writer(WARCWriter(fh, gzip=True, warc_version=WARC_VERSION),
                             _Payloads(bodies), user_agent, result)  # fmt: skip
            rows = list(mine.iter_rows(named=True)) if not mine.is_empty() else []
            writer.warcinfo(cycle, shard, rows)
            for fetch in rows:
                writer.fetch(fetch, history[fetch["url"]])
        os.replace(tmp, result.path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    result.bytes = result.path.stat().st_size
    return result


class _Writer:
    """The records of one file, in fetch order, counted into `out`."""

    def __init__(self, writer: Any, payloads: _Payloads, user_agent: str, out: WarcFile) -> None:
        self.w, self.payloads, self.user_agent, self.out = writer, payloads, user_agent, out
        self.info_id = ""

    def _write(self, record: Any) -> None:
        self.w.write_record(record)
        self.out.count(str(record.rec_type))

    def warcinfo(self, cycle: str, shard: int, rows: list[dict[str, Any]]) -> None:
        # dated by the partition's first fetch, not the clock: a re-export is byte-identical
        first = rows[0]["started_at"] if rows else datetime(1970, 1, 1, tzinfo=UTC)
        self.info_id = record_id(f"warcinfo:{cycle}:{shard}")
        software = f"atlas-crawler/{version('atlas-crawler')} warcio/{version('warcio')}"
        fields = {"software": software, "format": "WARC File Format 1.1",
                  "conformsTo": "https://iipc.github.io/warc-specifications/specifications/"
                                "warc-format/warc-1.1/",
                  "isPartOf": f"atlas crawl cycle {cycle}, origin shard {shard}",
                  "http-header-user-agent": self.user_agent, "robots": "obey",
                  "description": "HTTP header blocks rebuilt from the fetch records: status, "
                                 "Content-Type, ETag, Last-Modified, Location, Content-Length "
                                 "of the stored (decoded) payload"}  # fmt: skip
        block = "".join(f"{k}: {v}\r\n" for k, v in fields.items()).encode("utf-8")
        headers = {"WARC-Record-ID": self.info_id, "WARC-Date": warc_date(first),
                   "WARC-Filename": file_name(cycle, shard)}  # fmt: skip
        self._write(self.w.create_warc_record("", "warcinfo", payload=io.BytesIO(block),
                                              length=len(block), warc_headers_dict=headers))  # fmt: skip

    def fetch(self, fetch: dict[str, Any], history: list[dict[str, Any]]) -> None:
        """The records of one fetch; `history` is every fetch of its URL, oldest first."""
        if fetch["status"] is None:
            self.out.no_response += 1
            return
        earlier = history[: [f["fetch_id"] for f in history].index(fetch["fetch_id"])]
        status, key = int(fetch["status"]), fetch["body_key"]
        body = self.payloads.get(key) if key else None
        if key and body is None:
            self.out.missing_bodies += 1
            return
        rid = record_id(fetch["fetch_id"])
        date = warc_date(fetch["started_at"])
        base = {"WARC-Record-ID": rid, "WARC-Date": date, "WARC-Warcinfo-ID": self.info_id,
                "WARC-Atlas-Fetch-ID": fetch["fetch_id"],
                "WARC-Atlas-Header-Block": "rebuilt"}  # fmt: skip
        captures = self._captures(earlier)
        same = self._holding(captures, key) if key else None
        if status == 304:  # confirms the latest capture, whose payload some response holds
            confirmed = self._holding(captures, captures[-1]["body_key"]) if captures else None
            self._revisit(fetch, base, NOT_MODIFIED, confirmed, None)
        elif same is not None:
            self._revisit(fetch, base, IDENTICAL_PAYLOAD, same, len(body or b""))
        else:
            self._response(fetch, base, body)
        self._request(fetch, rid, date, earlier)

    def _captures(self, earlier: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Earlier 200s of the URL whose payload is (still) archived."""
        return [f for f in earlier if f["status"] == 200 and f["body_key"]
                and self.payloads.digest(f["body_key"]) is not None]  # fmt: skip

    def _holding(self, captures: list[dict[str, Any]], key: str) -> Capture | None:
        """The response record holding payload `key` for the URL: its first capture with that
        body (every later one with it is a revisit)."""
        for f in captures:
            if f["body_key"] == key:
                digest = self.payloads.digest(key)
                assert digest is not None  # _captures kept archived payloads only
                return Capture(record_id(f["fetch_id"]), f["url"],
                               warc_date(f["started_at"]), digest)  # fmt: skip
        return None

    def _response(self, fetch: dict[str, Any], base: dict[str, str], body: bytes | None) -> None:
        payload = body or b""
        warc = dict(base)
        if body is None and (fetch["bytes"] or 0) > 0:  # the answer had bytes we never kept
            warc["WARC-Truncated"] = "unspecified"
        elif fetch["reason"] in _TRUNCATED:
            warc["WARC-Truncated"] = _TRUNCATED[fetch["reason"]]
        http = StatusAndHeaders(status_line(int(fetch["status"])),
                                response_headers(fetch, len(payload)), protocol="HTTP/1.1")  # fmt: skip
        self._write(self.w.create_warc_record(
            fetch["url"], "response", payload=io.BytesIO(payload), length=len(payload),
            warc_headers_dict=warc, http_headers=http))  # fmt: skip

    def _revisit(self, fetch: dict[str, Any], base: dict[str, str], profile: str,
                 capture: Capture | None, payload_length: int | None) -> None:  # fmt: skip
        warc = {**base, "WARC-Profile": profile}
        if capture is not None:
            # the digest of the payload this answer confirms (the earlier capture's)
            warc.update({"WARC-Refers-To": capture.record_id,
                         "WARC-Refers-To-Target-URI": capture.uri,
                         "WARC-Refers-To-Date": capture.date,
                         "WARC-Payload-Digest": capture.digest})  # fmt: skip
        http = StatusAndHeaders(status_line(int(fetch["status"])),
                                response_headers(fetch, payload_length), protocol="HTTP/1.1")  # fmt: skip
        self._write(self.w.create_warc_record(fetch["url"], "revisit", warc_headers_dict=warc,
                                              http_headers=http))  # fmt: skip
        name = profile.rsplit("/", 1)[-1]
        self.out.revisits[name] = self.out.revisits.get(name, 0) + 1

    def _request(self, fetch: dict[str, Any], rid: str, date: str,
                 earlier: list[dict[str, Any]]) -> None:  # fmt: skip
        http = StatusAndHeaders(f"GET {request_target(fetch['url'])} HTTP/1.1",
                                request_headers(fetch, self.user_agent, _validators(earlier)),
                                is_http_request=True)  # fmt: skip
        warc = {"WARC-Record-ID": record_id(fetch["fetch_id"], "request"), "WARC-Date": date,
                "WARC-Concurrent-To": rid, "WARC-Warcinfo-ID": self.info_id,
                "WARC-Atlas-Fetch-ID": fetch["fetch_id"]}  # fmt: skip
        self._write(self.w.create_warc_record(fetch["url"], "request", warc_headers_dict=warc,
                                              http_headers=http))  # fmt: skip


def export_cycle(lake: Lake, bodies: Bodies, user_agent: str, cycle: str,
                 shards: Iterable[int], out_dir: Path) -> list[WarcFile]:  # fmt: skip
    """One file per shard, the lake read once."""
    _, every = partition_fetches(lake, cycle)
    return [export_warc(lake, bodies, user_agent, cycle, s, out_dir, every) for s in shards]
