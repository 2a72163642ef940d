"""A crawl of the script-built sandbox through Dagster with the render lane: the shells' text
comes from the rendered pages (ground truth from the sandbox), the plain origin is never
rendered, every request the browser caused went through Atlas (its user agent, its gaps, no
robots-disallowed script, nothing to the canary or the metadata address, no image or font)
and is a `subresource` row of `fetches`; each document says why it was or was not rendered."""

from __future__ import annotations

import itertools
import os
import re
from collections import defaultdict
from pathlib import Path

import polars as pl
import pytest

from atlas_sandbox import scripted
from tests.conftest import running_canary, running_sandbox, write_config
from tests.integration.test_cli import run_atlas

# make test runs `timing` tests after the others, one at a time: a browser's renders, on two
# cores shared with 3 other test processes, once ended a page before its slow script left
pytestmark = pytest.mark.timing

GAP_S = 0.3
UA = "AtlasBot/1.0 (+https://atlas.example.test/bot)"


def _words(text: str) -> str:
    return " ".join(re.findall(r"\w+", text))


def test_a_crawl_renders_the_script_built_pages_through_atlas_alone(tmp_path: Path) -> None:
    from atlas_pipeline.browser import chromium_path

    if chromium_path() is None:
        if os.environ.get("CI"):
            pytest.fail("Chromium is not installed; run scripts/ensure_chromium.sh")
        pytest.skip("Chromium is not installed (apt-get install -y chromium)")
    with running_canary(tmp_path / "canary.jsonl") as (canary_port, hits), running_sandbox(
        tmp_path / "requests.jsonl", 0, 12, scripted=True, canary_port=canary_port
    ) as web:  # fmt: skip
        port = web.port
        cfg = write_config(tmp_path / "atlas.yaml", {
            "seeds": scripted.seed_urls(port), "data_dir": str(tmp_path), "shards": 1,
            "user_agent": UA,
            "politeness": {"min_gap_s": GAP_S, "max_in_flight": 1},
            "limits": {"total_timeout_s": 10, "batch_max_idle_s": 20},
            # one page at a time, room for all: with one request in flight per origin, pages
            # rendered together wait on each other's slow requests (the lane test shows that)
            "render": {"navigation_timeout_s": 6, "settle_s": 6.5, "page_timeout_s": 16,
                       "concurrency": 1, "queue": 16},
            "resolve": {h: "127.0.0.1" for h in scripted.SCRIPTED_HOSTS}, "resolve_only": True,
        })  # fmt: skip
        env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "dagster_home")}
        res = run_atlas("crawl", "--config", str(cfg), env=env, timeout=600)
        assert res.returncode == 0, res.stderr[-3000:]
        log = web.log.entries()
        canary_hits = hits()

    lake = tmp_path / "lake" / "crawl"
    docs = pl.read_delta(str(lake / "documents"))
    texts = dict(pl.read_delta(str(lake / "document_texts")).select("document_id", "text").rows())
    kinds, truth = scripted.kinds(port), scripted.truth(port)
    by_url = {r["url"]: r for r in docs.iter_rows(named=True)}
    assert set(kinds) <= set(by_url), sorted(set(kinds) - set(by_url))
    for url, kind in kinds.items():
        doc = by_url[url]
        text = _words(texts[doc["text_hash"]])
        for line in truth[url].splitlines()[1:]:  # the paragraphs, as the page shows them
            assert _words(line) in text, (url, kind, line)
        expected = "render_not_needed" if kind == "plain" else "render_needed"
        assert doc["render_reason"] == expected, (url, doc["render_reason"])

    # the server's side: Atlas's user agent on every request, the browser's included
    assert log and {e["headers"]["user-agent"] for e in log} == {UA}
    paths = [e["path"] for e in log]
    assert scripted.FORBIDDEN_SCRIPT_PATH not in paths
    assert not any(p.startswith(("/img/", "/fonts/")) for p in paths)  # aborted, never sent
    assert canary_hits == []
    assert any(p.startswith("/api/article/") for p in paths)  # the XHRs went through Atlas
    starts: dict[str, list[float]] = defaultdict(list)
    for e in log:
        starts[e["host"]].append(e["start"])
    for host, times in starts.items():
        gaps = [b - a for a, b in itertools.pairwise(sorted(times))]
        assert min(gaps, default=GAP_S) >= GAP_S - 0.05, (host, min(gaps))

    fetches = pl.read_delta(str(lake / "fetches"))
    subs = fetches.filter(pl.col("kind") == "subresource")
    reasons = dict(subs.select("url", "reason").rows())
    assert subs.height > 0 and set(reasons.values()) <= {"fetched", "interrupted"}
    # the script that never ends was still loading when its page's render ended
    assert [u for u, r in reasons.items() if r == "interrupted"] == [
        scripted.url(scripted.SCRIPTED, "/drip/forever.js", port)]  # fmt: skip
    assert set(subs["original_url"].to_list()) <= set(kinds)
    logged = sum(1 for e in log if e["path"].startswith(("/api/", "/static/", "/drip/")))
    assert subs.height == logged  # every browser request the server saw is a fetches row

    # the lane's figures in the fetch batch's metadata, each class decided with its numbers
    import dagster as dg
    from dagster._core.instance.ref import InstanceRef

    with dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(tmp_path / "dagster_home"))) as i:
        event = i.get_latest_materialization_event(dg.AssetKey(["crawl", "fetches"]))
    assert event is not None and event.asset_materialization is not None
    lane = event.asset_materialization.metadata["render_lane"].value
    assert isinstance(lane, dict) and lane["browser"] == "available"
    assert lane["rendered"] >= len([k for k in kinds.values() if k != "plain"])
    assert lane["seconds"] > 0 and lane["subrequests"].get("render_resource_type", 0) > 0
    # the cdn's robots.txt was fetched for its script, and the script refused by it
    assert lane["subrequests"].get("robots_disallowed", 0) > 0
    assert "render_robots_unknown" not in lane["subrequests"]
    cdn = scripted.url(scripted.CDN, "", port).rstrip("/")
    cdn_robots = fetches.filter((pl.col("kind") == "robots") & (pl.col("origin") == cdn))
    assert cdn_robots.height == 1 and cdn_robots["reason"].to_list() == ["parsed"]
    assert [p for h, p in ((e["host"], e["path"]) for e in log) if h == scripted.CDN] == [
        "/robots.txt"]  # fmt: skip
    decided = {(d["origin"], d["page_class"]): d for d in lane["decisions"]}
    inline = decided[(scripted.url(scripted.SCRIPTED, "", port).rstrip("/"), "/inline/*")]
    assert inline["state"] == "sampling" and inline["rendered_words"] > inline["raw_words"]

    # every decision is in the store and the lake with its numbers: the almanac's articles
    # (a script that draws nothing, their text all in the raw HTML) were measured and decided
    # plain, and not one of them was rendered
    classes = {(r["origin"], r["page_class"]): r
               for r in pl.read_delta(str(lake / "render_classes")).iter_rows(named=True)}  # fmt: skip
    plain_origin = scripted.url(scripted.PLAIN, "", port).rstrip("/")
    articles = classes[(plain_origin, "/articles/*")]
    assert articles["state"] == "plain" and articles["samples"] == 3
    assert articles["raw_words"] == articles["rendered_words"] >= 3 * 200
    assert articles["share"] == 1.0 and articles["decided_at"] is not None
    assert decided[(plain_origin, "/articles/*")]["state"] == "plain"
    plain_pages = {u for u, k in kinds.items() if k == "plain"}
    assert not set(subs["original_url"].to_list()) & plain_pages
    stored = classes[(inline["origin"], "/inline/*")]
    assert (stored["state"], stored["samples"]) == ("sampling", inline["samples"])
    assert stored["rendered_words"] == inline["rendered_words"] > stored["raw_words"]
    # and in the cycle's crawl report
    (report,) = (tmp_path / "lake" / "reports").glob("c*/index.html")
    html = report.read_text()
    assert "Render lane: Documents by render reason" in html and "render_needed" in html
    assert "Render lane: Page classes: render decisions" in html and "/articles/*" in html


def test_a_lane_out_of_budget_falls_back_and_the_crawl_finishes(tmp_path: Path) -> None:
    """Budget 0: every page that would be rendered keeps its raw text as render_fallback,
    no browser request leaves, and the crawl ends normally."""
    with running_sandbox(tmp_path / "requests.jsonl", 0, 12, scripted=True) as web:
        cfg = write_config(tmp_path / "atlas.yaml", {
            "seeds": scripted.seed_urls(web.port), "data_dir": str(tmp_path), "shards": 1,
            "politeness": {"min_gap_s": 0.0, "max_in_flight": 1},
            "render": {"budget_s": 0},
            "resolve": {h: "127.0.0.1" for h in scripted.SCRIPTED_HOSTS}, "resolve_only": True,
        })  # fmt: skip
        env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "dagster_home")}
        res = run_atlas("crawl", "--config", str(cfg), env=env, timeout=600)
        assert res.returncode == 0, res.stderr[-3000:]
        paths = [e["path"] for e in web.log.entries()]
    docs = pl.read_delta(str(tmp_path / "lake" / "crawl" / "documents"))
    kinds = scripted.kinds(web.port)
    reasons = dict(docs.select("url", "render_reason").rows())
    assert {reasons[u] for u, k in kinds.items() if k != "plain"} == {"render_fallback"}
    assert {reasons[u] for u, k in kinds.items() if k == "plain"} == {"render_not_needed"}
    assert not any(p.startswith(("/api/", "/drip/", "/static/")) for p in paths)
    fetches = pl.read_delta(str(tmp_path / "lake" / "crawl" / "fetches"))
    assert fetches.filter(pl.col("kind") == "subresource").is_empty()
