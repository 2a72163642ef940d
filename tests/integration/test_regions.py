"""Two regions crawl the sandbox web together (issue: regions): each its own process and its
own coordination store, one control plane on PostgreSQL that each region reaches through a
TCP proxy of its own. The test cuts one region off for longer than a lease and measures, from
the sandbox's own request log, who served each origin, the overshoot against the bound
`ownership.overshoot_bound` gives, and the shares of a split origin."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pytest

from atlas_pipeline.config import load_config
from atlas_pipeline.lake import Lake
from atlas_pipeline.regions.audit import handoff_overshoot
from atlas_pipeline.regions.control_plane import ControlPlane
from atlas_pipeline.regions.ownership import TakeoverRule, extra_requests, overshoot_bound
from atlas_pipeline.urls import shard_key
from atlas_sandbox import normalize_url
from tests.conftest import ROOT, SandboxProcess, sandbox_config, write_config
from tests.tcpproxy import TcpProxy

# make test runs `timing` tests after the others, one at a time: its leases last 3 s, and
# with 7 other test processes on two cores a region missed its renewal and lost an origin
pytestmark = pytest.mark.timing

GAP_S = 0.5
LEASE_S = 3.0
CUT_AT_S, CUT_FOR_S = 3.0, 7.0  # the cut outlasts the lease by 4 s
SHARES = {"eu": 0.6, "us": 0.4}
SILENT_S = 1.5  # takeover: immediate steps in after this much silence, half a lease early
TOLERANCE_S = 0.08  # the server's own scheduling delay on two busy cores

REGION_WORKER = """
import json, sys, time
from pathlib import Path
from atlas_pipeline.config import load_config
from atlas_pipeline.crawl import Engine, export_ownership, fetch_shard, plan_frontier

if __name__ == "__main__":
    engine = Engine.from_config(load_config(sys.argv[1]))
    go = Path(sys.argv[2])
    while not go.exists():
        time.sleep(0.01)
    plan_frontier(engine, "c0001", 0)
    result = fetch_shard(engine, "c0001", 0, holder=sys.argv[3])
    export_ownership(engine, "c0001", 0)
    print(json.dumps({"requests": result.stats.requests, "not_owned": result.stats.not_owned,
                      "ownership": result.stats.ownership,
                      "outcomes": dict(result.stats.outcomes)}), flush=True)
"""


def _region_config(sandbox: SandboxProcess, tmp_path: Path, region: str, plane_url: str,
                   homes: dict[str, str], shared: str, takeover: str) -> Path:  # fmt: skip
    data = tmp_path / region
    data.mkdir()
    cfg = sandbox_config(
        sandbox, data, shards=1, user_agent=f"AtlasBot/1.0 (region {region})",
        politeness={"min_gap_s": GAP_S, "max_in_flight": 1, "gap_guard_s": 0.0},
        limits={"total_timeout_s": 10, "batch_max_idle_s": 60},
        regions={"name": region, "members": ["eu", "us"], "control_plane_url": plane_url,
                 "lease_s": LEASE_S, "renew_every_s": 0.5, "dispatch_margin_s": 0.3,
                 "home_silent_s": LEASE_S, "homes": homes, "takeover": takeover,
                 "silent_after_s": SILENT_S,
                 "shares": [{"origin": shared, "shares": SHARES}]},
    )  # fmt: skip
    return write_config(data / "atlas.yaml", cfg)


def _run_regions(sandbox: SandboxProcess, tmp_path: Path, plane_url: str,
                 homes: dict[str, str], shared: str,
                 meanwhile: Callable[[dict[str, TcpProxy]], None],
                 takeover: str = "lapse") -> dict[str, Any]:  # fmt: skip
    """Both regions crawl c0001 in their own processes, each reaching the control plane
    through its own proxy, while `meanwhile` cuts and restores the proxies; their outputs."""
    proxies = {r: TcpProxy("127.0.0.1", 5432) for r in ("eu", "us")}
    configs = {
        r: _region_config(sandbox, tmp_path, r,
                          plane_url.replace("127.0.0.1:5432", f"127.0.0.1:{p.port}"),
                          homes, shared, takeover)
        for r, p in proxies.items()
    }  # fmt: skip
    ControlPlane(plane_url, TakeoverRule(LEASE_S)).close()  # its schema, before the race
    script, go = tmp_path / "region_worker.py", tmp_path / "go"
    script.write_text(REGION_WORKER)
    sandbox.log.clear()
    procs = {
        r: subprocess.Popen([sys.executable, str(script), str(cfg), str(go), r], cwd=ROOT,
                            text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for r, cfg in configs.items()
    }  # fmt: skip
    try:
        time.sleep(4)  # imports
        go.touch()
        meanwhile(proxies)
        outputs = {}
        for r, p in procs.items():
            out, err = p.communicate(timeout=300)
            assert p.returncode == 0, err[-3000:]
            outputs[r] = json.loads(out.strip().splitlines()[-1])
        return outputs
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
        for proxy in proxies.values():
            proxy.close()


def _region_of(entry: dict[str, Any]) -> str:
    agent = entry["headers"]["user-agent"] or ""
    return "eu" if "region eu" in agent else "us" if "region us" in agent else "?"


@pytest.mark.parametrize("takeover", ["lapse", "immediate"])
def test_two_regions_split_origins_fail_over_under_a_partition_and_keep_shares(
    sandbox: SandboxProcess, tmp_path: Path, pg_schema_url: str, takeover: str
) -> None:
    hosts = sandbox.web.hosts
    shared_host, rest = hosts[0], hosts[1:]
    homes = {h: ("eu" if i % 2 == 0 else "us") for i, h in enumerate(rest)}
    shared = sandbox.web.origin_url(shared_host)
    cut: dict[str, float] = {}

    def partition(proxies: dict[str, TcpProxy]) -> None:
        time.sleep(CUT_AT_S)
        cut["at"] = time.time()
        proxies["eu"].cut()
        time.sleep(CUT_FOR_S)
        cut["restored"] = time.time()
        proxies["eu"].restore()

    outputs = _run_regions(sandbox, tmp_path, pg_schema_url, homes, shared, partition, takeover)
    cut_at, restored_at = cut["at"], cut["restored"]
    log = sorted(sandbox.log.entries(), key=lambda e: e["start"])
    by_origin: dict[str, list[tuple[float, str]]] = defaultdict(list)
    for e in log:
        by_origin[e["host"]].append((e["start"], _region_of(e)))
    assert {r for starts in by_origin.values() for _, r in starts} == {"eu", "us"}
    plane = ControlPlane(pg_schema_url, TakeoverRule(LEASE_S))
    try:
        audit = plane.events_after(0, limit=100_000)
    finally:
        plane.close()

    # 1. Before the cut each exclusive origin is served by its home region alone.
    for host, starts in by_origin.items():
        if host == shared_host:
            continue
        before = {r for t, r in starts if t < cut_at}
        assert before <= {homes[host]}, (host, before)

    # 2. Cut off, eu stops within its lease: no eu request to an exclusive origin from a
    # lease after the cut (its last renewal was before it) until the cut ends.
    stop_by = cut_at + LEASE_S + TOLERANCE_S
    late = [(h, t - cut_at) for h, starts in by_origin.items() if h != shared_host
            for t, r in starts if r == "eu" and stop_by < t < restored_at]  # fmt: skip
    assert late == [], late

    # 3. us takes eu's origins over with a higher token once their leases lapsed, and eu's
    # renewals under the old token are turned away and counted, on both sides.
    eu_homes = [sandbox.web.origin_url(h) for h, r in homes.items() if r == "eu"]
    taken = "takeover" if takeover == "immediate" else "grant"
    for origin in eu_homes:
        grants = [(e["region"], e["token"], e["action"]) for e in audit
                  if e["origin"] == origin and e["action"] in ("grant", "takeover")]  # fmt: skip
        assert grants[0] == ("eu", 1, "grant") and ("us", 2, taken) in grants, (origin, grants)
        if takeover == "immediate":  # before eu's lease ran out: the overlap the bound covers
            at = next(e["at"] for e in audit if e["origin"] == origin and e["token"] == 2)
            assert at < cut_at + LEASE_S, (origin, at - cut_at)
    stale = [e for e in audit if e["action"] == "reject_stale" and e["region"] == "eu"]
    assert stale and all(e["asked_token"] < e["token"] for e in stale)
    assert outputs["eu"]["ownership"]["rejected_stale"] == len(stale)
    assert outputs["eu"]["ownership"]["unreachable"] > 0
    took_over = {h for h, r in homes.items() if r == "eu"
                 and any(rr == "us" and cut_at < t < restored_at for t, rr in by_origin[h])}  # fmt: skip
    assert took_over == {h for h, r in homes.items() if r == "eu"}, took_over

    # 4. The union of both regions' requests keeps each exclusive origin's gap, handoff
    # included: at most the bound atlas config prints (after lapse: the requests in flight;
    # at once: lease x rate + in flight).
    bound = overshoot_bound(LEASE_S, GAP_S, 1, immediate=takeover == "immediate")
    overshoot = {h: extra_requests([t for t, _ in starts], GAP_S, TOLERANCE_S)
                 for h, starts in by_origin.items() if h != shared_host}  # fmt: skip
    assert max(overshoot.values()) <= bound.requests, (overshoot, bound)

    # 5. The split origin: each region keeps to its share, through the cut too.
    for region, share in SHARES.items():
        mine = sorted(t for t, r in by_origin[shared_host] if r == region)
        gaps = [b - a for a, b in itertools.pairwise(mine)]
        assert gaps and min(gaps) >= GAP_S / share - TOLERANCE_S, (region, min(gaps))
    assert any(r == "eu" and cut_at < t < restored_at for t, r in by_origin[shared_host])
    # 6. The lake says the same: each region's ownership partition holds the audit of its
    # origins, and the handoff check's rule, over both regions' fetches, finds every origin
    # within its bound and each share kept.
    lakes = {r: Lake(tmp_path / r / "lake") for r in ("eu", "us")}
    owned = lakes["eu"].read_partition("ownership", "c0001", shard_key(0))
    assert set(owned["action"]) >= {"grant", "renew", "reject_stale"}
    assert set(owned["reported_by"]) == {"eu"} and set(owned["region"]) == {"eu", "us"}
    cfg = load_config(tmp_path / "eu" / "atlas.yaml")
    report = handoff_overshoot(
        {r: lake.read_partition("fetches", "c0001", shard_key(0)) for r, lake in lakes.items()},
        cfg,
        {},
    )
    assert report.height == len(by_origin) + 1 and report["ok"].all(), report
    lake_extra = dict(report.select("origin", "extra").rows())
    print("regions:", {r: o["requests"] for r, o in outputs.items()},
          "overshoot per origin (server log):", overshoot, "(lake check):", lake_extra, f"bound {bound.requests:g} ({bound.why})",
          "stale renewals turned away:", len(stale), "held back at send:",
          {r: o["not_owned"] for r, o in outputs.items()})  # fmt: skip
    with psycopg.connect(pg_schema_url) as conn:  # the audit is there for analysts as well
        assert conn.execute("SELECT COUNT(*) FROM ownership_events").fetchone()[0] == len(audit)


def test_the_control_plane_down_for_both_regions_stops_dispatch_and_crawling_resumes(
    sandbox: SandboxProcess, tmp_path: Path, pg_schema_url: str
) -> None:
    """Both regions lose the control plane for 60 s mid-crawl: no request leaves without a
    valid lease (none from a lease after the cut until it ends), neither run crashes or
    ends early, and once it is back both finish every page, none lost."""
    hosts = sandbox.web.hosts
    homes = {h: ("eu" if i % 2 == 0 else "us") for i, h in enumerate(hosts[1:])}
    shared = sandbox.web.origin_url(hosts[0])
    cut: dict[str, float] = {}

    def outage(proxies: dict[str, TcpProxy]) -> None:
        time.sleep(CUT_AT_S)
        cut["at"] = time.time()
        for proxy in proxies.values():
            proxy.cut()
        time.sleep(60.0)
        cut["restored"] = time.time()
        for proxy in proxies.values():
            proxy.restore()

    outputs = _run_regions(sandbox, tmp_path, pg_schema_url, homes, shared, outage)
    log = sandbox.log.entries()
    stop_by = cut["at"] + LEASE_S + TOLERANCE_S
    during = [(e["host"], e["start"] - cut["at"]) for e in log
              if e["host"] != hosts[0] and stop_by < e["start"] < cut["restored"]]  # fmt: skip
    assert during == [], during
    assert any(e["start"] > cut["restored"] for e in log)  # it resumed by itself
    for region, out in outputs.items():
        assert out["ownership"]["unreachable"] > 0, region
    # nothing lost: every crawlable page was fetched, each exclusive one by its home region
    fetched = {(_region_of(e), normalize_url(e["origin"] + e["path"])) for e in log
               if e["status"] == 200}  # fmt: skip
    for url in sandbox.web.crawlable(50):
        host = urlsplit(url).hostname
        assert (homes.get(host, "eu"), url) in fetched, url
