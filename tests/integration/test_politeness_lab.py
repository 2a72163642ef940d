"""Three fetch-batch runs in separate processes crawl the politeness lab (`atlas web --lab`)
through one PostgreSQL coordination store; the server's request log proves the politeness
contract (issue: robots and politeness, "Done when"):

zero gap violations, zero in-flight cap violations, zero requests inside a Retry-After
window, zero requests to disallowed paths, nothing but robots.txt from the 503-robots origin.

Gaps are judged twice: as Atlas sent them (its fetch records, strictly) and as the server's
handlers started them, less SERVER_JITTER_S: with three crawlers, PostgreSQL and the server on
two cores, the server's own loop may start a handler a little after the request arrived.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import polars as pl
import pytest

from atlas_sandbox import SandboxWeb, lab
from tests.conftest import (
    SandboxProcess,
    private_pg_schema,
    run_partition_together,
    running_sandbox,
    sandbox_config,
    write_config,
)

ROOT = Path(__file__).resolve().parents[2]
GAP_S = 0.3
SERVER_JITTER_S = 0.05
TIMEOUT_S = 2.0  # site-005's drips outlive it
CLOSE_SLACK_S = 0.5  # from the client's timeout to the server seeing the connection close
RUNS = 3


@pytest.fixture(scope="module")
def lab_web(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SandboxProcess]:
    log = tmp_path_factory.mktemp("lab") / "requests.jsonl"
    with running_sandbox(log, origins=6, pages=15, lab=True) as web:
        yield web


@pytest.fixture(scope="module")
def crawled(lab_web: SandboxProcess, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("lab-crawl")
    with private_pg_schema() as store_url:
        cfg = write_config(tmp / "atlas.yaml", sandbox_config(
            lab_web, tmp, shards=1, coordination_url=store_url,
            politeness={"min_gap_s": GAP_S, "max_in_flight": 1},
            limits={"batch_max_idle_s": 5, "total_timeout_s": TIMEOUT_S},
        ))  # fmt: skip
        lab_web.log.clear()
        outputs = run_partition_together(cfg, tmp, RUNS)
    fetches = pl.read_delta(str(tmp / "lake" / "crawl" / "fetches"))
    log = sorted(lab_web.log.entries(), key=lambda e: e["start"])
    by_host: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for e in log:
        by_host[e["host"]].append(e)
    return {"log": log, "by_host": by_host, "outputs": outputs, "fetches": fetches,
            "web": lab_web.web}  # fmt: skip


def _gap(host: str) -> float:
    return float(lab.CRAWL_DELAY_S) if host == lab.CRAWL_DELAY else GAP_S


def test_all_three_runs_did_work(crawled: dict[str, Any]) -> None:
    assert sum(o["requests"] > 0 for o in crawled["outputs"]) >= 2, crawled["outputs"]


def test_no_gap_violation_as_sent_or_as_seen(crawled: dict[str, Any]) -> None:
    for host, entries in crawled["by_host"].items():
        starts = [e["start"] for e in entries]
        seen = min((b - a for a, b in itertools.pairwise(starts)), default=None)
        assert seen is None or seen >= _gap(host) - SERVER_JITTER_S, (host, seen)
    fetches = crawled["fetches"].sort("started_at")
    for (origin,), group in fetches.group_by("origin", maintain_order=True):
        host = origin.split("://")[1].rsplit(":", 1)[0]
        ts = [t.timestamp() for t in group["started_at"]]
        sent = min((b - a for a, b in itertools.pairwise(ts)), default=None)
        assert sent is None or sent >= _gap(host), (origin, sent)


def test_no_two_requests_in_flight_at_one_origin(crawled: dict[str, Any]) -> None:
    for host, entries in crawled["by_host"].items():
        for a, b in itertools.pairwise(entries):
            assert b["start"] >= a["end"], (host, a["path"], b["path"])


def test_a_timed_out_response_held_its_slot_until_its_connection_closed(
    crawled: dict[str, Any],
) -> None:
    """site-005's drips never end: each one times out, the client closes its connection at
    once (the server sees it go within CLOSE_SLACK_S), and the next request to the origin
    leaves only after that (the in-flight cap as the server sees it, above)."""
    fetches = crawled["fetches"]
    timed_out = fetches.filter(
        pl.col("origin").str.contains(lab.SLOW, literal=True) & (pl.col("reason") == "body_timeout")
    )
    entries = crawled["by_host"][lab.SLOW]
    paths = {urlsplit(u).path for u in timed_out["url"]}
    drips = [e for e in entries if e["path"] in paths]  # a body timeout is not retried
    assert len(drips) >= 2 and timed_out.height == len(drips) == len(paths), (timed_out, drips)
    followed = 0
    for drip in drips:
        assert drip["end"] - drip["start"] <= TIMEOUT_S + CLOSE_SLACK_S, drip
        after = [e["start"] for e in entries if e["start"] > drip["start"]]
        if after:
            followed += 1
            assert min(after) >= drip["end"], drip
    assert followed, "nothing was fetched from site-005 after any drip"


def test_no_request_inside_a_retry_after_window(crawled: dict[str, Any]) -> None:
    entries = crawled["by_host"][lab.THROTTLED]
    throttled = [e for e in entries if e["status"] == 429]
    assert throttled, "the throttling origin never answered 429"
    for t in throttled:
        inside = [e for e in entries
                  if t["end"] < e["start"] < t["end"] + lab.RETRY_AFTER_S - SERVER_JITTER_S]  # fmt: skip
        assert inside == [], inside


def test_no_disallowed_path_requested(crawled: dict[str, Any]) -> None:
    web: SandboxWeb = crawled["web"]
    for host, entries in crawled["by_host"].items():
        if host == lab.ROBOTS_404:  # no robots.txt published: everything is allowed
            continue
        bad = [e["path"] for e in entries if web.disallowed(host, e["path"])]
        assert bad == [], (host, bad)


def test_only_robots_txt_from_the_503_robots_origin(crawled: dict[str, Any]) -> None:
    paths = {e["path"] for e in crawled["by_host"][lab.ROBOTS_503]}
    assert paths == {"/robots.txt"}


def test_moved_robots_and_crawl_delay_were_honoured(crawled: dict[str, Any]) -> None:
    moved = [e["path"] for e in crawled["by_host"][lab.ROBOTS_MOVED]]
    assert moved[:2] == ["/robots.txt", lab.MOVED_ROBOTS]  # followed before any page
    pages_404 = {e["path"] for e in crawled["by_host"][lab.ROBOTS_404]}
    assert any(p.startswith("/tmp/") for p in pages_404)  # unavailable robots = allow all
    assert len(crawled["by_host"][lab.CRAWL_DELAY]) > 3
