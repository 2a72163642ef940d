"""Identical bytes are extracted once, even under two URLs, and both URLs keep a document."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest
from aiohttp import web

from atlas_pipeline.batch import run_batch
from atlas_pipeline.config import config_from_mapping
from atlas_pipeline.crawl import Engine, fetch_shard, plan_frontier, write_fetch_partitions
from atlas_pipeline.extractor_pool import shared_pool
from atlas_pipeline.records import Document
from tests.conftest import serving_app

ARTICLE = (
    "<html lang='en'><head><title>Mirror</title></head><body><nav><a href='/a'>a</a>"
    "<a href='/b'>b</a><a href='/c'>c</a></nav><article><h1>The mirrored article</h1>"
    + "<p>Harbour cranes unloaded the winter grain while the council argued about tolls.</p>" * 40
    + "</article></body></html>"
)
OTHER = ARTICLE.replace("mirrored article", "different article").replace("winter", "summer")


def _site(pages: dict[str, str]) -> Iterator[int]:
    """A real loopback server answering each path of `pages` with its HTML, any other with a
    404 (robots.txt: allow all)."""
    app = web.Application()

    async def page(request: web.Request) -> web.Response:
        if request.path not in pages:
            raise web.HTTPNotFound()
        return web.Response(text=pages[request.path], content_type="text/html")

    async def robots(_: web.Request) -> web.Response:
        return web.Response(text="User-agent: *\nAllow: /\n")

    app.router.add_get("/robots.txt", robots)
    app.router.add_get("/{p}", page)
    with serving_app(app) as port:
        yield port


@pytest.fixture()
def mirror_site() -> Iterator[int]:
    """/a and /b return the same bytes, /c different ones."""
    yield from _site({"/a": ARTICLE, "/b": ARTICLE, "/c": OTHER})


def test_same_bytes_under_two_urls_are_extracted_once(mirror_site: int, tmp_path: Path) -> None:
    cfg = config_from_mapping(
        {"seeds": [f"http://mirror.example.test:{mirror_site}/a"], "data_dir": str(tmp_path),
         "shards": 1, "politeness": {"min_gap_s": 0.0},
         "resolve": {"mirror.example.test": "127.0.0.1"}, "resolve_only": True},
        base_dir=tmp_path,
    )  # fmt: skip
    engine = Engine.from_config(cfg)
    committed: list[Document | None] = []  # documents rows as the store took them
    commit_batch = engine.store.commit_batch

    def spy(results, cycle, now):  # type: ignore[no-untyped-def]
        committed.extend(o.document for _, o in results)
        return commit_batch(results, cycle, now)

    engine.store.commit_batch = spy  # type: ignore[method-assign]
    plan_frontier(engine, "c0001", 0)
    result = fetch_shard(engine, "c0001", 0)
    assert result.stats.requests == 3
    # every URL a claim leased was requested once; robots.txt tasks are not counted
    assert result.stats.claimed == 3 and 1 <= result.stats.claims <= 3
    assert result.stats.extracted == 2  # /a (or /b) and /c
    assert result.stats.extraction_reused == 1
    docs = engine.lake.with_text(pl.read_delta(result.documents.uri)).sort("url")
    assert docs["url"].str.extract(r"(/\w)$").to_list() == ["/a", "/b", "/c"]
    a, b, c = docs.iter_rows(named=True)
    assert a["text_hash"] == b["text_hash"] != c["text_hash"]
    assert a["body_key"] == b["body_key"] and a["title"] == b["title"] == "The mirrored article"
    assert "winter grain" in a["text"] and "summer grain" in c["text"]
    # the mirror's text is stored once in the lake, mapped from both URLs
    texts = engine.lake.read("document_texts")
    assert texts.height == 2 and texts.filter(pl.col("document_id") == a["text_hash"]).height == 1
    assert result.document_texts.rows == 2
    # the coordination store never took a copy of the text: it lives once, in the body store
    # (its fetch records leave the store once the partition is in the lake, so the commits
    # are where to look)
    assert sum(d is not None for d in committed) == 3
    assert all(d is None or "text" not in json.loads(d.to_json()) for d in committed)
    assert list(engine.store.fetch_records("c0001", 0)) == []


@pytest.fixture()
def twin_site() -> Iterator[int]:
    """/a and /b: different bytes (a comment apart), the same extracted text."""
    yield from _site({"/a": ARTICLE, "/b": ARTICLE.replace("<body>", "<body><!-- b -->")})


def test_a_text_whose_first_body_is_gone_is_taken_from_another_that_holds_it(
    twin_site: int, tmp_path: Path
) -> None:
    cfg = config_from_mapping(
        {"seeds": [f"http://twin.example.test:{twin_site}/a",
                   f"http://twin.example.test:{twin_site}/b"],
         "data_dir": str(tmp_path), "shards": 1, "politeness": {"min_gap_s": 0.0},
         "scope": {"max_depth": 0},
         "resolve": {"twin.example.test": "127.0.0.1"}, "resolve_only": True},
        base_dir=tmp_path,
    )  # fmt: skip
    engine = Engine.from_config(cfg)
    plan_frontier(engine, "c0001", 0)
    lease = engine.store.acquire_batch("c0001", 0, "test", time.time())
    pool = shared_pool(cfg.extraction_workers, cfg.limits.parser_cpu_s,
                       cfg.limits.parser_memory_mb)  # fmt: skip
    run_batch(cfg, engine.store, engine.bodies, pool, "c0001", 0)
    docs = [r["document"] for r in engine.store.fetch_records("c0001", 0) if r["document"]]
    assert len(docs) == 2 and docs[0]["text_hash"] == docs[1]["text_hash"]
    assert docs[0]["body_key"] != docs[1]["body_key"]
    # the first record's body (and the text riding in its file) expired before the write
    first = engine.bodies.root / docs[0]["body_key"][:2] / docs[0]["body_key"][2:4]
    for path in first.glob(f"{docs[0]['body_key']}*"):
        path.unlink()
    assert engine.bodies.get_extraction(docs[0]["body_key"], docs[0]["extraction_version"]) is None
    written = write_fetch_partitions(engine, "c0001", 0, lease.fence)
    texts = engine.lake.read("document_texts")
    assert written[4].rows == 1 and texts["document_id"].to_list() == [docs[0]["text_hash"]]
    assert "winter grain" in texts["text"][0]
    engine.close()
