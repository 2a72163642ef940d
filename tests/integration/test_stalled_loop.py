"""The gap is kept where the request leaves (issue: the fetch hot path, item 2).

The event loop is blocked for half a second at every third send (failpoint `before_send`,
action `stall`), between a request's claim and its bytes leaving: the request leaves late.
The origin must still see every gap and never more requests at once than its cap, as the
sandbox server logged them: the send gate (politeness.send_delay) spaces requests from the
previous request's actual send, and one request per origin passes it at a time."""

from __future__ import annotations

import itertools
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from atlas_pipeline import failpoints
from atlas_pipeline.config import config_from_mapping
from atlas_pipeline.crawl import Engine, fetch_shard, plan_frontier
from tests.conftest import SandboxProcess, sandbox_config

# make test runs `timing` tests after the others, one at a time: it stalls the loop on purpose
# and reads the gaps from the server's log
pytestmark = pytest.mark.timing

GAP_S = 0.3
CAP = 2
SERVER_JITTER_S = 0.02  # the server logs a request when it reads it, a moment after it left


def _peak(entries: list[dict[str, Any]]) -> int:
    edges = sorted([(e["start"], 1) for e in entries] + [(e["end"], -1) for e in entries])
    peak = now = 0
    for _, step in edges:
        now += step
        peak = max(peak, now)
    return peak


def test_a_stalled_loop_keeps_every_gap_and_cap_as_the_origin_sees_them(
    sandbox: SandboxProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = config_from_mapping(sandbox_config(
        sandbox, tmp_path, shards=1, politeness={"min_gap_s": GAP_S, "max_in_flight": CAP},
        scope={"max_pages_per_origin": 8},
    ), base_dir=tmp_path)  # fmt: skip
    engine = Engine.from_config(cfg)
    plan_frontier(engine, "c0001", 0)
    sandbox.log.clear()
    monkeypatch.setattr(failpoints, "_SPECS", failpoints._parse("before_send=3:stall"))
    monkeypatch.setattr(failpoints, "_hits", failpoints.Counter())
    result = fetch_shard(engine, "c0001", 0)
    engine.close()
    assert failpoints._hits["before_send"] >= 15  # five stalls or more
    entries = sandbox.log.entries()
    by_host: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for e in sorted(entries, key=lambda e: e["start"]):
        by_host[e["host"]].append(e)
    short = [(host, round(b["start"] - a["start"], 3), b["path"])
             for host, es in by_host.items() for a, b in itertools.pairwise(es)
             if b["start"] - a["start"] < GAP_S - SERVER_JITTER_S]  # fmt: skip
    assert short == []
    assert {host: _peak(es) for host, es in by_host.items() if _peak(es) > CAP} == {}
    assert result.stats.requests >= 20
