"""One bounded HTTP GET: no automatic redirects, a cap on decompressed bytes, a total timeout."""

from __future__ import annotations

import asyncio
import time
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp.http_exceptions import LineTooLong

from . import defaults as d
from .config import CrawlConfig
from .egress import EgressGate, PinnedResolver
from .errors import EgressRefused
from .reasons import Reason

CHUNK = 64 * 1024
HTML_TYPES = ("text/html", "application/xhtml+xml")
# Response headers worth keeping (validators, redirects, throttling, type).
KEPT_HEADERS = (
    "content-type",
    "etag",
    "last-modified",
    "location",
    "retry-after",
    "content-length",
)


@dataclass(slots=True)
class Response:
    """What one request established; `error` is a reason code when there was no usable response."""

    url: str
    status: int | None
    started_at: float
    elapsed_s: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    charset: str | None = None
    truncated: bool = False
    error: str | None = None
    detail: str | None = None


# aiohttp's own parse bounds: one header line, and the number of lines (together ~1 MiB at
# most, before our total `max_header_bytes` check on what it parsed).
MAX_HEADER_LINE = 8190
MAX_HEADER_LINES = 128
SNIFF_BYTES = 512
# Signatures of binary formats (WHATWG MIME sniffing), and the bytes no text document holds.
_BINARY_MAGIC = (b"\x89PNG", b"GIF8", b"\xff\xd8\xff", b"%PDF-", b"PK\x03\x04", b"\x1f\x8b",
                 b"\x7fELF", b"MZ", b"BZh", b"7z\xbc\xaf", b"Rar!", b"\x00\x00\x01\x00",
                 b"RIFF", b"OggS", b"\x1aE\xdf\xa3", b"wOFF", b"\xca\xfe\xba\xbe")  # fmt: skip
_BINARY_BYTES = bytes([*range(0x00, 0x09), 0x0B, *range(0x0E, 0x1B), *range(0x1C, 0x20)])


def looks_binary(head: bytes) -> bool:
    """True when the first bytes of a body are not text (a known binary signature, or a
    control byte no text format uses), whatever the Content-Type says."""
    if head.startswith((b"\xef\xbb\xbf", b"\xfe\xff", b"\xff\xfe")):  # text byte-order marks
        return False
    if head.startswith(_BINARY_MAGIC):
        return True
    sniffed = head[:SNIFF_BYTES]
    # translate deletes those bytes in C (a generator over 512 bytes cost ~0.1 ms a page)
    return len(sniffed.translate(None, _BINARY_BYTES)) < len(sniffed)


def make_session(
    cfg: CrawlConfig,
    gate: EgressGate,
    on_sent: Callable[[Any], None] | None = None,
    on_answered: Callable[[Any], None] | None = None,
) -> aiohttp.ClientSession:
    """A session whose every connection goes through the egress gate's pinned resolver.
    `on_sent(ctx)` runs when a request's headers leave, `on_answered(ctx)` when its answer's
    headers are in or it failed (ctx: fetch's `trace_ctx`)."""
    trace = aiohttp.TraceConfig()
    if on_sent is not None:
        trace.on_request_headers_sent.append(_traced(on_sent))
    if on_answered is not None:
        # request_end comes once the status line and headers are read, before the body
        trace.on_request_end.append(_traced(on_answered))
        trace.on_request_exception.append(_traced(on_answered))
    connector = aiohttp.TCPConnector(
        resolver=PinnedResolver(gate),
        use_dns_cache=False,
        limit=cfg.politeness.global_concurrency,
        limit_per_host=cfg.politeness.max_in_flight,
    )
    limits = cfg.limits
    return aiohttp.ClientSession(
        connector=connector,
        # we inflate ourselves, bounded: aiohttp inflates each network chunk whole into its
        # buffer, and a slow reader lets a gzip bomb pile up hundreds of MiB there
        auto_decompress=False,
        trust_env=False,  # proxies from the environment would bypass the gate
        headers={"User-Agent": cfg.user_agent, "Accept-Encoding": "gzip, deflate"},
        trace_configs=[trace],
        max_line_size=MAX_HEADER_LINE,
        max_field_size=MAX_HEADER_LINE,
        max_headers=MAX_HEADER_LINES,
        timeout=aiohttp.ClientTimeout(
            total=limits.total_timeout_s,
            sock_connect=limits.connect_timeout_s,
            sock_read=limits.read_timeout_s,
        ),
    )


def _traced(hook: Callable[[Any], None]) -> Callable[[Any, Any, Any], Awaitable[None]]:
    """An aiohttp trace callback calling `hook` with the request's `trace_request_ctx`."""

    async def call(_: Any, ctx: Any, __: Any) -> None:
        if ctx.trace_request_ctx is not None:
            hook(ctx.trace_request_ctx)

    return call


async def fetch(
    session: aiohttp.ClientSession,
    gate: EgressGate,
    url: str,
    headers: dict[str, str],
    max_bytes: int,
    truncate: bool = False,
    trace_ctx: Any = None,
    max_header_bytes: int = d.MAX_HEADER_BYTES,
    sniff: bool = False,
) -> Response:
    """GET `url` once, within bounds: headers over `max_header_bytes`, a body over `max_bytes`
    decompressed (unless `truncate`), a body that stalls after the headers came, or (with
    `sniff`) binary bytes under a text/html label end it with `error` set to the reason."""
    started = time.time()
    resp = Response(url=url, status=None, started_at=started)
    try:
        gate.check_url(url)
        async with session.get(
            url, headers=headers, allow_redirects=False, trace_request_ctx=trace_ctx
        ) as r:
            resp.status = r.status
            resp.headers = {k: r.headers[k] for k in KEPT_HEADERS if k in r.headers}
            if robots_tags := r.headers.getall("x-robots-tag", []):  # page directives
                resp.headers["x-robots-tag"] = "\n".join(robots_tags)  # directives.HEADER_SEP
            resp.charset = r.charset
            header_bytes = sum(len(k) + len(v) + 4 for k, v in r.raw_headers)
            if header_bytes > max_header_bytes:
                resp.error = Reason.HEADERS_TOO_LARGE.value
                resp.detail = f"{header_bytes} bytes of headers, over {max_header_bytes}"
            else:
                await _read_body(r, resp, max_bytes, truncate, sniff)
    except EgressRefused as exc:
        resp.error, resp.detail = Reason.EGRESS_REFUSED.value, str(exc)
    except TimeoutError:
        # no answer is worth retrying; an answer whose body never finished is a bound hit
        slow_body = resp.status is not None
        resp.error = Reason.BODY_TIMEOUT.value if slow_body else Reason.TIMEOUT.value
        resp.detail = f"timed out{' reading the body' if slow_body else ''}"
    except aiohttp.ClientConnectorError as exc:
        refused = isinstance(getattr(exc.os_error, "__cause__", None), EgressRefused)
        resp.error = Reason.EGRESS_REFUSED.value if refused else Reason.NETWORK_ERROR.value
        resp.detail = str(exc.os_error if refused else exc)
    except aiohttp.ClientResponseError as exc:
        # aiohttp's header parser refusing a line or the count is a bound, not a glitch
        too_big = resp.status is None and _header_overflow(exc)
        resp.error = Reason.HEADERS_TOO_LARGE.value if too_big else Reason.NETWORK_ERROR.value
        resp.detail = f"{type(exc).__name__}: {exc.message}"
    except (aiohttp.ClientError, OSError, asyncio.IncompleteReadError) as exc:
        resp.error, resp.detail = Reason.NETWORK_ERROR.value, f"{type(exc).__name__}: {exc}"
    resp.elapsed_s = time.time() - started
    return resp


def _header_overflow(exc: BaseException) -> bool:
    """aiohttp wraps its parser's error twice; look down the chain for a header bound."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, LineTooLong) or "too many headers" in str(seen).lower():
            return True
        seen = seen.__cause__
    return False


async def _read_body(
    r: aiohttp.ClientResponse, resp: Response, max_bytes: int, truncate: bool, sniff: bool
) -> None:
    """Stream the decompressed body into `resp`, stopping at the first bound it breaks."""
    ctype = r.headers.get("content-type", "").split(";")[0].strip().lower()
    unsniffed = sniff and ctype in HTML_TYPES
    try:
        inflate = Inflater(r.headers.get("content-encoding", ""))
    except ValueError as exc:
        resp.error, resp.detail = Reason.BAD_ENCODING.value, str(exc)
        return
    parts: list[bytes] = []
    total = 0
    async for raw in r.content.iter_chunked(CHUNK):
        try:
            # at most one byte past the cap is ever inflated
            chunk = inflate(raw, max_bytes - total + 1)
        except zlib.error as exc:
            resp.error, resp.detail = Reason.BAD_ENCODING.value, f"corrupt body: {exc}"
            return
        total += len(chunk)
        if total > max_bytes:
            if not truncate:
                resp.error, resp.detail = Reason.TOO_LARGE.value, f"more than {max_bytes} bytes"
                return
            parts.append(chunk[: len(chunk) - (total - max_bytes)])
            resp.truncated = True
            break
        parts.append(chunk)
        if unsniffed and total >= SNIFF_BYTES:
            unsniffed = False
            if _binary_under(ctype, b"".join(parts)[:SNIFF_BYTES], resp):
                return
    body = b"".join(parts)
    if unsniffed and _binary_under(ctype, body, resp):
        return
    resp.body = body


class Inflater:
    """Content-Encoding decoding that never produces more than asked: gzip (members in a
    row), deflate (zlib-wrapped or raw), identity."""

    def __init__(self, encoding: str) -> None:
        self.encoding = encoding.strip().lower()
        if self.encoding in ("gzip", "x-gzip"):
            self._wbits = 16 + zlib.MAX_WBITS
        elif self.encoding == "deflate":
            self._wbits = zlib.MAX_WBITS
        elif self.encoding in ("", "identity"):
            self._wbits = 0
        else:
            raise ValueError(f"content-encoding {encoding!r} was not asked for")
        self._d = zlib.decompressobj(self._wbits) if self._wbits else None
        self._first = True

    def __call__(self, raw: bytes, limit: int) -> bytes:
        """Inflate `raw`, stopping once `limit` bytes came out (the rest is dropped: the
        caller stops reading at its cap anyway)."""
        if self._d is None:
            return raw
        if self._first and self.encoding == "deflate" and raw and raw[0] & 0x0F != 8:
            self._d = zlib.decompressobj(-zlib.MAX_WBITS)  # raw deflate, as servers often send
        self._first = False
        out = self._d.decompress(raw, max(1, limit))
        if self._d.eof and self._d.unused_data and len(out) < limit:  # another gzip member
            rest = self._d.unused_data
            self._d = zlib.decompressobj(self._wbits)
            out += self(rest, limit - len(out))
        return out


def _binary_under(ctype: str, head: bytes, resp: Response) -> bool:
    if not looks_binary(head):
        return False
    resp.error = Reason.BINARY_CONTENT.value
    resp.detail = f"binary bytes under {ctype}: {head[:16]!r}"
    return True
