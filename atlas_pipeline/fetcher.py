"""One bounded HTTP GET: no automatic redirects, a cap on decompressed bytes, a total timeout."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from .config import CrawlConfig
from .egress import EgressGate, PinnedResolver
from .errors import EgressRefused
from .reasons import Reason

CHUNK = 64 * 1024
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


def make_session(
    cfg: CrawlConfig, gate: EgressGate, on_sent: Callable[[Any], None] | None = None
) -> aiohttp.ClientSession:
    """A session whose every connection goes through the egress gate's pinned resolver.
    `on_sent(ctx)` runs when a request's headers leave (ctx: fetch's `trace_ctx`)."""
    trace = aiohttp.TraceConfig()
    if on_sent is not None:

        async def headers_sent(_: Any, ctx: Any, __: Any) -> None:
            if ctx.trace_request_ctx is not None:
                on_sent(ctx.trace_request_ctx)

        trace.on_request_headers_sent.append(headers_sent)
    connector = aiohttp.TCPConnector(
        resolver=PinnedResolver(gate),
        use_dns_cache=False,
        limit=cfg.politeness.global_concurrency,
        limit_per_host=cfg.politeness.max_in_flight,
    )
    return aiohttp.ClientSession(
        connector=connector,
        auto_decompress=True,
        trust_env=False,  # proxies from the environment would bypass the gate
        headers={"User-Agent": cfg.user_agent},
        trace_configs=[trace],
        timeout=aiohttp.ClientTimeout(
            total=cfg.limits.total_timeout_s, sock_connect=cfg.limits.connect_timeout_s
        ),
    )


async def fetch(
    session: aiohttp.ClientSession,
    gate: EgressGate,
    url: str,
    headers: dict[str, str],
    max_bytes: int,
    truncate: bool = False,
    trace_ctx: Any = None,
) -> Response:
    """GET `url` once. Over `max_bytes` decompressed: error body_too_large (or cut if `truncate`)."""
    started = time.time()
    resp = Response(url=url, status=None, started_at=started)
    try:
        gate.check_url(url)
        async with session.get(
            url, headers=headers, allow_redirects=False, trace_request_ctx=trace_ctx
        ) as r:
            resp.status = r.status
            resp.headers = {k: r.headers[k] for k in KEPT_HEADERS if k in r.headers}
            resp.charset = r.charset
            parts: list[bytes] = []
            total = 0
            async for chunk in r.content.iter_chunked(CHUNK):
                total += len(chunk)
                if total > max_bytes:
                    if not truncate:
                        resp.error, resp.detail = (
                            Reason.TOO_LARGE.value,
                            f"more than {max_bytes} bytes",
                        )
                        break
                    parts.append(chunk[: len(chunk) - (total - max_bytes)])
                    resp.truncated = True
                    break
                parts.append(chunk)
            resp.body = b"".join(parts)
    except EgressRefused as exc:
        resp.error, resp.detail = Reason.EGRESS_REFUSED.value, str(exc)
    except TimeoutError:
        resp.error, resp.detail = Reason.TIMEOUT.value, "total timeout"
    except aiohttp.ClientConnectorError as exc:
        refused = isinstance(getattr(exc.os_error, "__cause__", None), EgressRefused)
        resp.error = Reason.EGRESS_REFUSED.value if refused else Reason.NETWORK_ERROR.value
        resp.detail = str(exc.os_error if refused else exc)
    except (aiohttp.ClientError, OSError, asyncio.IncompleteReadError) as exc:
        resp.error, resp.detail = Reason.NETWORK_ERROR.value, f"{type(exc).__name__}: {exc}"
    resp.elapsed_s = time.time() - started
    return resp
