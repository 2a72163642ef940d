"""The sandbox commands: `atlas web`, `atlas canary`, `atlas indexer` (the test web and its
witnesses, from `atlas_sandbox`) and `atlas demo` (a real crawl of the sandbox web)."""

from __future__ import annotations

import argparse
import shutil
import socket
import sys
from pathlib import Path

import yaml

from atlas_pipeline.config import CrawlConfig, load_config
from atlas_pipeline.errors import AtlasError

from .crawl import _crawl, print_summary

DEMO_ORIGINS = 5  # generated origins besides the three publishers
DEMO_PAGES = 40  # pages per origin
DEMO_CYCLES = 3


def _free_port(preferred: int) -> int:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", preferred))
            return preferred
        except OSError:
            s.bind(("127.0.0.1", 0))
            return int(s.getsockname()[1])


def cmd_web(args: argparse.Namespace) -> int:
    from atlas_sandbox import (
        DEFAULT_CANARY_PORT,
        DEFAULT_TRAP_SCALE,
        MAX_TRAP_SCALE,
        SandboxWeb,
        serve_forever,
    )

    if args.canary_port is not None and not (args.hostile or args.scripted):
        raise AtlasError("--canary-port only means something with --hostile or --scripted")
    if args.trap_scale is not None and not args.traps:
        raise AtlasError("--trap-scale only means something with --traps")
    canary_port = DEFAULT_CANARY_PORT if args.canary_port is None else args.canary_port
    trap_scale = DEFAULT_TRAP_SCALE if args.trap_scale is None else args.trap_scale
    if not 1 <= trap_scale <= MAX_TRAP_SCALE:
        raise AtlasError(f"--trap-scale must be 1..{MAX_TRAP_SCALE}")
    web = SandboxWeb(seed=args.seed, generated_origins=args.origins, pages_per_origin=args.pages,
                     page_kb=(args.page_kb[0], args.page_kb[1]))  # fmt: skip
    serve_forever(web, port=args.port, log_path=Path(args.log) if args.log else None,
                  lab=args.lab, hostile=args.hostile, canary_port=canary_port,
                  traps=args.traps, trap_scale=trap_scale, dupes=args.dupes,
                  changing=args.changing, directives=args.directives,
                  scripted=args.scripted)  # fmt: skip
    return 0


def cmd_canary(args: argparse.Namespace) -> int:
    from atlas_sandbox import DEFAULT_CANARY_PORT, serve_canary_forever

    port = DEFAULT_CANARY_PORT if args.port is None else args.port
    serve_canary_forever(port=port, log_path=Path(args.log) if args.log else None)
    return 0


def cmd_indexer(args: argparse.Namespace) -> int:
    from atlas_sandbox import DEFAULT_INDEXER_PORT, serve_indexer_forever
    from atlas_sandbox.indexer import StoreError

    if args.fail_mode is not None and args.fail_after is None:
        raise AtlasError("--fail-mode only means something with --fail-after")
    if args.fail_after is not None and args.fail_after < 0:
        raise AtlasError("--fail-after must be 0 or more")
    port = DEFAULT_INDEXER_PORT if args.port is None else args.port
    try:
        serve_indexer_forever(Path(args.store), port=port, fail_after=args.fail_after,
                              fail_mode=args.fail_mode or "503")  # fmt: skip
    except StoreError as exc:
        raise AtlasError(str(exc)) from None
    return 0


def demo_config(data_dir: Path, port: int) -> dict[str, object]:
    from atlas_sandbox import SandboxWeb

    web = SandboxWeb(seed=7, generated_origins=DEMO_ORIGINS, pages_per_origin=DEMO_PAGES, port=port)
    return {
        "seeds": web.seed_urls(),
        "data_dir": str(data_dir),
        "shards": 4,
        "politeness": {"min_gap_s": 0.25, "max_in_flight": 1, "global_concurrency": 64},
        "scope": {"max_depth": 8, "max_pages_per_origin": 15},
        "limits": {"total_timeout_s": 10, "batch_max_idle_s": 30},
        "resolve": {host: "127.0.0.1" for host in web.hosts},
        "resolve_only": True,
    }


def _demo_rest(cfg: CrawlConfig, cycles: list[str]) -> bool:
    """After the crawl, what a user of the UI would otherwise find never run: the dbt models
    (and their tests) over the lake, the tables' freshness checks and the WARC files of the
    last cycle, each a run submitted to the instance like the crawl's."""
    import dagster as dg

    from resources.dbt import DBT_JOB

    from ..definitions import FRESHNESS_JOB, WARC_JOB
    from ..launcher import (
        DBT_LOCATION,
        LOCATION,
        QUIET,
        Launcher,
        ensure_dagster_home,
        failure_message,
    )
    from ..partitions import crawl_partitions, partition_key

    home = ensure_dagster_home(cfg)
    tags = {"atlas/source": "atlas demo"}
    ok = True
    with dg.DagsterInstance.get() as instance, \
            Launcher(instance, home, cfg, (LOCATION, DBT_LOCATION)) as launcher:  # fmt: skip
        runs = {launcher.create_and_submit(FRESHNESS_JOB, tags, QUIET): FRESHNESS_JOB,
                launcher.create_and_submit(DBT_JOB, tags, QUIET, DBT_LOCATION): DBT_JOB}  # fmt: skip
        partitions = crawl_partitions(cfg.shards)
        for shard in range(cfg.shards) if cycles else ():
            key = partition_key(cycles[-1], shard)
            part = {**tags, **partitions.get_tags_for_partition_key(key)}
            runs[launcher.create_and_submit(WARC_JOB, part, QUIET)] = f"{WARC_JOB} {key}"
        for run in launcher.wait(list(runs)):
            done = run.status == dg.DagsterRunStatus.SUCCESS
            ok = ok and done
            print(f"{runs[run.run_id]}: run {run.run_id[:8]} "
                  + ("ok" if done else f"FAILED: {failure_message(instance, run)}"))  # fmt: skip
    return ok


def cmd_demo(args: argparse.Namespace) -> int:
    from atlas_sandbox import SandboxServer, SandboxWeb

    data_dir = Path(args.data_dir).resolve()
    if data_dir.exists():
        shutil.rmtree(data_dir)  # the sandbox port may differ per run: start from a clean crawl
    data_dir.mkdir(parents=True)
    port = _free_port(args.port)
    web = SandboxWeb(seed=7, generated_origins=DEMO_ORIGINS, pages_per_origin=DEMO_PAGES)
    with SandboxServer(web, port=port, log_path=data_dir / "sandbox-requests.jsonl") as server:
        config_path = data_dir / "atlas.yaml"
        config_path.write_text(yaml.safe_dump(demo_config(data_dir, server.port), sort_keys=False))
        cfg = load_config(config_path)
        print(
            f"Sandbox web: {len(web.hosts)} origins on 127.0.0.1:{server.port}; crawl config {config_path}"
        )
        crawled = _crawl(cfg, str(config_path), args.cycles, 0)
    ok, ran = crawled.ok, crawled.cycles
    print_summary(cfg, ran)
    ok = _demo_rest(cfg, ran) and ok
    print(f"\nSandbox request log: {data_dir / 'sandbox-requests.jsonl'}")
    print("Open the same results in the Dagster UI:")
    print(f"  DAGSTER_HOME={cfg.data_dir / 'dagster_home'} ATLAS_CONFIG={config_path} "
          f"{Path(sys.executable).parent / 'dagster'} dev -w workspace.yaml")  # fmt: skip
    return 0 if ok else 1
