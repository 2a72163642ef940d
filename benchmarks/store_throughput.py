"""Claim+commit pairs per second of the coordination store, per backend, 1 vs 16 workers.

Each worker is its own process with its own connection, as cooperating runs would be. All
URLs sit in one shard, so every claim contends for the same shard (the worst case), and
each commit carries a page's worth of new links. Baseline: one worker on the same backend.

Each worker claims up to --batch URLs per call and commits them as one group, as a fetch
batch's store pump does; batch 1 (one claim, one commit per page) is the baseline. With
--shards N the origins are spread over N shards and worker i drains shard i mod N (runs of
different partitions), besides the one-shard case (runs cooperating on one partition).

Each row also says where the CPU went: the workers' own CPU per pair and the whole machine's
(from /proc/stat over the timed window; with the database server on this machine, the rest is
its share), and the ceiling: how far the machine lets one worker's figure scale at the same
CPU per pair. On 2 cores with PostgreSQL beside the workers, one worker already keeps about
one core busy, so no store can show 4x there; the CPU per pair is what a change can move.

    python benchmarks/store_throughput.py [--workers 16] [--seconds 8] [--links 10] [--batch 8]
                                          [--shards 16] [--backend postgresql]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

CYCLE, TOKEN = "c0001", "AtlasBot"
ROBOTS = "User-agent: *\nAllow: /\n"


def _store(url: str):  # type: ignore[no-untyped-def]
    from atlas_pipeline.coordination import OriginPolicy, open_store

    return open_store(url, OriginPolicy(0.0, 4), 10**9)


def _cand(url: str, origin: str, shard: int, depth: int = 0):  # type: ignore[no-untyped-def]
    from atlas_pipeline.coordination import Candidate

    return Candidate(url, url, origin, shard, depth, 1.0)


def prepare(url: str, origins: int, urls_per_origin: int, shards: int) -> None:
    store = _store(url)
    cands = [
        _cand(f"http://o{o}.example.test/p{i}", f"http://o{o}.example.test:80", o % shards)
        for o in range(origins)
        for i in range(urls_per_origin)
    ]
    store.discover(cands, None)
    for shard in range(shards):
        store.select_frontier(CYCLE, shard, time.time())
    store.close()


def worker(url: str, shard: int, deadline: float, links: int, batch: int,
           out: multiprocessing.Queue) -> None:  # type: ignore[type-arg]  # fmt: skip
    """A fetch batch's store traffic with zero-length fetches: claim up to `batch` URLs (giving
    back the previous round's slots in the same call), then commit them as one group."""
    from atlas_pipeline.coordination import Drained, Lease, Outcome, RobotsTask, UrlState
    from atlas_pipeline.records import FetchRecord

    store = _store(url)
    pairs = 0
    cpu = time.process_time()
    finished: list[tuple[str, int]] = []
    while time.time() < deadline:
        now = time.time()
        got = store.claim_batch(CYCLE, shard, now, TOKEN, 60.0, batch, finished)
        finished = []
        if isinstance(got, Drained):
            break
        if not isinstance(got, list):
            time.sleep(0.002)
            continue
        results = []
        for claim in got:
            if isinstance(claim, RobotsTask):
                store.put_robots(claim, "parsed", ROBOTS, now, 3600.0, 0.0)
            elif isinstance(claim, Lease):
                finished.append((claim.url, claim.fence))
                new = [
                    _cand(f"{claim.url}/l{i}", claim.origin, shard, claim.depth + 1)
                    for i in range(links)
                ]
                outcome = Outcome(UrlState.FETCHED, "fetched", now + 86400, status=200,
                                  record=FetchRecord(kind="page",
                                                     url=claim.url, origin=claim.origin),
                                  links=[({"href": c.url, "reason": None}, c) for c in new])  # fmt: skip
                results.append((claim, outcome))
        pairs += sum(store.commit_batch(results, CYCLE, time.time()))
    cpu = time.process_time() - cpu
    store.close()
    out.put((pairs, cpu))


@dataclass(frozen=True)
class Measured:
    """One measurement: pairs/s, the workers' own CPU and the whole machine's busy CPU over the
    timed window (the PostgreSQL server's share is the difference when it runs here)."""

    pairs: int
    seconds: float
    client_cpu_s: float
    machine_cpu_s: float

    @property
    def rate(self) -> float:
        return self.pairs / self.seconds

    @property
    def busy_cores(self) -> float:
        return self.machine_cpu_s / self.seconds

    def ms_per_pair(self, cpu_s: float) -> float:
        return 1000.0 * cpu_s / self.pairs if self.pairs else float("nan")


def busy_seconds(stat_line: str, ticks_per_s: float) -> float:
    """CPU seconds the machine spent busy, from the `cpu` line of /proc/stat: every field but
    idle and iowait (guest time is already inside user and nice, so it is not added twice)."""
    fields = [int(v) for v in stat_line.split()[1:]]
    busy = sum(fields[:8]) - fields[3] - (fields[4] if len(fields) > 4 else 0)
    return busy / ticks_per_s


def machine_busy() -> float:
    """Busy CPU seconds of this machine so far (0.0 where there is no /proc/stat)."""
    try:
        with open("/proc/stat") as f:
            line = f.readline()
    except OSError:
        return 0.0
    return busy_seconds(line, float(os.sysconf("SC_CLK_TCK")))


def measure(url: str, workers: int, shards: int, seconds: float, links: int,
            batch: int) -> Measured:  # fmt: skip
    ctx = multiprocessing.get_context("spawn")
    out, ready, go = ctx.Queue(), ctx.Queue(), ctx.Queue()
    procs = [
        ctx.Process(target=_delayed, args=(url, i % shards, seconds, links, batch, ready, go, out))
        for i in range(workers)
    ]
    for p in procs:
        p.start()
    for _ in procs:  # every process imported and connected: start the clock for all at once
        ready.get()
    start = time.time() + 0.2
    for _ in procs:
        go.put(start)
    time.sleep(max(0.0, start - time.time()))
    busy = machine_busy()
    time.sleep(max(0.0, start + seconds - time.time()))
    busy = machine_busy() - busy
    got = [out.get() for _ in procs]
    for p in procs:
        p.join()
    return Measured(sum(n for n, _ in got), seconds, sum(c for _, c in got), busy)


def _delayed(url: str, shard: int, seconds: float, links: int, batch: int,
             ready: multiprocessing.Queue, go: multiprocessing.Queue,  # type: ignore[type-arg]
             out: multiprocessing.Queue) -> None:  # type: ignore[type-arg]  # fmt: skip
    _store(url).close()  # import and connect outside the timed window
    ready.put(1)
    start = go.get()
    time.sleep(max(0.0, start - time.time()))
    worker(url, shard, start + seconds, links, batch, out)


PG = "postgresql://postgres@127.0.0.1:5432/test"


class PgSchemas:
    """A fresh schema of the test database per measurement (`url`), all dropped by `drop`,
    so runs leave nothing behind in the database."""

    def __init__(self) -> None:
        self.made: list[str] = []

    def url(self, tag: str) -> str:
        import psycopg

        schema = f"atlas_bench_{tag}_{uuid.uuid4().hex[:6]}"
        with psycopg.connect(PG, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
        self.made.append(schema)
        return f"{PG}?options=-csearch_path%3D{schema}"

    def drop(self) -> None:
        import psycopg

        with psycopg.connect(PG, autocommit=True) as conn:
            for schema in self.made:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        self.made.clear()


def backends(tmp: Path, schemas: PgSchemas) -> list[tuple[str, object]]:
    import psycopg

    out: list[tuple[str, object]] = [("sqlite", lambda tag: f"sqlite:///{tmp / tag}.db")]
    try:
        psycopg.connect(PG, connect_timeout=3).close()
    except psycopg.Error as exc:
        print(f"(PostgreSQL not reachable at {PG}: {exc}; run scripts/ensure_postgres.sh)")
        return out
    out.append(("postgresql", schemas.url))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--workers", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--origins", type=int, default=200)
    ap.add_argument("--urls-per-origin", type=int, default=200)
    ap.add_argument("--links", type=int, default=10, help="new links offered with each commit")
    ap.add_argument("--batch", type=int, default=8,
                    help="claims per call and commits per group (a batch's requests in flight)")  # fmt: skip
    ap.add_argument("--shards", type=int, default=16, help="shards of the spread-out case")
    ap.add_argument("--backend", choices=("sqlite", "postgresql"), default=None,
                    help="measure one backend only")  # fmt: skip
    args = ap.parse_args()
    schemas = PgSchemas()
    try:
        run(args, schemas)
    finally:
        if schemas.made:
            schemas.drop()


def run(args: argparse.Namespace, schemas: PgSchemas) -> None:
    cores = os.cpu_count() or 1
    with tempfile.TemporaryDirectory() as tmp:
        print(f"Coordination store: claim+commit pairs/s, {args.origins} origins x "
              f"{args.urls_per_origin} URLs, gap 0, {args.links} new links a commit, "
              f"{args.seconds:.0f} s per measurement, workers are processes, {cores} cores")  # fmt: skip
        print("CPU ms/pair: the workers' own, then the whole machine's (the rest is the "
              "database server's where it runs here); ceiling: the scaling this machine allows "
              "at one worker's CPU per pair (cores / cores busy with one worker)")  # fmt: skip
        print(f"{'backend':<12}{'shards':>7}{'batch':>6}{'1 worker':>10}"
              f"{f'{args.workers} workers':>12}{'scaling':>9}{'vs 2000/s':>11}"
              f"{'cores busy':>12}{'CPU ms/pair 1w':>17}{f'{args.workers}w':>13}"
              f"{'ceiling':>9}")  # fmt: skip
        for name, make_url in backends(Path(tmp), schemas):
            if args.backend not in (None, name):
                continue
            for shards in sorted({1, args.shards}):
                for batch in (1, args.batch):
                    got = []
                    for n in (1, args.workers):
                        url = make_url(f"w{n}b{batch}s{shards}")  # type: ignore[operator]
                        prepare(url, args.origins, args.urls_per_origin, shards)
                        # one worker drains one shard: the baseline of the same layout
                        got.append(measure(url, n, shards if n > 1 else 1, args.seconds,
                                           args.links, batch))  # fmt: skip
                    print(row(name, shards, batch, got[0], got[1], cores))


def row(name: str, shards: int, batch: int, one: Measured, many: Measured, cores: int) -> str:
    def cpu(m: Measured) -> str:
        return f"{m.ms_per_pair(m.client_cpu_s):.2f} / {m.ms_per_pair(m.machine_cpu_s):.2f}"

    ceiling = cores / one.busy_cores if one.busy_cores > 0 else float("nan")
    return (f"{name:<12}{shards:>7}{batch:>6}{one.rate:>10.0f}{many.rate:>12.0f}"
            f"{many.rate / one.rate:>8.2f}x{many.rate / 2000:>10.2f}x"
            f"{one.busy_cores:>5.2f} {many.busy_cores:>5.2f}{cpu(one):>17}{cpu(many):>13}"
            f"{ceiling:>8.2f}x")  # fmt: skip


if __name__ == "__main__":
    main()
