"""Running the sandbox web and the canary: in a background thread (tests) or in the
foreground (CLI)."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import signal
import socket
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import TracebackType
from typing import Any

from aiohttp import web as aio_web

from .changing import CHANGING_HOSTS, Changing
from .directives import DIRECTIVES_HOSTS, DirectivePages
from .dupes import DUPES_HOSTS, Dupes
from .hostile import DEFAULT_CANARY_PORT, HOSTILE_HOSTS, Hostile
from .lab import Lab
from .scripted import SCRIPTED_HOSTS, Scripted
from .site import SandboxWeb
from .traps import DEFAULT_TRAP_SCALE, TRAP_HOSTS, Traps
from .web import RequestLog, make_app

# In-flight requests get this long to finish when the server stops; tests stop often.
_SHUTDOWN_TIMEOUT = 2.0
_START_TIMEOUT = 10.0


class LoopThread:
    """An asyncio loop serving in a daemon thread: `setup` runs on it before `start` returns
    (a failure there is raised in the caller's thread, after `abort`), `teardown` when the
    loop stops. The scaffold of the sandbox web, the canary and the indexer."""

    def __init__(
        self,
        name: str,
        setup: Callable[[], Awaitable[Any]],
        teardown: Callable[[Any], Awaitable[None]],
        abort: Callable[[], None] = lambda: None,
    ) -> None:
        self.name, self._setup, self._teardown, self._abort = name, setup, teardown, abort
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError(f"{self.name} already started")
        loop, ready = asyncio.new_event_loop(), threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            asyncio.set_event_loop(loop)
            state: Any = None
            try:
                state = loop.run_until_complete(self._setup())
            except BaseException as exc:  # reported to start() in the caller's thread
                failure.append(exc)
                self._abort()
            ready.set()
            try:
                if not failure:
                    loop.run_forever()
            finally:
                if state is not None or not failure:
                    loop.run_until_complete(self._teardown(state))
                loop.close()

        thread = threading.Thread(target=run, name=self.name, daemon=True)
        thread.start()
        if not ready.wait(_START_TIMEOUT) or failure:
            thread.join(1)
            raise RuntimeError(f"{self.name} did not start") from (failure[0] if failure else None)
        self._loop, self._thread = loop, thread

    def stop(self) -> None:
        """Stop the loop and wait for the thread. Idempotent."""
        loop, thread = self._loop, self._thread
        self._loop = self._thread = None
        if loop is not None and thread is not None:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(_SHUTDOWN_TIMEOUT + 5)


async def _serve_app(app: aio_web.Application, sock: socket.socket) -> aio_web.AppRunner:
    runner = aio_web.AppRunner(app, access_log=None, shutdown_timeout=_SHUTDOWN_TIMEOUT,
                               handler_cancellation=True)  # fmt: skip
    await runner.setup()
    try:
        await aio_web.SockSite(runner, sock).start()
    except BaseException:
        await runner.cleanup()
        raise
    return runner


async def _nothing() -> None:
    """The setup of a LoopThread that was never started."""


async def _close_servers(servers: list[asyncio.Server]) -> None:
    for server in servers:
        server.close()
    await asyncio.gather(*(s.wait_closed() for s in servers))


async def _cleanup_app(runner: aio_web.AppRunner | None) -> None:
    if runner is not None:
        await runner.cleanup()


def _loopback(host: str) -> str:
    """Return ``host`` as an IP literal, refusing anything that is not loopback."""
    address = "127.0.0.1" if host == "localhost" else host
    try:
        if ipaddress.ip_address(address).is_loopback:
            return address
    except ValueError:
        pass
    # The sandbox serves fake sites with disallowed pages: never expose it beyond this host.
    raise ValueError(f"the sandbox web binds to loopback only, not {host!r}")


def _bind(host: str, port: int) -> socket.socket:
    """Bind (but do not listen on) a socket, so port 0 is resolved before serving."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except BaseException:
        sock.close()
        raise
    return sock


def _base_url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _stop_on_signals(stop: asyncio.Event) -> None:
    """Set ``stop`` on Ctrl-C or SIGTERM."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        # Signal handlers only work in the main thread; elsewhere Ctrl-C still raises.
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop.set)


def _bump_on_sigusr1(
    web: SandboxWeb, changing: Changing | None, directives: DirectivePages | None = None
) -> None:
    """On SIGUSR1, advance the generation of ``web`` (and ``changing``, ``directives``) and
    print ``generation N``, the line a parent process waits for."""
    sig = getattr(signal, "SIGUSR1", None)
    if sig is None:
        return  # no SIGUSR1 on this platform: generations stay at 0

    def bump() -> None:
        generation = web.bump_generation()
        if changing is not None:
            changing.bump_generation()
        if directives is not None:
            directives.bump_generation()
        print(f"generation {generation}", flush=True)

    # As for the stop signals: only the main thread can handle signals.
    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
        asyncio.get_running_loop().add_signal_handler(sig, bump)


class SandboxServer:
    """The sandbox web served from a background thread with its own event loop.

    Binding happens in ``start()`` (or ``__enter__``); ``web.port`` is then set to the
    real port, so the absolute links pages contain point at this server. ``hostile`` also
    serves the hostile origins (hostile.py), pointing at the canary on ``canary_port``;
    ``traps`` the trap origins (traps.py) at ``trap_scale``; ``dupes`` the duplicate-content
    origin (dupes.py); ``changing`` the changing-content origins (changing.py);
    ``directives`` the robots-directive origin (directives.py); ``scripted`` the script-drawn
    origins (scripted.py), their SSRF requests aimed at the canary on ``canary_port`` too.
    """

    def __init__(
        self,
        web: SandboxWeb,
        host: str = "127.0.0.1",
        port: int = 0,
        log_path: Path | None = None,
        hostile: bool = False,
        canary_port: int = DEFAULT_CANARY_PORT,
        traps: bool = False,
        trap_scale: int = DEFAULT_TRAP_SCALE,
        dupes: bool = False,
        changing: bool = False,
        directives: bool = False,
        scripted: bool = False,
    ) -> None:
        self.web = web
        self.host = _loopback(host)
        self.port = port
        self.hostile = Hostile(canary_port) if hostile else None
        self.traps = Traps(trap_scale) if traps else None  # a bad scale fails before the log opens
        self.dupes = Dupes() if dupes else None
        self.changing = Changing() if changing else None
        self.directives = DirectivePages() if directives else None
        self.scripted = Scripted(canary_port) if scripted else None
        self.log = RequestLog(log_path)
        self._server = LoopThread("atlas-sandbox-web", _nothing, _cleanup_app)

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT`` (reach origins by sending their Host header)."""
        return _base_url(self.host, self.port)

    def url(self, host: str, path: str = "/") -> str:
        """``http://HOST:PORT/path`` for an origin host on this server's port."""
        return f"http://{host}:{self.port}{path if path.startswith('/') else '/' + path}"

    def start(self) -> SandboxServer:
        """Bind, then serve in a daemon thread; returns once the server accepts requests."""
        if self._server.running:
            raise RuntimeError("sandbox server already started")
        sock = _bind(self.host, self.port)
        self.port = sock.getsockname()[1]
        self.web.port = self.port
        if self.changing is not None:
            self.changing.port = self.port
        app = make_app(self.web, self.log, hostile=self.hostile, traps=self.traps,
                       dupes=self.dupes, changing=self.changing,
                       directives=self.directives, scripted=self.scripted)  # fmt: skip
        self._server = LoopThread("atlas-sandbox-web", lambda: _serve_app(app, sock),
                                  _cleanup_app, sock.close)  # fmt: skip
        self._server.start()
        return self

    def bump_generation(self) -> int:
        """Advance the generation of ``web`` and of the changing and directive origins;
        returns it (what SIGUSR1 does to `atlas web`)."""
        generation = self.web.bump_generation()
        if self.changing is not None:
            self.changing.bump_generation()
        if self.directives is not None:
            self.directives.bump_generation()
        return generation

    def stop(self) -> None:
        """Stop serving, wait for the thread and close the log file. Idempotent."""
        self._server.stop()
        self.log.close()

    def __enter__(self) -> SandboxServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def serve_forever(
    web: SandboxWeb,
    host: str = "127.0.0.1",
    port: int = 8080,
    log_path: Path | None = None,
    lab: bool = False,
    hostile: bool = False,
    canary_port: int = DEFAULT_CANARY_PORT,
    traps: bool = False,
    trap_scale: int = DEFAULT_TRAP_SCALE,
    dupes: bool = False,
    changing: bool = False,
    directives: bool = False,
    scripted: bool = False,
) -> None:
    """Serve ``web`` in the foreground until Ctrl-C or SIGTERM (for ``atlas web``); ``lab``
    turns on the politeness lab's misbehaving origins (lab.py), ``hostile`` the hostile
    origins (hostile.py) with their links and redirects aimed at the canary on ``canary_port``,
    ``traps`` the trap origins (traps.py) with every trap's extent times ``trap_scale``,
    ``dupes`` the duplicate-content origin (dupes.py), ``changing`` the changing-content
    origins (changing.py), ``directives`` the robots-directive origin (directives.py),
    ``scripted`` the script-drawn origins (scripted.py), aimed at the canary too. SIGUSR1
    advances the generation of ``web``, of the changing and of the directive origins and
    prints ``generation N``."""
    address = _loopback(host)
    trap_origins = Traps(trap_scale) if traps else None  # a bad scale fails before binding
    sock = _bind(address, port)
    web.port = sock.getsockname()[1]
    changing_origins = Changing(web.port) if changing else None
    directive_origin = DirectivePages() if directives else None
    log = RequestLog(log_path)

    async def main() -> None:
        runner = aio_web.AppRunner(
            make_app(
                web,
                log,
                Lab() if lab else None,
                Hostile(canary_port) if hostile else None,
                trap_origins,
                Dupes() if dupes else None,
                changing_origins,
                directive_origin,
                Scripted(canary_port) if scripted else None,
            ),
            access_log=None,
            shutdown_timeout=_SHUTDOWN_TIMEOUT,
            # a handler ends when its client goes away, so the log's `end` is the moment the
            # server saw the connection close (a drip would otherwise notice at its next byte)
            handler_cancellation=True,
        )
        await runner.setup()
        await aio_web.SockSite(runner, sock).start()
        stop = asyncio.Event()
        _stop_on_signals(stop)
        _bump_on_sigusr1(web, changing_origins, directive_origin)
        hostile_note = (
            f"; hostile origins {', '.join(HOSTILE_HOSTS)} aimed at canary port {canary_port}"
            if hostile
            else ""
        )
        trap_note = f"; trap origins {', '.join(TRAP_HOSTS)} at scale {trap_scale}" if traps else ""
        dupes_note = f"; duplicate-content origin {', '.join(DUPES_HOSTS)}" if dupes else ""
        changing_note = (
            f"; changing-content origins {', '.join(CHANGING_HOSTS)} (SIGUSR1: next generation)"
            if changing
            else ""
        )
        directives_note = (
            f"; robots-directive origin {', '.join(DIRECTIVES_HOSTS)}" if directives else ""
        )
        scripted_note = (
            f"; script-drawn origins {', '.join(SCRIPTED_HOSTS)} aimed at canary port {canary_port}"
            if scripted
            else ""
        )
        print(
            f"Atlas sandbox web: {len(web.hosts)} origins on {_base_url(address, web.port)}"
            f" (routed by Host, e.g. {web.seed_urls()[0]}); "
            f"request log: {log_path if log_path is not None else 'in memory only'}"
            f"{hostile_note}{trap_note}{dupes_note}{changing_note}{directives_note}"
            f"{scripted_note}",
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
        log.close()


# ---------------------------------------------------------------------------- the canary

_CANARY_HEAD_LIMIT = 64 * 1024  # request-head bytes read before recording what came
_CANARY_READ_TIMEOUT_S = 5.0  # a silent connection is recorded after this long
_CANARY_BODY = b"canary: this hit was recorded.\n"
_CANARY_ANSWER = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\n"
    b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(_CANARY_BODY), _CANARY_BODY)
)


def _canary_hit(head: bytes, peer: Any, local: Any) -> dict[str, Any]:
    """A hit record from whatever the client sent (anything at all, TLS included)."""
    line = head.split(b"\r\n", 1)[0].decode("latin-1")
    parts = line.split(" ")
    is_http = len(parts) == 3 and parts[2].startswith("HTTP/")
    host = None
    for field in head.split(b"\r\n")[1:]:
        name, _, value = field.decode("latin-1").partition(":")
        if name.strip().lower() == "host":
            host = value.strip()
            break
    return {
        "time": time.time(),
        "method": parts[0] if is_http else None,
        "path": parts[1] if is_http else None,
        "host": host,
        "peer": peer[0] if peer else None,
        "local": _base_url(local[0], local[1]) if local else None,
        "request_line": line[:200],
    }


def _canary_handler(
    log: RequestLog,
) -> Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]:
    """The connection callback: read the request head, record the hit, answer 200."""

    async def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = bytearray()
        try:
            async with asyncio.timeout(_CANARY_READ_TIMEOUT_S):
                while b"\r\n\r\n" not in head and len(head) < _CANARY_HEAD_LIMIT:
                    data = await reader.read(4096)
                    if not data:
                        break
                    head += data
        except (TimeoutError, ConnectionError):
            pass  # record what came: a connection is a hit even if it said nothing
        # Recorded before answering, so a client holding the 200 finds its hit in the log.
        peer, local = writer.get_extra_info("peername"), writer.get_extra_info("sockname")
        log.append(_canary_hit(bytes(head), peer, local))
        try:
            writer.write(_CANARY_ANSWER)
            await writer.drain()
            writer.close()
            await writer.wait_closed()
        except ConnectionError:
            pass

    return on_connection


def _canary_sockets(host: str, port: int) -> list[socket.socket]:
    """Bind ``host`` (port 0: any free port), then ::1 on the same port when ``host`` is
    127.0.0.1, so IPv6 spellings of loopback reach the canary too."""
    first = _bind(_loopback(host), port)
    socks = [first]
    if host in ("127.0.0.1", "localhost"):
        # No IPv6 loopback here, or the port is taken on it: IPv4 only.
        with contextlib.suppress(OSError):
            socks.append(_bind("::1", first.getsockname()[1]))
    return socks


async def _start_canary(socks: list[socket.socket], log: RequestLog) -> list[asyncio.Server]:
    handler = _canary_handler(log)
    return [await asyncio.start_server(handler, sock=sock) for sock in socks]


class CanaryServer:
    """The canary in a background thread: every connection to its port is recorded as a hit
    (time, method, path, Host, peer) in ``log`` and answered 200. A crawl must never reach it.
    """

    def __init__(
        self, port: int = 0, log_path: Path | None = None, host: str = "127.0.0.1"
    ) -> None:
        self.host = _loopback(host)
        self.port = port
        self.log = RequestLog(log_path)
        self._server = LoopThread("atlas-canary", _nothing, _close_servers)

    def url(self, path: str = "/") -> str:
        """``http://127.0.0.1:PORT/path``."""
        return _base_url(self.host, self.port) + path

    def hits(self) -> list[dict[str, Any]]:
        """Every hit recorded so far."""
        return self.log.entries(settle_s=0)

    def start(self) -> CanaryServer:
        """Bind and serve in a daemon thread; returns once the canary accepts connections."""
        if self._server.running:
            raise RuntimeError("canary already started")
        socks = _canary_sockets(self.host, self.port)
        self.port = socks[0].getsockname()[1]

        def abort() -> None:
            for sock in socks:
                sock.close()

        self._server = LoopThread("atlas-canary", lambda: _start_canary(socks, self.log),
                                  _close_servers, abort)  # fmt: skip
        self._server.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the log. Idempotent."""
        self._server.stop()
        self.log.close()

    def __enter__(self) -> CanaryServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def serve_canary_forever(
    port: int = DEFAULT_CANARY_PORT, log_path: Path | None = None, host: str = "127.0.0.1"
) -> None:
    """Run the canary in the foreground until Ctrl-C or SIGTERM (for ``atlas canary``)."""
    socks = _canary_sockets(host, port)
    log = RequestLog(log_path)

    async def main() -> None:
        servers = await _start_canary(socks, log)
        stop = asyncio.Event()
        _stop_on_signals(stop)
        where = " and ".join(_base_url(*s.getsockname()[:2]) for s in socks)
        print(
            f"Atlas canary: recording every hit on {where}; "
            f"log: {log_path if log_path is not None else 'in memory only'}",
            flush=True,
        )
        try:
            await stop.wait()
        finally:
            for server in servers:
                server.close()

    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
    finally:
        log.close()
