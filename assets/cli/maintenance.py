"""Maintenance and reads: `atlas config`, `atlas sweep-bodies`, `atlas reextract`,
`atlas inspect`, `atlas stats`, `atlas export-warc`."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from atlas_pipeline.config import dump_config, load_config
from atlas_pipeline.errors import AtlasError, ConfigError

from .common import bar


def cmd_config(args: argparse.Namespace) -> int:
    cfg = load_config(args.config, dict(os.environ))
    print(dump_config(cfg), end="")
    from atlas_pipeline.regions.keeper import handoff_bounds

    for line in handoff_bounds(cfg):
        print(line)
    return 0


def cmd_sweep_bodies(args: argparse.Namespace) -> int:
    cfg = load_config(args.config, dict(os.environ))
    grace_s = args.grace_hours * 3600
    if grace_s < 2 * cfg.lease_s:
        raise ConfigError(
            f"--grace-hours {args.grace_hours:g} is shorter than two leases "
            f"({2 * cfg.lease_s:g} s): a body put by a running batch could be swept before "
            "its commit; use a longer grace"
        )
    from atlas_pipeline.crawl import Engine

    engine = Engine.from_config(cfg)
    try:
        report = engine.bodies.sweep_orphans(engine.store.referenced_bodies, grace_s)
    finally:
        engine.close()
    print(f"scanned {report.scanned} bodies, deleted {report.deleted} orphans "
          f"({report.bytes / 1e6:.1f} MB) from {cfg.bodies_path}")  # fmt: skip
    return 0


def cmd_reextract(args: argparse.Namespace) -> int:
    cfg = load_config(args.config, dict(os.environ))
    from atlas_pipeline.crawl import Engine, reextract

    shards = [args.shard] if args.shard is not None else list(range(cfg.shards))
    engine = Engine.from_config(cfg)
    try:
        for shard in shards:
            with bar(0, f"re-extract {args.cycle} shard {shard}", "doc") as progress:

                def tick(n: int, total: int, progress: Any = progress) -> None:
                    progress.total = total
                    progress.update(n - progress.n)

                done = reextract(engine, args.cycle, shard, on_progress=tick)
            print(f"{args.cycle} shard {shard}: {done.documents.rows} documents re-extracted "
                  f"from stored bodies ({done.failed} failed again, {done.expired} bodies past retention; "
                  "those kept as they were)")  # fmt: skip
    finally:
        engine.close()
    return 0


def cmd_inspect(args: argparse.Namespace) -> int:
    """A URL's whole history: discovery, catalogue state, fetches, robots, documents, events."""
    import json

    from atlas_pipeline.crawl import Engine
    from atlas_pipeline.inspect import check_crawl_data, inspect_url, render

    cfg = load_config(args.config, dict(os.environ))
    check_crawl_data(cfg.coordination)
    engine = Engine.from_config(cfg)
    try:
        found = inspect_url(engine, args.url)
    finally:
        engine.close()
    if args.json:
        print(json.dumps(found.as_json(), indent=2, default=str))
    elif found.known:
        print(render(found, args.limit), end="")
    if not found.known:
        print(f"atlas: {found.url} was never seen by this crawl\nhint: {found.hint}",
              file=sys.stderr)  # fmt: skip
        return 1
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    """The crawl-db summary from the lake, as a table or as JSON."""
    import json

    from atlas_pipeline.lake import Lake
    from atlas_pipeline.stats import crawl_stats, render_stats

    cfg = load_config(args.config, dict(os.environ))
    lake = Lake(cfg.lake_uri, cfg.lake_options)
    if not lake.exists("fetches") and not lake.exists("urls"):
        raise AtlasError(f"no crawl data in the lake at {cfg.lake_uri}: run atlas crawl first")
    stats = crawl_stats(lake, args.cycle)
    if args.cycle is not None and args.cycle not in stats.cycles:
        known = ", ".join(stats.cycles) or "none"
        raise AtlasError(f"cycle {args.cycle} has no fetches in the lake (cycles: {known})")
    if args.json:
        print(json.dumps(stats.as_json(), indent=2))
    else:
        print(render_stats(stats), end="")
    return 0


def cmd_export_warc(args: argparse.Namespace) -> int:
    """WARC/1.1 files of a cycle, one per shard, from the lake and the stored bodies."""
    from pathlib import Path

    from atlas_pipeline.bodies import open_bodies
    from atlas_pipeline.lake import Lake
    from atlas_pipeline.warc import export_warc, partition_fetches

    cfg = load_config(args.config, dict(os.environ))
    lake = Lake(cfg.lake_uri, cfg.lake_options)
    if not lake.exists("fetches"):
        raise AtlasError(f"no fetches in the lake at {cfg.lake_uri}: run atlas crawl first")
    if args.shard is not None and not 0 <= args.shard < cfg.shards:
        raise AtlasError(f"--shard {args.shard} is not a shard of this crawl "
                         f"(shards 0..{cfg.shards - 1})")  # fmt: skip
    cycle_rows, every = partition_fetches(lake, args.cycle)
    if cycle_rows.is_empty():
        known = ", ".join(sorted(set(every["crawl_cycle"].to_list()))) or "none"
        raise AtlasError(f"cycle {args.cycle} has no fetches in the lake (cycles: {known}); "
                         "pass one of those to --cycle")  # fmt: skip
    out = Path(args.out) if args.out else cfg.data_dir / "warc"
    bodies = open_bodies(cfg.bodies_url, cfg.bodies_path)
    shards = [args.shard] if args.shard is not None else list(range(cfg.shards))
    for shard in shards:
        written = export_warc(lake, bodies, cfg.user_agent, args.cycle, shard, out, every)
        print(written.summary())
    return 0
