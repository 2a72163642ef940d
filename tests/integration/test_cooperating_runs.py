"""Cooperating runs (issue: durable frontier, item 6): three processes, as on three machines,
drain the same (cycle, shard) queue at once through one PostgreSQL coordination store. Every
page is fetched exactly once, the origin gap holds across them (as the server saw it), each
process does part of the work, and the newest batch fence writes the partition."""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from pathlib import Path

import polars as pl

from atlas_sandbox import normalize_url
from tests.conftest import SandboxProcess, run_partition_together, sandbox_config, write_config

GAP_S = 0.3
SERVER_JITTER_S = 0.05
RUNS = 3


def test_three_processes_drain_one_partition_together_on_postgres(
    sandbox: SandboxProcess, tmp_path: Path, pg_schema_url: str
) -> None:
    cfg = write_config(tmp_path / "atlas.yaml", sandbox_config(
        sandbox, tmp_path, shards=1, coordination_url=pg_schema_url,
        politeness={"min_gap_s": GAP_S, "max_in_flight": 1},
    ))  # fmt: skip
    sandbox.log.clear()
    outputs = run_partition_together(cfg, tmp_path, RUNS)
    log = sorted(sandbox.log.entries(), key=lambda e: e["start"])
    pages = [e for e in log if e["path"] != "/robots.txt"]
    assert max(Counter((e["host"], e["path"]) for e in pages).values()) == 1  # exactly once
    fetched = {normalize_url(e["origin"] + e["path"]) for e in pages if e["status"] == 200}
    sitemaps = sandbox.web.sitemap_urls()  # announced in robots.txt: read for their URLs
    assert fetched == sandbox.web.crawlable(50) | sitemaps
    starts: dict[str, list[float]] = defaultdict(list)
    for e in log:
        starts[e["host"]].append(e["start"])
    gaps = [b - a for s in starts.values() for a, b in itertools.pairwise(s)]
    # One clock per origin, shared by all three. As Atlas sent them (the fetch records of all
    # runs): never closer than the gap. As the server's handlers started them: the same, less
    # the server's own scheduling delay when a burst arrives on a machine running three
    # crawlers, PostgreSQL and the server on two cores.
    fetches = pl.read_delta(str(tmp_path / "lake" / "crawl" / "fetches"))
    sent = [
        b - a
        for (_,), g in fetches.sort("started_at").group_by("origin", maintain_order=True)
        for a, b in itertools.pairwise(t.timestamp() for t in g["started_at"])
    ]
    assert fetches.height == len(log) and min(sent) >= GAP_S, min(sent)
    assert min(gaps) >= GAP_S - SERVER_JITTER_S, min(gaps)
    assert sum(o["requests"] for o in outputs) == len(pages)
    assert sum(o["requests"] > 0 for o in outputs) >= 2, outputs  # the work was shared
    assert sorted(o["fence"] for o in outputs) == [1, 2, 3]
    docs = pl.read_delta(str(tmp_path / "lake" / "crawl" / "documents"))
    assert docs.height == docs["url"].n_unique() == len(fetched - sitemaps)
    assert set(docs["batch_fence"]) == {3}, outputs  # the newest run owns the partition
    print("requests per run:", [o["requests"] for o in outputs],
          f"min gap sent {min(sent):.3f} s, seen by the server {min(gaps):.3f} s")  # fmt: skip
