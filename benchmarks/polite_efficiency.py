"""Polite-mode efficiency: how close a batch gets to the politeness ceiling.

100 origins (3 publishers + 97 generated) at 1 request/s each (min_gap_s 1.0, one request in
flight), one fetch batch through the engine (SQLite store, body store, extraction, lake), the
sandbox web in its own process writing its request log. From that log, per origin: requests
(robots.txt included) over the slots its gap allowed while it had work, i.e. between its
first and its last request: (last - first) / gap + 1. Efficiency = sum of requests / sum of
slots; the ceiling is the politeness limit itself (sum over origins with eligible work of
1/gap), so 1.0 is the best any polite crawler can do. Target: at least 0.9.

    .venv/bin/python benchmarks/polite_efficiency.py [--origins 100] [--pages 30] [--gap 1.0]
                                                     [--gap-from answer|send]
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def start_web(
    origins: int, pages: int, page_kb: list[int], log: Path
) -> tuple[subprocess.Popen[str], int]:
    cmd = [sys.executable, "-m", "assets.cli", "web", "--port", "0", "--seed", "7",
           "--origins", str(origins - 3), "--pages", str(pages), "--log", str(log),
           "--page-kb", *map(str, page_kb)]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    found = re.search(r"127\.0\.0\.1:(\d+)", proc.stdout.readline())
    if not found:
        proc.terminate()
        raise SystemExit("the sandbox web did not start")
    return proc, int(found.group(1))


def crawl(
    origins: int,
    pages: int,
    page_kb: list[int],
    gap: float,
    port: int,
    data_dir: Path,
    adaptive_max_gap: float,
    gap_from: str,
) -> dict[str, float]:
    from atlas_pipeline.config import config_from_mapping
    from atlas_pipeline.crawl import Engine, fetch_shard, plan_frontier
    from atlas_sandbox import SandboxWeb

    web = SandboxWeb(seed=7, generated_origins=origins - 3, pages_per_origin=pages, port=port,
                     page_kb=(page_kb[0], page_kb[1]))  # fmt: skip
    cfg = config_from_mapping({
        "seeds": web.seed_urls(), "data_dir": str(data_dir), "shards": 1,
        "politeness": {"min_gap_s": gap, "max_in_flight": 1, "global_concurrency": 2 * origins,
                       "adaptive_max_gap_s": adaptive_max_gap, "gap_from": gap_from},
        "scope": {"max_depth": 100, "max_pages_per_origin": 10 * pages},
        "limits": {"batch_max_idle_s": 5},
        "resolve": {h: "127.0.0.1" for h in web.hosts}, "resolve_only": True,
    }, base_dir=data_dir)  # fmt: skip
    engine = Engine.from_config(cfg)
    plan_frontier(engine, "c0001", 0)
    started = time.time()
    result = fetch_shard(engine, "c0001", 0)
    # the gap each origin ran under (a robots Crawl-delay may have raised it)
    rows = engine.store._select(  # type: ignore[attr-defined]
        "SELECT origin, min_gap_s, adapt_gap_s FROM origins").fetchall()  # fmt: skip
    gaps = {r["origin"]: r["min_gap_s"] for r in rows}
    widened = sum(r["adapt_gap_s"] > 0 for r in rows)
    print(f"  origins whose adaptive gap was wider than the base at the end: {widened}")
    fetches = engine.lake.read_partition("fetches", "c0001", "shard_000")
    engine.close()
    client_short = 0
    worst = 0.0
    for (origin,), g in fetches.sort("started_at").group_by("origin", maintain_order=True):
        ts = [t.timestamp() for t in g["started_at"]]
        for a, b in itertools.pairwise(ts):
            if b - a < gaps[origin]:
                client_short += 1
                worst = max(worst, gaps[origin] - (b - a))
    print(
        f"  client side: {client_short} gaps shorter than the origin gap, worst by {worst * 1000:.1f} ms"
    )
    return {"batch_s": time.time() - started, "requests": result.stats.requests, **gaps}


def efficiency(log: Path, gaps: dict[str, float]) -> tuple[float, int, float, list[float]]:
    starts: dict[str, list[float]] = defaultdict(list)
    for line in log.read_text().splitlines():
        entry = json.loads(line)
        starts[entry["origin"]].append(entry["start"])
    requests = slots = 0.0
    short: list[float] = []  # how much shorter than the gap, per short gap
    for origin, times in starts.items():
        times.sort()
        gap = gaps.get(origin, 1.0)
        requests += len(times)
        slots += (times[-1] - times[0]) / gap + 1
        short += [gap - (b - a) for a, b in itertools.pairwise(times) if b - a < gap]
    return requests / slots, int(requests), slots, short


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--origins", type=int, default=100)
    ap.add_argument("--pages", type=int, default=30, help="pages per origin")
    ap.add_argument("--gap", type=float, default=1.0, help="seconds between request starts")
    ap.add_argument("--page-kb", type=int, nargs=2, default=[2, 4], metavar=("LO", "HI"),
                    help="page sizes; small by default so extraction CPU does not cap the rate "
                         "on a small machine (the scheduler is what is measured)")  # fmt: skip
    ap.add_argument("--adaptive-max-gap", type=float, default=60.0,
                    help="politeness.adaptive_max_gap_s (0 turns AIMD pacing off)")  # fmt: skip
    ap.add_argument(
        "--gap-from",
        choices=["answer", "send"],
        default="answer",
        help="politeness.gap_from: the gap runs from each answer or each send",
    )
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "requests.jsonl"
        proc, port = start_web(args.origins, args.pages, args.page_kb, log)
        try:
            info = crawl(args.origins, args.pages, args.page_kb, args.gap, port,
                         Path(tmp) / "data", args.adaptive_max_gap, args.gap_from)  # fmt: skip
            time.sleep(0.5)  # the server writes each entry after its response
            gaps = {k: v for k, v in info.items() if "://" in k}
            eff, requests, slots, short = efficiency(log, gaps)
        finally:
            proc.terminate()
            proc.wait(10)
    print(f"Polite-mode efficiency: {args.origins} origins at 1 request per {args.gap:g} s "
          f"(one in flight), {args.pages} pages of {args.page_kb[0]}-{args.page_kb[1]} KB each, "
          f"one fetch batch, gap from each {args.gap_from}")  # fmt: skip
    print(f"  requests (robots.txt included)   {requests}")
    print(f"  politeness ceiling (slots)       {slots:.0f}")
    print(f"  achieved requests/s              {requests / info['batch_s']:.1f} "
          f"over {info['batch_s']:.1f} s")  # fmt: skip
    print(f"  efficiency = requests / ceiling  {eff:.3f}   (target >= 0.9)")
    worst = f", shortest by {max(short) * 1000:.1f} ms" if short else ""
    print(f"  gaps shorter than the origin gap as the server saw them: {len(short)}{worst}")


if __name__ == "__main__":
    main()
