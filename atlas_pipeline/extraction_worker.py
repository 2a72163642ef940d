"""The extraction worker process: parses the documents its pool (extractor_pool) sends it,
in the order sent, each under a CPU-time and a memory cap, and dies with its parent."""

from __future__ import annotations

import ctypes
import math
import os
import pickle
import resource
import signal
from multiprocessing.connection import Connection
from typing import Any

from .kept_parse import Keep, KeepFailed, parse_kept
from .parsing import parse_page, warm
from .reasons import Reason


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


def run_worker(conn: Connection, cpu_s: float, memory_mb: int, parent_pid: int = 0) -> None:
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
    conn.send((READY, None))
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
            _answer(conn, KEEP_FAILED, str(exc))
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
    """Send a worker's answer, pickled by the C pickler (as the jobs are: see ExtractorPool._feed)."""
    conn.send_bytes(pickle.dumps((kind, value), pickle.HIGHEST_PROTOCOL))


KEEP_FAILED = "keep_failed"
READY = "ready"  # a worker's first message: imports done, limits set


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
