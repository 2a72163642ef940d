"""Worker processes for `parsing.parse_page`, each document under a CPU-time and a memory cap.

A parser that crashes, loops or balloons costs that document (ParserFailure), never the
batch. One pool per process and limits (`shared_pool`) lives across batches; its workers
start with it and die with their parent (extraction_worker).

A fetch batch awaits `parse` on its own event loop, which writes the job to the worker's
socket and reads the answer itself: no thread of the pool stands between them. A thread per
worker used to carry every job (pickle, send, wait, read, then hand the answer to the loop
through a concurrent future): two thread hand-offs a page, which cost the batch's process
0.09 ms of CPU a page more than the loop doing the same I/O (measured over 1,500 sandbox
pages with the same two workers: 0.50 against 0.41 ms a job), and two more threads taking
turns at its interpreter lock. The slots are shared by every loop of the process (batches
run in threads), taken and given back under a lock. `submit`, for callers without a loop,
runs `parse` on a loop thread of the pool's own.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import multiprocessing.util
import os
import pickle
import signal
import socket
import struct
import sys
import threading
import types
from collections.abc import Coroutine, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from multiprocessing.process import BaseProcess
from typing import Any

from . import defaults as d
from .extraction_worker import KEEP_FAILED, ParserFailure, run_worker
from .kept_parse import Keep
from .loop_shared import Closed, LoopShared
from .reasons import Reason

__all__ = ["ExtractorPool", "ParserFailure", "close_shared", "shared_pool"]

log = logging.getLogger(__name__)

_SHORT, _LONG = struct.Struct("!i"), struct.Struct("!Q")  # multiprocessing's frame header

_STARTING = threading.Lock()


@contextlib.contextmanager
def _bare_main() -> Iterator[None]:
    """While a worker is being started, __main__ is an empty module. The spawn start method
    imports the parent's main module again in the child, and a worker needs nothing of it: a
    Dagster run's is Dagster's CLI, a script's brings its imports (measured: a worker under
    a main module importing polars, pyarrow, deltalake and SQLAlchemy had 186 MiB of RSS
    after one page, 82 MiB without them)."""
    with _STARTING:
        main = sys.modules.get("__main__")
        sys.modules["__main__"] = types.ModuleType("__main__")
        try:
            yield
        finally:
            if main is not None:
                sys.modules["__main__"] = main


def _spawn(proc: BaseProcess) -> None:
    with _bare_main():
        proc.start()


def _frame(payload: bytes) -> bytes:
    """`payload` as `Connection.send_bytes` frames it, for the worker's `Connection.recv`."""
    n = len(payload)
    head = _SHORT.pack(n) if n <= 0x7FFFFFFF else _SHORT.pack(-1) + _LONG.pack(n)
    return head + payload


async def _read_frame(loop: asyncio.AbstractEventLoop, sock: socket.socket) -> bytes | None:
    """One framed message from the worker, or None at EOF (the worker is gone). An answer is
    a kB or two: one read takes the header and the message together."""
    data = await loop.sock_recv(sock, 65536)
    buf = bytearray()
    while data:
        buf += data
        if len(buf) >= 4:
            n, start = _SHORT.unpack_from(buf)[0], 4
            if n == -1 and len(buf) >= 12:
                n, start = _LONG.unpack_from(buf, 4)[0], 12
            if n != -1 and len(buf) >= start + n:
                return bytes(buf[start : start + n])
        data = await loop.sock_recv(sock, 65536)
    return None


async def _started(starting: asyncio.Future[None]) -> None:
    """Await a worker's start in a thread. Cancelled meanwhile, this waits for the thread
    all the same: the slot must not be given back while a thread still fills it in."""
    try:
        await asyncio.shield(starting)
    except asyncio.CancelledError:
        await asyncio.wait({starting})
        if not starting.cancelled():
            starting.exception()  # retrieved: the caller has gone, nobody else would
        raise


class _Slot:
    """One worker process and the socket to it; replaced when it dies or overruns. Held by
    one caller at a time (`LoopShared`)."""

    def __init__(self, pool: ExtractorPool) -> None:
        self.pool = pool
        self.proc: BaseProcess | None = None
        self.sock: socket.socket | None = None
        self.busy = False  # a job is out to the worker, or it is starting

    def warm(self) -> None:
        """Start the worker if none was started yet, and wait until it is ready (blocking:
        a thread's work). The pool counts as warm after the first such wait, even one that
        failed: a worker that cannot start fails the documents it is given (ParserFailure),
        nobody waits on it forever."""
        self.busy = True  # so a pool closed meanwhile kills the worker, not waits its imports
        try:
            if self.proc is None:
                self.start()
        except ParserFailure as exc:
            if not self.pool.closed:  # else closing killed it on purpose
                log.warning("an extraction worker did not start: %s", exc.detail)
        finally:
            self.busy = False
            self.pool.warmed.set()

    def start(self) -> None:
        """Spawn the worker and wait until it is ready (blocking: seconds of imports)."""
        ctx = multiprocessing.get_context("spawn")
        parent, child = ctx.Pipe()
        self.proc = ctx.Process(
            target=run_worker,
            args=(child, self.pool.cpu_s, self.pool.memory_mb, os.getpid()),
            daemon=False,
        )
        try:
            self.pool.spawner.submit(_spawn, self.proc).result()
        except RuntimeError:  # the spawner has shut down: the pool closed
            parent.close()
            child.close()
            self.proc = None
            raise ParserFailure(
                Reason.PARSE_CRASHED.value, "the extraction pool is closed"
            ) from None
        child.close()
        if not parent.poll(self.pool.wall_s):
            parent.close()
            self.stop()
            raise ParserFailure(Reason.PARSE_TIMEOUT.value,
                                f"worker not ready in {self.pool.wall_s:.0f} s")  # fmt: skip
        try:
            parent.recv()  # READY
        except (EOFError, OSError):
            parent.close()
            raise ParserFailure(Reason.PARSE_CRASHED.value,
                                f"worker exit code {self._reap()} before it was ready") from None  # fmt: skip
        # a Pipe is a socketpair: the loops speak its framing themselves, never blocking
        self.sock = socket.socket(fileno=os.dup(parent.fileno()))
        parent.close()
        self.sock.setblocking(False)

    async def run(self, job: tuple[Any, ...]) -> dict[str, Any]:
        """Parse `job` in this slot's worker, started first if there is none. A caller
        cancelled mid-document stops the worker: its answer would be the next job's."""
        loop = asyncio.get_running_loop()
        self.busy = True
        try:
            if self.proc is None or self.sock is None or not self.proc.is_alive():
                self.stop()
                await _started(loop.run_in_executor(None, self.start))
            assert self.sock is not None
            # pickled here, not by Connection's ForkingPickler (made for handles and
            # sockets, which a job never holds): it was a fifth of the send's time
            try:
                await loop.sock_sendall(
                    self.sock, _frame(pickle.dumps(job, pickle.HIGHEST_PROTOCOL))
                )
                async with asyncio.timeout(self.pool.wall_s):
                    answer = await _read_frame(loop, self.sock)
            except TimeoutError:
                self.stop()
                raise ParserFailure(
                    Reason.PARSE_TIMEOUT.value, f"no answer in {self.pool.wall_s:.0f} s"
                ) from None
            except (BrokenPipeError, ConnectionResetError):
                answer = None
            if answer is None:
                code = await loop.run_in_executor(None, self._reap)
                if code == -signal.SIGXCPU:
                    raise ParserFailure(
                        Reason.PARSE_TIMEOUT.value, f"over {self.pool.cpu_s:g} s of CPU"
                    )
                raise ParserFailure(Reason.PARSE_CRASHED.value, f"worker exit code {code}")
        except asyncio.CancelledError:
            self.stop()
            raise
        finally:
            self.busy = False
        kind, value = pickle.loads(answer)
        if kind == KEEP_FAILED:
            raise OSError(value)  # as the batch's own body-store write would have
        if kind != "ok":
            if kind == Reason.PARSE_MEMORY.value:
                self.stop()  # it exits after saying so
            raise ParserFailure(kind, value)
        return dict(value)

    def _reap(self) -> int | None:
        """The exit code of a worker whose pipe closed, the slot left empty."""
        assert self.proc is not None
        self.proc.join(5)
        code = self.proc.exitcode
        self.stop()
        return code

    def stop(self, graceful: bool = False) -> None:
        if self.sock is not None:
            if graceful:  # an idle worker reads None and exits; its buffer has the room
                with contextlib.suppress(OSError):
                    self.sock.send(_frame(pickle.dumps(None)))
            self.sock.close()
        if self.proc is not None and self.proc.pid is not None:  # None: it never started
            self.proc.join(0.5 if graceful else 0)  # an idle worker exits at once on None
            if self.proc.is_alive():
                self.proc.kill()
                self.proc.join(5)
        self.proc, self.sock = None, None


def _stop_idle(slot: _Slot) -> None:
    slot.stop(graceful=True)


class ExtractorPool:
    """Worker processes for parse_page, each document under a CPU-time and a memory limit: a
    parser that crashes, loops or balloons costs that document (ParserFailure), never the
    batch. Spawned (not forked) because callers run threads."""

    def __init__(
        self, workers: int = 0, cpu_s: float = d.PARSER_CPU_S, memory_mb: int = d.PARSER_MEMORY_MB
    ) -> None:
        self.workers = workers or os.cpu_count() or 1
        self.cpu_s = cpu_s
        self.memory_mb = memory_mb
        self.wall_s = 3 * cpu_s + 10  # a worker blocked off-CPU still ends
        self.closed = False
        # Set once a worker is ready (or could not start): a batch claims no page before, so
        # no lease runs out on a page waiting for a worker's imports (seconds on a busy
        # machine; see wait_warm).
        self.warmed = threading.Event()
        self.pid = os.getpid()  # a forked child inherits the object, not its threads
        # Every worker is spawned by this one thread, which lives as long as the pool: a
        # worker asks the kernel to kill it when the thread that spawned it ends (prctl's
        # parent-death signal follows the thread), and the threads that start workers come
        # and go (a loop's executor's end with its batch).
        self.spawner = ThreadPoolExecutor(1, thread_name_prefix="extractor-spawn")
        self._slots = [_Slot(self) for _ in range(self.workers)]
        self._free: LoopShared[_Slot] = LoopShared(_stop_idle)
        self._io: asyncio.AbstractEventLoop | None = None  # submit's loop, made at first use
        self._io_thread: threading.Thread | None = None
        self._io_lock = threading.Lock()
        # Started now, not at the first document: a worker's imports (a second or more of
        # CPU) overlap the batch's first claims and requests instead of holding its first
        # parses, and the leases waiting on them, until a worker is warm.
        self._warming = [
            threading.Thread(target=self._warm, args=(slot,), name=f"extractor-{i}", daemon=True)
            for i, slot in enumerate(self._slots)
        ]
        for t in self._warming:
            t.start()

    def _warm(self, slot: _Slot) -> None:
        slot.warm()
        self._free.give(slot)

    async def parse(
        self,
        body: bytes,
        url: str,
        charset: str | None,
        want_text: bool,
        meta_names: tuple[str, ...] = (),
        keep: Keep | None = None,
    ) -> dict[str, Any]:
        """Parse in a worker, on the calling loop; `meta_names`: the meta tags to hand back
        (lowercased names). With `keep`, the worker stores the body and the text itself
        (`kept_parse`)."""
        try:
            slot = await self._free.take()
        except Closed:
            raise ParserFailure(
                Reason.PARSE_CRASHED.value, "the extraction pool is closed"
            ) from None
        try:
            return await slot.run((body, url, charset, want_text, meta_names, keep))
        finally:
            self._free.give(slot)

    def submit(
        self,
        body: bytes,
        url: str,
        charset: str | None,
        want_text: bool,
        meta_names: tuple[str, ...] = (),
        keep: Keep | None = None,
    ) -> Future[dict[str, Any]]:
        """`parse` for a caller without an event loop, on the pool's own loop thread."""
        return self._run_on_io(self.parse(body, url, charset, want_text, meta_names, keep))

    def _run_on_io(self, coro: Coroutine[Any, Any, dict[str, Any]]) -> Future[dict[str, Any]]:
        with self._io_lock:
            if self.closed:
                coro.close()
                fut: Future[dict[str, Any]] = Future()
                fut.cancel()
                return fut
            if self._io is None:
                self._io = asyncio.new_event_loop()
                self._io_thread = threading.Thread(
                    target=self._io.run_forever, name="extractor-io", daemon=True
                )
                self._io_thread.start()
            return asyncio.run_coroutine_threadsafe(coro, self._io)

    def wait_warm(self, timeout_s: float | None = None) -> bool:
        """Block until a worker is ready to parse (or could not start); False on timeout."""
        return self.warmed.wait(timeout_s)

    def worker_pids(self) -> list[int]:
        """Live worker processes (for operators and tests)."""
        return [s.proc.pid for s in self._slots if s.proc is not None and s.proc.pid is not None]

    def close(self) -> None:
        """Stop the workers: queued documents are not parsed first (whoever waits is told),
        a document in progress is nobody's any more (its worker is killed, its caller told
        ParserFailure), idle workers are asked to exit."""
        with self._io_lock:
            if self.closed:
                return
            self.closed = True
        for slot in self._slots:
            proc = slot.proc
            if slot.busy and proc is not None and proc.pid is not None:
                with contextlib.suppress(OSError, ValueError):
                    proc.kill()
        for slot in self._free.close():
            slot.stop(graceful=True)
        for t in self._warming:
            t.join()
        if self._io is not None and self._io_thread is not None:
            asyncio.run_coroutine_threadsafe(_drain(), self._io).result()
            self._io.call_soon_threadsafe(self._io.stop)
            self._io_thread.join()
            self._io.close()
        self.spawner.shutdown()

    def __enter__(self) -> ExtractorPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


async def _drain() -> None:
    """The pool's loop, closing: its parses end (their workers were killed) or are cancelled."""
    tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


_SHARED: dict[tuple[int, float, int], ExtractorPool] = {}
_SHARED_LOCK = threading.Lock()


def shared_pool(
    workers: int = 0, cpu_s: float = d.PARSER_CPU_S, memory_mb: int = d.PARSER_MEMORY_MB
) -> ExtractorPool:
    """This process's pool for these limits, started once and kept across batches: a worker
    costs seconds of CPU to start (trafilatura's imports), per batch before this. Callers
    must not close it. It closes when the process exits, before multiprocessing joins the
    process's children: a multiprocessing finalizer, which also runs in a pool worker
    process (a run launcher's, a ProcessPoolExecutor's), where atexit does not, and where a
    live pool would otherwise keep the process from exiting."""
    key = (workers or os.cpu_count() or 1, cpu_s, memory_mb)
    with _SHARED_LOCK:
        pool = _SHARED.get(key)
        if pool is None or pool.closed or pool.pid != os.getpid():
            pool = ExtractorPool(*key)
            _SHARED[key] = pool
            multiprocessing.util.Finalize(None, pool.close, exitpriority=10)
        return pool


def close_shared() -> None:
    """Close this process's shared pools now, joining their workers (what exit would do;
    for a benchmark that counts the workers' CPU, which only joined children report)."""
    with _SHARED_LOCK:
        pools = [p for p in _SHARED.values() if p.pid == os.getpid()]
        _SHARED.clear()
    for pool in pools:
        pool.close()
