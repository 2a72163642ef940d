"""Operator commands: `atlas pause`, `atlas resume`, `atlas set-policy`, `atlas optout`,
`atlas retention`."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from atlas_pipeline.config import ENV_CONFIG, load_config
from atlas_pipeline.errors import AtlasError


def run_job(args: argparse.Namespace, job: str, op: str, op_config: dict[str, Any]) -> Any:
    """Submit a run of the operator job `job` to the Dagster instance, as the UI's launchpad
    does, wait for it, and return its step output's metadata (values). A failed run raises
    with its step's own error."""
    import dagster as dg

    from ..launcher import QUIET, Launcher, ensure_dagster_home, failure_message
    from .common import _check_store

    cfg = load_config(args.config, dict(os.environ))
    config_path = str(Path(args.config).resolve()) if args.config else os.environ.get(ENV_CONFIG)
    if config_path:
        os.environ[ENV_CONFIG] = config_path  # the code location and the run load this config
    _check_store(cfg)
    home = ensure_dagster_home(cfg)
    tags = {"atlas/source": f"atlas {args.command}", "atlas/who": _who(args)}
    run_config = {"ops": {op: {"config": op_config}}, **QUIET}
    with dg.DagsterInstance.get() as instance, Launcher(instance, home, cfg) as launcher:
        run_id = launcher.create_and_submit(job, tags, run_config)
        run = next(launcher.wait([run_id]))
        if run.status != dg.DagsterRunStatus.SUCCESS:
            raise AtlasError(f"{job} run {run_id} {run.status.value.lower()}: "
                             f"{failure_message(instance, run)}")  # fmt: skip
        outputs = instance.get_records_for_run(
            run_id, of_type=dg.DagsterEventType.STEP_OUTPUT, limit=1
        ).records
    print(f"{job}: run {run_id} succeeded (listed under {job} in the Dagster UI)")
    event = outputs[0].event_log_entry.dagster_event if outputs else None
    data = event.step_output_data if event is not None else None
    return {k: v.value for k, v in (data.metadata if data is not None else {}).items()}


def cmd_pause(args: argparse.Namespace) -> int:
    """Pause or resume an origin or a registrable domain, audited with who and why."""
    from atlas_pipeline.crawl import Engine

    target = _target(args, domain_of_host=True)
    scope, value = target.scope, target.value
    pause = {"scope": scope, "value": value, "reason": args.reason, "who": _who(args)}
    if args.command == "pause":
        run_job(args, "pause_origin_job", "pause_origin", pause)
        print(f"paused {scope} {value}: no request from the next claim on ({args.reason})")
    elif run_job(args, "resume_origin_job", "resume_origin", pause).get("lifted"):
        print(f"resumed {scope} {value}")
    else:
        print(f"{scope} {value} was not paused")
    engine = Engine.from_config(load_config(args.config, dict(os.environ)))
    try:
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
    target = _target(args)
    report = run_job(args, "opt_out_job", "opt_out_target", {
        "scope": target.scope, "value": target.value, "reason": args.reason,
        "verification": args.verified_by, "who": _who(args)})  # fmt: skip
    lake_rows: dict[str, int] = report["lake_rows_deleted"]
    print(f"suppressed {target.scope} {target.value}: no request from now on")
    print(f"  removed {report['urls_removed']} URLs and {report['fetch_records_removed']} fetch "
          f"records from the store; lake rows deleted: {sum(lake_rows.values())} "
          f"({', '.join(f'{t} {n}' for t, n in lake_rows.items() if n)})")  # fmt: skip
    print(f"  {report['bodies_deleted']} bodies deleted; {report['tombstones_queued']} tombstones "
          "queued for the indexer (the index_delivery sensor sends them)")  # fmt: skip
    return 0


def cmd_set_policy(args: argparse.Namespace) -> int:
    """Set an origin's or domain's rate limits, priority or revisit bounds (a new version)."""
    from atlas_pipeline.coordination.operator import check_policy_change, policy_settings
    from atlas_pipeline.crawl import Engine

    target = _target(args)
    given = {"min_gap_s": args.min_gap_s, "max_in_flight": args.max_in_flight,
             "priority": args.priority, "revisit_min_s": args.revisit_min_s,
             "revisit_max_s": args.revisit_max_s}  # fmt: skip
    # checked here too, so that bad input fails in one line before any run is made
    check_policy_change(target.scope, policy_settings(given, args.unset or []), args.reason)
    op_config = {"scope": target.scope, "value": target.value, "reason": args.reason,
                 "who": _who(args), "unset": list(args.unset or []),
                 **{k: v for k, v in given.items() if v is not None}}  # fmt: skip
    version = run_job(args, "set_policy_job", "set_origin_policy", op_config)["version"]
    engine = Engine.from_config(load_config(args.config, dict(os.environ)))
    try:
        for o in engine.store.policy_overrides():
            print(f"  {o['scope']:<6} {o['value']}  v{o['version']}  {o['settings']}  "
                  f"by {o['who']}: {o['reason']}")  # fmt: skip
    finally:
        engine.close()
    print(f"{target.scope} {target.value}: policy version {version}")
    return 0


def cmd_retention(args: argparse.Namespace) -> int:
    r = run_job(args, "retention_job", "apply_retention", {"who": _who(args)})
    print(f"retention: {r['body_refs_expired']} body references expired, {r['bodies_deleted']} "
          f"bodies deleted ({r['mb_freed']:.1f} MB), {r['documents_deleted']} superseded "
          f"documents deleted, {r['suppressions_repurged']} suppressions purged again")  # fmt: skip
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
