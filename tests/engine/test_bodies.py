"""The content-addressed body store: sha256 keys, gzip on disk, idempotent put, extraction cache."""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

import pytest

from atlas_pipeline.bodies import BodyStore, digest

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


def test_stored_file_is_gzip_under_a_fanned_out_path(store: BodyStore) -> None:
    key = store.put(BODY)
    path = store.root / key[:2] / key[2:4] / f"{key}.gz"
    assert gzip.decompress(path.read_bytes()) == BODY
    assert store.uri(key) == path.as_uri()


def test_put_is_idempotent(store: BodyStore) -> None:
    key = store.put(BODY)
    [path] = files(store.root)
    before = (path.read_bytes(), path.stat().st_ino)
    assert store.put(BODY) == key
    assert files(store.root) == [path]  # no second file, no temp files left behind
    assert (path.read_bytes(), path.stat().st_ino) == before  # not rewritten, only touched


def test_gzip_output_is_deterministic(tmp_path: Path) -> None:
    a, b = BodyStore(tmp_path / "a"), BodyStore(tmp_path / "b")
    key = a.put(BODY)
    b.put(BODY)
    rel = Path(key[:2]) / key[2:4] / f"{key}.gz"
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


# orphan sweeping -------------------------------------------------------------------------
DAY = 86_400.0


def _age(store: BodyStore, key: str, seconds: float) -> None:
    import os
    import time

    path = store.root / key[:2] / key[2:4] / f"{key}.gz"
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
    leftover = folder / f".tmp-{os.getpid()}-{threading.get_ident()}-7-{key}.gz"
    leftover.write_bytes(b"someone else's")
    monkeypatch.setattr(bodies, "_TMP_SEQ", itertools.count(7))
    assert store.put(BODY) == key
    assert store.get(key) == BODY
    assert leftover.read_bytes() == b"someone else's"
    assert [p.name for p in folder.iterdir() if p.name.startswith(".tmp-")] == [leftover.name]
