"""The `atlas` command: `atlas web`, `atlas canary`, `atlas indexer`, `atlas crawl`, `atlas demo`,
`atlas config`."""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

import yaml

from atlas_pipeline.config import CrawlConfig, dump_config, load_config
from atlas_pipeline.errors import AtlasError, ConfigError

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

    if args.canary_port is not None and not args.hostile:
        raise AtlasError("--canary-port only means something with --hostile")
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
                  changing=args.changing, directives=args.directives)  # fmt: skip
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


def _check_store(cfg: CrawlConfig) -> None:
    from atlas_pipeline.crawl import Engine

    Engine.from_config(cfg).close()  # an unreachable store fails here, in one line


def _crawl(cfg: CrawlConfig, config_path: str, cycles: int, parallel: int) -> bool:
    import dagster as dg

    from .runner import ensure_dagster_home, run_cycles

    _check_store(cfg)
    home = ensure_dagster_home(cfg)
    os.environ["ATLAS_CONFIG"] = config_path  # the code location and its runs load this config
    print(f"Dagster instance: {home}")
    ok = True

    def report(cycle: str, runs: list) -> None:  # type: ignore[type-arg]
        nonlocal ok
        for run in runs:
            status = "ok" if run.success else f"FAILED: {run.error}"
            ok = ok and run.success
            print(f"  {cycle} shard_{run.shard:03d}  run {run.run_id[:8]}  {status}")

    def unfinished(pending: list[tuple[str, int]]) -> None:
        if pending:
            names = ", ".join(f"{c} shard_{s:03d}" for c, s in pending)
            print(f"Finishing {len(pending)} partition(s) an earlier crawl left unfinished "
                  f"first: {names}")  # fmt: skip

    with dg.DagsterInstance.get() as instance, CycleProgress(cfg) as progress:
        started = time.time()
        runs = run_cycles(cfg, home, cycles, instance, parallel, on_cycle=report,
                          on_start=progress.start, on_unfinished=unfinished)  # fmt: skip
        progress.stop()
        print(f"{cycles} new cycle(s) x {cfg.shards} shard(s), {len(runs)} run(s) in "
              f"{time.time() - started:.1f} s")  # fmt: skip
    return ok


def show_progress() -> bool:
    """Bars on a terminal, or when ATLAS_PROGRESS=1 asks for them (logs, tests)."""
    return sys.stderr.isatty() or os.environ.get("ATLAS_PROGRESS") == "1"


def bar(total: int, desc: str, unit: str) -> Any:
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, disable=not show_progress(),
                file=sys.stderr, dynamic_ncols=True, mininterval=0.5)  # fmt: skip


class CycleProgress:
    """A bar per cycle: URLs of the cycle done against URLs queued for it (the total grows as
    links come in), read from the coordination store twice a second, with rate and ETA."""

    def __init__(self, cfg: CrawlConfig) -> None:
        self.cfg = cfg
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> CycleProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self, cycle: str) -> None:
        self.stop()
        if not show_progress():
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, args=(cycle,), daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join(5)
            self._thread = None

    def _run(self, cycle: str) -> None:
        from atlas_pipeline.crawl import Engine

        engine: Engine | None = None
        progress = bar(0, f"cycle {cycle}", "url")
        try:
            while True:
                # A store that stops answering stops the bar, not the crawl's own runs (they
                # have their own outage rules): say so and keep asking.
                try:
                    engine = engine or Engine.from_config(self.cfg)
                    done, total = engine.store.cycle_progress(cycle)
                except AtlasError as exc:
                    progress.set_postfix_str(f"store unreachable, retrying ({exc})"[:120])
                    if engine is not None:
                        with contextlib.suppress(Exception):
                            engine.close()
                    engine = None
                else:
                    progress.total = max(total, done)
                    progress.n = done
                    progress.set_postfix_str("")
                progress.refresh()
                if self._stop.wait(0.5):
                    break
        finally:
            progress.close()
            if engine is not None:
                engine.close()


def cmd_crawl(args: argparse.Namespace) -> int:
    cfg = load_config(args.config, dict(os.environ))
    config_path = (
        str(Path(args.config).resolve()) if args.config else os.environ.get("ATLAS_CONFIG")
    )
    if config_path is None:
        raise AtlasError("atlas crawl needs --config FILE (or $ATLAS_CONFIG)")
    ok = _crawl(cfg, config_path, 0 if args.resume else args.cycles, args.parallel)
    print_summary(cfg)
    if not ok:
        return 1
    return _seeds_reached(cfg)


def _seeds_reached(cfg: CrawlConfig) -> int:
    """1, with one line saying why, when the runs succeeded but no seed was ever fetched."""
    from atlas_pipeline.crawl import Engine, unreached_seeds

    engine = Engine.from_config(cfg)
    try:
        unreached = unreached_seeds(engine)
    finally:
        engine.close()
    if not unreached:
        return 0
    shown = "; ".join(f"{seed} ({why})" for seed, why in unreached[:5])
    more = f"; and {len(unreached) - 5} more" if len(unreached) > 5 else ""
    print(f"atlas: no seed could be fetched: {shown}{more}. Check the seeds, the network and "
          "the sites' robots.txt (atlas inspect URL shows each attempt)", file=sys.stderr)  # fmt: skip
    return 1


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
        ok = _crawl(cfg, str(config_path), args.cycles, 0)
    print_summary(cfg)
    print(f"\nSandbox request log: {data_dir / 'sandbox-requests.jsonl'}")
    print("Open the same results in the Dagster UI:")
    print(f"  DAGSTER_HOME={cfg.data_dir / 'dagster_home'} ATLAS_CONFIG={config_path} "
          f"{Path(sys.executable).parent / 'dagster'} dev -w workspace.yaml")  # fmt: skip
    return 0 if ok else 1


def print_summary(cfg: CrawlConfig) -> None:
    import polars as pl

    from atlas_pipeline.lake import SCHEMAS, Lake

    lake = Lake(cfg.lake_path)
    fetches, docs, links, urls = (lake.read(t) for t in ("fetches", "documents", "links", "urls"))
    pages = fetches.filter(pl.col("kind") == "page")
    print("\nPages fetched per origin (all cycles):")
    per_origin = pages.group_by("origin").agg(
        pl.len().alias("requests"), (pl.col("reason") == "fetched").sum().alias("documents")
    )
    for row in per_origin.sort("origin").iter_rows(named=True):
        print(
            f"  {row['origin']:<42} {row['requests']:>5} requests  {row['documents']:>5} documents"
        )
    print(f"\nDocuments: {docs.height}   links: {links.height}   URLs known: {urls.height}")
    for name, df in (("fetches", fetches), ("links", links), ("urls", urls)):
        counts = df.group_by("reason").len().sort("len", descending=True)
        text = ", ".join(f"{r}={n}" for r, n in counts.iter_rows())
        print(f"Reason codes ({name}): {text}")
    print("\nDelta tables (read with polars.read_delta):")
    for table in SCHEMAS:
        if lake.exists(table):
            print(f"  {lake.uri(table)}")
    reports = cfg.lake_path / "reports"
    if reports.exists():
        print(f"Crawl reports (HTML, one per cycle and shard): {reports}")


def cmd_config(args: argparse.Namespace) -> int:
    cfg = load_config(args.config, dict(os.environ))
    print(dump_config(cfg), end="")
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


def cmd_pause(args: argparse.Namespace) -> int:
    """Pause or resume an origin or a registrable domain, audited with who and why."""
    from atlas_pipeline.crawl import Engine

    cfg = load_config(args.config, dict(os.environ))
    target = _target(args, domain_of_host=True)
    scope, value, who = target.scope, target.value, _who(args)
    engine = Engine.from_config(cfg)
    try:
        if args.command == "pause":
            engine.store.pause(scope, value, args.reason, who, time.time())
            print(f"paused {scope} {value}: no request from the next claim on ({args.reason})")
        elif engine.store.resume(scope, value, args.reason, who, time.time()):
            print(f"resumed {scope} {value}")
        else:
            print(f"{scope} {value} was not paused")
        for p in engine.store.pauses():
            print(f"  paused {p['scope']:<6} {p['value']}  by {p['who']}: {p['reason']}")
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


def _target(args: argparse.Namespace, domain_of_host: bool = False) -> Any:
    """The operator's target; with `domain_of_host`, a host name stands for its registrable
    domain (a pause), else it must be one (an opt-out or a policy is never wider than asked)."""
    from atlas_pipeline.optout import target_of
    from atlas_pipeline.urls import registrable_domain

    if args.domain and domain_of_host:
        return target_of("domain", registrable_domain(args.domain.strip().lower()))
    if getattr(args, "prefix", None):
        return target_of("prefix", args.prefix)
    return target_of("origin", args.origin) if args.origin else target_of("domain", args.domain)


def _who(args: argparse.Namespace) -> str:
    return str(args.who or os.environ.get("USER") or "unknown")


def cmd_optout(args: argparse.Namespace) -> int:
    """Suppress an origin, domain or URL prefix and purge everything of it, audited."""
    from atlas_pipeline.crawl import Engine
    from atlas_pipeline.optout import STEPS, opt_out

    cfg = load_config(args.config, dict(os.environ))
    target = _target(args)
    engine = Engine.from_config(cfg)
    try:
        with bar(STEPS, f"opt-out {target.value}", "step") as progress:
            report = opt_out(engine, target, args.reason, args.verified_by, _who(args),
                             on_step=lambda name: (progress.set_postfix_str(name),
                                                   progress.update(1)))  # fmt: skip
    finally:
        engine.close()
    print(f"suppressed {target.scope} {target.value}: no request from now on")
    print(f"  removed {report.store.urls} URLs and {report.store.records} fetch records from the "
          f"store; lake rows deleted: {sum(report.lake_rows.values())} "
          f"({', '.join(f'{t} {n}' for t, n in report.lake_rows.items() if n)})")  # fmt: skip
    print(f"  {report.bodies_deleted} bodies deleted; {report.tombstones} tombstones queued for "
          "the indexer (the index_delivery sensor sends them)")  # fmt: skip
    return 0


def cmd_set_policy(args: argparse.Namespace) -> int:
    """Set an origin's or domain's rate limits, priority or revisit bounds (a new version)."""
    from atlas_pipeline.crawl import Engine

    cfg = load_config(args.config, dict(os.environ))
    target = _target(args)
    given = {"min_gap_s": args.min_gap_s, "max_in_flight": args.max_in_flight,
             "priority": args.priority, "revisit_min_s": args.revisit_min_s,
             "revisit_max_s": args.revisit_max_s}  # fmt: skip
    settings = {k: v for k, v in given.items() if v is not None}
    settings.update(dict.fromkeys(args.unset or [], None))
    if not settings:
        raise ConfigError("nothing to set: give --min-gap-s, --max-in-flight, --priority, "
                          "--revisit-min-s, --revisit-max-s or --unset KEY")  # fmt: skip
    engine = Engine.from_config(cfg)
    try:
        version = engine.store.set_policy(target, settings, args.reason, _who(args), time.time())
        for o in engine.store.policy_overrides():
            print(f"  {o['scope']:<6} {o['value']}  v{o['version']}  {o['settings']}  "
                  f"by {o['who']}: {o['reason']}")  # fmt: skip
    finally:
        engine.close()
    print(f"{target.scope} {target.value}: policy version {version}")
    return 0


def cmd_retention(args: argparse.Namespace) -> int:
    from atlas_pipeline.crawl import Engine
    from atlas_pipeline.retention import run_retention

    cfg = load_config(args.config, dict(os.environ))
    engine = Engine.from_config(cfg)
    try:
        r = run_retention(engine, who=_who(args))
    finally:
        engine.close()
    print(f"retention: {r.body_refs_expired} body references expired, {r.bodies_deleted} bodies "
          f"deleted ({r.bytes_freed / 1e6:.1f} MB), {r.documents_deleted} superseded documents "
          f"deleted, {r.suppressions_repurged} suppressions purged again")  # fmt: skip
    return 0


def _operator_args(cmd: argparse.ArgumentParser, prefix: bool = False) -> None:
    """--config, the target (an origin, a registrable domain, maybe a URL prefix) and --who."""
    cmd.add_argument("--config", help="crawl config YAML (default $ATLAS_CONFIG)")
    where = cmd.add_mutually_exclusive_group(required=True)
    where.add_argument("--origin", help="a URL of the origin, e.g. https://example.com/")
    where.add_argument("--domain", help="a registrable domain, e.g. example.com")
    if prefix:
        where.add_argument("--prefix", help="a URL prefix, e.g. https://example.com/private/")
    cmd.add_argument("--who", help="operator name (default $USER)")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="atlas", description="Atlas: a polite, durable web crawler on Dagster."
    )
    sub = p.add_subparsers(dest="command", required=True)
    web = sub.add_parser("web", help="serve the sandbox web on loopback")
    web.add_argument("--port", type=int, default=8080)
    web.add_argument("--seed", type=int, default=7)
    web.add_argument(
        "--origins", type=int, default=5, help="generated origins besides the three publishers"
    )
    web.add_argument("--pages", type=int, default=40, help="pages per origin")
    web.add_argument("--page-kb", type=int, nargs=2, default=[20, 100], metavar=("LO", "HI"),
                     help="page size range in KB")  # fmt: skip
    web.add_argument("--log", help="JSON-lines request log file")
    web.add_argument("--lab", action="store_true",
                     help="politeness lab: site-001..006 misbehave (robots 503/404/301, 429, "
                          "slow, Crawl-delay); needs --origins 6 or more")  # fmt: skip
    web.add_argument("--hostile", action="store_true",
                     help="also serve the hostile origins (bombs., redirects., links.example.test):"
                          " gzip bomb, huge, drip, binary, SSRF redirects and links")  # fmt: skip
    web.add_argument("--canary-port", type=int,
                     help="port of the canary the hostile pages point at (with --hostile; "
                          "default: the default port of `atlas canary`)")  # fmt: skip
    web.add_argument("--traps", action="store_true",
                     help="also serve the trap origins (calendar., shop., feeds.example.test): "
                          "endless calendar and pagination, facets, session ids, tracking "
                          "parameters, URL spellings, base href, sitemap-only pages")  # fmt: skip
    web.add_argument("--trap-scale", type=int, metavar="N",
                     help="multiply every trap's extent by N (with --traps; default 1)")  # fmt: skip
    web.add_argument("--dupes", action="store_true",
                     help="also serve the duplicate-content origin (dupes.example.test): print "
                          "twins, near-duplicate live pages, corrected articles, canonical "
                          "claims")  # fmt: skip
    web.add_argument("--changing", action="store_true",
                     help="also serve the changing-content origins (rates., etag-churn., "
                          "no-conditional.example.test): pages changing every, every 4th or no "
                          "generation, ETags that change on every response, conditional headers "
                          "ignored; SIGUSR1 advances the generation")  # fmt: skip
    web.add_argument("--directives", action="store_true",
                     help="also serve the robots-directive origin (directives.example.test): "
                          "<meta name=robots|atlasbot> and X-Robots-Tag noindex / nofollow / "
                          "none, for us and for another bot; SIGUSR1 turns one page noindex")  # fmt: skip
    web.set_defaults(func=cmd_web)
    canary = sub.add_parser("canary", help="record every hit on a loopback port (SSRF canary)")
    canary.add_argument(
        "--port",
        type=int,
        help="port (0: any free port; default: the port `atlas web --hostile` points at)",
    )
    canary.add_argument("--log", help="JSON-lines hit log file")
    canary.set_defaults(func=cmd_canary)
    indexer = sub.add_parser(
        "indexer", help="a test indexer on loopback: stores delivered events, counts duplicates"
    )
    indexer.add_argument(
        "--store", required=True, help="JSON-lines event store (read back on start)"
    )
    indexer.add_argument("--port", type=int,
                         help="port (0: any free port; default: 8090)")  # fmt: skip
    indexer.add_argument("--fail-after", type=int, metavar="N",
                         help="cut delivery after N accepted batches: every later POST /events "
                              "fails (see --fail-mode) until restart")  # fmt: skip
    indexer.add_argument("--fail-mode", choices=("503", "close"),
                         help="with --fail-after: '503' refuses the batch and stores nothing "
                              "(default); 'close' stores it, then drops the connection "
                              "unanswered")  # fmt: skip
    indexer.set_defaults(func=cmd_indexer)
    crawl = sub.add_parser("crawl", help="add cycle partitions and materialize them")
    crawl.add_argument("--config", help="crawl config YAML (default $ATLAS_CONFIG)")
    crawl.add_argument("--cycles", type=int, default=1,
                       help="new cycles to add, after any an earlier crawl left unfinished")  # fmt: skip
    crawl.add_argument("--resume", action="store_true",
                       help="only finish what an earlier crawl left unfinished (--cycles 0)")  # fmt: skip
    crawl.add_argument(
        "--parallel", type=int, default=0, help="shard runs at once (default: all shards)"
    )
    crawl.set_defaults(func=cmd_crawl)
    demo = sub.add_parser("demo", help="start the sandbox web and crawl it for 3 cycles")
    demo.add_argument("--data-dir", default="atlas_data/demo")
    demo.add_argument("--port", type=int, default=8080)
    demo.add_argument("--cycles", type=int, default=DEMO_CYCLES)
    demo.set_defaults(func=cmd_demo)
    config = sub.add_parser("config", help="validate a crawl config and print every key")
    config.add_argument("--config", help="crawl config YAML (default $ATLAS_CONFIG)")
    config.set_defaults(func=cmd_config)
    sweep = sub.add_parser(
        "sweep-bodies", help="delete stored bodies that no committed fetch references"
    )
    sweep.add_argument("--config", help="crawl config YAML (default $ATLAS_CONFIG)")
    sweep.add_argument(
        "--grace-hours", type=float, default=24.0, help="keep bodies put more recently than this"
    )
    sweep.set_defaults(func=cmd_sweep_bodies)
    again = sub.add_parser(
        "reextract", help="rebuild documents from stored bodies (no request goes out)"
    )
    again.add_argument("--config", help="crawl config YAML (default $ATLAS_CONFIG)")
    again.add_argument("--cycle", required=True, help="the crawl cycle, e.g. c0001")
    again.add_argument("--shard", type=int, help="one shard (default: every shard)")
    again.set_defaults(func=cmd_reextract)
    for name, text in (("pause", "stop crawling an origin or registrable domain"),
                       ("resume", "lift a pause")):  # fmt: skip
        cmd = sub.add_parser(name, help=text)
        _operator_args(cmd)
        cmd.add_argument("--reason", required=True, help="why (kept in the audit log)")
        cmd.set_defaults(func=cmd_pause)
    optout = sub.add_parser(
        "optout", help="suppress an origin, domain or URL prefix and purge its data (audited)"
    )
    _operator_args(optout, prefix=True)
    optout.add_argument("--reason", required=True, help="the request (kept in the audit log)")
    optout.add_argument("--verified-by", required=True,
                        help="how the request was verified, e.g. 'DNS TXT record, ticket 42'")  # fmt: skip
    optout.set_defaults(func=cmd_optout)
    policy = sub.add_parser(
        "set-policy", help="rate limits, priority or revisit bounds of an origin or domain"
    )
    _operator_args(policy)
    policy.add_argument("--min-gap-s", type=float, help="floor on seconds between requests")
    policy.add_argument("--max-in-flight", type=float, help="concurrent requests at most")
    policy.add_argument("--priority", type=float, help="0..1, for its URLs now and later")
    policy.add_argument("--revisit-min-s", type=float, help="shortest revisit interval")
    policy.add_argument("--revisit-max-s", type=float, help="longest revisit interval")
    policy.add_argument("--unset", action="append", metavar="KEY",
                        help="remove a setting (repeatable), e.g. --unset priority")  # fmt: skip
    policy.add_argument("--reason", required=True, help="why (kept in the audit log)")
    policy.set_defaults(func=cmd_set_policy)
    retention = sub.add_parser(
        "retention", help="apply retention per data class now (the retention_job does it daily)"
    )
    retention.add_argument("--config", help="crawl config YAML (default $ATLAS_CONFIG)")
    retention.add_argument("--who", help="operator name (default $USER)")
    retention.set_defaults(func=cmd_retention)
    inspect = sub.add_parser(
        "inspect", help="explain a URL: discovery, state, fetches, robots, documents, events"
    )
    inspect.add_argument("url", help="the URL, in any spelling (it is normalized)")
    inspect.add_argument("--config", help="crawl config YAML (default $ATLAS_CONFIG)")
    inspect.add_argument("--json", action="store_true", help="print JSON instead of text")
    inspect.add_argument("--limit", type=int, default=20,
                         help="rows of a long list shown in the text report (default 20)")  # fmt: skip
    inspect.set_defaults(func=cmd_inspect)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return int(args.func(args))
    except AtlasError as exc:
        print(f"atlas: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
