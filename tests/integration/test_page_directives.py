"""Page-level robots directives end to end: the real engine crawls the sandbox's directive
origin (sandbox/directives.py) on loopback, and the Delta tables say what it decided.

- noindex pages (meta robots, a meta tag naming AtlasBot, X-Robots-Tag with and without our
  prefix) have documents, with index_reason noindex, but no index event;
- nofollow pages' links carry meta_nofollow and their targets are never requested, unless
  scope.follow_nofollow, which lets them through as it does rel=nofollow;
- another bot's prefix or meta name does not apply: that page is indexed as usual;
- in a second cycle, a page that was delivered and now says noindex emits a delete event for
  the document delivered; nothing else emits anything (its content did not change).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from atlas_pipeline.config import CrawlConfig, config_from_mapping
from atlas_pipeline.crawl import Engine, export_urls, fetch_shard, plan_frontier
from atlas_pipeline.outbox import DELETE, UPSERT
from atlas_pipeline.urls import shard_key
from atlas_sandbox import SandboxServer, SandboxWeb
from atlas_sandbox import directives as site

HOST = site.HOST


def _config(data: Path, port: int, **scope: Any) -> CrawlConfig:
    return config_from_mapping(
        {
            "seeds": [f"http://{HOST}:{port}/"],
            "data_dir": str(data),
            "shards": 1,
            "politeness": {"min_gap_s": 0.0},
            "scope": {"max_depth": 5, **scope},
            "limits": {"total_timeout_s": 10, "batch_max_idle_s": 20},
            "resolve": {HOST: "127.0.0.1"},
            "resolve_only": True,
            # every page is due again by the next cycle
            "revisit_interval_s": 0.5,
            "recrawl": {"min_interval_s": 0.2, "jitter": 0.0},
        },
        base_dir=data,
    )


def _cycle(cfg: CrawlConfig, cycle: str) -> None:
    engine = Engine.from_config(cfg)
    try:
        plan_frontier(engine, cycle, 0)
        fetch_shard(engine, cycle, 0)
        export_urls(engine, cycle, 0)
    finally:
        engine.close()


def _tables(cfg: CrawlConfig, cycle: str) -> dict[str, pl.DataFrame]:
    lake = Engine.from_config(cfg)
    try:
        return {t: lake.lake.read_partition(t, cycle, shard_key(0)) if t != "urls" else lake.lake.read(t)
                for t in ("fetches", "documents", "links", "index_ready", "urls")}  # fmt: skip
    finally:
        lake.close()


@pytest.fixture(scope="module")
def crawled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("directives")
    with SandboxServer(SandboxWeb(seed=7, generated_origins=0), directives=True) as server:
        cfg = _config(tmp / "data", server.port)
        _cycle(cfg, "c0001")
        first_log = server.log.entries()
        first = _tables(cfg, "c0001")
        time.sleep(0.6)  # past every revisit interval
        assert server.bump_generation() == 1
        server.log.clear()
        _cycle(cfg, "c0002")
        second = _tables(cfg, "c0002")
        # the same crawl with follow_nofollow: the nofollow pages' links are followed
        follow = _config(tmp / "follow", server.port, follow_nofollow=True)
        server.log.clear()
        _cycle(follow, "c0001")
        follow_log = server.log.entries()
        yield {"port": server.port, "first": first, "first_log": first_log,
               "second": second, "follow": _tables(follow, "c0001"), "follow_log": follow_log}  # fmt: skip


def _url(port: int, path: str) -> str:
    return f"http://{HOST}:{port}{path}"


def _paths(port: int, urls: list[str]) -> set[str]:
    prefix = f"http://{HOST}:{port}"
    return {u.removeprefix(prefix) for u in urls}


def _requested(log: list[dict[str, Any]]) -> set[str]:
    return {e["path"] for e in log if e["host"] == HOST and e["path"] != "/robots.txt"}


def test_every_page_is_fetched_and_stored(crawled: dict[str, Any]) -> None:
    docs = crawled["first"]["documents"]
    stored = _paths(crawled["port"], docs["url"].to_list())
    assert set(site.pages()) <= stored
    for row in docs.iter_rows(named=True):
        path = row["url"].removeprefix(f"http://{HOST}:{crawled['port']}")
        noindex = path in site.pages() and site.says(path)[0]
        assert row["index_reason"] == ("noindex" if noindex else None), path
        assert row["withdrawn_document_id"] is None, path  # nothing was delivered before


def test_noindex_pages_have_no_index_event(crawled: dict[str, Any]) -> None:
    port, tables = crawled["port"], crawled["first"]
    events = tables["index_ready"]
    assert set(events["action"].to_list()) == {UPSERT}
    fetched = _paths(port, tables["documents"]["url"].to_list())
    assert _paths(port, events["url"].to_list()) == site.indexed(0) & fetched
    for name in ("meta-noindex", "meta-atlasbot-none", "header-noindex", "header-several"):
        assert f"/directives/{name}" not in _paths(port, events["url"].to_list()), name


def test_another_bots_directives_do_not_apply(crawled: dict[str, Any]) -> None:
    indexed = _paths(crawled["port"], crawled["first"]["index_ready"]["url"].to_list())
    assert {"/directives/header-otherbot-noindex", "/directives/meta-otherbot-noindex",
            "/directives/plain"} <= indexed  # fmt: skip
    assert {"/targets/header-otherbot-noindex", "/targets/header-several"} <= _requested(
        crawled["first_log"]
    )


def test_nofollow_pages_links_are_recorded_not_followed(crawled: dict[str, Any]) -> None:
    port, links = crawled["port"], crawled["first"]["links"]
    requested = _requested(crawled["first_log"])
    for path in site.pages():
        row = links.filter((pl.col("source_url") == _url(port, path)) & (pl.col("kind") == "link"))
        assert row["url"].to_list() == [_url(port, site.target(path))], path
        nofollow = site.says(path)[1]
        assert row["reason"].to_list() == ["meta_nofollow" if nofollow else "admitted"], path
        assert (site.target(path) in requested) is not nofollow, path
    assert requested == {"/", *site.pages(), *site.followed(0)}
    fetched = _paths(port, crawled["first"]["fetches"]["url"].to_list())
    assert not fetched & (set(map(site.target, site.pages())) - site.followed(0))


def test_follow_nofollow_follows_them_as_it_does_rel_nofollow(crawled: dict[str, Any]) -> None:
    port, links = crawled["port"], crawled["follow"]["links"]
    assert "meta_nofollow" not in links["reason"].to_list()
    assert _requested(crawled["follow_log"]) == {"/", *site.pages(),
                                                 *map(site.target, site.pages())}  # fmt: skip
    # noindex still holds: follow_nofollow is about links only
    indexed = _paths(port, crawled["follow"]["index_ready"]["url"].to_list())
    assert "/directives/meta-noindex" not in indexed


def test_a_delivered_page_turning_noindex_is_deleted(crawled: dict[str, Any]) -> None:
    port, first, second = crawled["port"], crawled["first"], crawled["second"]
    turned = _url(port, f"/directives/{site.TURNS}")
    (delivered,) = first["index_ready"].filter(pl.col("url") == turned).iter_rows(named=True)
    assert delivered["action"] == UPSERT
    (doc,) = second["documents"].filter(pl.col("url") == turned).iter_rows(named=True)
    assert doc["index_reason"] == "noindex"
    assert doc["withdrawn_document_id"] == delivered["document_id"]
    # the only event of the second cycle: nothing else changed, and pages that were never
    # delivered are never deleted
    (event,) = second["index_ready"].iter_rows(named=True)
    assert (event["action"], event["url"], event["reason"]) == (DELETE, turned, "noindex")
    assert event["document_id"] == delivered["document_id"]
    assert event["event_id"] != delivered["event_id"]
    # and the catalogue knows the URL's document is withheld now
    urls = second["urls"].filter(pl.col("url") == turned)
    assert urls["document_id"].to_list() == [f"noindex:{delivered['document_id']}"]
