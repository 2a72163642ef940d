"""Discovery cost: scope-guard throughput, and merging discovered links into a big catalogue.

1. normalize + scope guard (the per-link work of a fetch batch): URLs/s over generated links.
2. Merge `--links` discovered links (half already known, in page-sized batches of 20, as the
   commit path offers them) into a SQLite catalogue pre-filled with `--existing` URLs, without
   and with the Bloom prefilter (loaded before the clock starts; its load time is printed);
   same data, same run, ratio against the plain merge.

    python benchmarks/url_merge.py [--existing 10000000] [--links 1000000]
"""

from __future__ import annotations

import argparse
import random
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

ORIGINS = 500


def url_of(i: int) -> str:
    return f"https://site-{i % ORIGINS}.example.test/section-{i % 37}/article-{i}"


def scope_throughput(n: int) -> float:
    from atlas_pipeline.config import config_from_mapping
    from atlas_pipeline.scope import ScopeGuard

    rng = random.Random(7)
    hosts = [f"site-{i}.example.test" for i in range(ORIGINS)]
    cfg = config_from_mapping(
        {"seeds": [f"https://{h}/" for h in hosts], "resolve": {h: "127.0.0.1" for h in hosts}},
        base_dir=Path.cwd(),
    )
    guard = ScopeGuard(cfg)
    hrefs = [
        rng.choice(["../a/b?utm_source=x&id=%d", "/Section/./page-%d", "page-%d#top",
                    "https://SITE-1.example.test:443/x/%d", "?page=%d&sort=new"]) % i
        for i in range(n)
    ]  # fmt: skip
    base = "https://site-1.example.test/news/today/index.html"
    started = time.perf_counter()
    for href in hrefs:
        guard.judge(href, base, 2, base)
    return n / (time.perf_counter() - started)


def prefill(path: Path, existing: int) -> None:
    """The catalogue rows written directly (the engine's own insert would take much longer)."""
    from atlas_pipeline.coordination import OriginPolicy, open_store

    open_store(f"sqlite:///{path}", OriginPolicy(0.0, 1), 10**9).close()
    con = sqlite3.connect(path)
    con.execute("PRAGMA journal_mode = WAL")
    con.execute("PRAGMA synchronous = OFF")  # a fixture, not a crawl: no crash to survive
    con.execute("PRAGMA cache_size = -4000000")  # index pages stay in memory while it fills
    from atlas_pipeline.coordination.sqlite import url_digest
    from atlas_pipeline.traps import trap_keys

    rows = ((u, u, f"https://site-{i % ORIGINS}.example.test:443", 0, 1, 0.5, "discovered",
             "admitted", 0.0, k.pattern, k.query_key, url_digest(u))
            for i in range(existing) for u in [url_of(i)] for k in [trap_keys(u)])  # fmt: skip
    con.executemany(
        "INSERT INTO urls (url, discovered_url, origin, shard, depth, priority, state, reason,"
        " discovered_at, trap_pattern, trap_query, url_hash) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
        rows,
    )
    # as a catalogue from before the trap counters looks: the store counts them on open
    con.execute("DELETE FROM store_settings WHERE key = 'trap_counts'")
    con.commit()
    con.close()


def merge(path: Path, links: int, existing: int, bloom: int) -> tuple[float, int]:
    from atlas_pipeline.coordination import Candidate, OriginPolicy, TrapCaps, open_store

    t0 = time.perf_counter()
    store = open_store(f"sqlite:///{path}", OriginPolicy(0.0, 1), 10**9,
                       TrapCaps(10**9, 10**9, 10**9, bloom))  # fmt: skip
    print(f"  opened ({'with' if bloom else 'no'} Bloom) in {time.perf_counter() - t0:.1f} s")
    rng = random.Random(11)
    ids = [rng.randrange(existing) if k % 2 else existing + k for k in range(links)]
    cands = [Candidate(url_of(i), url_of(i), f"https://site-{i % ORIGINS}.example.test:443",
                       0, 1, 0.5) for i in ids]  # fmt: skip
    store.discover([Candidate(url_of(0), url_of(0), cands[0].origin, 0, 1, 0.5)], None)  # warm
    started = time.perf_counter()
    admitted = 0
    for i in range(0, len(cands), 20):
        admitted += store.discover(cands[i : i + 20], None).count("admitted")
    took = time.perf_counter() - started
    store.close()
    return took, admitted


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--existing", type=int, default=10_000_000)
    ap.add_argument("--links", type=int, default=1_000_000)
    args = ap.parse_args()
    print(f"normalize + scope guard: {scope_throughput(200_000):,.0f} URLs/s (one core)")
    with tempfile.TemporaryDirectory() as tmp:
        results = {}
        first = Path(tmp) / "plain.db"
        t0 = time.perf_counter()
        prefill(first, args.existing)
        print(f"  prefilled {args.existing:,} URLs in {time.perf_counter() - t0:.0f} s")
        shutil.copyfile(first, Path(tmp) / "bloom.db")  # the same catalogue for both
        for label, bloom in (("plain", 0), ("bloom", args.existing + 2 * args.links)):
            results[label] = merge(Path(tmp) / f"{label}.db", args.links, args.existing, bloom)
        base = results["plain"][0]
        print(f"merge {args.links:,} discovered links (half known) into {args.existing:,} URLs:")
        for label, (took, admitted) in results.items():
            print(f"  {label:6} {took:7.1f} s  {args.links / took:9,.0f} links/s  "
                  f"{admitted:,} admitted  x{took / base:.2f} of plain")  # fmt: skip


if __name__ == "__main__":
    main()
