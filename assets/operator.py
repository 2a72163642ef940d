"""Operator controls as Dagster jobs, launched from the UI's launchpad with their config and by
`atlas pause`, `resume`, `set-policy`, `optout` and `retention` (which submit these same jobs,
so both paths leave a run and cannot drift); every one is audited (who, when, why) in the
coordination store's operator_log."""

import time

import dagster as dg
from pydantic import Field

from atlas_pipeline.coordination.operator import policy_settings
from atlas_pipeline.coordination.overrides import POLICY_KEYS
from atlas_pipeline.optout import opt_out, target_of
from atlas_pipeline.retention import run_retention
from resources.config import AtlasCrawl


class PauseConfig(dg.Config):
    """An origin URL (scope origin) or a registrable domain (scope domain), and why."""

    scope: str = "origin"
    value: str
    reason: str
    who: str = "dagster"


class OptOutConfig(dg.Config):
    """A verified opt-out: origin URL, registrable domain or URL prefix."""

    scope: str = "origin"
    value: str
    reason: str
    verification: str
    who: str = "dagster"


class PolicyConfig(dg.Config):
    """Settings for an origin URL or a registrable domain; `unset` names settings to remove."""

    scope: str = "origin"
    value: str
    reason: str
    who: str = "dagster"
    min_gap_s: float | None = None
    max_in_flight: float | None = None
    priority: float | None = None
    revisit_min_s: float | None = None
    revisit_max_s: float | None = None
    unset: list[str] = Field(default_factory=list)


@dg.op
def set_origin_policy(
    context: dg.OpExecutionContext, config: PolicyConfig, atlas: AtlasCrawl
) -> dg.Output[None]:
    """Set rate limits, priority or revisit bounds for an origin or domain (a new version)."""
    target = target_of(config.scope, config.value)
    settings = policy_settings({k: getattr(config, k) for k in POLICY_KEYS}, config.unset)
    with atlas.open() as engine:
        version = engine.store.set_policy(target, settings, config.reason, config.who,
                                          time.time())  # fmt: skip
    context.log.info(f"{target.scope} {target.value}: policy v{version} {settings}")
    return dg.Output(
        None, metadata={"version": version, "target": f"{target.scope} {target.value}"}
    )


@dg.op
def pause_origin(
    context: dg.OpExecutionContext, config: PauseConfig, atlas: AtlasCrawl
) -> dg.Output[None]:
    """Pause: no claim of the origin (or the domain's origins) from the next one on."""
    target = target_of(config.scope, config.value)
    with atlas.open() as engine:
        engine.store.pause(target.scope, target.value, config.reason, config.who, time.time())
    context.log.info(f"paused {target.scope} {target.value}")
    return dg.Output(None, metadata={"target": f"{target.scope} {target.value}"})


@dg.op
def resume_origin(
    context: dg.OpExecutionContext, config: PauseConfig, atlas: AtlasCrawl
) -> dg.Output[None]:
    """Lift a pause."""
    target = target_of(config.scope, config.value)
    with atlas.open() as engine:
        lifted = engine.store.resume(
            target.scope, target.value, config.reason, config.who, time.time()
        )
    context.log.info(f"{'resumed' if lifted else 'was not paused:'} {target.scope} {target.value}")
    return dg.Output(None, metadata={"lifted": lifted, "target": f"{target.scope} {target.value}"})


@dg.op
def opt_out_target(
    context: dg.OpExecutionContext, config: OptOutConfig, atlas: AtlasCrawl
) -> dg.Output[None]:
    """Suppress the target and purge every trace of it (queue, records, lake, bodies), with
    tombstones queued for the indexer."""
    target = target_of(config.scope, config.value)
    with atlas.open() as engine:
        report = opt_out(engine, target, config.reason, config.verification, config.who)
    context.log.info(f"suppressed {target.scope} {target.value}; lake rows {report.lake_rows}")
    return dg.Output(
        None,
        metadata={
            "urls_removed": report.store.urls,
            "fetch_records_removed": report.store.records,
            "lake_rows_deleted": dg.MetadataValue.json(report.lake_rows),
            "bodies_deleted": report.bodies_deleted,
            "tombstones_queued": report.tombstones,
        },
    )


@dg.job(name="pause_origin_job", description="Pause an origin or a registrable domain.")
def pause_job() -> None:
    pause_origin()


@dg.job(name="resume_origin_job", description="Resume an origin or a registrable domain.")
def resume_job() -> None:
    resume_origin()


@dg.job(name="opt_out_job", description="Suppress and purge an origin, domain or URL prefix.")
def opt_out_job() -> None:
    opt_out_target()


@dg.job(name="set_policy_job", description="Rate limits, priority, revisit bounds of an origin.")
def set_policy_job() -> None:
    set_origin_policy()


class RetentionConfig(dg.Config):
    """Who applies it (the schedule's runs: dagster:retention_job)."""

    who: str = "dagster:retention_job"


@dg.op
def apply_retention(
    context: dg.OpExecutionContext, config: RetentionConfig, atlas: AtlasCrawl
) -> dg.Output[None]:
    """Expire raw bodies and superseded documents past their retention; purge suppressed
    targets again."""
    with atlas.open() as engine:
        report = run_retention(engine, who=config.who)
    return dg.Output(
        None,
        metadata={
            "body_refs_expired": report.body_refs_expired,
            "bodies_deleted": report.bodies_deleted,
            "mb_freed": round(report.bytes_freed / 1e6, 2),
            "documents_deleted": report.documents_deleted,
            "lake_rows_deleted": dg.MetadataValue.json(report.lake_rows),
            "suppressions_repurged": report.suppressions_repurged,
        },
    )


@dg.job(name="retention_job", description="Retention per data class (bodies, documents).")
def retention_job() -> None:
    apply_retention()


OPERATOR_JOBS = [pause_job, resume_job, opt_out_job, set_policy_job, retention_job]


def retention_schedule(cron: str) -> dg.ScheduleDefinition:
    return dg.ScheduleDefinition(
        name="retention_schedule", cron_schedule=cron, job=retention_job,
        description="Runs the retention job on retention.cron.",
    )  # fmt: skip
