"""Bodies in object storage (issue: documents and dedupe, "body store ... object storage by
URL"): a crawl puts its bodies into an S3 bucket served by a real S3 endpoint on loopback
(moto's server); re-extraction reads them back without a request; the sweeper and the
opt-out purge delete from the bucket."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import polars as pl
import pytest

from atlas_pipeline.bodies import ObjectBodyStore
from atlas_pipeline.config import config_from_mapping
from atlas_pipeline.crawl import Engine, fetch_shard, plan_frontier, reextract
from atlas_pipeline.optout import opt_out, target_of
from atlas_sandbox import dupes
from tests.conftest import running_s3, running_sandbox, sandbox_config

BUCKET = "atlas-bodies"


@pytest.fixture(scope="module")
def s3_url() -> Iterator[str]:
    with running_s3() as port:
        yield (f"s3://{BUCKET}/crawl?endpoint_override=127.0.0.1:{port}&scheme=http"
               "&region=us-east-1")  # fmt: skip


@pytest.fixture(scope="module")
def crawled(s3_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    mp = pytest.MonkeyPatch()
    mp.setenv("AWS_ACCESS_KEY_ID", "test")
    mp.setenv("AWS_SECRET_ACCESS_KEY", "test")
    tmp = tmp_path_factory.mktemp("s3")
    ObjectBodyStore(s3_url + "&allow_bucket_creation=true").fs.create_dir(BUCKET)
    with running_sandbox(tmp / "requests.jsonl", 0, 12, dupes=True) as server:
        cfg = config_from_mapping(sandbox_config(
            server, tmp / "data", shards=1, seeds=dupes.seed_urls(server.port),
            resolve={h: "127.0.0.1" for h in dupes.DUPES_HOSTS}, bodies_url=s3_url,
        ), base_dir=tmp)  # fmt: skip
        engine = Engine.from_config(cfg)
        try:
            plan_frontier(engine, "c0001", 0)
            fetch_shard(engine, "c0001", 0)
            yield {"engine": engine, "cfg": cfg, "server": server, "tmp": tmp}
        finally:
            engine.close()
            mp.undo()


def _objects(store: ObjectBodyStore) -> set[str]:
    from pyarrow import fs

    infos = store.fs.get_file_info(fs.FileSelector(store.root, recursive=True))
    return {i.path.rsplit("/", 1)[-1][:-4] for i in infos if i.path.endswith(".zst")}


def test_bodies_land_in_the_bucket_not_on_disk(crawled: dict[str, Any]) -> None:
    engine: Engine = crawled["engine"]
    assert isinstance(engine.bodies, ObjectBodyStore)
    fetches = engine.lake.read("fetches").filter(pl.col("body_key").is_not_null())
    keys = set(fetches["body_key"].to_list())
    assert len(keys) >= 10 and keys <= _objects(engine.bodies)
    assert not crawled["cfg"].bodies_path.exists()
    docs = engine.lake.read("documents")
    assert docs.height and (docs["text_chars"] > 500).all()


def test_reextraction_reads_the_bucket_without_a_request(crawled: dict[str, Any]) -> None:
    engine: Engine = crawled["engine"]
    before = len(crawled["server"].log.entries())
    done = reextract(engine, "c0001", 0)
    assert done.documents.rows > 0 and done.failed == 0 and done.expired == 0
    assert len(crawled["server"].log.entries()) == before


def test_the_sweeper_deletes_orphans_from_the_bucket(crawled: dict[str, Any]) -> None:
    engine: Engine = crawled["engine"]
    orphan = engine.bodies.put(b"<html>a batch crashed before committing this</html>")
    fresh = engine.bodies.sweep_orphans(engine.store.referenced_bodies, 3600.0)
    assert fresh.deleted == 0 and engine.bodies.has(orphan)  # within the grace: kept
    later = engine.bodies.sweep_orphans(engine.store.referenced_bodies, 3600.0,
                                        now=time.time() + 7200)  # fmt: skip
    assert later.deleted == 1 and not engine.bodies.has(orphan)
    referenced = engine.store.referenced_bodies()
    assert referenced and all(engine.bodies.has(k) for k in referenced)


def test_a_bucket_written_before_zstd_is_read_and_swept_with_its_new_copy(
    crawled: dict[str, Any],
) -> None:
    """A body an older Atlas stored as `<key>.gz` (gzip): read back; a repeated put writes
    the `.zst` object beside it (no request to look first), read from then on; the sweeper
    deletes both objects and the cache as one body."""
    import gzip

    from atlas_pipeline.bodies import digest

    engine: Engine = crawled["engine"]
    store: ObjectBodyStore = engine.bodies  # type: ignore[assignment]
    body = b"<html>stored by an Atlas from before zstd</html>"
    key = digest(body)
    legacy = f"{store.root}/{key[:2]}/{key[2:4]}/{key}.gz"
    store._write(legacy, gzip.compress(body, compresslevel=1, mtime=0))
    store.put_extraction(key, "v1", {"text": "old"})
    assert store.has(key) and store.get(key) == body and store.uri(key).endswith(f"{key}.gz")
    assert store.put(body) == key
    assert key in _objects(store) and store.uri(key).endswith(f"{key}.zst")
    assert store.get(key) == body
    report = store.sweep_orphans(engine.store.referenced_bodies, 3600.0, now=time.time() + 7200)
    assert report.deleted == 1 and not store.has(key)
    assert store._mtime(legacy) is None and key not in _objects(store)
    assert store.get_extraction(key, "v1") is None


def test_an_opt_out_deletes_its_bodies_from_the_bucket(crawled: dict[str, Any]) -> None:
    engine: Engine = crawled["engine"]
    keys = set(engine.lake.read("fetches")["body_key"].drop_nulls().to_list())
    origin = crawled["server"].url(dupes.DUPES, "/")
    report = opt_out(engine, target_of("origin", origin), "owner asked", "ticket 1", "ops")
    assert report.bodies_deleted == len(keys)
    assert not keys & _objects(engine.bodies)
