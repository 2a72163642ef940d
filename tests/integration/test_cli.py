"""The `atlas` command as a user runs it: readable one-line errors, and a real multi-cycle crawl."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import dagster as dg
import polars as pl
from dagster._core.instance.ref import InstanceRef

from tests.conftest import SandboxProcess, sandbox_config, write_config

ATLAS = str(Path(sys.executable).parent / "atlas")
ROOT = Path(__file__).resolve().parents[2]


def run_atlas(
    *args: str, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ATLAS, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env
    )


def job_runs(home: Path) -> dict[tuple[str, str], int]:
    """Successful runs by (job, the atlas command that submitted them); none may have failed."""
    with dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:
        runs = instance.get_runs()
    assert all(r.is_success for r in runs), [(r.job_name, r.status) for r in runs]
    assert all(r.remote_job_origin is not None for r in runs)  # re-executable from the UI
    counts: dict[tuple[str, str], int] = {}
    for r in runs:
        key = (r.job_name, r.tags.get("atlas/source", ""))
        counts[key] = counts.get(key, 0) + 1
    return counts


def test_bad_config_key_is_one_readable_line(tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "bad.yaml", {"politness": {"min_gap_s": 1}})
    res = run_atlas("config", "--config", str(cfg))
    assert res.returncode == 2
    assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr
    assert "unknown key 'politness'" in res.stderr and "did you mean 'politeness'" in res.stderr


def test_bad_config_value_names_the_key(tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "bad.yaml", {"politeness": {"min_gap_s": -1}})
    res = run_atlas("crawl", "--config", str(cfg))
    assert res.returncode == 2 and res.stderr.count("\n") == 1
    assert "politeness.min_gap_s" in res.stderr and "-1" in res.stderr


def test_unreachable_postgres_store_is_one_readable_line(tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "pg.yaml", {"seeds": ["http://a.example.test/"],
                                              "coordination_url": "postgresql://postgres@127.0.0.1:1/atlas"})  # fmt: skip
    res = run_atlas("crawl", "--config", str(cfg))
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "Traceback" not in res.stderr
    assert (
        "cannot reach the coordination store postgresql://postgres@127.0.0.1:1/atlas" in res.stderr
    )


def test_unopenable_sqlite_store_is_one_readable_line(tmp_path: Path) -> None:
    (tmp_path / "a_file").write_text("not a folder")
    cfg = write_config(tmp_path / "s.yaml", {"seeds": ["http://a.example.test/"],
                                             "coordination_url": f"sqlite:///{tmp_path}/a_file/c.db"})  # fmt: skip
    res = run_atlas("crawl", "--config", str(cfg))
    assert res.returncode == 2 and res.stderr.count("\n") == 1
    assert "cannot open the coordination store" in res.stderr


def test_crawl_two_cycles_on_a_persistent_instance(sandbox: SandboxProcess, tmp_path: Path) -> None:
    """Budget 6 pages per origin per cycle: the second cycle continues where the first stopped."""
    cfg = write_config(tmp_path / "atlas.yaml",
                       sandbox_config(sandbox, tmp_path, scope={"max_pages_per_origin": 6}))  # fmt: skip
    home = tmp_path / "dagster_home"
    env = {**os.environ, "DAGSTER_HOME": str(home), "ATLAS_PROGRESS": "1"}
    res = run_atlas("crawl", "--config", str(cfg), "--cycles", "2", env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "c0002 shard_001" in res.stdout
    # a progress bar per cycle: URLs done of queued, with a rate (tqdm turns it into seconds a
    # URL below one a second, as on a loaded machine) and an ETA
    rate = r"(?:[\d.?]+ ?url/s|[\d.?]+ ?s/url)"
    assert re.search(rf"cycle c0001: .*\d+/\d+ \[\d\d:\d\d<\d\d:\d\d, +{rate}\]", res.stderr)
    assert "cycle c0002" in res.stderr
    fetches = pl.read_delta(str(tmp_path / "lake" / "crawl" / "fetches"))
    pages = fetches.filter(pl.col("kind") == "page")
    per_cycle = pages.group_by("crawl_cycle", "origin").len()
    assert per_cycle["len"].max() <= 6
    assert set(per_cycle["crawl_cycle"].to_list()) == {"c0001", "c0002"}
    assert pages["url"].n_unique() == pages.height  # nothing fetched twice across cycles
    with dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:
        assert instance.get_dynamic_partitions("crawl_cycle") == ["c0001", "c0002"]
        runs = instance.get_runs()
        assert len(runs) == 4 and all(r.is_success for r in runs)


def test_sweep_bodies_deletes_orphans_and_keeps_committed_bodies(tmp_path: Path) -> None:
    from atlas_pipeline.bodies import BodyStore
    from atlas_pipeline.config import load_config
    from atlas_pipeline.coordination import Candidate, Lease, Outcome, UrlState
    from atlas_pipeline.crawl import Engine
    from atlas_pipeline.records import FetchRecord

    cfg_path = write_config(tmp_path / "atlas.yaml", {"data_dir": str(tmp_path / "data"),
                                                      "seeds": ["http://a.example.test/"]})  # fmt: skip
    engine = Engine.from_config(load_config(cfg_path))
    bodies: BodyStore = engine.bodies
    committed, orphan = bodies.put(b"committed page"), bodies.put(b"fetched, never committed")
    # commit a record referencing one body, through the real store
    store = engine.store
    url = "http://a.example.test/"
    store.discover([Candidate(url, url, "http://a.example.test:80", 0, 0, 1.0)], "c0001")
    task = store.claim("c0001", 0, 1.0, "AtlasBot", 60.0)
    store.put_robots(task, "parsed", "", 1.0, 1e12, 0.0)  # type: ignore[arg-type]
    lease = store.claim("c0001", 0, 10.0, "AtlasBot", 60.0)
    assert isinstance(lease, Lease)
    store.commit(lease, Outcome(UrlState.FETCHED, "fetched", 1e12, 200, content_hash=committed,
                                record=FetchRecord(fetch_id="f", body_key=committed)), "c0001", 11.0)  # fmt: skip
    engine.close()
    for key in (committed, orphan):
        path = bodies.root / key[:2] / key[2:4] / f"{key}.zst"
        os.utime(path, (1.0, 1.0))  # put long ago
    short = run_atlas("sweep-bodies", "--config", str(cfg_path), "--grace-hours", "0")
    assert short.returncode == 2 and "shorter than two leases" in short.stderr
    res = run_atlas("sweep-bodies", "--config", str(cfg_path), "--grace-hours", "1")
    assert res.returncode == 0, res.stderr
    assert "scanned 2 bodies, deleted 1 orphans" in res.stdout
    assert bodies.has(committed) and not bodies.has(orphan)


def test_pause_and_resume_an_origin_from_the_cli_are_audited(tmp_path: Path) -> None:
    from atlas_pipeline.config import load_config
    from atlas_pipeline.crawl import Engine

    cfg_path = write_config(tmp_path / "atlas.yaml", {"data_dir": str(tmp_path / "data")})
    res = run_atlas("pause", "--config", str(cfg_path), "--origin", "https://News.Example.com/x",
                    "--reason", "complaint #7", "--who", "ops")  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "paused origin https://news.example.com:443" in res.stdout
    res = run_atlas("pause", "--config", str(cfg_path), "--domain", "www.shop.example.co.uk",
                    "--reason", "opt-out", "--who", "ops")  # fmt: skip
    assert "paused domain example.co.uk" in res.stdout
    res = run_atlas("resume", "--config", str(cfg_path), "--origin", "https://news.example.com/",
                    "--reason", "resolved", "--who", "ops")  # fmt: skip
    assert "resumed origin https://news.example.com:443" in res.stdout
    missing = run_atlas("pause", "--config", str(cfg_path), "--origin", "https://a.example/")
    assert missing.returncode == 2 and "--reason" in missing.stderr
    engine = Engine.from_config(load_config(cfg_path))
    assert [p["value"] for p in engine.store.pauses()] == ["example.co.uk"]
    assert [(r["action"], r["who"], r["reason"]) for r in engine.store.operator_log()] == [
        ("pause", "ops", "complaint #7"),
        ("pause", "ops", "opt-out"),
        ("resume", "ops", "resolved"),
    ]
    engine.close()
    # each command was a run of the job the UI launches, which the UI lists under that job
    assert job_runs(tmp_path / "data" / "dagster_home") == {
        ("pause_origin_job", "atlas pause"): 2, ("resume_origin_job", "atlas resume"): 1}  # fmt: skip


def test_optout_set_policy_and_retention_from_the_cli(tmp_path: Path) -> None:
    from atlas_pipeline.config import load_config
    from atlas_pipeline.crawl import Engine

    cfg_path = write_config(tmp_path / "atlas.yaml", {"data_dir": str(tmp_path / "data")})
    base = ("--config", str(cfg_path), "--who", "ops")
    res = run_atlas("optout", *base, "--prefix", "https://Example.com/private/",
                    "--reason", "owner request #9", "--verified-by", "DNS TXT")  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "suppressed prefix https://example.com/private/" in res.stdout
    unverified = run_atlas("optout", *base, "--domain", "example.com", "--reason", "x")
    assert unverified.returncode == 2 and "--verified-by" in unverified.stderr
    sub = run_atlas("optout", *base, "--domain", "news.example.com", "--reason", "x",
                    "--verified-by", "mail")  # fmt: skip
    assert sub.returncode == 2 and "not a registrable domain" in sub.stderr
    res = run_atlas("set-policy", *base, "--domain", "example.com", "--min-gap-s", "4",
                    "--priority", "0.8", "--reason", "partner")  # fmt: skip
    assert res.returncode == 0 and "policy version 1" in res.stdout, res.stderr
    res = run_atlas("set-policy", *base, "--domain", "example.com", "--unset", "priority",
                    "--reason", "done")  # fmt: skip
    assert "policy version 2" in res.stdout and "{'min_gap_s': 4.0}" in res.stdout
    bad = run_atlas("set-policy", *base, "--domain", "example.com", "--priority", "7",
                    "--reason", "typo")  # fmt: skip
    assert bad.returncode == 2 and "priority = 7 is outside [0, 1]" in bad.stderr
    res = run_atlas("retention", *base)
    assert res.returncode == 0 and "suppressions purged again" in res.stdout, res.stderr
    engine = Engine.from_config(load_config(cfg_path))
    try:
        actions = [r["action"] for r in engine.store.operator_log()]
    finally:
        engine.close()
    assert actions[:2] == ["suppress", "purge_store"] and actions.count("set_policy") == 2
    assert actions[-1] == "retention"
    assert job_runs(tmp_path / "data" / "dagster_home") == {
        ("opt_out_job", "atlas optout"): 1, ("set_policy_job", "atlas set-policy"): 2,
        ("retention_job", "atlas retention"): 1}  # fmt: skip


def test_a_crawl_that_reaches_no_seed_exits_non_zero_saying_why(tmp_path: Path) -> None:
    """One seed on a loopback port nothing listens on (mapped like the sandbox's hosts), one
    the egress gate refuses: the runs succeed, the crawl fetched nothing it was asked for."""
    import socket

    with socket.socket() as probe:  # a port that was free a moment ago: nothing listens
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    dead = f"http://dead.example.test:{port}/"
    cfg = write_config(tmp_path / "atlas.yaml", {
        "seeds": [dead, "http://10.1.2.3/"], "data_dir": str(tmp_path), "shards": 1,
        "resolve": {"dead.example.test": "127.0.0.1"}, "resolve_only": True,
        "limits": {"max_attempts": 2, "retry_backoff_s": 0.1, "batch_max_idle_s": 5},
    })  # fmt: skip
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "dagster_home")}
    res = run_atlas("crawl", "--config", str(cfg), env=env)
    assert res.returncode == 1, (res.stdout[-2000:], res.stderr[-2000:])
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("atlas: ")]
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr[-2000:]
    assert lines[0].startswith("atlas: no seed could be fetched: ")
    # its robots.txt could not be fetched (connection refused), so none of its pages was asked for
    assert f"{dead} (robots.txt unreachable, so nothing of its origin was fetched)" in lines[0]
    assert "http://10.1.2.3/ (refused: " in lines[0]
    assert "ok" in res.stdout  # every run itself succeeded


def test_a_crawl_stopped_before_any_seed_was_tried_exits_0_saying_so(
    sandbox: SandboxProcess, tmp_path: Path
) -> None:
    """A 30 s gap: each origin's robots.txt goes first and its seed no sooner than 30 s later,
    so a stop after 3 s leaves every seed queued, untried. That is the stop's doing, not a
    seed that could not be fetched: exit 0, and a line saying how to go on."""
    cfg = write_config(tmp_path / "atlas.yaml", sandbox_config(sandbox, tmp_path,
                       politeness={"min_gap_s": 30.0, "max_in_flight": 1}))  # fmt: skip
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "dagster_home")}
    res = run_atlas("crawl", "--config", str(cfg), "--max-seconds", "3", env=env)
    assert res.returncode == 0, (res.stdout[-2000:], res.stderr[-2000:])
    assert "stopped: --max-seconds 3 reached" in res.stdout
    assert "No seed was fetched before the stop; `atlas crawl --resume` goes on" in res.stdout
    assert "no seed could be fetched" not in res.stderr


def test_a_partition_a_crash_left_unwritten_is_finished_by_the_next_crawl(
    sandbox: SandboxProcess, tmp_path: Path
) -> None:
    """A shard run SIGKILLed after its batch committed everything, before its lake write: the
    store holds the pages, the lake none. The next `atlas crawl` runs that partition again
    before its new cycle, and every page lands in the lake once; `--resume` then has
    nothing left to do and adds no cycle."""
    from atlas_sandbox import normalize_url

    cfg = write_config(tmp_path / "atlas.yaml", sandbox_config(sandbox, tmp_path, shards=1))
    home = tmp_path / "dagster_home"
    env = {k: v for k, v in os.environ.items() if k != "ATLAS_FAILPOINTS"}
    env["DAGSTER_HOME"] = str(home)
    crashed = run_atlas("crawl", "--config", str(cfg),
                        env={**env, "ATLAS_FAILPOINTS": "before_lake_write=1:kill"})  # fmt: skip
    assert crashed.returncode != 0
    documents = tmp_path / "lake" / "crawl" / "documents"
    assert not documents.exists() or pl.read_delta(str(documents)).height == 0

    res = run_atlas("crawl", "--config", str(cfg), env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "Finishing 1 partition(s) an earlier crawl left unfinished first: c0001 shard_000" in (
        res.stdout
    )
    assert re.search(r"c0001 shard_000  run \w+  ok", res.stdout), res.stdout
    assert re.search(r"c0002 shard_000  run \w+  ok", res.stdout), res.stdout
    docs = pl.read_delta(str(documents))
    assert docs.height == docs["url"].n_unique()  # no document twice
    assert set(docs["url"]) == {normalize_url(u) for u in sandbox.web.crawlable(50)}

    again = run_atlas("crawl", "--config", str(cfg), "--resume", env=env)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "Finishing" not in again.stdout and "0 new cycle(s)" in again.stdout
    with dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:
        assert instance.get_dynamic_partitions("crawl_cycle") == ["c0001", "c0002"]


def test_url_rules_decide_with_their_reason_and_inspect_names_the_rule(
    sandbox: SandboxProcess, tmp_path: Path
) -> None:
    """An allow rule in front of a broader deny: the deny keeps its URLs out (never requested,
    `url_rule_denied` in the links table), the allow lets its page through, and `atlas
    inspect` names the deciding rule of each."""
    import fnmatch
    import json

    from atlas_sandbox import normalize_url

    rules = [
        {"action": "allow", "pattern": "*/guide/simple-*", "origin": f"http://docs-b.example.test:{sandbox.port}/"},
        {"action": "deny", "pattern": "*/guide/*"},
        {"action": "deny", "pattern": r"/posts/[a-z]+-(data|study)", "kind": "regex"},
    ]  # fmt: skip
    cfg = write_config(tmp_path / "atlas.yaml",
                       sandbox_config(sandbox, tmp_path, scope={"url_rules": rules}))  # fmt: skip
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "dagster_home")}
    sandbox.log.clear()
    res = run_atlas("crawl", "--config", str(cfg), env=env)
    assert res.returncode == 0, res.stderr[-3000:]

    def denied(url: str) -> bool:  # the rules, decided here without Atlas's code
        if fnmatch.fnmatchcase(url, "*/guide/simple-*") and "docs-b." in url:
            return False
        return fnmatch.fnmatchcase(url, "*/guide/*") or bool(
            re.search(r"/posts/[a-z]+-(data|study)", url)
        )

    requested = {normalize_url(e["origin"] + e["path"]) for e in sandbox.log.entries()}
    assert not [u for u in requested if denied(u)]
    reachable = {normalize_url(u) for u in sandbox.web.crawlable(50)}
    links = pl.read_delta(str(tmp_path / "lake" / "crawl" / "links"))
    rejected = set(links.filter(pl.col("reason") == "url_rule_denied")["url"])
    assert rejected and all(denied(u) for u in rejected)
    assert {u for u in reachable if denied(u)} & set(links["url"]) <= rejected
    press = [u for u in reachable if "/guide/simple-" in u and "docs-b." in u]
    assert press and set(press) <= requested  # the allow rule let it through

    shown = run_atlas("inspect", sorted(rejected)[0], "--config", str(cfg), "--json", env=env)
    assert shown.returncode == 0, shown.stderr
    found = json.loads(shown.stdout)
    assert "url_rule_denied" in found["reasons"]
    assert found["url_rule"].startswith("scope.url_rules[")
    assert " deny " in found["url_rule"]
    text = run_atlas("inspect", press[0], "--config", str(cfg), env=env).stdout
    assert "rule     scope.url_rules[0]: allow glob '*/guide/simple-*' on http://docs-b" in text


def test_set_overrides_are_validated_like_the_file_and_reach_the_runs(
    sandbox: SandboxProcess, tmp_path: Path
) -> None:
    cfg = write_config(tmp_path / "atlas.yaml", sandbox_config(sandbox, tmp_path))
    bad = run_atlas("config", "--config", str(cfg), "-s", "politeness.min_gap_s=-1")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
    assert "politeness.min_gap_s" in bad.stderr and "-1" in bad.stderr
    typo = run_atlas("crawl", "--config", str(cfg), "-s", "scope.max_pages_per_orign=3")
    assert typo.returncode == 2 and "did you mean 'max_pages_per_origin'" in typo.stderr
    shape = run_atlas("config", "--config", str(cfg), "-s", "shards")
    assert shape.returncode == 2 and "write -s key=value" in shape.stderr
    shown = run_atlas("config", "--config", str(cfg), "-s", "scope.max_pages_per_origin=3",
                      "-s", "scope.url_rules=[{action: deny, pattern: '*/private/*'}]")  # fmt: skip
    assert shown.returncode == 0 and "max_pages_per_origin: 3" in shown.stdout
    assert "pattern: '*/private/*'" in shown.stdout

    env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "dagster_home")}
    res = run_atlas("crawl", "--config", str(cfg), "-s", "scope.max_pages_per_origin=3", env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    fetches = pl.read_delta(str(tmp_path / "lake" / "crawl" / "fetches"))
    per_origin = fetches.filter(pl.col("kind") == "page").group_by("origin").len()
    # the run, in its own process, read the override: a budget of 3 URLs an origin (its
    # sitemap among them) instead of the file's 1,000, which would have taken every page
    assert 0 < per_origin["len"].max() <= 3
    assert per_origin["len"].sum() < len(sandbox.web.crawlable(50)) / 2
    with dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(tmp_path / "dagster_home"))) as i:
        tags = {r.tags.get("atlas/set") for r in i.get_runs()}
    assert tags == {'["scope.max_pages_per_origin=3"]'}


def test_a_cycle_deadline_ends_the_batch_and_the_next_cycle_picks_up_the_rest(
    sandbox: SandboxProcess, tmp_path: Path
) -> None:
    """limits.batch_max_s: with every origin gapped far apart, the batch stops claiming at its
    deadline, its open URLs wait with reason cycle_deadline, and the next cycle fetches them."""
    from atlas_pipeline.config import load_config
    from atlas_pipeline.crawl import Engine

    cfg = write_config(tmp_path / "atlas.yaml", sandbox_config(sandbox, tmp_path, shards=1,
                       politeness={"min_gap_s": 0.6, "max_in_flight": 1},
                       limits={"total_timeout_s": 5, "batch_max_s": 3}))  # fmt: skip
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "dagster_home")}
    sandbox.log.clear()
    first = run_atlas("crawl", "--config", str(cfg), env=env)
    assert first.returncode == 0, first.stderr[-3000:]
    starts = sorted(e["start"] for e in sandbox.log.entries())
    assert starts and starts[-1] - starts[0] <= 3 + 0.5  # nothing claimed past the deadline
    engine = Engine.from_config(load_config(cfg))
    try:
        rows = [r for r in engine.store.url_rows(0) if r["reason"] == "cycle_deadline"]
    finally:
        engine.close()
    waiting = {r["url"] for r in rows}
    assert len(waiting) >= 10 and {r["state"] for r in rows} == {"eligible"}  # open, untried
    fetched_first = set(pl.read_delta(str(tmp_path / "lake" / "crawl" / "fetches"))["url"])
    assert not waiting & fetched_first
    second = run_atlas("crawl", "--config", str(cfg), env=env)
    assert second.returncode == 0, second.stderr[-3000:]
    fetches = pl.read_delta(str(tmp_path / "lake" / "crawl" / "fetches"))
    picked_up = set(fetches.filter(pl.col("crawl_cycle") == "c0002")["url"]) & waiting
    assert len(picked_up) >= 3


def test_atlas_stats_matches_the_request_log_and_the_lake(
    sandbox: SandboxProcess, tmp_path: Path
) -> None:
    """`atlas stats` after a 2-cycle crawl: fetch statuses and per-origin fetches as the
    sandbox's own request log counts them, URL states as the store holds them, documents and
    clusters as the lake holds them; `--cycle` narrows the fetch counts to that cycle."""
    import json
    from collections import Counter

    from atlas_pipeline.config import load_config
    from atlas_pipeline.crawl import Engine

    cfg = write_config(tmp_path / "atlas.yaml",
                       sandbox_config(sandbox, tmp_path, scope={"max_pages_per_origin": 4}))  # fmt: skip
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "dagster_home")}
    empty = run_atlas("stats", "--config", str(cfg), env=env)
    assert empty.returncode == 2 and "run atlas crawl first" in empty.stderr
    sandbox.log.clear()
    res = run_atlas("crawl", "--config", str(cfg), "--cycles", "2", env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    log = sandbox.log.entries()
    # the end-of-crawl stats dump: this crawl's fetches, statuses and latency percentiles
    assert "Crawl stats (c0001, c0002):" in res.stdout
    assert f"  fetches {len(log)} (" in res.stdout
    statuses = Counter(str(e["status"]) for e in log)
    shown_statuses = re.search(r"  statuses: (.*)", res.stdout)
    assert shown_statuses is not None
    assert dict(p.split("=") for p in shown_statuses.group(1).split(", ")) == {
        k: str(v) for k, v in statuses.items()}  # fmt: skip
    assert re.search(r"  latency all: p50 [\d.]+ s, p90 [\d.]+ s, p99 [\d.]+ s", res.stdout)
    shown = run_atlas("stats", "--config", str(cfg), "--json", env=env)
    assert shown.returncode == 0, shown.stderr
    stats = json.loads(shown.stdout)
    assert stats["cycles"] == ["c0001", "c0002"]
    assert stats["fetches"] == len(log)
    assert stats["fetch_statuses"] == {
        str(k): v for k, v in Counter(e["status"] for e in log).items()
    }
    by_origin = Counter(normalize_origin(e["origin"]) for e in log)
    assert {o["origin"]: o["fetches"] for o in stats["origins"] if o["fetches"]} == by_origin
    assert stats["bytes"] > 0 and "text/html" in stats["mime_types"]
    engine = Engine.from_config(load_config(cfg))
    try:
        rows = [r for s in range(2) for r in engine.store.url_rows(s)]
    finally:
        engine.close()
    assert stats["urls"] == len(rows)
    assert stats["url_states"] == dict(Counter(str(r["state"]) for r in rows))
    docs = pl.read_delta(str(tmp_path / "lake" / "crawl" / "documents"))
    assert stats["documents"] == docs.height > 0
    clusters = pl.read_delta(str(tmp_path / "lake" / "crawl" / "dedupe_clusters"))
    assert stats["clusters"] == clusters["cluster_id"].n_unique()
    assert stats["open_urls"] > 0 and stats["queue_age_s"] >= 0  # the budget left URLs open

    second = json.loads(run_atlas("stats", "--config", str(cfg), "--cycle", "c0002", "--json",
                                  env=env).stdout)  # fmt: skip
    cycle_two = pl.read_delta(str(tmp_path / "lake" / "crawl" / "fetches")).filter(
        pl.col("crawl_cycle") == "c0002")  # fmt: skip
    assert second["fetches"] == cycle_two.height < stats["fetches"]
    table = run_atlas("stats", "--config", str(cfg), env=env).stdout
    assert "Fetch statuses" in table and "URLs by state" in table and "Origin" in table
    bad = run_atlas("stats", "--config", str(cfg), "--cycle", "c0009", env=env)
    assert bad.returncode == 2 and "cycles: c0001, c0002" in bad.stderr


def normalize_origin(origin: str) -> str:
    from atlas_pipeline.urls import origin_of
    from atlas_sandbox import normalize_url

    return origin_of(normalize_url(origin + "/"))


def test_stop_conditions_end_the_crawl_and_the_next_crawl_finishes_what_it_left(
    sandbox: SandboxProcess, tmp_path: Path
) -> None:
    """--max-pages stops the running shard runs the way Ctrl-C does (their requests in flight
    committed, no further cycle), exits 0 saying why; --max-seconds likewise; the next crawl
    finishes the partitions left, so nothing is lost or fetched twice."""
    cfg = write_config(tmp_path / "atlas.yaml", sandbox_config(sandbox, tmp_path,
                       politeness={"min_gap_s": 1.0, "max_in_flight": 1}))  # fmt: skip
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "dagster_home")}
    bad = run_atlas("crawl", "--config", str(cfg), "--max-pages", "0", env=env)
    assert bad.returncode == 2 and "must be more than 0" in bad.stderr
    sandbox.log.clear()
    res = run_atlas("crawl", "--config", str(cfg), "--cycles", "3", "--max-pages", "12", env=env)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    assert re.search(r"stopped: --max-pages 12 reached \(\d+ fetches\)", res.stdout), res.stdout
    assert "c0001 shard_000" in res.stdout and "c0002" not in res.stdout  # no further cycle
    assert "stopped (a stop condition)" in res.stdout
    requested = len(sandbox.log.entries())
    reachable = len(sandbox.web.crawlable(50))
    # it stopped soon after 12 (5 origins at 1 request/s: the last commit window, the 1 s check
    # and the runs' stop through their launcher each let a few more go), long before the end
    assert 12 <= requested <= 12 + 30 < reachable, (requested, reachable)

    timed = run_atlas("crawl", "--config", str(cfg), "--max-seconds", "3", env=env)
    assert timed.returncode == 0, timed.stderr[-3000:]
    assert "Finishing" in timed.stdout and "stopped: --max-seconds 3 reached" in timed.stdout

    done = run_atlas("crawl", "--config", str(cfg), "--resume", env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    from atlas_sandbox import normalize_url

    docs = pl.read_delta(str(tmp_path / "lake" / "crawl" / "documents"))
    missing = {normalize_url(u) for u in sandbox.web.crawlable(50)} - set(docs["url"])
    assert not missing, (sorted(missing), timed.stdout[-1500:], done.stdout[-3000:])
    assert set(docs["url"]) == {normalize_url(u) for u in sandbox.web.crawlable(50)}
    assert docs.height == docs["url"].n_unique()
    pages = [e for e in sandbox.log.entries() if e["path"] != "/robots.txt"]
    repeated = len(pages) - len({(e["host"], e["path"]) for e in pages})
    assert repeated <= 4  # at most the requests in flight at each stop, re-asked


def test_a_partition_no_batch_claimed_before_a_stop_is_finished_by_the_next_crawl(
    sandbox: SandboxProcess, tmp_path: Path
) -> None:
    """With --parallel 1, a stop condition met during shard 0's run ends the crawl before any
    other shard's run starts: no batch ever claimed their partitions, yet shard 0's frontier
    queued their seeds for the cycle (as a run cancelled while it starts, under load, leaves
    them). `--resume` finishes those partitions too, not only the one a batch claimed."""
    from atlas_pipeline.urls import origin_of, shard_of
    from atlas_sandbox import normalize_url

    origins = {origin_of(normalize_url(u)) for u in sandbox.web.seed_urls()}
    # shard 0 runs first and must hold an origin (15 pages at 1 request/s outlast the stop),
    # another shard the others: which shard an origin hashes to follows the random port
    shards = next(n for n in range(2, 9)
                  if 0 in (some := {shard_of(o, n) for o in origins}) and len(some) > 1)  # fmt: skip
    held = sorted({shard_of(o, shards) for o in origins})
    cfg = write_config(tmp_path / "atlas.yaml", sandbox_config(sandbox, tmp_path, shards=shards,
                       politeness={"min_gap_s": 1.0, "max_in_flight": 1}))  # fmt: skip
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "dagster_home")}
    # 8: past the robots.txt of shard 0's origins (at most 5) and its seeds, long before the
    # at least 16 fetches of its origins
    first = run_atlas("crawl", "--config", str(cfg), "--parallel", "1", "--max-pages", "8",
                      env=env)  # fmt: skip
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-3000:]
    assert "stopped: --max-pages 8 reached" in first.stdout, first.stdout
    assert "c0001 shard_000" in first.stdout and "c0001 shard_001" not in first.stdout

    done = run_atlas("crawl", "--config", str(cfg), "--resume", env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    names = ", ".join(f"c0001 shard_{s:03d}" for s in held)
    assert (f"Finishing {len(held)} partition(s) an earlier crawl left unfinished first: "
            f"{names}") in done.stdout, done.stdout  # fmt: skip
    docs = pl.read_delta(str(tmp_path / "lake" / "crawl" / "documents"))
    assert set(docs["url"]) == {normalize_url(u) for u in sandbox.web.crawlable(50)}
    assert docs.height == docs["url"].n_unique()
