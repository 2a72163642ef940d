"""Submit crawl runs to the Dagster instance the way the UI, schedules and sensors do.

`atlas crawl` is a client of the instance, not a run launcher of its own: it loads the code
location once (a gRPC code server it keeps running while its runs go), creates each shard's
run from that location's job snapshot (so the run has a job origin: the UI lists it under its
job and can re-execute it) and hands it to the instance's run coordinator. With the queued
coordinator, Dagster's default, a dagster-daemon dequeues runs under `dagster.yaml`'s limits and
the run launcher starts them; when no daemon serves the instance, `atlas crawl` runs the
daemon's run-queue loop itself for as long as it waits (one atlas process per instance at a
time, under a lock; the others wait on it and take over when it ends). A Dagster run costs 0.6-9 s of overhead, so a run covers a whole shard of a
cycle. Politeness never depends on how many runs go at once: it lives in the coordination store.

Why private Dagster modules: Dagster's only public way to submit a run from Python is the
GraphQL client, which needs a webserver; these are the calls `dagster job launch` makes
(`dagster._cli.job`) and the loop of `dagster-daemon`'s run queue, kept to this module.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg
import yaml
from dagster._core.run_coordinator.queued_run_coordinator import QueuedRunCoordinator
from dagster._core.workspace.context import WorkspaceProcessContext
from dagster._core.workspace.load_target import CompositeTarget, ModuleTarget
from dagster._daemon.run_coordinator.queued_run_coordinator_daemon import (
    QueuedRunCoordinatorDaemon,
)

from atlas_pipeline.config import ENV_SET, CrawlConfig
from atlas_pipeline.errors import AtlasError

from .ctrl_c import CtrlC
from .partitions import crawl_partitions, partition_key
from .sensors import IN_PROGRESS

LOCATION = "atlas"  # the crawl's code location, named so in the repository's workspace.yaml too
DEFINITIONS_MODULE = "assets.definitions"
DBT_LOCATION = "atlas_dbt"
# each location's module, as workspace.yaml loads them
LOCATIONS = {LOCATION: DEFINITIONS_MODULE, DBT_LOCATION: "assets.dbt_definitions"}
SHARD_TAG = "dagster/partition/origin_shard"
FETCH_POOL = "atlas_fetch"
DAEMON_HEARTBEAT_TOLERANCE_S = 60.0
POLL_S = 0.5
# Events still go to the instance (and the UI); the terminal gets the runs' warnings only.
QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
FINISHED = {
    dg.DagsterRunStatus.SUCCESS,
    dg.DagsterRunStatus.FAILURE,
    dg.DagsterRunStatus.CANCELED,
}


def dagster_yaml(cfg: CrawlConfig) -> dict[str, Any]:
    """The embedded default instance: SQLite storage under the home, telemetry off, the queued
    run coordinator (checked every second) with one run per origin shard at a time, and as many
    fetch steps at once as there are shards (the `atlas_fetch` pool)."""
    return {
        "telemetry": {"enabled": False},
        "run_queue": {"dequeue_interval_seconds": 1},
        "concurrency": {
            "runs": {
                "tag_concurrency_limits": [
                    {"key": SHARD_TAG, "value": {"applyLimitPerUniqueValue": True}, "limit": 1}
                ]
            },
            "pools": {"default_limit": max(cfg.shards, 1)},
        },
    }


def ensure_dagster_home(cfg: CrawlConfig) -> Path:
    """$DAGSTER_HOME if set, else <data_dir>/dagster_home. Writes dagster.yaml (the embedded
    default above) when it is absent; one already there is the operator's and stays as it is."""
    home = Path(os.environ.get("DAGSTER_HOME") or cfg.data_dir / "dagster_home").resolve()
    home.mkdir(parents=True, exist_ok=True)
    path = home / "dagster.yaml"
    if not path.exists():
        path.write_text(yaml.safe_dump(dagster_yaml(cfg), sort_keys=False))
    os.environ["DAGSTER_HOME"] = str(home)
    return home


@dataclass(frozen=True)
class ShardRun:
    cycle: str
    shard: int
    run_id: str
    success: bool
    error: str | None
    status: str = ""
    stopped: bool = False  # ended by a stop condition of the crawl, not by a failure


class StopRequested(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Launcher:
    """Loads the code location, serves the run queue while it waits unless a daemon does,
    creates and submits shard runs, and waits for them."""

    def __init__(self, instance: dg.DagsterInstance, home: Path, cfg: CrawlConfig,
                 locations: tuple[str, ...] = (LOCATION,)) -> None:  # fmt: skip
        """`locations`: the code locations to load; the crawl's alone unless runs of the dbt
        location are submitted too (importing dbt costs its code server about 1.2 s)."""
        self.locations = locations
        self.instance = instance
        self.home = home
        self.cfg = cfg
        self._stack = ExitStack()
        self._workspace: Any = None
        self._stop = threading.Event()
        self._dequeuer: threading.Thread | None = None
        self._stack_has_lock = False
        self._serve = False
        self._process: Any = None
        self.queue_failure: str | None = None
        self.ctrl_c = CtrlC()  # installed while the launcher is entered

    def __enter__(self) -> Launcher:
        try:
            self._enter()
        except BaseException:
            self._stack.close()
            raise
        return self

    def _enter(self) -> None:
        self._stack.enter_context(self.ctrl_c)
        self._queue_lock = self.home / "atlas-run-queue.lock"
        self._serve = self._no_daemon()
        if self._serve and self._take_queue():
            # this process serves the queue from the start: whatever an earlier atlas process
            # left queued or started is dead (the lock was free)
            abandon_unfinished_runs(self.instance)
        targets = [ModuleTarget(LOCATIONS[name], None, None, name) for name in self.locations]
        self._process = self._stack.enter_context(
            WorkspaceProcessContext(
                self.instance,
                targets[0] if len(targets) == 1 else CompositeTarget(targets=targets),
                code_server_log_level="WARNING",
            )
        )
        self._workspace = self._process.create_request_context()
        for name in self.locations:
            error = self._workspace.get_code_location_error(name)
            if error is not None:
                raise AtlasError(f"the code location {name!r} did not load: {error.message}")
        self._start_serving()

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._dequeuer is not None:
            self._dequeuer.join(30)
        self._stack.close()

    # -- the run queue ----------------------------------------------------------------------

    def _no_daemon(self) -> bool:
        """True when runs would sit in the queue with nobody to take them: the instance queues
        runs and no dagster-daemon has sent a heartbeat lately."""
        if not isinstance(self.instance.run_coordinator, QueuedRunCoordinator):
            return False
        beat = self.instance.get_daemon_heartbeats().get(QueuedRunCoordinatorDaemon.daemon_type())
        return beat is None or time.time() - beat.timestamp > DAEMON_HEARTBEAT_TOLERANCE_S

    def _take_queue(self) -> bool:
        """The instance's queue lock, if no other atlas process holds it: one process serves
        the queue (launching every queued run, its own and those of any atlas command waiting
        beside it, such as `atlas pause` during a crawl); the others wait on it and take over
        when it ends."""
        if self._stack_has_lock:
            return True
        handle = self._queue_lock.open("a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            return False
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()}")
        handle.flush()
        self._stack.callback(handle.close)  # closing the file releases the lock
        self._stack_has_lock = True
        return True

    def _start_serving(self) -> None:
        if self._serve and self._dequeuer is None and self._take_queue():
            self._dequeuer = threading.Thread(target=self._dequeue, args=(self._process,),
                                              name="atlas-run-queue", daemon=True)  # fmt: skip
            self._dequeuer.start()

    def _dequeue(self, process: WorkspaceProcessContext) -> None:
        """What dagster-daemon's run-queue daemon does, in this process: launch queued runs as
        dagster.yaml's limits allow, every dequeue interval."""
        coordinator = self.instance.run_coordinator
        assert isinstance(coordinator, QueuedRunCoordinator)
        interval = float(coordinator.dequeue_interval_seconds)
        try:
            with QueuedRunCoordinatorDaemon(interval_seconds=interval) as daemon:
                while not self._stop.is_set():
                    # a run that cannot be launched is marked failed, with the error, by
                    # the iteration itself: what it yields is only for the daemon's log
                    for _ in daemon.run_iteration(process):
                        pass
                    self._stop.wait(interval)
        except Exception as exc:  # the waiting crawl raises it: runs would never leave the queue
            self.queue_failure = f"the run queue stopped: {type(exc).__name__}: {exc}"

    # -- runs -------------------------------------------------------------------------------

    def submit(self, job_name: str, cycle: str, shard: int) -> str:
        """Create the run of partition (cycle, shard) from the location's snapshot and submit it."""
        key = partition_key(cycle, shard)
        tags = {**crawl_partitions(self.cfg.shards).get_tags_for_partition_key(key),
                "atlas/cycle": cycle, "atlas/source": "atlas crawl"}  # fmt: skip
        if os.environ.get(ENV_SET):  # what a re-execution from the UI would not have
            tags["atlas/set"] = os.environ[ENV_SET]
        return self.create_and_submit(job_name, tags, QUIET)

    def create_and_submit(self, job_name: str, tags: Mapping[str, str],
                          run_config: Mapping[str, Any] | None = None,
                          location_name: str = LOCATION) -> str:  # fmt: skip
        from dagster._core.definitions.selector import JobSubsetSelector

        location = self._workspace.get_code_location(location_name)
        (repository_name,) = location.get_repository_names()
        repo = location.get_repository(repository_name)
        job = location.get_job(JobSubsetSelector(location_name=location_name,
            repository_name=repository_name, job_name=job_name, op_selection=None))  # fmt: skip
        config = dict(run_config or {})
        plan = location.get_execution_plan(job, config, step_keys_to_execute=None,
                                           known_state=None, instance=self.instance)  # fmt: skip
        run = self.instance.create_run(
            job_name=job_name,
            run_id=None,
            run_config=config,
            resolved_op_selection=None,
            step_keys_to_execute=plan.execution_plan_snapshot.step_keys_to_execute,
            op_selection=None,
            status=None,
            root_run_id=None,
            parent_run_id=None,
            tags={**job.tags, **tags},
            job_snapshot=job.job_snapshot,
            execution_plan_snapshot=plan.execution_plan_snapshot,
            parent_job_snapshot=job.parent_job_snapshot,
            remote_job_origin=job.get_remote_origin(),
            job_code_origin=job.get_python_origin(),
            asset_selection=None,
            asset_check_selection=None,
            asset_graph=repo.asset_graph,
        )
        self.instance.submit_run(run.run_id, self._workspace)
        return run.run_id

    def wait(
        self, run_ids: list[str], tick: Callable[[], str | None] | None = None
    ) -> Iterator[dg.DagsterRun]:
        """Yield each run as it finishes; `tick`, asked while waiting, raises StopRequested
        with the reason it returns. A Ctrl-C comes out of it as KeyboardInterrupt."""
        waiting = list(run_ids)
        while waiting:
            self.ctrl_c.raise_pending()  # one a finalizer swallowed (ctrl_c.py)
            if tick is not None and (reason := tick()) is not None:
                raise StopRequested(reason)
            for run_id in list(waiting):
                run = self.instance.get_run_by_id(run_id)
                if run is not None and run.status in FINISHED:
                    waiting.remove(run_id)
                    if run.status != dg.DagsterRunStatus.SUCCESS:
                        free_slots_of_finished_runs(self.instance)
                    yield run
            if waiting:
                if self.queue_failure is not None:
                    raise AtlasError(self.queue_failure)
                self._start_serving()  # the process that served the queue may have ended
                time.sleep(POLL_S)

    def cancel(self, run_ids: list[str], started_too: bool = False) -> None:
        """Take runs that have not started off the queue (after a Ctrl-C, which the started
        ones got too); with `started_too`, also ask the started ones to stop, through their
        run launcher: the run worker gets a SIGINT, which a fetch batch handles like Ctrl-C."""
        for run_id in run_ids:
            run = self.instance.get_run_by_id(run_id)
            if run is None or run.status in FINISHED:
                continue
            if started_too or run.status in (dg.DagsterRunStatus.QUEUED,
                                             dg.DagsterRunStatus.NOT_STARTED):  # fmt: skip
                self.instance.run_coordinator.cancel_run(run_id)

    def outcome(self, run: dg.DagsterRun, cycle: str, shard: int) -> ShardRun:
        success = run.status == dg.DagsterRunStatus.SUCCESS
        return ShardRun(cycle, shard, run.run_id, success,
                        None if success else failure_message(self.instance, run),
                        run.status.value)  # fmt: skip


def failure_message(instance: dg.DagsterInstance, run: dg.DagsterRun) -> str:
    """The first step failure's own message (a readable one, such as a store outage's), else
    the run's failure or cancellation."""
    for kind in (dg.DagsterEventType.STEP_FAILURE, dg.DagsterEventType.RUN_FAILURE,
                 dg.DagsterEventType.RUN_CANCELED):  # fmt: skip
        records = instance.get_records_for_run(run.run_id, of_type=kind, limit=1).records
        for record in records:
            event = record.event_log_entry.dagster_event
            if event is None:
                continue
            data = getattr(event.event_specific_data, "error", None)
            description = getattr(event.event_specific_data, "user_failure_data", None)
            if description is not None and description.description:
                return str(description.description)
            if data is not None:
                return f"{data.cls_name}: {data.message.strip()}"
            return event.message or str(kind.value)
    return f"run {run.status.value.lower()}"


def abandon_unfinished_runs(instance: dg.DagsterInstance) -> list[str]:
    """Runs a killed crawl left queued or started. Only called when this process took the
    instance's queue lock free and no daemon serves it, so none of them can still be running; left
    alone, they would count against the queue's limit for their shard and their fetch steps
    would keep their `atlas_fetch` pool slots, forever (dagster-daemon's run monitoring does
    the same for runs it finds dead). Their partitions are finished again by
    `unfinished_partitions`, from the coordination store's own record."""
    runs = instance.get_runs(dg.RunsFilter(statuses=IN_PROGRESS))
    for run in runs:
        if run.status == dg.DagsterRunStatus.QUEUED:
            instance.report_run_canceled(run, message="left queued by an atlas crawl that stopped")
        else:
            instance.report_run_failed(
                run, message="left unfinished by an atlas crawl that stopped (killed?); "
                "the next atlas crawl finishes its partition")  # fmt: skip
        instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
    free_slots_of_finished_runs(instance)
    return [r.run_id for r in runs]


def free_slots_of_finished_runs(instance: dg.DagsterInstance) -> int:
    """Give back `atlas_fetch` pool slots that finished runs still hold. A run worker killed
    in its fetch step (a crash, the OOM killer) is marked failed by its code server but keeps
    its slot, and with `pools.default_limit` slots that shard's next fetch would wait forever;
    dagster-daemon's run monitoring frees them where a daemon runs."""
    storage = instance.event_log_storage
    if not storage.supports_global_concurrency_limits:
        return 0
    info = storage.get_concurrency_info(FETCH_POOL)
    holders = {s.run_id for s in info.claimed_slots} | {p.run_id for p in info.pending_steps}
    freed = 0
    for run_id in holders:
        run = instance.get_run_by_id(run_id)
        if run is None or run.status in FINISHED:
            storage.free_concurrency_slots_for_run(run_id)
            freed += 1
    return freed
