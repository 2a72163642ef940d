"""A parser worker keeps what it parsed in a folder body store (issue 16, the fetch hot path):
the body and the extraction are on disk before the answer, the answer carries the text's
length and not the text (tens of kB a page the batch's process never needs), the cache
answers for bytes extracted before, and a disk error is the disk's, not a parse failure."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import zstandard

from atlas_pipeline import defaults as d
from atlas_pipeline.bodies import BodyStore, digest
from atlas_pipeline.extractor_pool import ExtractorPool, ParserFailure
from atlas_pipeline.kept_parse import Keep, text_chars
from atlas_pipeline.render_policy import words
from tests.engine.test_parser_isolation import page

URL = "http://a.example.test/"


@pytest.fixture(scope="module")
def pool() -> Iterator[ExtractorPool]:
    with ExtractorPool(1, cpu_s=30.0, memory_mb=0) as p:
        yield p


def _keep(root: Path, body: bytes, words: bool = False) -> Keep:
    return Keep(str(root), digest(body), d.EXTRACTION_VERSION, words)


def test_the_worker_stores_body_and_text_and_answers_without_the_text(
    pool: ExtractorPool, tmp_path: Path
) -> None:
    body = page(12)
    store, keep = BodyStore(tmp_path), _keep(tmp_path, body)
    out = pool.submit(body, URL, None, True, (), keep).result(timeout=120)
    ext = out["extraction"]
    assert "text" not in ext and out["reused"] is False
    stored = store.get_extraction(keep.key, d.EXTRACTION_VERSION)
    assert stored is not None and "Paragraph 11" in stored["text"]
    assert ext["text_chars"] == len(stored["text"]) == text_chars(stored)
    assert ext["text_hash"] == stored["text_hash"] and ext["title"] == stored["title"]
    assert store.get(keep.key) == body  # the body, zstd'd under its digest
    stored = Path(store.uri(keep.key).removeprefix("file://"))
    assert stored.name == f"{keep.key}.zst"
    assert zstandard.ZstdDecompressor().decompress(stored.read_bytes()) == body
    assert len(out["links"]) == 12
    # one file a page: the text rides in the body's file (a second file cost the worker
    # more than anything else it did beyond the parse)
    assert [p.name for p in tmp_path.rglob("*") if p.is_file()] == [f"{keep.key}.zst"]


def test_bytes_extracted_before_are_answered_from_the_store(
    pool: ExtractorPool, tmp_path: Path
) -> None:
    body = page(5)
    keep = _keep(tmp_path, body)
    first = pool.submit(body, URL, None, True, (), keep).result(timeout=120)
    again = pool.submit(body, URL + "other", None, True, (), keep).result(timeout=120)
    assert again["reused"] is True and first["reused"] is False
    assert again["extraction"] == first["extraction"]
    assert len(again["links"]) == 5  # links are this URL's, parsed every time


def test_links_only_still_store_the_body(pool: ExtractorPool, tmp_path: Path) -> None:
    body = page(3)
    keep = _keep(tmp_path, body)
    out = pool.submit(body, URL, None, False, (), keep).result(timeout=120)
    assert "extraction" not in out and BodyStore(tmp_path).has(keep.key)
    assert BodyStore(tmp_path).get_extraction(keep.key, d.EXTRACTION_VERSION) is None


def test_with_words_a_scripted_page_answers_its_word_count_and_never_its_text(
    pool: ExtractorPool, tmp_path: Path
) -> None:
    """The render lane's measure of the raw HTML is counted where the text is: a page with a
    script element answers its words, one without answers none (the lane needs no count:
    nothing can draw text there); neither sends the text."""
    plain = page(4)
    scripted = plain.replace(b"<body>", b"<body><script>draw()</script>")
    store = BodyStore(tmp_path)
    for body, has_script in ((scripted, True), (plain, False)):
        for attempt in ("parsed", "reused"):
            out = pool.submit(body, URL, None, True, (), _keep(tmp_path, body, True)).result(120)
            assert out["reused"] is (attempt == "reused")
            ext = out["extraction"]
            assert "text" not in ext and out["has_script"] is has_script
            stored = store.get_extraction(digest(body), d.EXTRACTION_VERSION)
            assert stored is not None and "Paragraph 3" in stored["text"]
            if has_script:
                assert ext["words"] == words(stored["text"]) > 0
            else:
                assert "words" not in ext


def test_a_store_that_cannot_be_written_is_an_os_error_not_a_parse_failure(
    pool: ExtractorPool, tmp_path: Path
) -> None:
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the store's folder should be")
    body = page(2)
    with pytest.raises(OSError, match="body store") as info:
        pool.submit(body, URL, None, True, (), _keep(blocked, body)).result(timeout=120)
    assert not isinstance(info.value, ParserFailure)
    # the worker goes on: the next document is parsed and kept
    ok = pool.submit(body, URL, None, True, (), _keep(tmp_path, body)).result(timeout=120)
    assert ok["extraction"]["text_chars"] > 0


def test_a_stored_body_is_touched_before_its_parse_so_the_sweeper_spares_its_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bytes stored a while ago, unreferenced, fetched again: the orphan sweeper runs while
    the worker parses them. The worker touched the body before it looked in the cache, so
    the sweeper spares the body and the text it carries, which the answer says it reused."""
    import os
    import time

    from atlas_pipeline import kept_parse

    body = page(6)
    keep = _keep(tmp_path, body)
    store = BodyStore(tmp_path)
    first = kept_parse.parse_kept(body, URL, None, True, (), keep)
    path = Path(store.uri(keep.key).removeprefix("file://"))
    old = time.time() - 2 * 86_400
    os.utime(path, (old, old))
    swept: list[int] = []
    parse = kept_parse.parse_page

    def parse_during_a_sweep(*args: object, **kwargs: object) -> dict[str, object]:
        swept.append(store.sweep_orphans(set, grace_s=86_400).deleted)
        return parse(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(kept_parse, "parse_page", parse_during_a_sweep)
    again = kept_parse.parse_kept(body, URL, None, True, (), keep)
    assert swept == [0] and again["reused"] is True
    assert again["extraction"] == first["extraction"]
    stored = store.get_extraction(keep.key, d.EXTRACTION_VERSION)
    assert stored is not None and "Paragraph 5" in stored["text"]
