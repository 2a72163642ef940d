"""Shared fixtures: a real sandbox web on loopback and crawl configs pointed at it."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from atlas_sandbox import Changing, SandboxWeb

ROOT = Path(__file__).resolve().parents[1]

os.environ.setdefault("DBT_SEND_ANONYMOUS_USAGE_STATS", "false")


class FileRequestLog:
    """The sandbox's JSON-lines request log read from its file (the server is another process)."""

    QUIET_S = 0.1  # no growth for this long: the server has logged what it answered

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0

    def clear(self, settle_s: float = 2.0) -> None:
        """Start a new window at the end of the file, once it has stopped growing: the server
        logs a request after its last byte is sent, so the lines of requests a test just
        finished may land a moment later and must not count in the next window."""
        self._settle(settle_s)
        self._offset = self.path.stat().st_size if self.path.exists() else 0

    def _settle(self, settle_s: float) -> None:
        """Wait (up to settle_s) until the file's size holds for QUIET_S."""
        deadline = time.time() + settle_s
        size, since = -1, time.time()
        while self.path.exists() and time.time() < deadline:
            now = self.path.stat().st_size
            if now != size:
                size, since = now, time.time()
            elif time.time() - since >= self.QUIET_S:
                return
            time.sleep(0.02)

    def entries(self, settle_s: float = 0.5) -> list[dict[str, Any]]:
        """Entries since clear(); waits (up to settle_s) until the file stops growing, since a
        client can read its response a moment before the server has logged it."""
        self._settle(settle_s)
        if not self.path.exists():
            return []
        with self.path.open("rb") as fh:
            fh.seek(self._offset)
            data = fh.read()
        lines = data.decode("utf-8").splitlines()
        if lines and not data.endswith(b"\n"):
            lines = lines[:-1]  # a line still being written
        return [json.loads(line) for line in lines if line]


@dataclass
class SandboxProcess:
    """The sandbox web served by `atlas web` in its own process: the crawler under test never
    shares a GIL with the server, so the times the server logs are the times requests arrived.

    `web` (and `changing`, with --changing) model the server's content on this side; with
    `proc`, ``bump_generation()`` moves the server and the models on together."""

    web: SandboxWeb
    port: int
    log: FileRequestLog
    proc: subprocess.Popen[str] | None = None
    changing: Changing | None = None
    _lines: queue.Queue[str] = field(default_factory=queue.Queue, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.proc is not None and self.proc.stdout is not None:
            # A reader thread, so waiting for a line can time out (a pipe read cannot).
            stdout = self.proc.stdout
            reader = threading.Thread(target=self._read, args=(stdout,), daemon=True)
            reader.start()

    def _read(self, stdout: Iterable[str]) -> None:
        for line in stdout:
            self._lines.put(line)

    def url(self, host: str, path: str = "/") -> str:
        return self.web.url(host, path)

    def bump_generation(self, timeout_s: float = 10.0) -> int:
        """SIGUSR1 to `atlas web`, wait for its `generation N` line, bump the models; returns N."""
        assert self.proc is not None, "bump_generation needs the `atlas web` process"
        self.proc.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + timeout_s
        seen: list[str] = []
        while True:
            try:
                line = self._lines.get(timeout=max(deadline - time.monotonic(), 0.001))
            except queue.Empty:
                raise AssertionError(
                    f"`atlas web` printed no 'generation N' line within {timeout_s} s of SIGUSR1"
                    f" (exit code {self.proc.poll()}, other output: {seen!r})"
                ) from None
            found = re.fullmatch(r"generation (\d+)", line.strip())
            if found:
                break
            seen.append(line)
        generation = int(found.group(1))
        model = self.web.bump_generation()
        if self.changing is not None:
            self.changing.bump_generation()
        assert model == generation, f"server at generation {generation}, test model at {model}"
        return generation


@contextmanager
def _running_cli(what: str, args: list[str]) -> Iterator[tuple[subprocess.Popen[str], int]]:
    """`atlas <what> --port 0 ...` in its own process; yields it and the loopback port its
    banner names, and stops it after."""
    cmd = [sys.executable, "-m", "assets.cli", what, "--port", "0", *args]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True,
                            start_new_session=True)  # fmt: skip
    try:
        assert proc.stdout is not None
        banner = proc.stdout.readline()
        found = re.search(r"127\.0\.0\.1:(\d+)", banner)
        assert found, f"atlas {what} did not start: {banner!r}"
        yield proc, int(found.group(1))
    finally:
        proc.terminate()
        proc.wait(10)


@contextmanager
def pythons_own_sigint() -> Iterator[None]:
    """SIGINT handled by Python's own handler while this holds, as in a fresh interpreter a
    terminal started, whatever this process had: a test process run as a background job of
    a script has SIGINT ignored (POSIX), and an earlier test may leave another handler.
    Ignored, it is also ignored by every child started meanwhile (a disposition, unlike a
    handler, survives exec)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@contextmanager
def serving_app(app: Any) -> Iterator[int]:
    """An aiohttp `web.Application` on 127.0.0.1 (a free port, yielded), served from a loop of
    its own in a thread: callable from inside a running loop, and its handlers' clocks and
    answers never wait on the caller's loop. Cleaned up on exit."""
    import asyncio

    from aiohttp import web

    loop = asyncio.new_event_loop()
    runner = web.AppRunner(app)
    started = threading.Event()
    port: list[int] = []

    def serve() -> None:
        loop.run_until_complete(runner.setup())
        loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", 0).start())
        port.append(int(runner.addresses[0][1]))
        started.set()
        loop.run_forever()
        loop.run_until_complete(runner.cleanup())
        loop.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    if not started.wait(10):
        raise RuntimeError("the loopback app server did not start")
    try:
        yield port[0]
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


@contextmanager
def running_sandbox(
    log: Path,
    origins: int,
    pages: int,
    lab: bool = False,
    hostile: bool = False,
    canary_port: int | None = None,
    traps: bool = False,
    trap_scale: int = 1,
    dupes: bool = False,
    changing: bool = False,
    directives: bool = False,
    scripted: bool = False,
) -> Iterator[SandboxProcess]:
    """`atlas web` in its own process (seed 7, loopback, a port of its own), request log at `log`;
    `hostile` adds the hostile origins, aimed at the canary on `canary_port` (see running_canary);
    `traps` the trap origins, every trap's extent times `trap_scale`; `dupes` the
    duplicate-content origin; `changing` the changing-content origins (see
    SandboxProcess.bump_generation); `directives` the robots-directive origin; `scripted` the
    script-drawn origins of the render lane (their SSRF XHRs aimed at `canary_port` too)."""
    if trap_scale != 1 and not traps:
        raise ValueError("trap_scale only means something with traps=True")
    args = ["--seed", "7", "--origins", str(origins), "--pages", str(pages), "--log", str(log),
            *(["--lab"] if lab else []), *(["--hostile"] if hostile else []),
            *(["--canary-port", str(canary_port)] if canary_port is not None else []),
            *(["--traps", "--trap-scale", str(trap_scale)] if traps else []),
            *(["--dupes"] if dupes else []), *(["--changing"] if changing else []),
            *(["--directives"] if directives else []),
            *(["--scripted"] if scripted else [])]  # fmt: skip
    with _running_cli("web", args) as (proc, port):
        web = SandboxWeb(seed=7, generated_origins=origins, pages_per_origin=pages, port=port)
        model = Changing(port) if changing else None
        yield SandboxProcess(web, port, FileRequestLog(log), proc, model)


@contextmanager
def running_canary(log: Path) -> Iterator[tuple[int, Callable[[], list[dict[str, Any]]]]]:
    """`atlas canary` in its own process on a free loopback port, hits logged at `log`; yields
    the port and a function returning every hit so far."""
    with _running_cli("canary", ["--log", str(log)]) as (_, port):
        hits = FileRequestLog(log)  # the same JSON-lines format as the sandbox's log
        yield port, hits.entries


@contextmanager
def running_indexer(
    store: Path, fail_after: int | None = None, fail_mode: str | None = None
) -> Iterator[tuple[int, Callable[[], dict[str, int]]]]:
    """`atlas indexer` in its own process on a free loopback port, events stored at `store` (read
    back if it exists); `fail_after` cuts delivery after that many batches, the way `fail_mode`
    says ('503' or 'close'). Yields the port and a function returning GET /stats."""
    args = ["--store", str(store),
            *(["--fail-after", str(fail_after)] if fail_after is not None else []),
            *(["--fail-mode", fail_mode] if fail_mode is not None else [])]  # fmt: skip
    with _running_cli("indexer", args) as (_, port):

        def stats() -> dict[str, int]:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/stats", timeout=10) as resp:
                return dict(json.load(resp))

        yield port, stats


@pytest.fixture(scope="session")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SandboxProcess]:
    """Three publishers plus two generated origins, 15 pages each, with a request log."""
    with running_sandbox(tmp_path_factory.mktemp("sandbox") / "requests.jsonl", 2, 15) as web:
        yield web


PARTITION_WORKER = """
import json, sys, time
from pathlib import Path
from atlas_pipeline.config import load_config
from atlas_pipeline.crawl import Engine, fetch_shard, plan_frontier

if __name__ == "__main__":
    engine = Engine.from_config(load_config(sys.argv[1]))
    go = Path(sys.argv[2])
    while not go.exists():  # start together, imports done
        time.sleep(0.01)
    plan_frontier(engine, "c0001", 0)
    result = fetch_shard(engine, "c0001", 0, holder=sys.argv[3])
    print(json.dumps({"requests": result.stats.requests, "fence": result.lease.fence,
                      "superseded_by": result.superseded_by}), flush=True)
"""


def run_partition_together(cfg: Path, workdir: Path, runs: int) -> list[dict[str, Any]]:
    """`runs` processes (as on as many machines) drain partition (c0001, shard 0) of `cfg` at
    once; each one's requests, batch fence and superseding fence, in start order."""
    script, go = workdir / "partition_worker.py", workdir / "go"
    script.write_text(PARTITION_WORKER)
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(cfg), str(go), f"run-{i}"],
            cwd=ROOT,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for i in range(runs)
    ]
    try:
        time.sleep(4)  # imports and store connections
        go.touch()
        outputs = []
        for p in procs:
            out, err = p.communicate(timeout=240)
            assert p.returncode == 0, err[-3000:]
            outputs.append(json.loads(out.strip().splitlines()[-1]))
        return outputs
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()


def sandbox_config(server: SandboxProcess, data_dir: Path, **overrides: Any) -> dict[str, Any]:
    """A crawl config for `server`: every sandbox host mapped to loopback, nothing else reachable."""
    web = server.web
    cfg: dict[str, Any] = {
        "seeds": web.seed_urls(),
        "data_dir": str(data_dir),
        "shards": 2,
        "politeness": {"min_gap_s": 0.0, "max_in_flight": 1},
        "scope": {"max_depth": 50, "max_pages_per_origin": 1000},
        "limits": {"total_timeout_s": 10, "batch_max_idle_s": 20},
        "resolve": {h: "127.0.0.1" for h in web.hosts},
        "resolve_only": True,
    }
    for key, value in overrides.items():
        if isinstance(value, dict):
            cfg[key] = {**cfg.get(key, {}), **value}
        else:
            cfg[key] = value
    return cfg


def write_config(path: Path, cfg: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


# PostgreSQL ------------------------------------------------------------------------------
PG_URL = os.environ.get("ATLAS_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")


def postgres_available() -> str | None:
    """None when PostgreSQL answers, else why not. In CI a missing server fails the tests:
    PostgreSQL tests are never skipped silently there (`make test` starts the server)."""
    import psycopg

    try:
        psycopg.connect(PG_URL, connect_timeout=3).close()
        return None
    except psycopg.Error as exc:
        if os.environ.get("CI"):
            raise
        return f"PostgreSQL at {PG_URL} is not reachable ({exc}); run scripts/ensure_postgres.sh"


@contextmanager
def private_pg_schema() -> Iterator[str]:
    """A coordination URL on a fresh, private PostgreSQL schema, dropped afterwards."""
    import uuid

    import psycopg

    why = postgres_available()
    if why:
        pytest.skip(why)
    schema = f"atlas_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    sep = "&" if "?" in PG_URL else "?"
    try:
        yield f"{PG_URL}{sep}options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


@contextmanager
def private_pg_database(prefix: str = "atlas_db") -> Iterator[str]:
    """The name of a fresh PostgreSQL database (for a Dagster instance), dropped afterwards."""
    import uuid

    import psycopg

    why = postgres_available()
    if why:
        pytest.skip(why)
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield name
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def load_benchmark(name: str) -> Any:
    """A script of benchmarks/ as a module, so a test can run it small."""
    import importlib.util

    path = ROOT / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture()
def pg_schema_url() -> Iterator[str]:
    """A coordination URL on a fresh, private PostgreSQL schema, dropped afterwards."""
    with private_pg_schema() as url:
        yield url


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A coordination URL, once on SQLite and once on PostgreSQL (a private schema)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'coord.db'}"
    return str(request.getfixturevalue("pg_schema_url"))


# S3 on loopback ---------------------------------------------------------------------------
@contextmanager
def running_s3() -> Iterator[int]:
    """A real S3 endpoint (moto's server) on a loopback port, stopped afterwards."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p",
                             str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                time.sleep(0.1)
        else:
            raise AssertionError("the S3 endpoint did not start")
        yield port
    finally:
        proc.terminate()
        proc.wait(10)


# Chromium ---------------------------------------------------------------------------------
@contextmanager
def chromium_browser(allow: tuple[str, ...] = ()) -> Iterator[Any]:
    """Debian's Chromium under Playwright, sealed off the network but for `allow` (see
    atlas_pipeline.browser).
    Without a browser the test is skipped, except in CI, where `make test` installs it and a
    missing browser fails the test: browser tests are never skipped silently there."""
    from playwright.sync_api import sync_playwright

    from atlas_pipeline.browser import chromium_path, launch_options

    path = chromium_path()
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("Chromium is not installed; run scripts/ensure_chromium.sh")
        pytest.skip("Chromium is not installed (apt-get install -y chromium)")
    with sync_playwright() as p:
        browser = p.chromium.launch(**launch_options(path, allow))
        try:
            yield browser
        finally:
            browser.close()
