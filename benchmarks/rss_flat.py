"""Memory over a long crawl: a 100k-page sandbox web crawled in several cycles, RSS per cycle.

    .venv/bin/python benchmarks/rss_flat.py                 # 100 origins x 1000 pages, 4 cycles
    .venv/bin/python benchmarks/rss_flat.py --quick         # 10 x 120 pages, 3 cycles (~1 min)
    .venv/bin/python benchmarks/rss_flat.py --json          # machine-readable results

Issue 16 asks that a crawl's memory follow what is in flight, not how much it has crawled:
a 100k-page crawl over several cycles keeps RSS flat within 20% after its first cycle.

The web is served by `crawl_throughput.py`'s sandbox server (its own process, every page
prerendered). One Atlas process then runs the cycles through the engine API, as the
Dagster assets of a partition do: `plan_frontier`, `fetch_shard` (SQLite coordination,
body store, extraction pool, Delta writes), `cluster_documents` and the urls / origins /
schedule exports, per shard. `scope.max_pages_per_origin` admits `pages / cycles` URLs of
each origin to a cycle's queue, so every cycle fetches new pages and the store, lake and body
store grow cycle by cycle while the work per cycle stays the same.

A thread samples, every 0.25 s, the RSS (VmRSS) of the Atlas process and of every process
below it (its extraction workers). Per cycle it reports the peak of the main process, the
peak of the largest worker and the peak of their sum, and the main process's RSS once the
cycle is done. The baseline is the run's own first cycle: the verdict is the largest later
cycle's peak over the first cycle's (all processes together, and the main process alone),
against the 1.2 of the issue.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
for p in (REPO, HERE):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

import crawl_throughput as ct  # noqa: E402  (the sandbox server and its web)

RESULT_TAG = "RESULT "
FLAT = 1.2  # issue 16: within 20% after the first cycle
_MIB = 1024.0


def _rss_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / _MIB
    except OSError:  # the process ended meanwhile
        pass
    return 0.0


def _descendants(pid: int) -> list[int]:
    out: list[int] = []
    todo = [pid]
    while todo:
        p = todo.pop()
        kids = []
        try:  # each thread's children are listed under that thread
            for task in Path(f"/proc/{p}/task").iterdir():
                kids += [int(k) for k in (task / "children").read_text().split()]
        except OSError:
            continue
        out += kids
        todo += kids
    return out


class ProcessTreeRss:
    """Peaks of this process's RSS, its largest descendant's and their sum, sampled in a
    thread, for each open window (`open` / `close`): a cycle's, and a step's inside it."""

    def __init__(self, every_s: float = 0.25) -> None:
        self.every_s = every_s
        self._lock = threading.Lock()
        self._open: list[dict[str, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)
        self._thread.start()

    def open(self) -> dict[str, float]:
        window = {"main_mib": 0.0, "worker_mib": 0.0, "total_mib": 0.0}
        with self._lock:
            self._open.append(window)
        self.sample()
        return window

    def close(self, window: dict[str, float]) -> dict[str, float]:
        self.sample()
        with self._lock:
            # by identity: two windows may hold equal peaks
            self._open = [w for w in self._open if w is not window]
        return window

    def sample(self) -> None:
        me = os.getpid()
        main = _rss_mib(me)
        workers = [_rss_mib(p) for p in _descendants(me)]
        with self._lock:
            for w in self._open:
                w["main_mib"] = max(w["main_mib"], main)
                w["worker_mib"] = max([w["worker_mib"], *workers])
                w["total_mib"] = max(w["total_mib"], main + sum(workers))

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self.sample()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def run_atlas(args: argparse.Namespace) -> dict[str, Any]:
    from atlas_pipeline.config import config_from_mapping
    from atlas_pipeline.crawl import (
        Engine,
        cluster_documents,
        export_origins,
        export_schedule,
        export_urls,
        fetch_shard,
        plan_frontier,
    )
    from atlas_pipeline.extractor_pool import close_shared

    web = ct._web(args.origins, args.pages, args.port)
    per_cycle = -(-args.pages // args.cycles)
    cycles: list[dict[str, Any]] = []
    rss = ProcessTreeRss()
    with tempfile.TemporaryDirectory(prefix="atlas-rss-") as tmp_s:
        tmp = Path(tmp_s)
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
                "scope": {"max_pages_per_origin": per_cycle, "max_depth": ct.MAX_DEPTH},
                "resolve": {h: "127.0.0.1" for h in web.hosts},
                "resolve_only": True,
                "extraction_workers": args.workers,
            },
            base_dir=tmp,
        )
        eng = Engine.from_config(cfg)
        try:
            for n in range(1, args.cycles + 1):
                cycle = f"c{n:04d}"
                window = rss.open()
                started = time.perf_counter()
                pages = requests = 0
                steps: dict[str, float] = {}

                for shard in range(cfg.shards):
                    _step(rss, steps, "plan_frontier", plan_frontier, eng, cycle, shard)
                    res = _step(rss, steps, "fetch_shard", fetch_shard, eng, cycle, shard)
                    pages += res.documents.rows
                    requests += res.stats.requests
                    _step(rss, steps, "cluster_documents", cluster_documents, eng, cycle, shard)
                    _step(rss, steps, "exports", _exports, eng, cycle, shard,
                         (export_urls, export_origins, export_schedule))  # fmt: skip
                took = time.perf_counter() - started
                row = {"cycle": cycle, "pages": pages, "requests": requests, "seconds": took,
                       **rss.close(window), "end_main_mib": _rss_mib(os.getpid()),
                       "store_mib": _size_mib(tmp / "coordination.db"),
                       "lake_mib": _size_mib(tmp / "lake"), "bodies_mib": _size_mib(tmp / "bodies"),
                       "steps_main_mib": steps}  # fmt: skip
                cycles.append(row)
                print(f"[rss] {cycle}: {pages} pages in {took:.0f} s, peak main "
                      f"{row['main_mib']:.0f} MiB, all {row['total_mib']:.0f} MiB",
                      file=sys.stderr, flush=True)  # fmt: skip
            total_docs = eng.lake.read("documents").height
        finally:
            eng.close()
            close_shared()
            rss.stop()
    return {"cycles": cycles, "documents": total_docs, "per_cycle": per_cycle}


def _step(rss: ProcessTreeRss, steps: dict[str, float], name: str, call: Any, *a: Any) -> Any:
    """Run one step of a cycle, noting the main process's peak RSS while it ran."""
    inner = rss.open()
    out = call(*a)
    steps[name] = max(steps.get(name, 0.0), rss.close(inner)["main_mib"])
    return out


def _exports(eng: Any, cycle: str, shard: int, exports: tuple[Any, ...]) -> None:
    for export in exports:
        export(eng, cycle, shard)


def _size_mib(path: Path) -> float:
    if path.is_file():
        return path.stat().st_size / 2**20
    if not path.exists():
        return 0.0
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20


def verdict(cycles: list[dict[str, Any]]) -> dict[str, float]:
    first, later = cycles[0], cycles[1:] or cycles
    return {
        key: max(c[key] for c in later) / first[key] if first[key] else float("nan")
        for key in ("total_mib", "main_mib", "worker_mib")
    }


def print_table(report: dict[str, Any]) -> None:
    cfg = report["config"]
    print(f"Atlas memory over {cfg['cycles']} cycles: {cfg['origins']} origins x {cfg['pages']} "
          f"pages ({report['server']['pages']:,} served), {report['per_cycle']} pages per origin "
          f"per cycle, shards={cfg['shards']}, concurrency={cfg['concurrency']}, "
          f"cores={cfg['cores']}, gap=0 s")  # fmt: skip
    print(f"documents in the lake at the end: {report['documents']:,}")
    print()
    head = (f"{'cycle':<6} {'pages':>7} {'seconds':>8} {'pages/s':>8} {'main MiB':>9} "
            f"{'worker MiB':>11} {'all MiB':>8} {'main after':>11} {'store MiB':>10} "
            f"{'lake MiB':>9} {'bodies MiB':>11}")  # fmt: skip
    print(head)
    print("-" * len(head))
    for c in report["cycles"]:
        print(f"{c['cycle']:<6} {c['pages']:>7} {c['seconds']:>8.1f} "
              f"{c['pages'] / c['seconds'] if c['seconds'] else 0:>8.1f} {c['main_mib']:>9.0f} "
              f"{c['worker_mib']:>11.0f} {c['total_mib']:>8.0f} {c['end_main_mib']:>11.0f} "
              f"{c['store_mib']:>10.1f} {c['lake_mib']:>9.1f} {c['bodies_mib']:>11.1f}")  # fmt: skip
    print()
    print("peak RSS of the main process by step (MiB):")
    for c in report["cycles"]:
        print(
            f"  {c['cycle']}: " + ", ".join(f"{k} {v:.0f}" for k, v in c["steps_main_mib"].items())
        )
    v = report["verdict"]
    print()
    print("largest later cycle's peak / first cycle's peak (issue 16: at most 1.20):")
    print(f"  all Atlas processes  {v['total_mib']:.2f}x")
    print(f"  main process         {v['main_mib']:.2f}x")
    print(f"  largest worker       {v['worker_mib']:.2f}x")
    print("flat" if v["total_mib"] <= FLAT and v["main_mib"] <= FLAT else "NOT flat")


def main_parent(args: argparse.Namespace) -> int:
    print(f"[rss] starting sandbox server ({args.origins} x {args.pages}), prerendering ...",
          file=sys.stderr, flush=True)  # fmt: skip
    server, port, info = ct.start_server(args.origins, args.pages)
    try:
        cmd = [sys.executable, __file__, "--run", "--port", str(port),
               "--origins", str(args.origins), "--pages", str(args.pages),
               "--cycles", str(args.cycles), "--shards", str(args.shards),
               "--concurrency", str(args.concurrency), "--workers", str(args.workers)]  # fmt: skip
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, cwd=REPO)
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(RESULT_TAG)]
    if proc.returncode != 0 or not lines:
        sys.stderr.write(proc.stdout)
        print(f"the Atlas run failed (exit {proc.returncode})", file=sys.stderr)
        return 1
    result = json.loads(lines[-1][len(RESULT_TAG) :])
    report = {
        "config": {"origins": args.origins, "pages": args.pages, "cycles": args.cycles,
                   "shards": args.shards, "concurrency": args.concurrency,
                   "workers": args.workers or os.cpu_count(), "cores": os.cpu_count()},
        "server": info, **result, "verdict": verdict(result["cycles"]),
    }  # fmt: skip
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_table(report)
    return 0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--origins", type=int, default=100, help="origins (3 fixed + generated)")
    p.add_argument("--pages", type=int, default=1000, help="pages per origin")
    p.add_argument("--cycles", type=int, default=4, help="cycles the pages are spread over")
    p.add_argument("--shards", type=int, default=1, help="origin shards, run one by one")
    p.add_argument("--concurrency", type=int, default=ct.CONCURRENCY, help="requests in flight")
    p.add_argument("--workers", type=int, default=0, help="extraction processes; 0 = cores")
    p.add_argument("--quick", action="store_true", help="smoke run: 10 x 120 pages, 3 cycles")
    p.add_argument("--json", action="store_true", help="print machine-readable results only")
    p.add_argument("--run", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.quick:
        args.origins, args.pages, args.cycles = 10, 120, 3
    if args.cycles < 2:
        p.error("--cycles must be at least 2: the first cycle is the baseline")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.run:
        print(RESULT_TAG + json.dumps(run_atlas(args)), flush=True)
        return 0
    return main_parent(args)


if __name__ == "__main__":
    raise SystemExit(main())
