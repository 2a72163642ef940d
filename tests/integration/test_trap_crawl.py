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
from atlas_pipeline.urls import normalize
from atlas_sandbox import traps
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


# ------------------------------------------------------------- filters combined in any order
# catalogue.example.test (issue 20 part 5): listings add or remove any of five filters in any
# order. The novelty rule stops the listing's variants after `scope.novelty_window` fetched
# ones brought nothing new, and withdraws the ones still queued, so its listing fetches stay
# about 1 + window whatever the scale: the origin's share falls as its real pages grow. The
# ordinary sandbox origins crawled alongside make up the rest of the crawl.
CATALOGUE_SCALES = (10, 15)


def _catalogue_crawl(tmp: Path, scale: int) -> dict[str, Any]:
    with running_sandbox(tmp / "requests.jsonl", 3, 120, traps=True, trap_scale=scale) as server:
        port = server.port
        cfg = sandbox_config(
            server, tmp / "data", seeds=traps.catalogue_seed_urls(port) + server.web.seed_urls(),
            shards=1, resolve={traps.CATALOGUE: "127.0.0.1"},
        )  # fmt: skip
        engine = Engine.from_config(load_config(write_config(tmp / "atlas.yaml", cfg)))
        plan_frontier(engine, "c0001", 0)
        fetch_shard(engine, "c0001", 0)
        export_urls(engine, "c0001", 0)
        engine.close()
        lake = tmp / "data" / "lake" / "crawl"
        return {
            "port": port,
            "links": pl.read_delta(str(lake / "links")),
            "fetches": pl.read_delta(str(lake / "fetches")),
            "urls": pl.read_delta(str(lake / "urls")),
        }


@pytest.fixture(scope="module")
def catalogue_crawls(tmp_path_factory: pytest.TempPathFactory) -> dict[int, dict[str, Any]]:
    return {s: _catalogue_crawl(tmp_path_factory.mktemp(f"catalogue{s}"), s)
            for s in CATALOGUE_SCALES}  # fmt: skip


@pytest.mark.parametrize("scale", CATALOGUE_SCALES)
def test_combined_filters_stay_a_small_share_and_every_item_is_fetched(
    catalogue_crawls: dict[int, dict[str, Any]], scale: int
) -> None:
    crawl = catalogue_crawls[scale]
    fetches = crawl["fetches"].filter(pl.col("kind") == "page")
    mine = fetches.filter(pl.col("url").str.contains(traps.CATALOGUE, literal=True))
    listings = mine.filter(pl.col("url").map_elements(traps.is_catalogue_listing,
                                                      return_dtype=pl.Boolean))  # fmt: skip
    items = {normalize(u) for u in traps.catalogue_product_urls(crawl["port"], scale)}
    fetched = set(mine.filter(pl.col("reason") == "fetched")["url"].to_list())
    print(
        f"\ncatalogue trap-scale {scale}: listing fetches {listings.height} / origin "
        f"fetches {mine.height} ({listings.height / mine.height:.1%}) / crawl fetches "
        f"{fetches.height} ({listings.height / fetches.height:.1%}); items fetched "
        f"{len(items & fetched)} / {len(items)}; listing URLs served "
        f"{traps.catalogue_listing_urls(scale)}"
    )
    assert listings.height < 0.05 * mine.height
    assert listings.height < 0.02 * fetches.height
    assert items <= fetched
    reasons = Counter(crawl["links"]["reason"].to_list())
    assert reasons["trap_no_novelty"] > 0, reasons  # the rejected links say why
    withdrawn = crawl["urls"].filter(pl.col("reason") == "trap_no_novelty")
    assert withdrawn.height > 0 and withdrawn["url"].map_elements(
        traps.is_catalogue_listing, return_dtype=pl.Boolean).all()  # fmt: skip
