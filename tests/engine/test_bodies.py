"""The content-addressed body store: sha256 keys, zstd on disk (gzip still read), idempotent
put, extraction cache."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import time
from pathlib import Path

import pytest
import zstandard

from atlas_pipeline.bodies import BodyStore, _slug, digest
from atlas_pipeline.body_codec import pack

BODY = b"<html><body><p>chip supply</p></body></html>"


@pytest.fixture
def store(tmp_path: Path) -> BodyStore:
    return BodyStore(tmp_path / "bodies")


def files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def test_key_is_the_sha256_of_the_raw_bytes(store: BodyStore) -> None:
    key = store.put(BODY)
    assert key == hashlib.sha256(BODY).hexdigest() == digest(BODY)


@pytest.mark.parametrize("body", [BODY, b"", bytes(range(256)) * 100])
def test_get_round_trips(store: BodyStore, body: bytes) -> None:
    key = store.put(body)
    assert store.has(key)
    assert store.get(key) == body


def test_stored_file_is_zstd_under_a_fanned_out_path(store: BodyStore) -> None:
    key = store.put(BODY)
    path = store.root / key[:2] / key[2:4] / f"{key}.zst"
    assert zstandard.ZstdDecompressor().decompress(path.read_bytes()) == BODY
    assert store.uri(key) == path.as_uri()
    assert files(store.root) == [path]


def test_put_is_idempotent(store: BodyStore) -> None:
    key = store.put(BODY)
    [path] = files(store.root)
    before = (path.read_bytes(), path.stat().st_ino)
    assert store.put(BODY) == key
    assert files(store.root) == [path]  # no second file, no temp files left behind
    assert (path.read_bytes(), path.stat().st_ino) == before  # not rewritten, only touched


def test_zstd_output_is_deterministic(tmp_path: Path) -> None:
    a, b = BodyStore(tmp_path / "a"), BodyStore(tmp_path / "b")
    key = a.put(BODY)
    b.put(BODY)
    rel = Path(key[:2]) / key[2:4] / f"{key}.zst"
    assert (a.root / rel).read_bytes() == (b.root / rel).read_bytes()


def test_different_bytes_get_different_keys(store: BodyStore) -> None:
    k1, k2 = store.put(BODY), store.put(BODY + b" ")
    assert k1 != k2
    assert store.get(k1) == BODY
    assert store.get(k2) == BODY + b" "


def test_missing_key(store: BodyStore) -> None:
    key = digest(b"never stored")
    assert not store.has(key)
    with pytest.raises(FileNotFoundError):
        store.get(key)


def test_extraction_cache_round_trips_by_version(store: BodyStore) -> None:
    key = store.put(BODY)
    result = {"title": "Chip supply \u2014 \u00e9t\u00e9", "text": "chip supply", "links": [1, 2]}
    assert store.get_extraction(key, "trafilatura/v1") is None
    store.put_extraction(key, "trafilatura/v1", result)
    assert store.get_extraction(key, "trafilatura/v1") == result
    # another extraction version is a cache miss, and does not clobber the first
    assert store.get_extraction(key, "trafilatura/v2") is None
    store.put_extraction(key, "trafilatura/v2", {"text": "v2"})
    assert store.get_extraction(key, "trafilatura/v1") == result
    assert store.get_extraction(key, "trafilatura/v2") == {"text": "v2"}


def test_extraction_cache_is_per_body(store: BodyStore) -> None:
    k1, k2 = store.put(b"one"), store.put(b"two")
    store.put_extraction(k1, "v1", {"text": "one"})
    assert store.get_extraction(k2, "v1") is None


def test_the_extraction_cache_is_utf8_json_either_way(store: BodyStore) -> None:
    """A cache written before orjson (json.dumps, ensure_ascii=False) reads back, and what is
    written now is the same UTF-8 JSON: non-ASCII text as itself, not escaped."""
    key = store.put(BODY)
    result = {"text": "Grüße, 東京 — naïve \u2028 line", "title": None, "text_chars": 31}
    store.put_extraction(key, "v1", result)
    (written,) = [p for p in files(store.root) if ".extract-" in p.name]
    raw = written.read_bytes()
    assert json.loads(raw.decode("utf-8")) == result
    assert "東京".encode() in raw and b"\\u" not in raw
    written.write_bytes(json.dumps(result, ensure_ascii=False).encode("utf-8"))
    assert store.get_extraction(key, "v1") == result


def test_put_extraction_overwrites(store: BodyStore) -> None:
    key = store.put(BODY)
    store.put_extraction(key, "v1", {"text": "old"})
    store.put_extraction(key, "v1", {"text": "new"})
    assert store.get_extraction(key, "v1") == {"text": "new"}
    assert not [p for p in files(store.root) if p.name.startswith(".tmp-")]


# a parsed body's file carries its extraction ------------------------------------------------
RESULT = {"title": "Chip supply", "text": "Grüße, 東京 chip supply", "text_hash": "ab"}


def test_a_parsed_body_is_one_file_that_holds_its_extraction(store: BodyStore) -> None:
    """What a parser worker writes: the body and its extraction in one file (not two a
    page), which stays a plain zstd file of the body for any decoder."""
    key = digest(BODY)
    store.put_parsed(key, BODY, "v1", RESULT)
    path = store.root / key[:2] / key[2:4] / f"{key}.zst"
    assert files(store.root) == [path]
    assert store.get(key) == BODY and store.has(key)
    assert store.get_extraction(key, "v1") == RESULT
    assert store.get_extraction(key, "v2") is None  # another version's is not this one
    data = path.read_bytes()
    assert zstandard.ZstdDecompressor().decompress(data) == BODY  # stops after the body
    # a decoder that reads every frame passes over the extraction's (a skippable frame)
    reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data), read_across_frames=True)
    assert reader.read() == BODY


def test_a_parsed_body_without_an_extraction_is_the_body_alone(store: BodyStore) -> None:
    key = digest(BODY)
    store.put_parsed(key, BODY, "v1", None)
    assert store.get_extraction(key, "v1") is None
    [path] = files(store.root)
    assert path.read_bytes() == pack(BODY)  # what `put` writes: no frame but the body's


def test_a_parsed_body_stored_before_is_touched_and_its_extraction_kept_apart(
    store: BodyStore,
) -> None:
    key = store.put(BODY)
    [path] = files(store.root)
    before = (path.read_bytes(), path.stat().st_ino)
    _age(store, key, 2 * DAY)
    store.put_parsed(key, BODY, "v1", RESULT)
    assert (path.read_bytes(), path.stat().st_ino) == before  # the body is not rewritten
    assert path.stat().st_mtime > time.time() - DAY  # but touched: in use
    assert [p.name for p in files(store.root)] == [
        f"{key}.extract-{_slug('v1')}.json",
        f"{key}.zst",
    ]
    assert store.get_extraction(key, "v1") == RESULT


def test_an_extraction_written_later_wins_over_the_one_in_the_body_file(
    store: BodyStore,
) -> None:
    """A re-extraction of the same version (or a repair) writes the extraction's own file;
    the read looks there first."""
    key = digest(BODY)
    store.put_parsed(key, BODY, "v1", RESULT)
    store.put_extraction(key, "v1", {"text": "again"})
    assert store.get_extraction(key, "v1") == {"text": "again"}
    store.put_extraction(key, "v2", {"text": "v2"})
    assert store.get_extraction(key, "v2") == {"text": "v2"}


@pytest.mark.parametrize("order", ["text first", "text last"])
def test_two_writers_of_one_new_body_never_lose_the_text(store: BodyStore, order: str) -> None:
    """Two workers parse the same bytes at once (two URLs of a batch, one asked for the text),
    both before either file exists. Whichever writes last, the text stands: a body file is
    never replaced, and a writer that finds one there keeps its text in a file of its own."""
    key = digest(BODY)
    writes = [(RESULT, "with text"), (None, "links only")]
    for extraction, _ in writes if order == "text first" else writes[::-1]:
        store.put_parsed(key, BODY, "v1", extraction, stored=False)  # both saw no body
    assert store.get(key) == BODY
    assert store.get_extraction(key, "v1") == RESULT
    assert not [p for p in files(store.root) if p.name.startswith(".tmp-")]


def test_a_plain_put_racing_a_parsed_one_keeps_the_text(store: BodyStore) -> None:
    """The batch stores a body itself (its worker died, or the bytes did not change) while a
    worker's parse of the same bytes lands: the batch's copy never replaces the worker's."""
    key = digest(BODY)
    store.put_parsed(key, BODY, "v1", RESULT, stored=False)
    store._write_atomic(store._file(key, ".zst"), b"not this", replace=False)
    assert store.get_extraction(key, "v1") == RESULT and store.get(key) == BODY


def test_without_hard_links_a_body_is_still_written(
    store: BodyStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file system that refuses hard links (some network and FUSE mounts) gets the plain
    rename a body was always written with."""
    import os

    def refuse(*_: object) -> None:
        raise PermissionError("no hard links here")

    monkeypatch.setattr(os, "link", refuse)
    key = digest(BODY)
    store.put_parsed(key, BODY, "v1", RESULT)
    assert store.get(key) == BODY and store.get_extraction(key, "v1") == RESULT
    assert [p.name for p in files(store.root)] == [f"{key}.zst"]


def test_the_sweeper_takes_the_extraction_with_the_body(store: BodyStore) -> None:
    key = digest(b"orphan")
    store.put_parsed(key, b"orphan", "v1", RESULT)
    _age(store, key, 2 * DAY)
    assert store.sweep_orphans(set, grace_s=DAY).deleted == 1
    assert store.get_extraction(key, "v1") is None and files(store.root) == []


# orphan sweeping -------------------------------------------------------------------------
DAY = 86_400.0


def _age(store: BodyStore, key: str, seconds: float) -> None:
    import os
    import time

    [path] = (store.root / key[:2] / key[2:4]).glob(f"{key}.[gz][zs]*")
    t = time.time() - seconds
    os.utime(path, (t, t))


def test_sweep_deletes_only_old_unreferenced_bodies_and_their_caches(store: BodyStore) -> None:
    kept, orphan, young = store.put(b"kept"), store.put(b"orphan"), store.put(b"young")
    store.put_extraction(orphan, "v1", {"text": "x"})
    for key in (kept, orphan):
        _age(store, key, 2 * DAY)
    report = store.sweep_orphans(lambda: {kept}, grace_s=DAY)
    assert (report.scanned, report.deleted) == (3, 1) and report.bytes > 0
    assert store.has(kept) and store.has(young) and not store.has(orphan)
    assert store.get_extraction(orphan, "v1") is None
    assert store.put(b"orphan") == orphan and store.get(orphan) == b"orphan"  # put again


def test_a_put_racing_the_sweep_keeps_its_body(store: BodyStore) -> None:
    key = store.put(b"page")
    _age(store, key, 2 * DAY)

    def referenced_while_a_batch_puts_the_same_bytes() -> set[str]:
        store.put(b"page")  # listed as old a moment ago; touched now, committed later
        return set()

    report = store.sweep_orphans(referenced_while_a_batch_puts_the_same_bytes, grace_s=DAY)
    assert report.deleted == 0 and store.get(key) == b"page"


def test_put_of_existing_bytes_refreshes_the_mtime(store: BodyStore) -> None:
    key = store.put(b"page")
    _age(store, key, 2 * DAY)
    store.put(b"page")
    assert store.sweep_orphans(set, grace_s=DAY).deleted == 0


def test_a_folder_removed_after_a_put_is_made_again(store: BodyStore) -> None:
    """The store remembers the folders it made; one deleted since (an operator clearing the
    store, the sweeper) is made again rather than failing the write."""
    import shutil

    key = store.put(BODY)
    store.put_extraction(key, "v1", {"text": "one"})
    shutil.rmtree(store.root)
    assert store.put(BODY) == key
    store.put_extraction(key, "v1", {"text": "two"})
    assert store.get(key) == BODY
    assert store.get_extraction(key, "v1") == {"text": "two"}


def test_a_leftover_temporary_file_of_the_same_name_is_passed_over(
    store: BodyStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Temporary names are the process, thread and a count; a file an earlier process of the
    same id left behind under that name is never written into or replaced."""
    import itertools
    import os
    import threading

    from atlas_pipeline import bodies

    key = digest(BODY)
    folder = store.root / key[:2] / key[2:4]
    folder.mkdir(parents=True)
    leftover = folder / f".tmp-{os.getpid()}-{threading.get_ident()}-7-{key}.zst"
    leftover.write_bytes(b"someone else's")
    monkeypatch.setattr(bodies, "_TMP_SEQ", itertools.count(7))
    assert store.put(BODY) == key
    assert store.get(key) == BODY
    assert leftover.read_bytes() == b"someone else's"
    assert [p.name for p in folder.iterdir() if p.name.startswith(".tmp-")] == [leftover.name]


# stores written before zstd ------------------------------------------------------------


def _legacy_put(store: BodyStore, body: bytes) -> Path:
    """A body as Atlas stored it before zstd: gzip level 1 under `<key>.gz`."""
    key = digest(body)
    path = store.root / key[:2] / key[2:4] / f"{key}.gz"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(body, compresslevel=1, mtime=0))
    return path


def test_a_body_stored_as_gzip_is_read_and_a_repeated_put_only_touches_it(
    store: BodyStore,
) -> None:
    import os

    path = _legacy_put(store, BODY)
    os.utime(path, (1.0, 1.0))
    key = digest(BODY)
    assert store.has(key) and store.get(key) == BODY
    assert store.uri(key) == path.as_uri()
    assert store.put(BODY) == key
    assert files(store.root) == [path]  # not stored a second time as .zst
    assert path.stat().st_mtime > 1.0  # touched: the sweeper sees it in use


def test_sweep_and_delete_reach_gzip_bodies_and_their_caches(store: BodyStore) -> None:
    _legacy_put(store, b"old orphan")
    old_kept = _legacy_put(store, b"old kept")
    store.put_extraction(digest(b"old orphan"), "v1", {"text": "x"})
    new_orphan = store.put(b"new orphan")
    for key in (digest(b"old orphan"), digest(b"old kept"), new_orphan):
        _age(store, key, 2 * DAY)
    report = store.sweep_orphans(lambda: {digest(b"old kept")}, grace_s=DAY)
    assert (report.scanned, report.deleted) == (3, 2)
    assert files(store.root) == [old_kept]
    gone = store.delete({digest(b"old kept")}, lambda: set(), idle_since=time.time())
    assert (gone.scanned, gone.deleted) == (1, 1) and files(store.root) == []


def test_a_gzip_body_swept_while_it_is_put_again_keeps_its_new_copy_and_cache(
    store: BodyStore,
) -> None:
    """The sweeper moves an idle .gz aside; a put racing it finds neither file and writes a
    .zst. The sweeper must see that copy and keep the extraction cache the new copy needs."""
    import os

    path = _legacy_put(store, BODY)
    key = digest(BODY)
    store.put_extraction(key, "v1", {"text": "kept"})
    os.utime(path, (1.0, 1.0))
    real_rename = os.rename

    def rename_then_put(src: object, dst: object) -> None:
        real_rename(src, dst)  # type: ignore[arg-type]
        if str(dst).endswith(f".sweep-{key}.gz"):
            store.put(BODY)  # the racing put: the .gz is gone, so it writes a .zst

    os.rename = rename_then_put  # type: ignore[assignment]
    try:
        report = store.sweep_orphans(lambda: set(), grace_s=DAY)
    finally:
        os.rename = real_rename
    assert report.deleted == 0
    assert store.get(key) == BODY and store.get_extraction(key, "v1") == {"text": "kept"}
    assert [p.name for p in files(store.root)] == sorted(
        [f"{key}.extract-{_slug('v1')}.json", f"{key}.zst"]
    )
