"""Operator commands: `atlas pause`, `atlas resume`, `atlas set-policy`, `atlas optout`,
`atlas retention`."""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

from atlas_pipeline.config import load_config
from atlas_pipeline.errors import ConfigError

from .common import bar


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
