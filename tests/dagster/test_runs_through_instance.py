"""`atlas crawl` submits its runs to the Dagster instance (issue 17, parts 1-2): on a
PostgreSQL-backed instance (dagster-postgres) served by `dagster-daemon`, the daemon launches
every shard run in its own process, the runs cooperate through the PostgreSQL coordination
store with every origin's gap held as the server saw it, the job's page in the UI lists the
runs (GraphQL, as the webserver serves it to the UI), and one of them is re-executed from
there and runs again."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import dagster as dg
import polars as pl
import yaml
from dagster._core.instance.ref import InstanceRef

from tests.conftest import PG_URL, SandboxProcess, private_pg_database, sandbox_config, write_config

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
GAP_S = 0.3
SERVER_JITTER_S = 0.05
REPOSITORY = "__repository__@atlas"  # the UI's job page filters runs by this label


@contextmanager
def private_database() -> Iterator[str]:
    """A fresh database for the Dagster instance, as a psycopg2 URL (dagster-postgres)."""
    with private_pg_database("atlas_dg") as name:
        yield (
            PG_URL.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg2://", 1)
            + f"/{name}"
        )


@contextmanager
def started(
    cmd: list[str], env: dict[str, str], log: Path, niceness: int = 0
) -> Iterator[subprocess.Popen[bytes]]:
    """A process in its own group, which is killed as a whole afterwards; with `niceness`, it
    and every process it starts run at that lower CPU priority."""
    if niceness:
        cmd = ["nice", "-n", str(niceness), *cmd]
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)  # fmt: skip
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        # What it started and left behind (a code server outlived the webserver after a clean
        # CI run, 26 minutes later): its group, gone at once.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(what: str, check: Any, timeout: float, log: Path | None = None) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.5)
    tail = log.read_text(errors="replace")[-3000:] if log else ""
    raise AssertionError(f"timed out waiting for {what}\n{tail}")


def graphql(port: int, query: str, variables: dict[str, Any]) -> dict[str, Any]:
    body = json.dumps({"query": query, "variables": variables}).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{port}/graphql", data=body,
                                     headers={"Content-Type": "application/json"})  # fmt: skip
    with urllib.request.urlopen(request, timeout=60) as response:
        answer = json.loads(response.read())
    assert "errors" not in answer, answer
    return answer["data"]  # type: ignore[no-any-return]


JOB_RUNS = """
query JobRuns($filter: RunsFilter!) {
  runsOrError(filter: $filter) {
    ... on Runs { results { runId status jobName tags { key value } } }
  }
}"""

REEXECUTE = """
mutation Reexecute($params: ReexecutionParams!) {
  launchRunReexecution(reexecutionParams: $params) {
    __typename
    ... on LaunchRunSuccess { run { runId parentRunId status } }
    ... on PythonError { message }
    ... on InvalidStepError { invalidStepKey }
  }
}"""


def ping(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=2):
            return True
    except OSError:
        return False


def test_the_daemon_launches_every_shard_run_and_the_ui_re_executes_one(
    sandbox: SandboxProcess, tmp_path: Path, pg_schema_url: str
) -> None:
    home = tmp_path / "dagster_home"
    home.mkdir()
    with private_database() as dagster_db:
        (home / "dagster.yaml").write_text(yaml.safe_dump({
            "storage": {"postgres": {"postgres_url": dagster_db}},
            "telemetry": {"enabled": False},
            "run_queue": {"dequeue_interval_seconds": 1},
            "concurrency": {"runs": {"tag_concurrency_limits": [{
                "key": "dagster/partition/origin_shard",
                "value": {"applyLimitPerUniqueValue": True}, "limit": 1}]}},
        }))  # fmt: skip
        cfg = write_config(tmp_path / "atlas.yaml", sandbox_config(
            sandbox, tmp_path, shards=3, coordination_url=pg_schema_url,
            politeness={"min_gap_s": GAP_S, "max_in_flight": 1},
        ))  # fmt: skip
        env = {k: v for k, v in os.environ.items() if k != "ATLAS_FAILPOINTS"}
        env |= {"DAGSTER_HOME": str(home), "ATLAS_CONFIG": str(cfg)}
        daemon_log, web_log = tmp_path / "daemon.log", tmp_path / "webserver.log"
        daemon_cmd = [str(BIN / "dagster-daemon"), "run", "-w", "workspace.yaml"]
        # The daemon's runs (three crawlers, each with its extraction workers) yield the CPU to
        # the sandbox, so on two cores the server's handlers start when requests arrive and
        # the gaps it logs are the ones the crawlers left; as Atlas sent them is checked below.
        with (
            started(daemon_cmd, env, daemon_log, niceness=10),
            dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance,
        ):
            wait_for("the daemon's first heartbeat",
                     lambda: "QUEUED_RUN_COORDINATOR" in instance.get_daemon_heartbeats(),
                     120, daemon_log)  # fmt: skip
            sandbox.log.clear()
            crawl = subprocess.run([str(BIN / "atlas"), "crawl", "--config", str(cfg)], cwd=ROOT,
                                   env=env, capture_output=True, text=True, timeout=600)  # fmt: skip
            assert crawl.returncode == 0, crawl.stdout[-2000:] + crawl.stderr[-3000:]
            runs = instance.get_runs()
            assert len(runs) == 3 and all(r.is_success for r in runs)
            # the daemon launched them (this crawl did not serve the queue), each in its own
            # process
            assert not (home / "atlas-run-queue.lock").exists()
            pids = set()
            for run in runs:
                events = instance.all_logs(run.run_id)
                kinds = [e.dagster_event_type for e in events]
                assert kinds.count(dg.DagsterEventType.RUN_ENQUEUED) == 1, run.run_id
                assert kinds.count(dg.DagsterEventType.RUN_STARTING) == 1, run.run_id
                started_in = [e.message for e in events
                              if (e.message or "").startswith("Started process for run")]  # fmt: skip
                assert len(started_in) == 1, run.run_id
                pids.add(started_in[0])
            launched = re.findall(r"Launched (\d+) runs", daemon_log.read_text(errors="replace"))
            assert sum(int(n) for n in launched) == 3, launched
            assert len(pids) == 3
            log = sorted(sandbox.log.entries(), key=lambda e: e["start"])
            by_host: dict[str, list[dict[str, Any]]] = defaultdict(list)
            for e in log:
                by_host[e["host"]].append(e)
            gaps = [(b["start"] - a["start"], host, a["path"], b["path"])
                    for host, seen in by_host.items() for a, b in itertools.pairwise(seen)]  # fmt: skip
            # as Atlas sent them (every run's fetch records): never closer than the gap
            fetches = pl.read_delta(str(tmp_path / "lake" / "crawl" / "fetches"))
            sent = []
            for (origin,), g in fetches.sort("started_at").group_by("origin", maintain_order=True):
                times = [t.timestamp() for t in g["started_at"]]
                sent += [(t2 - t1, origin, u1, u2) for (t1, u1), (t2, u2)
                         in itertools.pairwise(zip(times, g["url"], strict=True))]  # fmt: skip
            assert sent and min(sent)[0] >= GAP_S, min(sent)
            assert gaps and min(gaps)[0] >= GAP_S - SERVER_JITTER_S, (min(gaps), min(sent))

            port = free_port()
            web_cmd = [str(BIN / "dagster-webserver"), "-w", "workspace.yaml",
                       "-h", "127.0.0.1", "-p", str(port)]  # fmt: skip
            with started(web_cmd, env, web_log):
                wait_for("the webserver", lambda: ping(port), 180, web_log)
                listed = graphql(port, JOB_RUNS, {"filter": {
                    "pipelineName": "crawl_cycle_job",
                    "tags": [{"key": ".dagster/repository", "value": REPOSITORY}],
                }})["runsOrError"]["results"]  # fmt: skip
                assert {r["runId"] for r in listed} == {r.run_id for r in runs}
                parent = sorted(runs, key=lambda r: r.tags["dagster/partition"])[1]
                launched = graphql(port, REEXECUTE, {"params": {
                    "parentRunId": parent.run_id, "strategy": "ALL_STEPS"}})  # fmt: skip
                answer = launched["launchRunReexecution"]
                assert answer["__typename"] == "LaunchRunSuccess", answer
                child_id = answer["run"]["runId"]
                assert answer["run"]["parentRunId"] == parent.run_id

            def finished() -> dg.DagsterRun | None:
                run = instance.get_run_by_id(child_id)
                return run if run is not None and run.is_finished else None

            child = wait_for("the re-executed run", finished, 300, daemon_log)
            assert child.is_success, child.status
            assert child.tags["dagster/partition"] == parent.tags["dagster/partition"]
            assert child.parent_run_id == parent.run_id
