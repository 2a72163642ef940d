"""A crawl of the trap origins (`atlas web --traps`) at two depths (issue: URL identity,
"Done when"): the calendar, the facets, pagination and repeating paths are cut by their
caps with reason codes; the catalogue holds exactly as many URLs when every trap is ten
times deeper; every sitemap-only and feed-only page is fetched, and robots still rules
sitemap entries."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from atlas_pipeline.config import load_config
from atlas_pipeline.crawl import Engine, export_urls, fetch_shard, plan_frontier
from atlas_pipeline.sandbox import traps
from atlas_pipeline.urls import normalize
from tests.conftest import running_sandbox, sandbox_config, write_config


def _crawl(tmp: Path, scale: int) -> dict[str, Any]:
    with running_sandbox(tmp / "requests.jsonl", 0, 12, traps=True, trap_scale=scale) as server:
        port = server.port
        feed = tmp / "partners.tsv"
        traps.write_partner_feed(feed, port)
        cfg = sandbox_config(
            server, tmp / "data", seeds=traps.seed_urls(port), shards=1,
            resolve={h: "127.0.0.1" for h in traps.TRAP_HOSTS},
            discovery={"feed_file": str(feed)},
        )  # fmt: skip
        engine = Engine.from_config(load_config(write_config(tmp / "atlas.yaml", cfg)))
        plan_frontier(engine, "c0001", 0)
        fetch_shard(engine, "c0001", 0)
        export_urls(engine, "c0001", 0)
        rows = engine.store.url_rows(0)
        engine.close()
        lake = tmp / "data" / "lake" / "crawl"
        return {
            "port": port,
            "urls": rows,
            "links": pl.read_delta(str(lake / "links")),
            "fetches": pl.read_delta(str(lake / "fetches")),
            "requests": server.log.entries(),
        }


@pytest.fixture(scope="module")
def crawls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[int, dict[str, Any]]]:
    yield {s: _crawl(tmp_path_factory.mktemp(f"traps{s}"), s) for s in (1, 10)}


def test_traps_are_cut_by_their_caps_with_reason_codes(crawls: dict[int, dict[str, Any]]) -> None:
    links = crawls[1]["links"]
    reasons = Counter(links["reason"].to_list())
    for cap in ("calendar_cap", "query_variant_cap", "pagination_cap", "repeating_path"):
        assert reasons[cap] > 0, (cap, reasons)
    urls = [r["url"] for r in crawls[1]["urls"]]
    months = [u for u in urls if "/calendar/" in u and u.count("/") == 5]
    assert len(months) == 36  # the calendar cap, of 241 months
    listings = [u for u in urls if "/shop?" in u]
    assert len(listings) <= 100  # the facet cap, of 1440 listings
    pages = [u for u in urls if "/list?page=" in u]
    assert max(int(u.rsplit("=", 1)[1]) for u in pages) == 50  # the pagination cap


def test_a_ten_times_deeper_trap_adds_no_url(crawls: dict[int, dict[str, Any]]) -> None:
    shallow, deep = (Counter(r["origin"].split(":")[1] for r in crawls[s]["urls"]) for s in (1, 10))
    assert shallow == deep  # per host: the caps, not the trap's extent, decide


def test_every_sitemap_only_and_feed_only_page_is_fetched(
    crawls: dict[int, dict[str, Any]],
) -> None:
    crawl = crawls[1]
    fetched = set(crawl["fetches"].filter(pl.col("reason") == "fetched")["url"].to_list())
    port = crawl["port"]
    for page in traps.sitemap_only_urls(port) + traps.feed_only_urls(port):
        assert normalize(page) in fetched, page
    sitemaps = crawl["fetches"].filter(pl.col("kind") == "sitemap")
    assert sitemaps.height == len(traps.SITEMAP_PATHS) + 1  # the index and its three
    asked = {r["path"] for r in crawl["requests"] if r["host"] == traps.FEEDS}
    assert not any(p.startswith(traps.FEEDS_DISALLOWED) for p in asked)


def test_session_ids_and_tracking_parameters_never_reach_the_catalogue(
    crawls: dict[int, dict[str, Any]],
) -> None:
    urls = [r["url"] for r in crawls[1]["urls"]]
    for marker in ("sid=", "jsessionid", "utm_", "gclid", "fbclid"):
        assert not [u for u in urls if marker in u.lower()], marker
    products = {normalize(u) for u in traps.product_urls(crawls[1]["port"])}
    assert products <= set(urls)
