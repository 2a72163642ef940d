"""Extraction throughput: Atlas's parse_page and ExtractorPool next to bare trafilatura.

    .venv/bin/python benchmarks/extraction_throughput.py              # 600 pages, 3 passes
    .venv/bin/python benchmarks/extraction_throughput.py --pages 200 --repeat 1

The pages are real sandbox HTML (``SandboxWeb(seed=7, page_kb=(5, 40))`` rendered in memory,
no network): home, section and article pages taken round-robin over the origins, 5-40 KB
each. In the same run, on the same pages, it times:

* bare trafilatura: ``bare_extraction(html, url=..., with_metadata=True)`` on every page
  (after a UTF-8 decode), one process, one core;
* ``parse_page(body, url, charset, want_text=True)`` in-process, one core: charset
  detection, links through selectolax (lexbor) and text through trafilatura, as a worker runs
  it; and ``want_text=False`` (decode and links only) to show what the links cost;
* ``parse_kept`` in-process, one core: parse_page, then the body and its text stored in a
  folder body store, as a crawl's worker does with a local store (a fresh store a pass, kept
  until the run ends: deleting files makes the next creates dearer on ext4, see
  crawl_throughput.py). The body's key is computed before the pass (the batch does that,
  not the worker). Its CPU over parse_page's is what keeping a page costs a worker;
* ``ExtractorPool`` with 1 worker and with ``os.cpu_count()`` workers: all pages submitted at
  once from this process, as the fetcher does, so the time includes pickling, the pipes, the
  serving threads and the per-document CPU limit, on top of parse_page.

Each in-process contender runs in a spawned process of its own (as the pool's workers are),
so no contender inherits another's warm caches; each first extracts 20 warm-up pages from
another seed that are not in the timed set. They are alive at once and take turns, 20 pages
at a time (the order rotating every block), through --repeat passes, and the mean of the
passes counts: the machine's speed drifts by 10-30% over minutes on this kind of VM, and a
contender's whole pass after another's measured that drift as much as the contenders
(parse_page came out faster than the bare trafilatura it calls). The first pass is over the
pages the pools get, each later one over as many pages of another seed: trafilatura and
htmldate memoize functions of strings taken from a page, so a second pass over the same
pages in one process would be flattered. The pools are
warmed the same way (worker spawn and imports are reported separately, not timed) and run
round by round, the order rotating; the round with the least wall time counts.

Pages/s per core: wall pages/s divided by the cores the contender can use (1 for a single
process; min(workers, cores) for a pool). Pages per CPU-second: pages divided by the CPU
seconds the contender used (for a pool: its workers from /proc/<pid>/stat plus this
process's serving threads). Both are given as a ratio to bare trafilatura's.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import wait as wait_all
from itertools import zip_longest
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from atlas_pipeline import defaults  # noqa: E402
from atlas_pipeline.bodies import digest  # noqa: E402
from atlas_pipeline.extractor_pool import ExtractorPool  # noqa: E402
from atlas_pipeline.kept_parse import Keep, parse_kept  # noqa: E402
from atlas_pipeline.parsing import parse_page, text_hash  # noqa: E402

SEED = 7
WARMUP_SEED = SEED + 1
WARMUP_PAGES = 20
PAGES_PER_ORIGIN = 60
PAGE_KB = (5, 40)
CHARSET = "utf-8"  # what the sandbox server declares in Content-Type
KEPT = "parse_kept in-process"
BLOCK = 20  # pages an in-process contender parses before the next one's turn

Page = tuple[bytes, str]  # (body, url)


def make_pages(n: int, seed: int = SEED) -> list[Page]:
    """`n` sandbox pages (bytes, URL), round-robin over origins so any `n` mixes sites."""
    from atlas_sandbox import SandboxWeb

    origins = max(1, -(-n // PAGES_PER_ORIGIN))
    web = SandboxWeb(
        seed=seed,
        generated_origins=max(0, origins - 3),
        pages_per_origin=PAGES_PER_ORIGIN,
        page_kb=PAGE_KB,
    )
    per_host = [[(web.render(h, p), web.url(h, p)) for p in web.pages(h)] for h in web.hosts]
    pages = [pg for row in zip_longest(*per_host) for pg in row if pg is not None]
    return pages[:n]


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


# ---------------------------------------------------------------- in-process contenders


def _bare(body: bytes, url: str) -> str:
    from trafilatura import bare_extraction

    doc = bare_extraction(body.decode("utf-8", errors="replace"), url=url, with_metadata=True)
    if doc is None:
        return ""
    if isinstance(doc, dict):  # only with as_dict=True, which is not asked for
        return str(doc.get("text") or "")
    return doc.text or ""


def _parse_page(body: bytes, url: str) -> str:
    return str(parse_page(body, url, CHARSET, True)["extraction"]["text_hash"])


def _links_only(body: bytes, url: str) -> str:
    parse_page(body, url, CHARSET, False)
    return ""


def _kept(root: str, keys: dict[bytes, str]) -> Callable[[bytes, str], str]:
    """parse_kept into the folder store at `root`, the keys known beforehand."""

    def parse(body: bytes, url: str) -> str:
        keep = Keep(root, keys[body], defaults.EXTRACTION_VERSION)
        return str(parse_kept(body, url, CHARSET, True, (), keep)["extraction"]["text_hash"])

    return parse


IN_PROCESS: dict[str, Callable[[bytes, str], str]] = {
    "bare": _bare,
    "parse_page": _parse_page,
    "links_only": _links_only,
}


def _contender(kind: str, root: str | None, pages: list[Page]) -> Callable[[bytes, str], str]:
    if kind != "parse_kept":
        return IN_PROCESS[kind]
    assert root is not None
    store = tempfile.mkdtemp(prefix="store-", dir=root)
    return _kept(store, {body: digest(body) for body, _ in pages})


def serve_in_process(
    kind: str, warm: list[Page], passes: list[list[Page]], root: str | None, conn: Connection
) -> None:
    """Child-process entry: warm up, then parse the blocks of the passes' pages the parent
    names, one at a time on this one core, answering each with its (wall, CPU, kernel)
    seconds; None ends it, answered with every pass's results in turn (and, for bare
    trafilatura, the CPU seconds text_hash takes on them: what parse_page adds for it)."""
    fn = _contender(kind, root, warm)
    for body, url in warm:
        fn(body, url)
    out = [[""] * len(pages) for pages in passes]
    conn.send("ready")
    while (block := conn.recv()) is not None:
        n, start, stop = block
        pages = passes[n]
        if start == 0:  # a pass begins: a store that holds none of its pages (nor their texts)
            fn = _contender(kind, root, pages)
        sys0, cpu0, wall0 = os.times().system, time.process_time(), time.perf_counter()
        for k in range(start, stop):
            out[n][k] = fn(*pages[k])
        conn.send((time.perf_counter() - wall0, time.process_time() - cpu0,
                   os.times().system - sys0))  # fmt: skip
    hash0 = time.process_time()
    done = [t for pass_out in out for t in pass_out]
    hashes = [text_hash(t) for t in done] if kind == "bare" else done
    conn.send((hashes, (time.process_time() - hash0) / len(passes)))


def measure_in_process(
    kinds: list[str], warm: list[Page], passes: list[list[Page]], root: str
) -> dict[str, list[dict[str, Any]]]:
    """Every in-process contender in a process of its own, all alive at once and taking
    turns a block of BLOCK pages at a time (the order rotating block by block), one pass
    over each page list of `passes` (distinct pages: a second pass over the same pages in
    one process would be flattered by trafilatura's and htmldate's memos). The machine's
    speed drifts by 10-30% over minutes here, so one contender's whole pass after another's
    compared the drift as much as the contenders; in blocks of a fraction of a second each
    contender sees the same drift. One result per pass and contender."""
    ctx = multiprocessing.get_context("spawn")
    kids: dict[str, tuple[Any, Connection]] = {}
    try:
        for kind in kinds:
            mine, theirs = ctx.Pipe()
            proc = ctx.Process(target=serve_in_process, args=(kind, warm, passes, root, theirs))
            proc.start()
            theirs.close()
            kids[kind] = (proc, mine)
        for kind, (_, conn) in kids.items():
            if conn.recv() != "ready":
                raise SystemExit(f"{kind}: the contender did not start")
        results: dict[str, list[dict[str, Any]]] = {k: [] for k in kinds}
        turn = 0
        for n, pages in enumerate(passes):
            sums = {k: [0.0, 0.0, 0.0, 0.0] for k in kinds}  # wall, CPU, kernel, other CPU
            for start in range(0, len(pages), BLOCK):
                order = kinds[turn % len(kinds) :] + kinds[: turn % len(kinds)]
                turn += 1
                for kind in order:
                    conn = kids[kind][1]
                    machine0 = _machine_busy_s()
                    conn.send((n, start, min(len(pages), start + BLOCK)))
                    wall, cpu, kernel = conn.recv()
                    other = max(0.0, _machine_busy_s() - machine0 - cpu)
                    for i, x in enumerate((wall, cpu, kernel, other)):
                        sums[kind][i] += x
            for kind, (wall, cpu, kernel, other) in sums.items():
                results[kind].append({"wall_s": wall, "cpu_s": cpu, "sys_s": kernel,
                                     "other_cpu_s": other})  # fmt: skip
        for kind, (_, conn) in kids.items():
            conn.send(None)
            hashes, hash_cpu = conn.recv()
            for one in results[kind]:
                one.update(hashes=hashes, hash_cpu_s=hash_cpu)
        return results
    finally:
        for proc, conn in kids.values():
            conn.close()
            proc.join(10)
            if proc.is_alive():
                proc.kill()


# ---------------------------------------------------------------- the pool


def measure_pool(
    workers: int, warm: list[Page], pages: list[Page], want_text: bool = True
) -> dict[str, Any]:
    """ExtractorPool(workers): warm every worker, then submit all pages at once and wait."""
    with ExtractorPool(workers) as pool:
        t0 = time.perf_counter()
        wait_all([pool.submit(b, u, CHARSET, True) for b, u in warm])
        startup = time.perf_counter() - t0
        pids = pool.worker_pids()
        if len(pids) != workers:
            raise SystemExit(f"warm-up started {len(pids)} of {workers} workers")
        worker0 = {pid: _proc_cpu_s(pid) for pid in pids}
        machine0, cpu0, wall0 = _machine_busy_s(), time.process_time(), time.perf_counter()
        futures = [pool.submit(b, u, CHARSET, want_text) for b, u in pages]
        results = [f.result() for f in futures]
        wall = time.perf_counter() - wall0
        parent = time.process_time() - cpu0
        worker = sum(_proc_cpu_s(pid) - c for pid, c in worker0.items())
        machine = _machine_busy_s() - machine0
        replaced = sorted(pool.worker_pids()) != sorted(pids)
    return {
        "wall_s": wall,
        "cpu_s": parent + worker,
        "parent_cpu_s": parent,
        "worker_cpu_s": worker,
        "other_cpu_s": max(0.0, machine - parent - worker),
        "startup_s": startup,
        "replaced": replaced,
        "hashes": [r["extraction"]["text_hash"] for r in results] if want_text else [],
    }


# ---------------------------------------------------------------- report


def _row(
    name: str, rounds: list[dict[str, Any]], n: int, cores: int, paired: bool = False
) -> dict[str, Any]:
    """A contender's figures: from its fastest round, or for paired contenders (which took
    turns with the others in small blocks) the mean of its passes."""
    best = min(rounds, key=lambda r: r["wall_s"])
    if paired:
        best = {**best, **{k: statistics.fmean(r[k] for r in rounds)
                           for k in ("wall_s", "cpu_s", "sys_s", "other_cpu_s")}}  # fmt: skip
    rates = [n / r["wall_s"] for r in rounds]
    return {
        **best,
        "name": name,
        "cores": cores,
        "pages_per_s": n / best["wall_s"],
        "per_core": n / best["wall_s"] / cores,
        "per_cpu_s": n / best["cpu_s"],
        "cpu_ms": best["cpu_s"] * 1000 / n,
        "wall_ms": best["wall_s"] * 1000 / n,
        "busy": best["cpu_s"] / best["wall_s"],
        "spread": (max(rates) - min(rates)) / max(rates),
    }


def print_report(rows: list[dict[str, Any]], links: dict[str, Any], pool_links: dict[str, Any],
                 pages: list[Page], args: argparse.Namespace, usable: int) -> None:  # fmt: skip
    import trafilatura

    n = len(pages)
    sizes = [len(b) for b, _ in pages]
    print(
        f"Extraction throughput: {n} sandbox pages (seed {SEED}, {min(sizes) / 1024:.0f}-"
        f"{max(sizes) / 1024:.0f} KB, median {statistics.median(sizes) / 1024:.0f} KB, "
        f"{sum(sizes) / 2**20:.1f} MiB of HTML); trafilatura {trafilatura.__version__}, "
        f"python {platform.python_version()}, {usable} usable cores; in-process: mean of {args.repeat} paired passes, pools: best of {args.repeat} rounds"
    )
    print()
    head = (
        f"{'contender':<26} {'pages/s':>8} {'/core':>7} {'pages/':>7} {'CPU ms':>7} "
        f"{'cores':>6} {'vs bare':>8} {'vs bare':>8} {'spread':>7} {'other':>6}"
    )
    sub = (
        f"{'':<26} {'wall':>8} {'wall':>7} {'CPU-s':>7} {'/page':>7} "
        f"{'busy':>6} {'/core':>8} {'CPU-s':>8} {'':>7} {'CPU':>6}"
    )
    print(head)
    print(sub)
    print("-" * len(head))
    bare = rows[0]
    for r in rows:
        print(
            f"{r['name']:<26} {r['pages_per_s']:>8.1f} {r['per_core']:>7.1f} "
            f"{r['per_cpu_s']:>7.1f} {r['cpu_ms']:>7.2f} {r['busy']:>6.2f} "
            f"{r['per_core'] / bare['per_core']:>7.2f}x {r['per_cpu_s'] / bare['per_cpu_s']:>7.2f}x "
            f"{r['spread'] * 100:>6.1f}% {r['other_cpu_s'] / r['cpu_s'] * 100:>5.0f}%"
        )
    print()
    inproc = rows[1]
    kept = next(r for r in rows if r["name"] == KEPT)
    print(
        f"Body and text stored (parse_kept over parse_page, a folder store): "
        f"{kept['cpu_ms'] - inproc['cpu_ms']:+.2f} ms CPU/page "
        f"({(kept['cpu_ms'] - inproc['cpu_ms']) / inproc['cpu_ms'] * 100:+.0f}% of parse_page; "
        f"kernel {kept['sys_s'] * 1000 / n:.2f} ms/page against {inproc['sys_s'] * 1000 / n:.2f})"
    )
    print(
        f"Links only (parse_page want_text=False: decode + selectolax): {links['cpu_ms']:.2f} ms "
        f"CPU/page in-process ({links['cpu_ms'] / inproc['cpu_ms'] * 100:.0f}% of parse_page)"
    )
    print(
        f"text_hash of the extracted text (whitespace runs to one space + sha256, inside parse_page): "
        f"{bare['hash_cpu_s'] * 1000 / n:.2f} ms CPU/page"
    )
    over_wall = pool_links["wall_ms"] - links["wall_ms"]
    over_cpu = pool_links["cpu_ms"] - links["cpu_ms"]
    print(
        f"Pool overhead per document (links only, 1 worker vs in-process): {over_wall:+.2f} ms "
        f"wall, {over_cpu:+.2f} ms CPU (this process {pool_links['parent_cpu_s'] * 1000 / n:.2f}"
        f" ms, worker {pool_links['worker_cpu_s'] * 1000 / n - links['cpu_ms']:+.2f} ms) = "
        f"{over_cpu / inproc['cpu_ms'] * 100:.0f}% of a parse_page's CPU"
    )
    for r in (r for r in rows if "worker_cpu_s" in r):
        print(
            f"{r['name']}: CPU {r['worker_cpu_s']:.2f} s workers + {r['parent_cpu_s']:.2f} s "
            f"this process; spawn + warm-up {r['startup_s']:.1f} s (not timed)"
        )
    same = ", ".join(
        f"{r['name']} {sum(a == b for a, b in zip(r['hashes'], bare['hashes'], strict=False))}"
        f"/{len(r['hashes'])}"
        for r in rows[1:]
    )
    print(f"Same text as bare trafilatura (text_hash): {same}")
    print(
        "Columns: '/core' = wall pages/s / cores the contender can use (1, or min(workers, "
        "cores)); 'pages/CPU-s' = pages / CPU s used (pool: workers + this process); "
        "'cores busy' = CPU s / wall s; 'vs bare' = ratio to bare trafilatura's '/core' and "
        "'pages/CPU-s'; 'spread' = (max - min) / max pages/s over rounds; 'other CPU' = CPU "
        "of unrelated processes during the counted round, as % of the contender's."
    )
    noisy = [r for r in [*rows, links, pool_links] if r["other_cpu_s"] > 0.05 * r["cpu_s"]]
    if noisy:
        print(
            f"WARNING: other processes ran during {len(noisy)} of {len(rows) + 2} counted passes "
            "(other CPU > 5%); wall-clock figures are disturbed, per CPU-s ones less so."
        )
    if any(r.get("replaced") for r in rows):
        print("WARNING: a pool worker was replaced mid-run (crash or limit); CPU undercounted.")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pages", type=int, default=600, help="pages to extract (default 600)")
    ap.add_argument("--repeat", type=int, default=3,
                    help="passes (in-process: their mean counts; pools: the fastest)")  # fmt: skip
    ap.add_argument("--workers", type=int, default=0, help="big pool's workers; 0 = cpu_count")
    args = ap.parse_args(argv)
    workers = args.workers or os.cpu_count() or 1
    usable = len(os.sched_getaffinity(0))

    pages = make_pages(args.pages)
    warm = make_pages(WARMUP_PAGES, seed=WARMUP_SEED)
    with tempfile.TemporaryDirectory(prefix="atlas-extraction-") as stores:
        _run(args, workers, usable, pages, warm, stores)


def _run(args: argparse.Namespace, workers: int, usable: int, pages: list[Page],
         warm: list[Page], stores: str) -> None:  # fmt: skip
    in_process = {"bare trafilatura": "bare", "parse_page in-process": "parse_page",
                  KEPT: "parse_kept", "links in-process": "links_only"}  # fmt: skip
    t0 = time.perf_counter()
    # pass 1 is the pools' pages; the others are pages of other seeds, as many and as large
    sets = [pages, *(make_pages(len(pages), seed=SEED + 10 + i) for i in range(args.repeat - 1))]
    passes = measure_in_process(list(in_process.values()), warm, sets, stores)
    print(f"[bench] in-process contenders, {args.repeat} paired passes: "
          f"{time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)  # fmt: skip
    pools: list[tuple[str, int, Callable[[], dict[str, Any]]]] = [
        ("ExtractorPool 1 worker", 1, lambda: measure_pool(1, warm, pages)),
        (f"ExtractorPool {workers} workers", min(workers, usable),
         lambda: measure_pool(workers, warm, pages)),
        ("links pool 1 worker", 1, lambda: measure_pool(1, warm, pages, want_text=False)),
    ]  # fmt: skip
    if workers == 1:
        del pools[1]
    rounds: dict[str, list[dict[str, Any]]] = {name: [] for name, _, _ in pools}
    for i in range(args.repeat):
        k = i % len(pools)  # rotate the order, so no contender always follows another
        for name, _, run in pools[k:] + pools[:k]:
            t0 = time.perf_counter()
            rounds[name].append(run())
            print(
                f"[bench] round {i + 1}/{args.repeat} {name}: {time.perf_counter() - t0:.1f} s",
                file=sys.stderr,
                flush=True,
            )
    n = len(pages)
    mine = {name: _row(name, passes[kind], n, 1, paired=True) for name, kind in in_process.items()}
    rows = [*(r for name, r in mine.items() if name != "links in-process"),
            *(_row(name, rounds[name], n, cores) for name, cores, _ in pools[:-1])]  # fmt: skip
    pool_links = _row(pools[-1][0], rounds[pools[-1][0]], n, 1)
    print_report(rows, mine["links in-process"], pool_links, pages, args, usable)


if __name__ == "__main__":
    main(sys.argv[1:])
