"""The fetch batch's progress line in its run's Dagster log, at a fixed interval whatever the
batch is waiting on and once at its end (so a short batch has one too), and the CLI's running
line with the cycle's answers so far."""

from __future__ import annotations

import itertools
import os
import re
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.instance.ref import InstanceRef

from tests.conftest import SandboxProcess, sandbox_config, write_config
from tests.integration.test_cli import run_atlas

# make test runs `timing` tests after the others, one at a time: progress lines must come every
# interval (0.7-2 s apart)
pytestmark = pytest.mark.timing

LINE = re.compile(r"(c\d{4})/shard (\d+): (\d+) requests \([\d.]+/s\), statuses (.+), "
                  r"(\d+) errors, \d+ extracted, [\d.]+ MB, \d+ stale commits, (\d+) s$")  # fmt: skip


def _batch_lines(home: Path) -> dict[str, list[tuple[float, re.Match[str]]]]:
    """Each fetch run's progress lines (timestamp, parsed), by run id."""
    out: dict[str, list[tuple[float, re.Match[str]]]] = {}
    with dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:
        for run in instance.get_runs():
            assert run.is_success
            lines = [(e.timestamp, m) for e in instance.all_logs(run.run_id)
                     if e.user_message and (m := LINE.search(e.user_message))]  # fmt: skip
            out[run.run_id] = lines
    return out


def _crawl(sandbox: SandboxProcess, data: Path, gap_s: float, every_s: float,
           pages: int) -> tuple[Path, str]:  # fmt: skip
    cfg = write_config(data / "atlas.yaml", sandbox_config(
        sandbox, data, scope={"max_pages_per_origin": pages},
        politeness={"min_gap_s": gap_s, "max_in_flight": 1}))  # fmt: skip
    home = data / "dagster_home"
    env = {**os.environ, "DAGSTER_HOME": str(home), "ATLAS_PROGRESS": "1"}
    res = run_atlas("crawl", "--config", str(cfg), "-s", f"limits.progress_every_s={every_s}",
                    env=env)  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    return home, res.stderr


def test_a_long_batch_logs_its_progress_every_interval_and_at_its_end(
    sandbox: SandboxProcess, tmp_path: Path
) -> None:
    home, stderr = _crawl(sandbox, tmp_path, gap_s=1.0, every_s=1.0, pages=5)
    runs = _batch_lines(home)
    # a shard that no sandbox origin hashes to (the port is random) has one line, its last
    idle = [lines for lines in runs.values() if lines[-1][1].group(3) == "0"]
    assert all(len(lines) == 1 for lines in idle) and len(idle) < len(runs)
    for lines in (lines for lines in runs.values() if lines not in idle):
        assert len(lines) >= 4, [m.group(0) for _, m in lines]  # a 4-5 s batch, 1 s apart
        stamps = [t for t, _ in lines[:-1]]
        gaps = [b - a for a, b in itertools.pairwise(stamps)]
        assert all(0.7 <= g <= 2.0 for g in gaps), gaps  # the interval, not the loop's turns
        final = lines[-1][1]
        assert int(final.group(3)) > 0 and "200=" in final.group(4)
        assert final.group(5) == "0"
        counts = [int(m.group(3)) for _, m in lines]
        assert counts == sorted(counts)
    # the CLI's line: the cycle's answers so far, beside its URL count and rate
    assert re.search(r"cycle c0001: 200=\d+.*, 0 errors: .*\d+/\d+ \[", stderr), stderr[-2000:]


def test_a_short_batch_still_logs_one_line_at_its_end(
    sandbox: SandboxProcess, tmp_path: Path
) -> None:
    home, _ = _crawl(sandbox, tmp_path, gap_s=0.0, every_s=60.0, pages=2)
    runs = _batch_lines(home)
    assert runs and all(len(lines) == 1 for lines in runs.values()), runs
    for lines in runs.values():
        assert int(lines[0][1].group(6)) < 60  # the batch ended before its first interval
