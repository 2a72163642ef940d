"""The aiohttp application serving a ``SandboxWeb``, its request log and a DNS shim."""

from __future__ import annotations

import hashlib
import json
import logging
import socket
import threading
import time
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from email.utils import format_datetime, parsedate_to_datetime
from pathlib import Path
from typing import Any, TextIO

from aiohttp import web as aio_web
from aiohttp.abc import AbstractResolver, ResolveResult

from .changing import Changing
from .directives import Answer as DirectiveAnswer
from .directives import DirectivePages
from .dupes import Dupes
from .hostile import Answer, Hostile, Stream
from .lab import Lab
from .scripted import Scripted
from .site import SandboxWeb
from .traps import Traps

_logger = logging.getLogger(__name__)

LOGGED_HEADERS: tuple[str, ...] = (
    "user-agent",
    "if-none-match",
    "if-modified-since",
    "accept-encoding",
)
"""Request headers copied into every log entry (None when absent)."""

CACHE_CONTROL = "public, max-age=600"

_HTML = "text/html; charset=utf-8"
_TEXT = "text/plain; charset=utf-8"
_XML = "application/xml; charset=utf-8"


class RequestLog:
    """Thread-safe request log: kept in memory and appended to a JSON-lines file.

    Each line is flushed as it is written, so a crashed or killed run still leaves a
    complete log behind.
    """

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self._lock = threading.Condition()
        self._entries: list[dict[str, Any]] = []
        self._open = 0  # requests being answered: their entries are not written yet
        self._file: TextIO | None = None
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._file = path.open("a", encoding="utf-8")

    def begin(self) -> None:
        """A request arrived; its entry follows once the response is written."""
        with self._lock:
            self._open += 1

    def append(self, entry: dict[str, Any], begun: bool = False) -> None:
        """Record one request (`begun`: it was announced with ``begin()``)."""
        line = json.dumps(entry, separators=(",", ":"))
        with self._lock:
            self._entries.append(entry)
            if self._file is not None:
                self._file.write(line + "\n")
                self._file.flush()
            if begun:
                self._open -= 1
                self._lock.notify_all()

    def entries(self, settle_s: float = 2.0) -> list[dict[str, Any]]:
        """A copy of the entries since the last ``clear()``.

        A client can read its response before the server has logged it, so this waits
        (up to `settle_s`) for requests still being answered to be written first.
        """
        with self._lock:
            self._lock.wait_for(lambda: self._open == 0, timeout=settle_s)
            return [dict(e) for e in self._entries]

    def clear(self) -> None:
        """Forget the in-memory entries; the file keeps the full history."""
        with self._lock:
            self._entries.clear()

    def close(self) -> None:
        """Close the file; later entries are kept in memory only."""
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)


class SandboxResolver(AbstractResolver):
    """aiohttp resolver sending the sandbox's hosts to loopback and refusing all others.

    Use ``aiohttp.TCPConnector(resolver=SandboxResolver(web))`` to fetch real sandbox URLs
    such as ``http://news-a.example.test:PORT/``; any other name (for example the
    external host some pages link to) fails like an unknown DNS name. ``extra_hosts``
    (for example ``HOSTILE_HOSTS`` or ``TRAP_HOSTS``) go to loopback as well.
    """

    def __init__(
        self, web: SandboxWeb, address: str = "127.0.0.1", extra_hosts: Iterable[str] = ()
    ) -> None:
        self._web = web
        self._address = address
        self._extra = frozenset(h.lower().rstrip(".") for h in extra_hosts)

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        known = self._web.is_sandbox_host(host) or host.lower().rstrip(".") in self._extra
        if not known:
            raise OSError(f"sandbox resolver: {host!r} is not a sandbox host")
        return [
            ResolveResult(
                hostname=host,
                host=self._address,
                port=port,
                family=socket.AF_INET,
                proto=0,
                flags=socket.AI_NUMERICHOST,
            )
        ]

    async def close(self) -> None:
        return None


def _host_name(raw_host: str) -> str:
    """Host part of a Host header: lowercase, port and trailing dot stripped."""
    name = raw_host.strip()
    # An IPv6 literal ("[::1]:8080") has colons of its own.
    name = name[: name.find("]") + 1] if name.startswith("[") else name.rsplit(":", 1)[0]
    return name.lower().rstrip(".")


def _not_modified(headers: Mapping[str, str], etag: str, last_modified: datetime) -> bool:
    """RFC 9110 §13.2.2: If-None-Match decides when present, else If-Modified-Since."""
    inm = headers.get("If-None-Match")
    if inm is not None:
        # Weak comparison: a W/ prefix on the client's copy still matches.
        tags = {t.strip().removeprefix("W/") for t in inm.split(",")}
        return "*" in tags or etag in tags
    ims = headers.get("If-Modified-Since")
    if ims is None:
        return False
    try:
        since = parsedate_to_datetime(ims)
    except (TypeError, ValueError, IndexError):
        return False  # an unparsable date is ignored, as the RFC requires
    if since.tzinfo is None:
        since = since.replace(tzinfo=UTC)
    return last_modified <= since


def _respond(
    sandbox: SandboxWeb, request: aio_web.BaseRequest
) -> tuple[int, dict[str, str], bytes]:
    """Status, headers and body for one request (pure; no I/O)."""
    if request.method not in ("GET", "HEAD"):
        return 405, {"Allow": "GET, HEAD", "Content-Type": _TEXT}, b"method not allowed\n"
    host = _host_name(request.headers.get("Host", ""))
    if not sandbox.is_sandbox_host(host):
        text = "421 Misdirected Request: unknown host. This server serves:\n"
        text += "".join(f"  {h}\n" for h in sandbox.hosts)
        return 421, {"Content-Type": _TEXT}, text.encode()
    path_qs = request.raw_path
    path = path_qs.partition("?")[0]

    if path == "/robots.txt":
        body = sandbox.robots_txt(host).encode()
        return _cacheable(request, body, _TEXT, sandbox.last_modified(host, "/"))
    if path == "/sitemap.xml":
        body = sandbox.sitemap_xml(host).encode()
        return _cacheable(request, body, _XML, sandbox.last_modified(host, "/"))
    target = sandbox.redirect_target(host, path)
    if target is not None:
        return 301, {"Location": target, "Content-Type": _TEXT}, b"moved permanently\n"
    key = sandbox.resolve(host, path_qs)
    if key is None:
        html = '<!DOCTYPE html>\n<html lang="en"><head><title>Not found</title></head>'
        html += "<body><h1>404 Not Found</h1></body></html>\n"
        return 404, {"Content-Type": _HTML}, html.encode()
    etag = sandbox.etag(host, key)
    last_modified = sandbox.last_modified(host, key)
    headers = {
        "ETag": etag,
        "Last-Modified": format_datetime(last_modified, usegmt=True),
        "Cache-Control": CACHE_CONTROL,
    }
    if _not_modified(request.headers, etag, last_modified):
        return 304, headers, b""
    return 200, {**headers, "Content-Type": _HTML}, sandbox.render(host, key)


def _cacheable(
    request: aio_web.BaseRequest, body: bytes, content_type: str, last_modified: datetime
) -> tuple[int, dict[str, str], bytes]:
    """A 200 (or 304) for a small generated resource, validated by a hash of its bytes."""
    etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
    headers = {
        "ETag": etag,
        "Last-Modified": format_datetime(last_modified, usegmt=True),
        "Cache-Control": CACHE_CONTROL,
    }
    if _not_modified(request.headers, etag, last_modified):
        return 304, headers, b""
    return 200, {**headers, "Content-Type": content_type}, body


def make_app(
    web: SandboxWeb,
    log: RequestLog,
    lab: Lab | None = None,
    hostile: Hostile | None = None,
    traps: Traps | None = None,
    dupes: Dupes | None = None,
    changing: Changing | None = None,
    directives: DirectivePages | None = None,
    scripted: Scripted | None = None,
) -> aio_web.Application:
    """An aiohttp app serving every origin of ``web``, routed by the Host header; with a
    ``lab``, its misbehaving origins answer first (see lab.py); with ``hostile``, the hostile
    origins are served too (see hostile.py); with ``traps``, the trap origins (see traps.py);
    with ``dupes``, the duplicate-content origin (see dupes.py); with ``changing``, the
    changing-content origins (see changing.py); with ``directives``, the robots-directive
    origin (see directives.py); with ``scripted``, the script-drawn origins (see scripted.py)."""

    async def answer(request: aio_web.Request) -> Answer | DirectiveAnswer | Stream:
        host, path = _host_name(request.headers.get("Host", "")), request.path
        if hostile is not None and hostile.serves(host) and request.method in ("GET", "HEAD"):
            return await hostile.answer(host, request.raw_path, web.port)
        if traps is not None and traps.serves(host) and request.method in ("GET", "HEAD"):
            return traps.answer(host, request.raw_path, web.port)
        if dupes is not None and dupes.serves(host) and request.method in ("GET", "HEAD"):
            return dupes.answer(host, request.raw_path, web.port)
        if changing is not None and changing.serves(host) and request.method in ("GET", "HEAD"):
            return changing.answer(host, request.raw_path, web.port, request.headers)
        if directives is not None and directives.serves(host) and request.method in ("GET", "HEAD"):
            return directives.answer(host, request.raw_path)
        if scripted is not None and scripted.serves(host) and request.method in ("GET", "HEAD"):
            return await scripted.answer(host, request.raw_path, web.port)
        special = None
        if lab is not None and web.is_sandbox_host(host):
            await lab.delay(host, path)
            special = lab.answer(host, path, web.robots_txt(host))
        return special or _respond(web, request)

    async def handle(request: aio_web.Request) -> aio_web.StreamResponse:
        start = time.time()
        log.begin()
        status, sent = 500, 0
        try:
            try:
                result = await answer(request)
            except Exception:
                _logger.exception("sandbox handler failed for %s", request.raw_path)
                result = 500, {"Content-Type": _TEXT}, b"internal error\n"
            if isinstance(result, Stream):
                status = result.status
                response = aio_web.StreamResponse(status=status, headers=result.headers)
                try:
                    await response.prepare(request)
                    if request.method != "HEAD":
                        async for chunk in result.chunks:
                            await response.write(chunk)
                            sent += len(chunk)
                    await response.write_eof()
                except ConnectionError:
                    pass  # the client went away mid-body (how a drip ends); logged below
                finally:
                    await result.chunks.aclose()
            else:
                status, headers, body = result
                sent = 0 if request.method == "HEAD" or status == 304 else len(body)
                response = aio_web.Response(status=status, headers=headers, body=body or None)
                # Send it here rather than returning it, so ``end`` covers writing the body.
                await response.prepare(request)
                await response.write_eof()
        finally:
            raw_host = request.headers.get("Host", "")
            log.append(
                {
                    "origin": f"{request.scheme}://{raw_host}",
                    "host": _host_name(raw_host),
                    "path": request.raw_path,
                    "method": request.method,
                    "start": start,
                    "end": time.time(),
                    "status": status,
                    "bytes": sent,
                    "headers": {h: request.headers.get(h) for h in LOGGED_HEADERS},
                    "peer": request.remote,
                },
                begun=True,
            )
        return response

    app = aio_web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    return app
