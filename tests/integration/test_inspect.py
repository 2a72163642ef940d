"""`atlas inspect URL` on a real crawl of the sandbox web: a fetched page, a robots-blocked
URL, a link rejected at discovery, an unknown URL and a bad one, each explained from the
coordination store and the Delta tables the crawl wrote."""

from __future__ import annotations

import contextlib
import io
import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from assets.cli import main
from atlas_pipeline.config import load_config
from atlas_pipeline.crawl import Engine, cluster_documents, export_urls, fetch_shard, plan_frontier
from tests.conftest import running_sandbox, sandbox_config, write_config

ROOT = Path(__file__).resolve().parents[2]


def inspect(cfg: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "assets.cli", "inspect", *args, "--config", str(cfg)],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


_IN_HOURS = re.compile(r"\(in (\d+\.\d) h\)")


def assert_same_verdict_but_the_clock(a: str, b: str) -> None:
    """Two verdicts rendered moments apart are the same text but for the hours left until
    the revisit, which may differ by one rounding step (0.1 h) when the calls straddle it."""
    ha, hb = _IN_HOURS.findall(a), _IN_HOURS.findall(b)
    assert len(ha) == len(hb) == 1, (a, b)
    assert abs(float(ha[0]) - float(hb[0])) <= 0.1 + 1e-9, (a, b)
    assert _IN_HOURS.sub("(in ? h)", a) == _IN_HOURS.sub("(in ? h)", b)


def inspect_json(cfg: Path, url: str) -> dict[str, Any]:
    """`atlas inspect URL --json` in this process (`inspect` above runs the real
    command line; this saves an interpreter start per call)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["inspect", url, "--json", "--config", str(cfg)])
    assert code == 0, out.getvalue()
    return dict(json.loads(out.getvalue()))


@pytest.fixture(scope="module")
def crawl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One cycle of the three publishers (robots rules on news-a, docs-b and store-c), one
    shard; then an operator pauses docs-b."""
    tmp = tmp_path_factory.mktemp("inspect")
    with running_sandbox(tmp / "requests.jsonl", 0, 12) as server:
        cfg_path = write_config(tmp / "atlas.yaml",
                                sandbox_config(server, tmp / "data", shards=1))  # fmt: skip
        engine = Engine.from_config(load_config(cfg_path))
        plan_frontier(engine, "c0001", 0)
        fetch_shard(engine, "c0001", 0)
        export_urls(engine, "c0001", 0)
        cluster_documents(engine, "c0001", 0)
        requests = server.log.entries()
        docs_origin = server.url("docs-b.example.test").rstrip("/")
        engine.store.pause("origin", docs_origin, "complaint #12", "ops", time.time())
        urls = engine.store.url_rows(0)
        robots = {r["origin"]: engine.store.robots(r["origin"]) for r in urls}
        engine.close()
    lake = tmp / "data" / "lake" / "crawl"
    yield {
        "cfg": cfg_path, "urls": {r["url"]: r for r in urls}, "robots": robots,
        "requests": requests, "docs_origin": docs_origin,
        **{t: pl.read_delta(str(lake / t)) for t in ("fetches", "links", "documents")},
    }  # fmt: skip


def test_a_fetched_page_shows_its_fetch_discovery_document_and_pause(
    crawl: dict[str, Any],
) -> None:
    fetches: pl.DataFrame = crawl["fetches"]
    page = (
        fetches.filter((pl.col("reason") == "fetched") & (pl.col("depth") == 1)
                       & pl.col("url").str.starts_with(crawl["docs_origin"]))
        .sort("url")["url"][0]
    )  # fmt: skip
    row = crawl["urls"][page]
    # any spelling of it: host case, a fragment and a tracking parameter
    spelled = page.replace("docs-b", "DOCS-B") + "?utm_source=mail#top"
    got = inspect_json(crawl["cfg"], spelled)
    assert got["url"] == page and got["known"] is True
    mine = fetches.filter(pl.col("url") == page)
    assert len(got["fetches"]) == mine.height == 1
    assert (got["fetches"][0]["status"], got["fetches"][0]["reason"]) == (200, "fetched")
    assert got["fetches"][0]["fetch_id"] == mine["fetch_id"][0]
    assert got["verdict"].startswith("fetched 1 time; last 200 fetched at ")
    assert "due again" in got["verdict"] and "(first_visit)" in got["verdict"]
    assert got["verdict"].endswith(f"origin {crawl['docs_origin']} paused by ops: complaint #12")
    # where it was discovered: every link row pointing at it, the admitting one first
    links = crawl["links"].filter(pl.col("url") == page)
    assert len(got["discovered_by"]) == links.height > 0
    first = got["discovered_by"][0]
    assert first["first"] and first["source_url"] == row["source"]
    assert first["reason"] == "admitted"
    assert got["catalogue"]["state"] == "fetched" and got["catalogue"]["depth"] == 1
    doc = crawl["documents"].filter(pl.col("url") == page)
    assert [d["title"] for d in got["documents"]] == doc["title"].to_list()
    assert got["documents"][0]["text_hash"] == doc["text_hash"][0]
    assert got["catalogue"]["document_id"] == got["dedupe"][0]["document_id"]
    assert [e["document_id"] for e in got["index_events"]] == [got["catalogue"]["document_id"]]
    assert got["robots"]["allowed"] is True
    log = got["operator"]["log"]
    assert [(r["action"], r["value"], r["who"]) for r in log] == [
        ("pause", crawl["docs_origin"], "ops")
    ]
    # the text report says the same, verdict first; only the "(in 22.2 h)" until the
    # revisit may have moved on by a rounding step between the two calls
    res = inspect(crawl["cfg"], page)
    assert res.returncode == 0, res.stderr
    text = res.stdout
    assert_same_verdict_but_the_clock(text.splitlines()[0], f"verdict: {got['verdict']}")
    assert "Fetches (1)" in text and " 200 fetched " in text
    assert f"first: c0001  {row['source']}" in text
    assert f"{doc['title'][0]!r}" in text and "complaint #12" in text


def test_a_robots_blocked_url_names_the_policy_version_and_the_rule(
    crawl: dict[str, Any],
) -> None:
    blocked = sorted(u for u, r in crawl["urls"].items()
                     if r["state"] == "blocked" and "/cart/" in u)  # fmt: skip
    assert blocked, "store-c links to its /cart/ pages"
    url = blocked[0]
    version = crawl["robots"][crawl["urls"][url]["origin"]].version
    got = inspect_json(crawl["cfg"], url)
    assert (
        got["verdict"] == f"never fetched: blocked by robots (policy v{version}: Disallow: /cart/)"
    )
    assert got["fetches"] == [] and crawl["fetches"].filter(pl.col("url") == url).height == 0
    path = url.split(":", 2)[2].split("/", 1)[1]
    assert not [r for r in crawl["requests"] if r["path"] == f"/{path}"]  # never requested
    robots = got["robots"]
    assert (robots["allowed"], robots["group"], robots["rule"]) == (False, "*", "Disallow: /cart/")
    assert robots["current_version"] == robots["decided_version"] == version
    assert got["catalogue"]["reason"] == "robots_disallowed"
    # news-a has a group of its own for AtlasBot: that group, not "*", decides
    drafts = next(u for u, r in crawl["urls"].items() if "/drafts/" in u)
    text = inspect(crawl["cfg"], drafts).stdout
    assert "blocked by robots" in text.splitlines()[0]
    assert "DISALLOWED: group User-agent: atlasbot: Disallow: /drafts/ matches /drafts/" in text


def test_a_link_rejected_at_discovery_gives_its_reason(crawl: dict[str, Any]) -> None:
    links: pl.DataFrame = crawl["links"]
    outside = links.filter(pl.col("reason") == "host_not_allowed").sort("url")["url"][0]
    got = inspect_json(crawl["cfg"], outside)
    rows = links.filter(pl.col("url") == outside)
    assert got["verdict"].startswith(f"rejected at discovery: host_not_allowed ({rows.height} link")
    assert got["catalogue"] is None and got["fetches"] == []
    assert sorted(r["source_url"] for r in got["discovered_by"]) == sorted(rows["source_url"])


def test_an_unknown_url_says_so_and_exits_1(crawl: dict[str, Any]) -> None:
    page = next(iter(crawl["urls"]))
    unknown = page.rstrip("/") + "/no-such-page-anywhere"
    res = inspect(crawl["cfg"], unknown)
    assert res.returncode == 1 and res.stdout == ""
    assert f"{unknown} was never seen by this crawl" in res.stderr
    assert "hint: looked up as" in res.stderr and "in scope" in res.stderr
    res = inspect(crawl["cfg"], "http://elsewhere.example.net/", "--json")
    assert res.returncode == 1
    got = json.loads(res.stdout)
    assert got["known"] is False and "host_not_allowed" in got["hint"]


def test_a_bad_url_is_one_clear_error(crawl: dict[str, Any]) -> None:
    res = inspect(crawl["cfg"], "ftp://files.example.test/x")
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "Traceback" not in res.stderr
    assert "bad URL" in res.stderr and "scheme 'ftp' is not crawlable" in res.stderr
    res = inspect(crawl["cfg"], "http://")
    assert res.returncode == 2 and "bad URL" in res.stderr
