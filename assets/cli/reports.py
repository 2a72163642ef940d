"""`atlas report`: the crawl-wide HTML reports, one per cycle across every shard, and their index."""

from __future__ import annotations

import argparse
import os

from atlas_pipeline.config import CrawlConfig, load_config
from atlas_pipeline.errors import AtlasError


def write_crawl_reports(cfg: CrawlConfig, cycles: list[str] | None = None) -> list[str]:
    """Write the reports of `cycles` (default: every cycle) and the index; the pages' paths."""
    from atlas_pipeline.crawl_report import write_reports
    from atlas_pipeline.lake import Lake

    lake = Lake(cfg.lake_uri, cfg.lake_options)
    return [str(p) for p in write_reports(cfg.reports_dir, lake, cfg.seeds, cycles)]


def cmd_report(args: argparse.Namespace) -> int:
    from atlas_pipeline.lake import Lake

    cfg = load_config(args.config, dict(os.environ))
    lake = Lake(cfg.lake_uri, cfg.lake_options)
    if not lake.exists("fetches"):
        raise AtlasError(f"no crawl data in the lake at {cfg.lake_uri}: run atlas crawl first")
    if args.cycle is not None:
        known = sorted(set(lake.read("fetches")["crawl_cycle"].to_list()))
        if args.cycle not in known:
            raise AtlasError(f"cycle {args.cycle} has no fetches in the lake "
                             f"(cycles: {', '.join(known) or 'none'})")  # fmt: skip
    pages = write_crawl_reports(cfg, None if args.cycle is None else [args.cycle])
    for page in pages:
        print(page)
    return 0
