"""A document Atlas cannot read costs that document, never the batch: a page whose parse runs
past its CPU limit and a sitemap that is not XML are each quarantined with their reason and
the error in their fetch record, and the batch goes on to the rest of the site. Both once
crashed the batch instead: their records were built with the error twice (the 100k-page
benchmark's first run met a page over the parser's CPU limit)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest
from aiohttp import web

from atlas_pipeline.config import config_from_mapping
from atlas_pipeline.crawl import Engine, fetch_shard, plan_frontier
from tests.conftest import serving_app

HOST = "failing.example.test"


def _page(paragraphs: int) -> str:
    rows = "".join(f"<div><p>Paragraph {i} with some words to extract here and there.</p>"
                   f"<a href='/x{i % 3}'>link {i}</a></div>" for i in range(paragraphs))  # fmt: skip
    return f"<html><body>{rows}</body></html>"


HEAVY = _page(40_000)  # 4 MB: several CPU seconds of extraction, over the 1 s allowed
HOME = ("<html><body><article><h1>Home</h1>" + "<p>Plain words for a plain page.</p>" * 20
        + "<a href='/heavy'>heavy</a> <a href='/ok'>ok</a></article></body></html>")  # fmt: skip


@pytest.fixture()
def failing_site() -> Iterator[int]:
    """A real loopback server: a home page, a page too heavy to parse, a readable page, and
    a sitemap (announced by robots.txt) that is not XML."""
    app = web.Application()
    port_box: list[int] = []

    async def robots(_: web.Request) -> web.Response:
        return web.Response(text=f"User-agent: *\nAllow: /\n"
                                 f"Sitemap: http://{HOST}:{port_box[0]}/broken.xml\n")  # fmt: skip

    async def page(request: web.Request) -> web.Response:
        body = {"/": HOME, "/heavy": HEAVY}.get(request.path, HOME.replace("Home", "Ok"))
        return web.Response(text=body, content_type="text/html")

    async def broken(_: web.Request) -> web.Response:
        return web.Response(text="<urlset><url><loc>http://", content_type="application/xml")

    app.router.add_get("/robots.txt", robots)
    app.router.add_get("/broken.xml", broken)
    app.router.add_get("/{p:.*}", page)
    with serving_app(app) as port:
        port_box.append(port)
        yield port


def test_an_unparseable_page_and_an_unreadable_sitemap_cost_only_themselves(
    failing_site: int, tmp_path: Path
) -> None:
    base = f"http://{HOST}:{failing_site}"
    cfg = config_from_mapping(
        {"seeds": [f"{base}/"], "data_dir": str(tmp_path), "shards": 1,
         "politeness": {"min_gap_s": 0.0}, "limits": {"parser_cpu_s": 1.0},
         "resolve": {HOST: "127.0.0.1"}, "resolve_only": True, "extraction_workers": 1},
        base_dir=tmp_path,
    )  # fmt: skip
    engine = Engine.from_config(cfg)
    try:
        plan_frontier(engine, "c0001", 0)
        result = fetch_shard(engine, "c0001", 0)
        urls = {r["url"]: r for r in engine.store.url_rows(0)}
    finally:
        engine.close()
    fetches = pl.read_delta(result.fetches.uri)
    by_url = {r["url"]: r for r in fetches.iter_rows(named=True)}
    heavy, sitemap = by_url[f"{base}/heavy"], by_url[f"{base}/broken.xml"]
    assert heavy["reason"] == "parse_timeout" and "CPU" in heavy["error"]
    assert urls[f"{base}/heavy"]["state"] == "quarantined"
    # its body is kept all the same: the worker that would have stored it with its text was
    # stopped mid-parse, so the batch stored it before committing the failure
    assert heavy["body_key"] and engine.bodies.get(heavy["body_key"]) == HEAVY.encode()
    assert sitemap["reason"] == "sitemap_unreadable" and "not XML" in sitemap["error"]
    assert urls[f"{base}/broken.xml"]["state"] == "quarantined"
    # ... and the batch went on: the rest of the site is fetched and parsed
    docs = pl.read_delta(result.documents.uri)
    assert {f"{base}/", f"{base}/ok"} <= set(docs["url"].to_list())
    assert f"{base}/heavy" not in set(docs["url"].to_list())
