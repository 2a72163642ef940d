"""Worker processes for `parsing.parse_page`, each document under a CPU-time and a memory cap.

A parser that crashes, loops or balloons costs that document (ParserFailure), never the
batch. One pool per process and limits (`shared_pool`) lives across batches; its workers
start with it and die with their parent.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import math
import multiprocessing
import multiprocessing.util
import os
import pickle
import queue
import resource
import select
import signal
import sys
import threading
import types
from collections.abc import Iterator
from concurrent.futures import Future
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

from . import defaults as d
from .kept_parse import Keep, KeepFailed, parse_kept
from .parsing import parse_page, warm
from .reasons import Reason

log = logging.getLogger(__name__)


class ParserFailure(Exception):
    """One document could not be parsed within its limits; `reason` is the reason code."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


_PR_SET_PDEATHSIG = 1  # prctl(2)


def _die_with(parent_pid: int) -> None:
    """Have the kernel SIGKILL this process when its parent dies (Linux), so a crawl killed
    with -9 leaves no worker behind, not even one busy with a long document (an idle one
    would see its pipe close anyway). Ctrl-C is the parent's to handle: workers ignore it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the pipe's EOF still ends an idle worker
        return
    if os.getppid() != parent_pid:  # the parent died before the request took effect
        os._exit(0)


def _worker(conn: Connection, cpu_s: float, memory_mb: int, parent_pid: int = 0) -> None:
    """Parse jobs until told to stop. Once warm, the address space is capped at its size plus
    `memory_mb`; every job gets `cpu_s` seconds of CPU on top of what the worker used so far
    (the kernel kills it with SIGXCPU past that). A worker that hit its memory cap answers
    and exits, so the next document starts in a fresh one. It dies with its parent."""
    if parent_pid:
        _die_with(parent_pid)
    warm()
    limit = _mapped_bytes() + memory_mb * 1024 * 1024 if memory_mb else 0
    if limit:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    conn.send((_READY, None))
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError):  # the parent is gone
            return
        if job is None:
            return
        used = resource.getrusage(resource.RUSAGE_SELF)
        soft = math.ceil(used.ru_utime + used.ru_stime + cpu_s)
        resource.setrlimit(resource.RLIMIT_CPU, (soft, resource.RLIM_INFINITY))
        try:
            _answer(conn, "ok", _parse(*job))
            continue
        except KeepFailed as exc:  # the disk's problem: not a parse failure of the document
            _answer(conn, _KEEP_FAILED, str(exc))
            continue
        except Exception as exc:  # the document's problem, not the worker's
            # C parsers report a failed allocation in their own words; the peak tells
            out_of_memory = isinstance(exc, MemoryError) or (
                limit and _peak_bytes() >= limit - 2**20
            )
            if not out_of_memory:
                _answer(conn, Reason.PARSE_FAILED.value, f"{type(exc).__name__}: {exc}")
                continue
        _answer(conn, Reason.PARSE_MEMORY.value, f"over {memory_mb} MiB beyond a warm parser")
        return


def _answer(conn: Connection, kind: str, value: Any) -> None:
    """Send a worker's answer, pickled by the C pickler (as the jobs are: see _Slot._run)."""
    conn.send_bytes(pickle.dumps((kind, value), pickle.HIGHEST_PROTOCOL))


_KEEP_FAILED = "keep_failed"
_READY = "ready"  # a worker's first message: imports done, limits set


def _parse(
    body: bytes,
    url: str,
    charset: str | None,
    want_text: bool,
    meta_names: tuple[str, ...],
    keep: Keep | None,
) -> dict[str, Any]:
    if keep is None:
        return parse_page(body, url, charset, want_text, meta_names)
    return parse_kept(body, url, charset, want_text, meta_names, keep)


def _peak_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmPeak:"):
                return int(line.split()[1]) * 1024
    return 0


def _mapped_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * resource.getpagesize()


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


class _Slot:
    """One worker process and the pipe to it; replaced when it dies or overruns."""

    def __init__(self, pool: ExtractorPool) -> None:
        self.pool = pool
        self.proc: BaseProcess | None = None
        self.conn: Connection | None = None
        # the answer's wait: one poll object a worker, not the selector that Connection.poll
        # builds, registers and closes on every call (a third of this thread's time a page)
        self.answer: select.poll | None = None
        self.busy = False  # a job is out to the worker

    def run(self, job: tuple[Any, ...]) -> dict[str, Any]:
        self.busy = True
        try:
            return self._run(job)
        finally:
            self.busy = False

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

    def _run(self, job: tuple[Any, ...]) -> dict[str, Any]:
        if self.proc is None or not self.proc.is_alive():
            self._start()
        assert self.conn is not None and self.proc is not None and self.answer is not None
        # pickled here, not by Connection.send's ForkingPickler (made for handles and
        # sockets, which a job never holds): it was a fifth of this thread's samples
        self.conn.send_bytes(pickle.dumps(job, pickle.HIGHEST_PROTOCOL))
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
        if kind == _KEEP_FAILED:
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
            target=_worker,
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
            while (item := self._jobs.get()) is not None:
                job, fut = item
                if not fut.set_running_or_notify_cancel():
                    continue
                try:
                    fut.set_result(slot.run(job))
                except BaseException as exc:  # handed to the waiting caller
                    fut.set_exception(exc)
        finally:
            slot.stop(graceful=True)

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
