"""A bounded store (issue 15, part 5): once a partition's lake write is recorded at its batch
fence, its fetch records leave the coordination store; their body references stay until
retention expires them or an opt-out purges them. Runs on both backends."""

from __future__ import annotations

from pathlib import Path

from atlas_pipeline.coordination import (
    CoordinationStore,
    Lease,
    Outcome,
    Suppression,
    UrlState,
)
from atlas_pipeline.records import FetchRecord
from tests.engine.test_coordination import (  # noqa: F401  (backend: the two-backend fixture)
    CYCLE,
    LEASE_S,
    SHARD,
    T0,
    TOKEN,
    TTL,
    backend,
    cand,
    make_store,
    ready_origin,
)

OTHER = "c2"
A = "https://news-a.example.test/a"
B = "https://news-a.example.test/b"
C = "https://news-a.example.test/c"


def _commit(store: CoordinationStore, cycle: str, url: str, now: float, body: str) -> str:
    """Fetch `url` in `cycle` (no current-content hash: only the record names its body)."""
    store.discover([cand(url)], cycle)
    lease = store.claim(cycle, SHARD, now, TOKEN, LEASE_S)
    assert isinstance(lease, Lease) and lease.url == url, lease
    fetch_id = f"f-{cycle}-{url[-1]}"
    res = Outcome(UrlState.FETCHED, "fetched", now + TTL, 200,
                  record=FetchRecord(fetch_id=fetch_id, url=url, body_key=body))  # fmt: skip
    assert store.commit(lease, res, cycle, now + 1)
    return fetch_id


def _ids(store: CoordinationStore, cycle: str) -> list[str]:
    return [r["record"]["fetch_id"] for r in store.fetch_records(cycle, SHARD)]


def test_a_recorded_lake_write_moves_its_partitions_records_out(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    now = ready_origin(store, [A])
    fa = _commit(store, CYCLE, A, now, "ka")
    fb = _commit(store, CYCLE, B, now + 5, "kb")
    fc = _commit(store, OTHER, C, now + 10, "kc")
    lease = store.acquire_batch(CYCLE, SHARD, "run-1", T0)
    assert store.lake_write(CYCLE, SHARD) is None
    assert store.partition_written(CYCLE, SHARD, lease.fence, {fa, fb}, 2, now + 20) == 2
    assert store.lake_write(CYCLE, SHARD) == lease.fence
    assert _ids(store, CYCLE) == []  # nothing of the written partition is left
    assert _ids(store, OTHER) == [fc]  # another partition keeps its records
    assert store.lake_write(OTHER, SHARD) is None
    # the bodies the moved records named are still referenced (until retention)
    assert store.referenced_bodies() == {"ka", "kb", "kc"}
    # recording again (a crash right after the delete, a re-run) deletes nothing more
    assert store.partition_written(CYCLE, SHARD, lease.fence, {fa, fb}, 2, now + 21) == 0
    store.close()


def test_only_the_newest_batch_fence_moves_records_out(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    now = ready_origin(store, [A])
    fa = _commit(store, CYCLE, A, now, "ka")
    old = store.acquire_batch(CYCLE, SHARD, "run-1", T0)
    new = store.acquire_batch(CYCLE, SHARD, "run-1-retry", T0 + 1)
    # the older run's write may be overwritten by the newer one, which needs the records
    assert store.partition_written(CYCLE, SHARD, old.fence, {fa}, 1, now + 5) is None
    assert _ids(store, CYCLE) == [fa] and store.lake_write(CYCLE, SHARD) is None
    # a record committed after the newest write's listing stays for the next write
    fb = _commit(store, CYCLE, B, now + 5, "kb")
    assert store.partition_written(CYCLE, SHARD, new.fence, {fa}, 1, now + 10) == 1
    assert _ids(store, CYCLE) == [fb] and store.lake_write(CYCLE, SHARD) == new.fence
    store.close()


def test_retention_and_opt_outs_reach_the_moved_body_references(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    now = ready_origin(store, [A])
    fa = _commit(store, CYCLE, A, now, "ka")
    fb = _commit(store, CYCLE, B, now + 5, "kb")
    lease = store.acquire_batch(CYCLE, SHARD, "run-1", T0)
    assert store.partition_written(CYCLE, SHARD, lease.fence, {fa, fb}, 2, now + 20) == 2
    # an opt-out of one URL names its body for the body purge and stops referencing it
    purged = store.suppress(Suppression("prefix", B), "asked", "mail", "ops", now + 30)
    assert "kb" in purged.body_keys and "ka" not in purged.body_keys
    assert store.referenced_bodies() == {"ka"}
    # retention expires a moved reference like a record's: by its commit time
    assert store.expire_bodies(now) == 0
    assert store.expire_bodies(now + 100) == 1
    assert store.referenced_bodies() == set()
    store.close()


def test_moving_records_out_finds_them_by_key_and_only_in_their_partition(
    tmp_path: Path,
    backend: str,  # noqa: F811  (the two-backend fixture)
) -> None:
    store = make_store(tmp_path, gap=0.0)
    # a dozen ids: for two or three, SQLite takes the primary key whatever the statement says
    pages = [f"{A}/{i}" for i in range(12)]
    now = ready_origin(store, pages)
    ids = set()
    for i in range(len(pages)):
        lease = store.claim(CYCLE, SHARD, now + i, TOKEN, LEASE_S)
        assert isinstance(lease, Lease) and lease.url in pages, lease
        res = Outcome(UrlState.FETCHED, "fetched", now + TTL, 200,
                      record=FetchRecord(url=lease.url, body_key=f"k{i}"))  # fmt: skip
        assert store.commit(lease, res, CYCLE, now + i)
        ids.add(res.record.fetch_id)
    fc = _commit(store, OTHER, C, now + 20, "kc")
    lease = store.acquire_batch(CYCLE, SHARD, "run-1", T0)
    statements: list[str] = []
    if backend == "sqlite":
        store._conn().set_trace_callback(statements.append)  # type: ignore[attr-defined]
    # an id of another partition among them is left where it is
    assert store.partition_written(CYCLE, SHARD, lease.fence, ids | {fc}, 12, now + 30) == 12
    assert _ids(store, CYCLE) == [] and _ids(store, OTHER) == [fc]
    assert store.referenced_bodies() == {f"k{i}" for i in range(12)} | {"kc"}
    if backend == "sqlite":
        # by primary key: through the partition's index SQLite read every record of the
        # partition, blobs and all, once for every 200 ids moved
        db = store._conn()  # type: ignore[attr-defined]
        db.set_trace_callback(None)
        moves = [s for s in statements if "fetch_records" in s and "fetch_id IN" in s]
        assert len(moves) == 2  # the body references read, then the delete
        for sql in moves:
            plan = " ".join(str(row[3]) for row in db.execute(f"EXPLAIN QUERY PLAN {sql}"))
            assert "fetch_records_partition" not in plan and "(fetch_id=?)" in plan, plan
    store.close()
