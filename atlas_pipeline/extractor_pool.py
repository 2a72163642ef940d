"""Worker processes for `parsing.parse_page`, each document under a CPU-time and a memory cap.

A parser that crashes, loops or balloons costs that document (ParserFailure), never the
batch. One pool per process and limits (`shared_pool`) lives across batches; its workers
start with it and die with their parent (extraction_worker). A thread per worker keeps it
fed one document ahead (`_feed`).
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import multiprocessing.util
import os
import pickle
import queue
import select
import signal
import sys
import threading
import types
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

from . import defaults as d
from .extraction_worker import KEEP_FAILED, ParserFailure, run_worker
from .kept_parse import Keep
from .reasons import Reason

__all__ = ["ExtractorPool", "ParserFailure", "close_shared", "shared_pool"]

log = logging.getLogger(__name__)


_STARTING = threading.Lock()

# Jobs out to a worker at once: the one it parses and the next, already in its pipe. Measured
# in crawl_throughput's Atlas contender (10k pages, alternating pairs): the workers used 4-7%
# less CPU fed one ahead (136.3 and 136.4 s against 142.0 and 146.2 s) than waiting for this
# thread to wake, take the interpreter lock and send the next job after each answer.
_IN_FLIGHT = 2
# A job sent ahead must fit the pipe's buffer (about 230 kB on Linux, written in one piece),
# so a send never waits on a worker that is itself waiting to write its answer.
_AHEAD_BYTES = 128 * 1024
_Job = tuple[bytes, Future[dict[str, Any]]]  # a pickled job and whoever waits for it


class _WorkerGone(Exception):
    """A job could not go out: the worker went while on an earlier one."""


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


class _Slot:
    """One worker process and the pipe to it; replaced when it dies or overruns."""

    def __init__(self, pool: ExtractorPool) -> None:
        self.pool = pool
        self.proc: BaseProcess | None = None
        self.conn: Connection | None = None
        # the answer's wait: one poll object a worker, not the selector that Connection.poll
        # builds, registers and closes on every call (a third of this thread's time a page)
        self.answer: select.poll | None = None
        self.out = 0  # jobs sent to the worker, not yet answered
        self.busy = False  # a job is out to the worker, or it is starting

    def warm(self) -> None:
        """Start the worker if none was started yet, and wait until it is ready. The pool
        counts as warm after the first such wait, even one that failed: a worker that cannot
        start fails the documents it is given (ParserFailure), nobody waits on it forever."""
        self.busy = True  # so a pool closed meanwhile kills the worker, not waits its imports
        try:
            if self.proc is None:
                self._start()
        except ParserFailure as exc:
            if not self.pool.closed:  # else closing killed it on purpose
                log.warning("an extraction worker did not start: %s", exc.detail)
        finally:
            self.busy = False
            self.pool.warmed.set()

    def send(self, payload: bytes) -> None:
        """Send a pickled job, starting a worker if none is there; its answer comes from
        `receive`, in the order sent. _WorkerGone: the worker went while on an earlier job,
        whose `receive` tells how."""
        self.busy = True
        try:
            if not self.out and (self.proc is None or not self.proc.is_alive()):
                self._start()
            assert self.conn is not None
            try:
                self.conn.send_bytes(payload)
            except OSError:
                if self.out:
                    raise _WorkerGone from None
                raise
            self.out += 1
        finally:
            self.busy = self.out > 0

    def receive(self) -> dict[str, Any]:
        """The answer to the oldest job out. A worker that does not answer in time, died or
        hit its memory cap is stopped (`proc` None), the job it was on failed."""
        try:
            return self._receive()
        finally:
            self.out = max(self.out - 1, 0)
            self.busy = self.out > 0

    def _receive(self) -> dict[str, Any]:
        assert self.conn is not None and self.proc is not None and self.answer is not None
        if not self.answer.poll(self.pool.wall_s * 1000):
            self.stop()
            raise ParserFailure(
                Reason.PARSE_TIMEOUT.value, f"no answer in {self.pool.wall_s:.0f} s"
            )
        try:
            kind, value = self.conn.recv()
        except (EOFError, OSError):
            code = self._reap()
            if code == -signal.SIGXCPU:
                raise ParserFailure(
                    Reason.PARSE_TIMEOUT.value, f"over {self.pool.cpu_s:g} s of CPU"
                ) from None
            raise ParserFailure(Reason.PARSE_CRASHED.value, f"worker exit code {code}") from None
        if kind == KEEP_FAILED:
            raise OSError(value)  # as the batch's own body-store write would have
        if kind != "ok":
            if kind == Reason.PARSE_MEMORY.value:
                self.stop()  # it exits after saying so
            raise ParserFailure(kind, value)
        return dict(value)

    def _start(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        parent, child = ctx.Pipe()
        self.proc = ctx.Process(
            target=run_worker,
            args=(child, self.pool.cpu_s, self.pool.memory_mb, os.getpid()),
            daemon=False,
        )
        with _bare_main():
            self.proc.start()
        child.close()
        self.conn = parent
        self.answer = select.poll()
        self.answer.register(parent.fileno(), select.POLLIN)
        if not parent.poll(self.pool.wall_s):
            self.stop()
            raise ParserFailure(Reason.PARSE_TIMEOUT.value,
                                f"worker not ready in {self.pool.wall_s:.0f} s")  # fmt: skip
        try:
            parent.recv()  # _READY
        except (EOFError, OSError):
            raise ParserFailure(Reason.PARSE_CRASHED.value,
                                f"worker exit code {self._reap()} before it was ready") from None  # fmt: skip

    def _reap(self) -> int | None:
        """The exit code of a worker whose pipe closed, the slot left empty."""
        assert self.proc is not None
        self.proc.join(5)
        code = self.proc.exitcode
        self.stop()
        return code

    def stop(self, graceful: bool = False) -> None:
        if self.conn is not None:
            if graceful:
                with contextlib.suppress(OSError):
                    self.conn.send(None)
            self.conn.close()
        if self.proc is not None and self.proc.pid is not None:  # None: it never started
            self.proc.join(0.5 if graceful else 0)  # an idle worker exits at once on None
            if self.proc.is_alive():
                self.proc.kill()
                self.proc.join(5)
        self.proc, self.conn, self.answer = None, None, None
        self.out = 0


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
        self._jobs: queue.SimpleQueue[tuple[tuple[Any, ...], Future[dict[str, Any]]] | None] = (
            queue.SimpleQueue()
        )
        self._slots = [_Slot(self) for _ in range(self.workers)]
        self._threads = [
            threading.Thread(target=self._serve, args=(slot,), name=f"extractor-{i}", daemon=True)
            for i, slot in enumerate(self._slots)
        ]
        for t in self._threads:
            t.start()

    def _serve(self, slot: _Slot) -> None:
        try:
            # Started now, not at the first document: a worker's imports (a second or more of
            # CPU) overlap the batch's first claims and requests instead of holding its first
            # parses, and the leases waiting on them, until a worker is warm.
            slot.warm()
            self._feed(slot)
        finally:
            slot.stop(graceful=True)

    def _feed(self, slot: _Slot) -> None:
        """Keep up to _IN_FLIGHT jobs out to the slot's worker and hand back their answers in
        the order sent, so the worker finds its next document waiting when it answers rather
        than wait for this thread to wake and send one. A job over _AHEAD_BYTES waits for
        the worker to be free instead: written into a full pipe it could block this thread
        while the worker blocks writing a long answer. A worker that dies, overruns or hits
        its cap fails the job it was on; the jobs behind it were never begun, and go to the
        next worker."""
        sent: deque[_Job] = deque()
        waiting: deque[_Job] = deque()  # taken, to go out in this order
        stopping = behind = False  # behind: the worker went while on the oldest job out
        while sent or waiting or not stopping:
            ahead = not sent or (len(sent) < _IN_FLIGHT and not behind)
            if waiting and ahead and (not sent or len(waiting[0][0]) <= _AHEAD_BYTES):
                if self._send(slot, waiting[0], sent):
                    waiting.popleft()
                else:
                    behind = True
                continue
            if not waiting and not stopping and ahead:
                try:  # waits for a job only when the worker has none
                    item = self._jobs.get(block=not sent)
                except queue.Empty:
                    pass  # on to the answer
                else:
                    if item is None:
                        stopping = True
                        continue
                    job, fut = item
                    if fut.set_running_or_notify_cancel():
                        # pickled here, once (a job sent again keeps its bytes), not by
                        # Connection.send's ForkingPickler (made for handles and sockets,
                        # which a job never holds): it was a fifth of this thread's samples
                        waiting.append((pickle.dumps(job, pickle.HIGHEST_PROTOCOL), fut))
                    continue
            _, fut = sent.popleft()
            try:
                fut.set_result(slot.receive())
            except BaseException as exc:  # handed to the waiting caller
                fut.set_exception(exc)
            behind = False
            if slot.proc is None:  # the worker is gone: what it had not begun goes again
                waiting.extendleft(reversed(sent))
                sent.clear()

    def _send(self, slot: _Slot, job: _Job, sent: deque[_Job]) -> bool:
        """Send `job` (a failure to start a worker is its answer); False: not now, the
        worker went while on an earlier job."""
        payload, fut = job
        try:
            if self.closed:
                raise ParserFailure(Reason.PARSE_CRASHED.value, "the extraction pool closed")
            slot.send(payload)
        except _WorkerGone:
            return False
        except BaseException as exc:
            fut.set_exception(exc)
            return True
        sent.append(job)
        return True

    def submit(
        self,
        body: bytes,
        url: str,
        charset: str | None,
        want_text: bool,
        meta_names: tuple[str, ...] = (),
        keep: Keep | None = None,
    ) -> Future[dict[str, Any]]:
        """Parse in a worker; `meta_names`: the meta tags to hand back (lowercased names).
        With `keep`, the worker stores the body and the text itself (`kept_parse`)."""
        fut: Future[dict[str, Any]] = Future()
        self._jobs.put(((body, url, charset, want_text, meta_names, keep), fut))
        return fut

    def wait_warm(self, timeout_s: float | None = None) -> bool:
        """Block until a worker is ready to parse (or could not start); False on timeout."""
        return self.warmed.wait(timeout_s)

    def worker_pids(self) -> list[int]:
        """Live worker processes (for operators and tests)."""
        return [s.proc.pid for s in self._slots if s.proc is not None and s.proc.pid is not None]

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        while True:  # queued documents are not parsed first: whoever waits is told
            try:
                item = self._jobs.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                item[1].cancel()
        for _ in self._threads:
            self._jobs.put(None)
        for slot in self._slots:
            # a document in progress (or a worker still importing) is nobody's any more:
            # its thread sees the pipe close and goes on to the stop sentinel at once
            proc = slot.proc
            if slot.busy and proc is not None and proc.pid is not None:
                with contextlib.suppress(OSError, ValueError):
                    proc.kill()
        for t in self._threads:
            t.join()

    def __enter__(self) -> ExtractorPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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
