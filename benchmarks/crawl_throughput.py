"""Crawl throughput: Atlas's engine vs a minimal aiohttp + trafilatura loop, same sandbox web.

    .venv/bin/python benchmarks/crawl_throughput.py            # 50 origins x 200 pages,
                                                               # medians of 3 rounds
    .venv/bin/python benchmarks/crawl_throughput.py --repeat 1 # one round of each
    .venv/bin/python benchmarks/crawl_throughput.py --quick    # 10 x 30 smoke run, 1 round
    .venv/bin/python benchmarks/crawl_throughput.py --json     # machine-readable results
    .venv/bin/python benchmarks/crawl_throughput.py --profile  # + cProfile of the Atlas run
    .venv/bin/python benchmarks/crawl_throughput.py --keeper   # + the keeper (below)

A default run is three rounds, the contenders taking turns to go first, and reports the
median of every number. One round says little on this machine kind: the VM's speed drifts by
tens of percent over minutes, and a contender's round takes two to three. On 2026-12-06 one
round of the same code gave Atlas 1.64x the baseline's CPU per page (31.2 against 19.0 ms),
and the three rounds of the next run 1.00x, 1.31x and 1.20x; with the machine quiet, rounds
of one session have moved by +-4% (12.07 to 12.69 ms/page).

Three kinds of process, all started from this file:

* the sandbox server (``--serve``): its own process, so its CPU is not charged to a
  contender and it does not share a GIL with one. Before it listens it prerenders every
  page of the web into an unbounded body cache (the library's LRU keeps only 1024 bodies),
  so both contenders hit the same warm server that only looks bytes up and sends them.
* one fresh process per contender (``--run atlas|baseline``), started one after the
  other. Each times its own crawl and reports wall seconds, CPU seconds of itself plus its
  extraction workers (``getrusage`` SELF + CHILDREN deltas; the workers are joined inside the
  timed region), and peak RSS of itself and of its largest worker.
* the parent (default mode): starts the server, computes the URL set, runs the contenders
  and prints the table. It also records each contender's whole-process CPU
  (``RUSAGE_CHILDREN`` delta around it: interpreter start-up and imports included) and the
  server's CPU while that contender ran (from ``/proc/<pid>/stat``).

URL set: the baseline fetches exactly the pages ``SandboxWeb.reachable(max_depth)`` lists
(the sandbox's own oracle of what a polite, in-scope BFS from the seeds fetches: 200 pages
only, robots-disallowed paths and external hosts excluded). Atlas discovers its URLs itself
from the seeds; the parent checks that the URLs of its documents equal that set.

The keeper (``--keeper``, not in a default run) is a third contender: the plain loop that
also keeps what any crawler must keep of a page, and the plain loop does not: the body, zstd
level 1 in a file named by its SHA-256 (as Atlas's body store), the page's links (selectolax,
resolved against the URL) and its text, both in Parquet files written in chunks. It has no
coordination store, no politeness, robots or scope rules and no lake commits, so Atlas against
it says what those cost, and Atlas against the baseline what all of Atlas's work costs.

Atlas runs through the engine API (``plan_frontier`` + ``fetch_shard`` per shard, with the
lake writes, SQLite coordination and body store); a Dagster run adds its own overhead on
top (roughly 0.6-1.5 s per run; not measured here).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

SEED = 7
CYCLE = "c0001"
QUICK = (10, 30)
DEFAULT_ROUNDS = 3  # a round alone is at the mercy of the VM (see the docstring)
MAX_DEPTH = 100
CONCURRENCY = 64
RESULT_TAG = "RESULT "
CONTENDERS = ("atlas", "baseline", "keeper")
_MIB = 1024.0  # ru_maxrss is in KiB on Linux


def _web(origins: int, pages: int, port: int = 8080) -> Any:
    from atlas_sandbox import SandboxWeb

    if origins < 3:
        raise SystemExit("--origins must be at least 3 (the fixed publishers)")
    return SandboxWeb(seed=SEED, generated_origins=origins - 3, pages_per_origin=pages, port=port)


def _rusage_cpu(who: int) -> float:
    ru = resource.getrusage(who)
    return ru.ru_utime + ru.ru_stime


def _proc_cpu_s(pid: int) -> float:
    """utime + stime of a live process (Linux /proc), in seconds; 0.0 when unavailable."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat[stat.rfind(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _machine_busy_s() -> float:
    """CPU seconds the whole machine spent busy since boot (all cores; Linux /proc/stat)."""
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return 0.0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


class _RssSampler:
    """Samples this process's RSS (VmRSS) in a thread: (seconds since start, MiB) points."""

    def __init__(self, every_s: float = 0.5) -> None:
        import threading

        self.every_s = every_s
        self.points: list[tuple[float, float, str]] = []
        self.phase = "start"
        self._stop = threading.Event()
        self._t0 = time.perf_counter()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _rss_mib(self) -> float:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / _MIB
        return 0.0

    def mark(self, phase: str) -> None:
        self.phase = phase
        self.points.append((time.perf_counter() - self._t0, self._rss_mib(), phase))

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self.points.append((time.perf_counter() - self._t0, self._rss_mib(), self.phase))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def report(self, out: Any) -> None:
        peak = max(self.points, key=lambda p: p[1])
        print(f"peak sampled RSS {peak[1]:.0f} MiB at {peak[0]:.1f} s ({peak[2]})", file=out)
        step = max(1, len(self.points) // 40)
        for t, mib, phase in self.points[::step]:
            print(f"  {t:7.1f} s  {mib:8.0f} MiB  {phase}", file=out)


class _ThreadCpu:
    """CPU seconds of this process's threads by name (Linux /proc/self/task), sampled in a
    thread so that threads which end before the crawl does (a batch's store and body
    threads) are counted too: the last reading of each thread id is its total."""

    def __init__(self, every_s: float = 0.25) -> None:
        import threading

        self.every_s = every_s
        self.seen: dict[int, tuple[str, float]] = {}
        self._base: dict[int, float] = {}
        self._tick = os.sysconf("SC_CLK_TCK")
        self._read(self._base)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-sampler", daemon=True)
        self._thread.start()

    def _read(self, into: dict[int, Any]) -> None:
        import threading

        # Python threads by their Python name (the OS name of each is just "python");
        # native ones (tokio, jemalloc) by the name the OS has for them
        named = {t.native_id: t.name for t in threading.enumerate()}
        main = threading.main_thread().native_id
        for task in Path("/proc/self/task").iterdir():
            try:
                stat = (task / "stat").read_text()
                tid = int(task.name)
                name = (
                    "event loop (main)"
                    if tid == main
                    else named.get(tid) or ((task / "comm").read_text().strip())
                )
            except OSError:  # the thread ended meanwhile
                continue
            fields = stat[stat.rfind(")") + 2 :].split()
            cpu = (int(fields[11]) + int(fields[12])) / self._tick
            into[tid] = cpu if into is self._base else (name, cpu)

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self._read(self.seen)

    def stop(self) -> dict[str, float]:
        """CPU seconds since start by thread name, numbered suffixes merged."""
        self._stop.set()
        self._thread.join()
        self._read(self.seen)
        out: dict[str, float] = {}
        for tid, (name, cpu) in self.seen.items():
            if name == "bench-sampler":
                continue
            key = name.rstrip("0123456789_-") or name
            out[key] = out.get(key, 0.0) + cpu - self._base.get(tid, 0.0)
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))


# ---------------------------------------------------------------------------- server


def serve(origins: int, pages: int) -> None:
    """Server process: prerender every page, then serve until SIGTERM."""
    import atlas_sandbox.site as site
    from atlas_sandbox import serve_forever

    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    web = _web(origins, pages, port)  # the real port first: changing it clears the caches
    site._BODY_CACHE_SIZE = 1 << 30  # keep every prerendered body (the default LRU keeps 1024)
    started = time.perf_counter()
    n = nbytes = 0
    for host in web.hosts:
        web.robots_txt(host)
        for path in web.pages(host):
            nbytes += len(web.render(host, path))  # also computes and caches the ETag
            n += 1
    took = time.perf_counter() - started
    print(f"PRERENDERED {port} {n} {nbytes} {took:.3f}", flush=True)
    serve_forever(web, port=port)


def start_server(origins: int, pages: int) -> tuple[subprocess.Popen[str], int, dict[str, Any]]:
    proc = subprocess.Popen(
        [sys.executable, __file__, "--serve", "--origins", str(origins), "--pages", str(pages)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("PRERENDERED"):
        proc.kill()
        raise SystemExit(f"sandbox server failed to start: {line!r}")
    _, port_s, n, nbytes, took = line.split()
    port = int(port_s)
    deadline = time.monotonic() + 30
    while True:  # wait until it answers a real request
        try:
            req = urllib.request.Request(
                f"http://127.0.0.1:{port}/robots.txt", headers={"Host": "news-a.example.test"}
            )
            with urllib.request.urlopen(req, timeout=2) as resp:
                if resp.status == 200:
                    break
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise SystemExit("sandbox server did not answer")
        time.sleep(0.05)
    info = {"port": port, "pages": int(n), "bytes": int(nbytes), "prerender_s": float(took)}
    return proc, port, info


# ---------------------------------------------------------------------------- contenders


def _measure_start() -> tuple[float, float, float, float, float]:
    return (
        time.perf_counter(),
        _rusage_cpu(resource.RUSAGE_SELF),
        _rusage_cpu(resource.RUSAGE_CHILDREN),
        resource.getrusage(resource.RUSAGE_SELF).ru_stime,
        resource.getrusage(resource.RUSAGE_CHILDREN).ru_stime,
    )


def _workers_hwm_mib(pids: list[int]) -> float:
    """The summed peak RSS (VmHWM) of these live workers. ru_maxrss of RUSAGE_CHILDREN does
    not tell it: Linux carries a child's high-water mark across exec, so a worker forked by
    a 200 MiB parent reports 200 MiB whatever it used after exec. A worker that was replaced
    during the run (after a parser cap) is not counted."""
    total = 0.0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    total += int(line.split()[1]) / _MIB
        except OSError:
            pass
    return total


def _measure_end(start: tuple[float, float, float, float, float]) -> dict[str, Any]:
    import multiprocessing

    wall0, self0, kids0, sys_self0, sys_kids0 = start
    wall = time.perf_counter() - wall0
    stray = [p.pid for p in multiprocessing.active_children()]
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_self = me.ru_utime + me.ru_stime - self0
    cpu_kids = kids.ru_utime + kids.ru_stime - kids0
    return {
        "seconds": wall,
        "cpu_self_s": cpu_self,
        "cpu_children_s": cpu_kids,
        "cpu_s": cpu_self + cpu_kids,
        # the kernel's share (system time): file and socket work, page faults
        "sys_self_s": me.ru_stime - sys_self0,
        "sys_children_s": kids.ru_stime - sys_kids0,
        "rss_mib": me.ru_maxrss / _MIB,
        "children_rss_mib": kids.ru_maxrss / _MIB,
        "unjoined_children": stray,
    }


def _time_lake_write() -> tuple[list[float], dict[str, float]]:
    """([wall s, main-thread CPU s] of the lake writes after each batch (the serial tail of a
    fetch_shard, while the extraction workers idle), {step: wall s}), summed and filled in
    as they run. The steps: each table's write, and the store moving
    the written records out. The Parquet encoding of those writes runs on lake-writer
    threads (delta_files.write_files), counted in the per-thread split, not here."""
    import atlas_pipeline.crawl as crawl
    from atlas_pipeline.coordination.operator import OperatorStore
    from atlas_pipeline.lake import Lake

    spent = [0.0, 0.0]
    steps: dict[str, float] = {}
    inside = [False]  # a step counts only within the tail (plan_frontier writes too)

    def timer(inner: Any, name: Any) -> Any:
        def timed(*args: Any, **kwargs: Any) -> Any:
            if not inside[0]:
                return inner(*args, **kwargs)
            wall = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                step = name(args)
                steps[step] = steps.get(step, 0.0) + time.perf_counter() - wall

        return timed

    Lake.add_texts = timer(Lake.add_texts, lambda a: "document_texts")  # type: ignore[method-assign]
    Lake.write_partition = timer(Lake.write_partition, lambda a: a[1])  # type: ignore[method-assign]
    OperatorStore.partition_written = timer(  # type: ignore[method-assign]
        OperatorStore.partition_written, lambda a: "records out of the store"
    )
    inner = crawl.write_fetch_partitions

    def tail(*args: Any, **kwargs: Any) -> Any:
        wall, cpu = time.perf_counter(), time.thread_time()
        inside[0] = True
        try:
            return inner(*args, **kwargs)
        finally:
            inside[0] = False
            spent[0] += time.perf_counter() - wall
            spent[1] += time.thread_time() - cpu

    crawl.write_fetch_partitions = tail  # type: ignore[assignment]
    return spent, steps


@contextlib.contextmanager
def _data_dir(args: argparse.Namespace) -> Iterator[Path]:
    """A fresh data dir for one run that writes files (Atlas, the keeper). Under the parent
    (``--urls-file`` set) it lives in the parent's scratch folder and is deleted with it,
    after the last round: deleting a run's ~20,000 files at its end made the next run
    slower. On ext4 without a journal (this machine kind's root file system) the inode allocator passes over every inode freed in the
    last ~30 s (``recently_deleted``, reading its inode table block), so for half a minute
    after a big delete each file create costs more kernel time. Measured with a loop of
    create, write, hard link and unlink of 3,000 files: 1.0-1.9 ms a file right after the
    previous loop's 3,000 files were deleted, about 0.5 ms 45 s later, 0.18 ms with the inode
    tables out of the cache. Only Atlas wrote files then, so a contender's own clean-up weighed
    on the next Atlas round alone (its workers' kernel time rose from 3.8 to 8.7 s over four
    runs back to back). Run on its own (no ``--urls-file``) it cleans up as before."""
    if not args.urls_file:
        with tempfile.TemporaryDirectory(prefix="atlas-bench-") as tmp:
            yield Path(tmp)
        return
    yield Path(tempfile.mkdtemp(prefix="atlas-run-", dir=Path(args.urls_file).parent))


def run_atlas(args: argparse.Namespace) -> dict[str, Any]:
    from atlas_pipeline.config import config_from_mapping
    from atlas_pipeline.crawl import Engine, fetch_shard, plan_frontier
    from atlas_pipeline.extractor_pool import close_shared

    web = _web(args.origins, args.pages, args.port)
    with _data_dir(args) as tmp:
        cfg = config_from_mapping(
            {
                "seeds": web.seed_urls(),
                "data_dir": str(tmp),
                "shards": args.shards,
                "politeness": {
                    "min_gap_s": 0.0,
                    "max_in_flight": 2,
                    "global_concurrency": args.concurrency,
                },
                "scope": {"max_pages_per_origin": 100000, "max_depth": MAX_DEPTH},
                "resolve": {h: "127.0.0.1" for h in web.hosts},
                "resolve_only": True,
                "extraction_workers": args.workers,
            },
            base_dir=tmp,
        )
        profiler = sampler = None
        if args.profile:
            import cProfile

            profiler = cProfile.Profile()
            sampler = _RssSampler()
        threads = _ThreadCpu()
        lake_write, lake_steps = _time_lake_write()
        start = _measure_start()
        if profiler is not None:
            profiler.enable()
        eng = Engine.from_config(cfg)
        requests = robots = nbytes = claims = claimed = slot_returns = 0
        outcomes: dict[str, int] = {}
        for shard in range(cfg.shards):
            if sampler is not None:
                sampler.mark(f"plan_frontier shard {shard}")
            plan_frontier(eng, CYCLE, shard)
            if sampler is not None:
                sampler.mark(f"fetch_shard shard {shard}")
            res = fetch_shard(eng, CYCLE, shard)
            requests += res.stats.requests
            claims += res.stats.claims
            claimed += res.stats.claimed
            slot_returns += res.stats.slot_returns
            robots += res.stats.robots_requests
            nbytes += res.stats.bytes
            for k, v in res.stats.outcomes.items():
                outcomes[k] = outcomes.get(k, 0) + v
        if profiler is not None:
            profiler.disable()
        # the extraction pool outlives batches (one per process): join its workers here, so
        # their CPU is counted (RUSAGE_CHILDREN sees joined children only)
        from atlas_pipeline.extractor_pool import shared_pool

        lim = cfg.limits
        hwm = _workers_hwm_mib(
            shared_pool(
                cfg.extraction_workers, lim.parser_cpu_s, lim.parser_memory_mb
            ).worker_pids()
        )
        close_shared()
        out = _measure_end(start)
        out["thread_cpu_s"] = threads.stop()
        out["lake_write_s"], out["lake_write_cpu_s"] = lake_write
        out["lake_steps_s"] = lake_steps
        out["workers_hwm_mib"] = hwm
        if sampler is not None:
            sampler.mark("done")
            sampler.stop()
        docs = eng.lake.read("documents")
        eng.close()
        if profiler is not None:
            import pstats

            print("\n=== RSS of the Atlas main process over the crawl ===", file=sys.stderr)
            assert sampler is not None
            sampler.report(sys.stderr)
            print("\n=== cProfile of the Atlas crawl (main process only) ===", file=sys.stderr)
            for key in ("cumulative", "tottime"):
                print(f"--- top {args.profile_top} by {key} ---", file=sys.stderr)
                st = pstats.Stats(profiler, stream=sys.stderr)
                st.sort_stats(key).print_stats(args.profile_top)
    out.update(
        pages=docs.height,
        requests=requests,
        robots_requests=robots,
        claims=claims,
        claimed=claimed,
        slot_returns=slot_returns,
        bytes=nbytes,
        outcomes=outcomes,
        text_chars=int(docs["text_chars"].sum()) if docs.height else 0,
        urls=sorted(docs["url"].to_list()),
        profiled=bool(args.profile),
    )
    return out


def _warm_baseline() -> None:
    import trafilatura  # noqa: F401


def _extract(body: bytes, url: str) -> tuple[str | None, str]:
    return _extract_html(body.decode("utf-8", errors="replace"), url)


def _extract_html(html: str, url: str) -> tuple[str | None, str]:
    from trafilatura import bare_extraction

    doc = bare_extraction(html, url=url, with_metadata=True, include_comments=False)
    if doc is None:
        return None, ""
    if isinstance(doc, dict):  # as_dict=True spelling; not used, but typed as possible
        return doc.get("title"), doc.get("text") or ""
    return doc.title, doc.text or ""


def _warm_keeper() -> None:
    import selectolax.lexbor  # noqa: F401
    import trafilatura  # noqa: F401

    import atlas_pipeline.bodies  # noqa: F401  (and body_codec, which it imports)


def _extract_kept(body: bytes, url: str, root: str) -> tuple[str | None, str, list[str]]:
    """The plain loop's extraction, plus the least a crawler keeps of a page: the body,
    zstd level 1 as Atlas's body store writes it, in a file named by its SHA-256 under two
    folder levels, and the page's links (selectolax's lexbor, as Atlas's workers parse
    them), resolved against the page's URL. (title, text, links)."""
    from urllib.parse import urljoin

    from selectolax.lexbor import LexborHTMLParser

    from atlas_pipeline.bodies import digest
    from atlas_pipeline.body_codec import pack

    key = digest(body)
    folder = os.path.join(root, key[:2], key[2:4])
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, key + ".zst"), "wb") as fh:
        fh.write(pack(body))
    html = body.decode("utf-8", errors="replace")
    links = [urljoin(url, a.attributes.get("href") or "")
             for a in LexborHTMLParser(html).css("a[href]")]  # fmt: skip
    title, text = _extract_html(html, url)
    return title, text, links


class _KeptTables:
    """The keeper's two Parquet files, written by its event loop in chunks of CHUNK pages
    (snappy, as the lake's): texts (url, title, text) and links (url, target), so memory
    holds a chunk, not the crawl."""

    CHUNK = 1000

    def __init__(self, root: Path) -> None:
        self.root = root
        self.texts: dict[str, list[Any]] = {"url": [], "title": [], "text": []}
        self.links: dict[str, list[str]] = {"url": [], "target": []}
        self.writers: dict[str, Any] = {}

    def add(self, url: str, title: str | None, text: str, links: list[str]) -> None:
        self.texts["url"].append(url)
        self.texts["title"].append(title)
        self.texts["text"].append(text)
        self.links["url"] += [url] * len(links)
        self.links["target"] += links
        if len(self.texts["url"]) >= self.CHUNK:
            self.flush()

    def flush(self) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        for name, cols in (("texts", self.texts), ("links", self.links)):
            if not next(iter(cols.values())):
                continue
            # every column a string: a chunk's types may not come from its values (a chunk
            # whose pages have no links, or no titles, would make a column of nulls)
            schema = pa.schema([(col, pa.string()) for col in cols])
            writer = self.writers.get(name)
            if writer is None:
                writer = pq.ParquetWriter(self.root / f"{name}.parquet", schema,
                                          compression="snappy")  # fmt: skip
                self.writers[name] = writer
            writer.write_table(pa.table(cols, schema=schema))
            for values in cols.values():
                values.clear()

    def close(self) -> None:
        self.flush()
        for writer in self.writers.values():
            writer.close()


def run_baseline(args: argparse.Namespace) -> dict[str, Any]:
    """The plain loop; as the keeper (``--run keeper``) it also keeps bodies, links and
    texts (_extract_kept, _KeptTables)."""
    if args.run != "keeper":
        return _run_plain(args, None)
    with _data_dir(args) as tmp:
        return _run_plain(args, tmp)


def _run_plain(args: argparse.Namespace, keep: Path | None) -> dict[str, Any]:
    import asyncio
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    import aiohttp

    from atlas_sandbox import SandboxResolver

    web = _web(args.origins, args.pages, args.port)
    urls: list[str] = json.loads(Path(args.urls_file).read_text())
    workers = args.workers or os.cpu_count() or 1
    counts = {"pages": 0, "requests": 0, "errors": 0, "bytes": 0, "text_chars": 0}

    async def crawl(pool: ProcessPoolExecutor) -> None:
        loop = asyncio.get_running_loop()
        slots = asyncio.Semaphore(args.concurrency)  # bounds bodies in memory too
        connector = aiohttp.TCPConnector(resolver=SandboxResolver(web), limit=args.concurrency)
        async with aiohttp.ClientSession(connector=connector) as session:

            async def one(url: str) -> None:
                async with slots:
                    try:
                        async with session.get(url, allow_redirects=False) as r:
                            status = r.status
                            body = await r.read()
                    except (aiohttp.ClientError, OSError, TimeoutError):
                        counts["errors"] += 1
                        return
                    counts["requests"] += 1
                    counts["bytes"] += len(body)
                    if status != 200:
                        counts["errors"] += 1
                        return
                    if tables is None:
                        _, text = await loop.run_in_executor(pool, _extract, body, url)
                    else:
                        title, text, links = await loop.run_in_executor(
                            pool, _extract_kept, body, url, str(keep)
                        )
                        tables.add(url, title, text, links)
                    counts["pages"] += 1
                    counts["text_chars"] += len(text)

            await asyncio.gather(*(one(u) for u in urls))

    if keep is not None:
        import pyarrow.parquet  # noqa: F401  (before the timer, as aiohttp and Atlas's own)
    start = _measure_start()
    tables = None if keep is None else _KeptTables(keep)
    pool = ProcessPoolExecutor(
        max_workers=workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_warm_baseline if keep is None else _warm_keeper,
    )
    try:
        asyncio.run(crawl(pool))
        if tables is not None:
            tables.close()
    finally:
        hwm = _workers_hwm_mib(list(getattr(pool, "_processes", None) or {}))
        pool.shutdown(wait=True)
    out = _measure_end(start)
    out.update(counts, robots_requests=0, profiled=False, workers_hwm_mib=hwm)
    return out


def run_contender(args: argparse.Namespace) -> None:
    result = run_atlas(args) if args.run == "atlas" else run_baseline(args)
    print(RESULT_TAG + json.dumps(result), flush=True)


# ---------------------------------------------------------------------------- parent


def spawn_contender(
    name: str, args: argparse.Namespace, port: int, urls_file: Path, server_pid: int
) -> dict[str, Any]:
    cmd = [
        sys.executable, __file__, "--run", name, "--port", str(port),
        "--origins", str(args.origins), "--pages", str(args.pages),
        "--shards", str(args.shards), "--concurrency", str(args.concurrency),
        "--workers", str(args.workers), "--urls-file", str(urls_file),
    ]  # fmt: skip
    if args.profile and name == "atlas":
        cmd += ["--profile", "--profile-top", str(args.profile_top)]
    server0 = _proc_cpu_s(server_pid)
    machine0 = _machine_busy_s()
    kids0 = _rusage_cpu(resource.RUSAGE_CHILDREN)
    wall0 = time.perf_counter()
    # stderr is inherited: warnings, tracebacks and --profile output show as they come.
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, cwd=REPO)
    wall = time.perf_counter() - wall0
    kids = _rusage_cpu(resource.RUSAGE_CHILDREN) - kids0
    server = _proc_cpu_s(server_pid) - server0
    machine = _machine_busy_s() - machine0
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(RESULT_TAG)]
    if proc.returncode != 0 or not lines:
        sys.stderr.write(proc.stdout)
        raise SystemExit(f"{name} run failed (exit {proc.returncode})")
    result: dict[str, Any] = json.loads(lines[-1][len(RESULT_TAG) :])
    # CPU that neither this contender (with its workers) nor the server used: other load on
    # the machine (the parent itself is idle, waiting). Non-trivial values mean noisy numbers.
    other = max(0.0, machine - kids - server)
    result.update(process_seconds=wall, process_cpu_s=kids, server_cpu_s=server, other_cpu_s=other)
    return result


def _per_page(x: float, pages: int) -> float:
    return x / pages if pages else float("nan")


def summarize(name: str, r: dict[str, Any]) -> dict[str, Any]:
    pages = int(r["pages"])
    return {
        "contender": name,
        "pages": pages,
        "requests": int(r["requests"]),
        "robots_requests": int(r.get("robots_requests", 0)),
        "seconds": r["seconds"],
        "pages_per_s": pages / r["seconds"] if r["seconds"] else float("nan"),
        "cpu_s": r["cpu_s"],
        "cpu_self_s": r["cpu_self_s"],
        "cpu_children_s": r["cpu_children_s"],
        "cpu_s_per_page": _per_page(r["cpu_s"], pages),
        "sys_self_s": r.get("sys_self_s", float("nan")),
        "sys_children_s": r.get("sys_children_s", float("nan")),
        "rss_mib": r["rss_mib"],
        "children_rss_mib": r["children_rss_mib"],
        "workers_hwm_mib": r.get("workers_hwm_mib", float("nan")),
        "all_rss_mib": r["rss_mib"] + r.get("workers_hwm_mib", float("nan")),
        "process_seconds": r["process_seconds"],
        "process_cpu_s": r["process_cpu_s"],
        "server_cpu_s": r["server_cpu_s"],
        "other_cpu_s": r["other_cpu_s"],
        "bytes": int(r["bytes"]),
        "text_chars": int(r["text_chars"]),
        "unjoined_children": r["unjoined_children"],
        "thread_cpu_s": r.get("thread_cpu_s", {}),
        **(
            {
                "lake_write_s": r["lake_write_s"],
                "lake_write_cpu_s": r["lake_write_cpu_s"],
                "lake_steps_s": r.get("lake_steps_s", {}),
                "claims": r["claims"],
                "claimed": r["claimed"],
                "slot_returns": r.get("slot_returns", 0),
            }
            if "lake_write_s" in r
            else {}
        ),
        "profiled": r.get("profiled", False),
    }


def print_table(report: dict[str, Any]) -> None:
    cfg = report["config"]
    srv = report["server"]
    print(
        f"Atlas crawl throughput: {cfg['origins']} origins x {cfg['pages']} pages, "
        f"shards={cfg['shards']}, concurrency={cfg['concurrency']}, "
        f"extraction workers={cfg['workers']}, cores={cfg['cores']}, gap=0 s"
    )
    print(
        f"Sandbox server: separate process, {srv['pages']} pages "
        f"({srv['bytes'] / 2**20:.0f} MiB HTML) prerendered in {srv['prerender_s']:.1f} s "
        "before timing (warm for both contenders)"
    )
    print(
        f"URL set: {report['url_set']['size']} pages = SandboxWeb.reachable(max_depth="
        f"{MAX_DEPTH}); Atlas document URLs == that set: {report['url_set']['atlas_matches']}"
        + (
            f" (missing {report['url_set']['atlas_missing']}, e.g. "
            f"{', '.join(report['url_set']['atlas_missing_sample'])}; extra "
            f"{report['url_set']['atlas_extra']})"
            if not report["url_set"]["atlas_matches"]
            else ""
        )
    )
    keeper = report.get("keeper")
    rows = report["results"] + ([keeper["row"]] if keeper else [])
    chars = {r["contender"]: r["text_chars"] for r in rows}
    print(
        "Extracted text: "
        + ", ".join(f"{k} {v:,} chars" for k, v in chars.items())
        + f" (identical: {len(set(chars.values())) == 1})"
    )
    print()
    head = (
        f"{'contender':<10} {'pages':>6} {'seconds':>8} {'pages/s':>8} {'CPU s':>8} "
        f"{'CPU s/page':>11} {'RSS MiB':>8} {'child RSS':>10} {'srv CPU s':>10} {'other CPU s':>12}"
    )
    print(head)
    print("-" * len(head))
    for row in rows:
        print(
            f"{row['contender']:<10} {row['pages']:>6} {row['seconds']:>8.2f} "
            f"{row['pages_per_s']:>8.1f} {row['cpu_s']:>8.2f} {row['cpu_s_per_page'] * 1000:>8.2f} ms "
            f"{row['rss_mib']:>8.1f} {row['children_rss_mib']:>10.1f} {row['server_cpu_s']:>10.2f} "
            f"{row['other_cpu_s']:>12.2f}"
        )
    rounds = report.get("rounds", [])
    if len(rounds) > 1:
        print(
            f"(each row: the median of {len(rounds)} rounds; contenders alternate who runs first)"
        )
        for i, rd in enumerate(rounds, 1):
            a_, b_ = rd["atlas"], rd["baseline"]
            print(
                f"  round {i}: atlas {a_['pages_per_s']:.1f} pages/s, "
                f"{a_['cpu_s_per_page'] * 1000:.2f} ms/page; baseline {b_['pages_per_s']:.1f} "
                f"pages/s, {b_['cpu_s_per_page'] * 1000:.2f} ms/page; ratios "
                f"{rd['pages_per_s_ratio']:.2f}x pages/s, {rd['cpu_s_per_page_ratio']:.2f}x CPU/page"
                f" (other CPU {a_['other_cpu_s']:.1f} / {b_['other_cpu_s']:.1f} s)"
            )
    print()
    ra = report["ratios"]
    print("Atlas / baseline (medians):" if len(rounds) > 1 else "Atlas / baseline:")
    print(f"  wall seconds      {ra['seconds']:.2f}x")
    print(f"  pages/s           {ra['pages_per_s']:.2f}x")
    print(f"  CPU s/page        {ra['cpu_s_per_page']:.2f}x")
    if len(rounds) > 1:
        pr = report["paired_ratios"]
        print(
            f"  paired: the median of the rounds' own ratios, {pr['pages_per_s_ratio']:.2f}x "
            f"pages/s and {pr['cpu_s_per_page_ratio']:.2f}x CPU s/page (each round's two "
            "runs share its machine; the medians above may come from different rounds)"
        )
    for line in target_lines(report, "baseline"):
        print(line)
    print(f"  peak RSS process  {ra['rss_mib']:.2f}x")
    print(f"  peak RSS children {ra['children_rss_mib']:.2f}x")
    print(
        f"  peak RSS, all     {ra['all_rss_mib']:.2f}x (main's peak + every worker's VmHWM: "
        + ", ".join(f"{r['contender']} {r['all_rss_mib']:.0f} MiB" for r in report["results"])
        + ")"
    )
    if keeper:
        print_keeper(keeper)
    print()
    for row in rows:
        print(
            f"{row['contender']}: CPU {row['cpu_self_s']:.2f} s main + "
            f"{row['cpu_children_s']:.2f} s workers (kernel: {row['sys_self_s']:.2f} s main, "
            f"{row['sys_children_s']:.2f} s workers); {row['requests']} page requests + "
            f"{row['robots_requests']} robots.txt; whole process incl. start-up/imports "
            f"{row['process_seconds']:.2f} s wall, {row['process_cpu_s']:.2f} s CPU"
        )
        if row["thread_cpu_s"]:
            split = ", ".join(f"{k} {v:.1f} s" for k, v in row["thread_cpu_s"].items() if v >= 0.05)
            print(f"  {row['contender']} main-process CPU by thread: {split}")
        if "lake_write_s" in row:
            print(
                f"  {row['contender']} lake writes after the batch: {row['lake_write_s']:.1f} s "
                f"wall, {row['lake_write_cpu_s']:.1f} s CPU of the main thread (Parquet "
                "encoding runs on lake-writer threads, in the split above)"
            )
            if row.get("lake_steps_s"):
                split = ", ".join(f"{k} {v:.2f} s" for k, v in row["lake_steps_s"].items())
                print(f"  {row['contender']} lake writes by step (wall): {split}")
            per = row["claimed"] / row["claims"] if row["claims"] else 0.0
            print(
                f"  {row['contender']} claims: {row['claims']} store transactions leased "
                f"{row['claimed']} URLs ({per:.1f} a claim); {row['slot_returns']} more gave "
                "finished slots back on their own"
            )
    print(
        "Notes: seconds and CPU cover the crawl only (Atlas: Engine.from_config .. last "
        "fetch_shard incl. lake writes; baseline, keeper: pool start .. pool joined); CPU = process + "
        "its joined extraction workers; 'child RSS' = largest worker's ru_maxrss, which includes the parent's RSS at fork (see 'peak RSS, all' for what workers use); 'srv CPU s' = sandbox "
        "server CPU while that contender ran; 'other CPU s' = CPU used by unrelated processes on the "
        "machine meanwhile (should be ~0). A Dagster run adds ~0.6-1.5 s per run on top "
        "(not measured here)."
    )
    noisy = [
        r["contender"] for r in report["results"] if r["other_cpu_s"] > 0.05 * r["process_cpu_s"]
    ]
    if noisy:
        print(
            f"WARNING: other processes used > 5% as much CPU as {', '.join(noisy)} during its "
            "run; wall-clock numbers are disturbed (CPU s/page much less so)."
        )
    if any(r["profiled"] for r in report["results"]):
        print("WARNING: the Atlas run was profiled (cProfile); its timings are inflated.")


def print_keeper(keeper: dict[str, Any]) -> None:
    """Atlas against the keeper: what of Atlas's cost is keeping bodies, links and texts."""
    print()
    for i, rd in enumerate(keeper["rounds"], 1):
        k_ = rd["keeper"]
        print(
            f"  round {i}: keeper {k_['pages_per_s']:.1f} pages/s, "
            f"{k_['cpu_s_per_page'] * 1000:.2f} ms/page; Atlas / keeper "
            f"{rd['pages_per_s_ratio']:.2f}x pages/s, {rd['cpu_s_per_page_ratio']:.2f}x CPU/page"
        )
    ra, pr = keeper["ratios"], keeper["paired_ratios"]
    print(
        f"Atlas / keeper (the plain loop keeping bodies, links and texts): medians "
        f"{ra['pages_per_s']:.2f}x pages/s, {ra['cpu_s_per_page']:.2f}x CPU s/page, "
        f"{ra['all_rss_mib']:.2f}x peak RSS all; paired {pr['pages_per_s_ratio']:.2f}x "
        f"pages/s, {pr['cpu_s_per_page_ratio']:.2f}x CPU s/page"
    )
    for line in target_lines(keeper, "keeper"):
        print(line)


ROUND_KEYS = ("seconds", "pages_per_s", "cpu_s_per_page", "rss_mib", "other_cpu_s")


def round_order(i: int, keeper: bool = False) -> tuple[str, ...]:
    """Who runs first in round `i`: the contenders alternate, so a drift of the machine
    over the rounds (page cache, thermal, a neighbour) weighs on both alike. With the keeper
    the three take turns in a rotation."""
    if keeper:
        return tuple(CONTENDERS[(i + j) % 3] for j in range(3))
    return ("atlas", "baseline") if i % 2 == 0 else ("baseline", "atlas")


# Issue 16's throughput targets, against the plain loop: Atlas at least this share of its
# pages/s, at most this multiple of its CPU per page.
PAGES_PER_S_TARGET = 0.9
CPU_PER_PAGE_TARGET = 1.15


def versus(ours: list[dict[str, Any]], theirs: list[dict[str, Any]], name: str) -> dict[str, Any]:
    """Atlas's rounds against contender `name`'s: each round's own ratios and their
    medians (paired_ratios), and the CPU a page Atlas spends beyond the contender next to
    what CPU_PER_PAGE_TARGET allows, in ms (extra_cpu_ms: medians of the rounds). A ratio
    hides that the allowance moves with the VM's speed: on 2026-12-07 the plain loop took
    16.6-23.8 ms a page from 13:27 to 15:02 and 8.5-12.4 ms from 16:07 to 16:33, so 15%
    allowed Atlas 2.5-3.6 ms a page more, then 1.3-1.9 ms."""
    import statistics

    rounds = [
        {
            "atlas": {k: a_[k] for k in ROUND_KEYS},
            name: {k: b_[k] for k in ROUND_KEYS},
            "pages_per_s_ratio": _ratio(a_["pages_per_s"], b_["pages_per_s"]),
            "cpu_s_per_page_ratio": _ratio(a_["cpu_s_per_page"], b_["cpu_s_per_page"]),
            "extra_cpu_ms_per_page": (a_["cpu_s_per_page"] - b_["cpu_s_per_page"]) * 1000,
            "allowed_cpu_ms_per_page": (CPU_PER_PAGE_TARGET - 1) * b_["cpu_s_per_page"] * 1000,
        }
        for a_, b_ in zip(ours, theirs, strict=True)
    ]
    extra = {
        key: statistics.median(rd[f"{key}_cpu_ms_per_page"] for rd in rounds)
        for key in ("extra", "allowed")
    }
    return {"rounds": rounds, "paired_ratios": paired_ratios(rounds), "extra_cpu_ms": extra}


def target_lines(versus_: dict[str, Any], name: str) -> list[str]:
    """What a report says of issue 16's targets against contender `name`, from the rounds'
    own (paired) ratios: each target met or missed, and Atlas's extra CPU a page in ms. A
    ratio is judged as printed, to two decimals, so a line never says "1.15x, at most
    1.15x: missed" (the ratio of two measured floats is seldom exactly on the line)."""
    pr, ms, n = versus_["paired_ratios"], versus_["extra_cpu_ms"], len(versus_["rounds"])
    pps, cpu = round(pr["pages_per_s_ratio"], 2), round(pr["cpu_s_per_page_ratio"], 2)
    return [
        f"  targets against the {name} (paired): pages/s {pps:.2f}x, at least "
        f"{PAGES_PER_S_TARGET:.2f}x: {'met' if pps >= PAGES_PER_S_TARGET else 'missed'}; "
        f"CPU s/page {cpu:.2f}x, at most {CPU_PER_PAGE_TARGET:.2f}x: "
        f"{'met' if cpu <= CPU_PER_PAGE_TARGET else 'missed'}",
        f"  Atlas's CPU a page beyond the {name}'s: {ms['extra']:.2f} ms; "
        f"{CPU_PER_PAGE_TARGET:.2f}x allows {ms['allowed']:.2f} ms "
        + ("(one round)" if n == 1 else f"(medians of {n} rounds)"),
    ]


def median_row(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """One contender's rounds as one row: every number the median of its rounds (a run
    disturbed by the machine moves the median little, where a mean moves with it); what is
    not a number (per-thread CPU, outcomes) is that of the round with the median CPU per
    page."""
    import statistics

    by_cpu = sorted(rows, key=lambda r: r["cpu_s_per_page"])
    out = dict(by_cpu[(len(by_cpu) - 1) // 2])
    for key, value in rows[0].items():
        if isinstance(value, bool):
            continue
        if isinstance(value, int):  # counts stay whole: the lower middle round's
            out[key] = statistics.median_low(r[key] for r in rows)
        elif isinstance(value, float):
            out[key] = statistics.median(r[key] for r in rows)
    out["rounds"] = len(rows)
    return out


def _ratio(a: float, b: float) -> float:
    return a / b if b else float("nan")


def paired_ratios(rounds: list[dict[str, Any]]) -> dict[str, float]:
    """The median of each round's own Atlas / baseline ratio. The medians' ratio divides
    numbers that may come from different rounds, so it takes no account of the machine's
    drift between rounds, which the two contenders of one round share (they run back to
    back): on 2026-12-06 the baseline measured 12.79 ms/page in one round and 14.61 in the
    next, and the medians' ratio came out 1.09x CPU/page while the rounds' own were 1.24x,
    1.23x and 1.09x."""
    import statistics

    return {
        key: statistics.median(rd[key] for rd in rounds)
        for key in ("pages_per_s_ratio", "cpu_s_per_page_ratio")
    }


def main_parent(args: argparse.Namespace) -> None:
    def log(msg: str) -> None:
        print(f"[bench] {msg}", file=sys.stderr, flush=True)

    log(f"starting sandbox server ({args.origins} x {args.pages}), prerendering ...")
    server, port, info = start_server(args.origins, args.pages)
    try:
        log(f"server ready on port {port}: {info['pages']} pages in {info['prerender_s']:.1f} s")
        web = _web(args.origins, args.pages, port)
        oracle = sorted(web.reachable(MAX_DEPTH))
        # also the Atlas rounds' data dirs (_data_dir): deleted after the last round
        with tempfile.TemporaryDirectory(prefix="atlas-bench-") as tmp:
            urls_file = Path(tmp) / "urls.json"
            urls_file.write_text(json.dumps(oracle))
            log(f"{len(oracle)} reachable pages; {args.repeat} round(s) of each contender")
            runs: dict[str, list[dict[str, Any]]] = {"atlas": [], "baseline": []}
            if args.keeper:
                runs["keeper"] = []
            for i in range(args.repeat):
                for name in round_order(i, args.keeper):
                    r = spawn_contender(name, args, port, urls_file, server.pid)
                    log(f"round {i + 1}, {name}: {r['pages']} pages in {r['seconds']:.1f} s")
                    runs[name].append(r)
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    # every Atlas round must fetch the oracle's set: what any round missed or added is shown
    expected = set(oracle)
    url_sets = [set(r.pop("urls")) for r in runs["atlas"]]
    missing = set().union(*(expected - u for u in url_sets))
    extra = set().union(*(u - expected for u in url_sets))
    by_run = {name: [summarize(name, r) for r in rs] for name, rs in runs.items()}
    rows = [median_row(by_run["atlas"]), median_row(by_run["baseline"])]
    a, b = rows
    report = {
        "config": {
            "origins": args.origins,
            "pages": args.pages,
            "shards": args.shards,
            "concurrency": args.concurrency,
            "workers": args.workers or os.cpu_count(),
            "cores": os.cpu_count(),
            "seed": SEED,
            "max_depth": MAX_DEPTH,
        },
        "server": info,
        "url_set": {
            "size": len(oracle),
            "atlas_matches": not missing and not extra,
            "atlas_missing": len(missing),
            "atlas_extra": len(extra),
            "atlas_missing_sample": sorted(missing)[:5],
        },
        "results": rows,
        **versus(by_run["atlas"], by_run["baseline"], "baseline"),
        "ratios": {
            k: _ratio(a[k], b[k])
            for k in (
                "seconds",
                "pages_per_s",
                "cpu_s_per_page",
                "rss_mib",
                "children_rss_mib",
                "all_rss_mib",
            )
        },
    }
    if args.keeper:
        k = median_row(by_run["keeper"])
        report["keeper"] = {
            "row": k,
            **versus(by_run["atlas"], by_run["keeper"], "keeper"),
            "ratios": {key: _ratio(a[key], k[key])
                       for key in ("seconds", "pages_per_s", "cpu_s_per_page", "all_rss_mib")},
        }  # fmt: skip
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_table(report)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--origins", type=int, default=50, help="origins (3 fixed + generated)")
    p.add_argument("--pages", type=int, default=200, help="pages per origin (>= 12)")
    p.add_argument("--shards", type=int, default=1, help="Atlas origin shards, run one by one")
    p.add_argument("--quick", action="store_true", help=f"smoke run: {QUICK[0]} x {QUICK[1]}")
    p.add_argument("--json", action="store_true", help="print machine-readable results only")
    p.add_argument("--concurrency", type=int, default=CONCURRENCY, help="requests in flight")
    p.add_argument("--workers", type=int, default=0, help="extraction processes; 0 = cores")
    p.add_argument("--repeat", type=int, default=None,
                   help="rounds of both contenders (alternating who runs first); the table "
                   "shows each number's median (default 3; 1 with --quick)")  # fmt: skip
    p.add_argument("--profile", action="store_true", help="cProfile the Atlas run (stderr)")
    p.add_argument("--profile-top", type=int, default=25, help=argparse.SUPPRESS)
    p.add_argument("--keeper", action="store_true",
                   help="a third contender: the plain loop that also keeps each body (zstd), "
                   "its links and its text (Parquet), to show what that work costs")  # fmt: skip
    # inner modes
    p.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--run", choices=CONTENDERS, help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--urls-file", default="", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.quick:
        args.origins, args.pages = QUICK
    if args.repeat is None:
        args.repeat = 1 if args.quick or args.run or args.serve else DEFAULT_ROUNDS
    if args.repeat < 1:
        p.error(f"--repeat must be at least 1, not {args.repeat}")
    return args


def main() -> None:
    args = parse_args()
    if args.serve:
        serve(args.origins, args.pages)
    elif args.run:
        run_contender(args)
    else:
        main_parent(args)


if __name__ == "__main__":
    main()
