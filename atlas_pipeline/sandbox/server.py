"""Running the sandbox web: in a background thread (tests) or in the foreground (CLI)."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import signal
import socket
import threading
from pathlib import Path
from types import TracebackType

from aiohttp import web as aio_web

from .lab import Lab
from .site import SandboxWeb
from .web import RequestLog, make_app

# In-flight requests get this long to finish when the server stops; tests stop often.
_SHUTDOWN_TIMEOUT = 2.0
_START_TIMEOUT = 10.0


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


class SandboxServer:
    """The sandbox web served from a background thread with its own event loop.

    Binding happens in ``start()`` (or ``__enter__``); ``web.port`` is then set to the
    real port, so the absolute links pages contain point at this server.
    """

    def __init__(
        self,
        web: SandboxWeb,
        host: str = "127.0.0.1",
        port: int = 0,
        log_path: Path | None = None,
    ) -> None:
        self.web = web
        self.host = _loopback(host)
        self.port = port
        self.log = RequestLog(log_path)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT`` (reach origins by sending their Host header)."""
        return _base_url(self.host, self.port)

    def url(self, host: str, path: str = "/") -> str:
        """``http://HOST:PORT/path`` for an origin host on this server's port."""
        return f"http://{host}:{self.port}{path if path.startswith('/') else '/' + path}"

    def start(self) -> SandboxServer:
        """Bind, then serve in a daemon thread; returns once the server accepts requests."""
        if self._thread is not None:
            raise RuntimeError("sandbox server already started")
        sock = _bind(self.host, self.port)
        self.port = sock.getsockname()[1]
        self.web.port = self.port
        ready = threading.Event()
        loop = asyncio.new_event_loop()
        thread = threading.Thread(
            target=self._run, args=(loop, sock, ready), name="atlas-sandbox-web", daemon=True
        )
        thread.start()
        if not ready.wait(_START_TIMEOUT):
            raise RuntimeError("sandbox server did not start in time")
        if self._error is not None:
            thread.join()
            raise RuntimeError("sandbox server failed to start") from self._error
        self._loop, self._thread = loop, thread
        return self

    def _run(
        self, loop: asyncio.AbstractEventLoop, sock: socket.socket, ready: threading.Event
    ) -> None:
        asyncio.set_event_loop(loop)
        runner = aio_web.AppRunner(
            make_app(self.web, self.log), access_log=None, shutdown_timeout=_SHUTDOWN_TIMEOUT
        )
        try:
            loop.run_until_complete(runner.setup())
            loop.run_until_complete(aio_web.SockSite(runner, sock).start())
        except BaseException as exc:  # reported to start() in the caller's thread
            self._error = exc
            sock.close()
            loop.run_until_complete(runner.cleanup())
            loop.close()
            ready.set()
            return
        ready.set()
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(runner.cleanup())
            loop.close()

    def stop(self) -> None:
        """Stop serving, wait for the thread and close the log file. Idempotent."""
        loop, thread = self._loop, self._thread
        self._loop = self._thread = None
        if loop is not None and thread is not None:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(_SHUTDOWN_TIMEOUT + 5)
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
) -> None:
    """Serve ``web`` in the foreground until Ctrl-C or SIGTERM (for ``atlas web``); ``lab``
    turns on the politeness lab's misbehaving origins (lab.py)."""
    address = _loopback(host)
    sock = _bind(address, port)
    web.port = sock.getsockname()[1]
    log = RequestLog(log_path)

    async def main() -> None:
        runner = aio_web.AppRunner(
            make_app(web, log, Lab() if lab else None),
            access_log=None,
            shutdown_timeout=_SHUTDOWN_TIMEOUT,
        )
        await runner.setup()
        await aio_web.SockSite(runner, sock).start()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            # Signal handlers only work in the main thread; elsewhere Ctrl-C still raises.
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, stop.set)
        print(
            f"Atlas sandbox web: {len(web.hosts)} origins on {_base_url(address, web.port)}"
            f" (routed by Host, e.g. {web.seed_urls()[0]}); "
            f"request log: {log_path if log_path is not None else 'in memory only'}",
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
