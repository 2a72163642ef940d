"""The lake: Delta tables written per partition, with exact schemas and UTC timestamps."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from atlas_pipeline import lake_columns
from atlas_pipeline.errors import LakeError
from atlas_pipeline.lake import SCHEMAS, TS, Lake, frame


@pytest.fixture
def lake(tmp_path: Path) -> Lake:
    return Lake(tmp_path / "lake")


def cells(df: pl.DataFrame, *cols: str) -> list[tuple]:
    return sorted(df.select(cols).rows())


@pytest.mark.parametrize("table", sorted(SCHEMAS))
def test_reading_a_missing_table_gives_an_empty_frame_with_the_schema(
    lake: Lake, table: str
) -> None:
    assert not lake.exists(table)
    df = lake.read(table)
    assert df.height == 0
    assert df.schema == pl.Schema(SCHEMAS[table])
    assert df.columns[:2] == ["crawl_cycle", "origin_shard"]


@pytest.mark.parametrize("table", ["fetches", "links", "documents", "frontier"])
def test_written_table_reads_back_with_the_exact_schema(lake: Lake, table: str) -> None:
    lake.write_partition(
        table, [{"url": "https://a.test/", "unknown_column": 1}], "c1", "shard_000"
    )
    df = lake.read(table)
    assert df.schema == pl.Schema(SCHEMAS[table])
    assert "unknown_column" not in df.columns
    assert df.height == 1


def test_write_partition_replaces_only_its_partition(lake: Lake) -> None:
    lake.write_partition("fetches", [{"fetch_id": "a1"}, {"fetch_id": "a2"}], "c1", "shard_000")
    lake.write_partition("fetches", [{"fetch_id": "b1"}], "c1", "shard_001")
    lake.write_partition("fetches", [{"fetch_id": "c1"}], "c2", "shard_000")
    written = lake.write_partition("fetches", [{"fetch_id": "a3"}], "c1", "shard_000")
    assert (written.table, written.rows) == ("fetches", 1)
    assert written.uri == lake.uri("fetches")
    assert cells(lake.read("fetches"), "crawl_cycle", "origin_shard", "fetch_id") == [
        ("c1", "shard_000", "a3"),
        ("c1", "shard_001", "b1"),
        ("c2", "shard_000", "c1"),
    ]


def test_rewriting_a_partition_is_idempotent(lake: Lake) -> None:
    rows = [{"fetch_id": "a", "url": "https://a.test/", "status": 200}]
    first = lake.write_partition("fetches", rows, "c1", "shard_000")
    second = lake.write_partition("fetches", rows, "c1", "shard_000")
    assert second.version > first.version
    assert cells(lake.read("fetches"), "fetch_id", "url", "status") == [
        ("a", "https://a.test/", 200)
    ]


def test_an_empty_write_clears_the_partition(lake: Lake) -> None:
    empty = lake.write_partition("links", [], "c1", "shard_000")
    assert empty.rows == 0
    assert lake.exists("links")
    lake.write_partition("links", [{"href": "a"}], "c1", "shard_000")
    lake.write_partition("links", [{"href": "b"}], "c1", "shard_001")
    lake.write_partition("links", [], "c1", "shard_000")
    assert lake.read("links")["href"].to_list() == ["b"]


def test_partition_keys_override_row_values(lake: Lake) -> None:
    lake.write_partition(
        "fetches",
        [{"fetch_id": "a", "crawl_cycle": "wrong", "origin_shard": "x"}],
        "c1",
        "shard_002",
    )
    assert cells(lake.read("fetches"), "crawl_cycle", "origin_shard") == [("c1", "shard_002")]


def test_timestamps_become_utc_datetimes(lake: Lake) -> None:
    rows = [
        {"fetch_id": "a", "started_at": 1_700_000_000.123456},
        {"fetch_id": "b", "started_at": 0},
        {"fetch_id": "c", "started_at": None},
    ]
    lake.write_partition("fetches", rows, "c1", "shard_000")
    df = lake.read("fetches").sort("fetch_id")
    assert df.schema["started_at"] == TS
    assert df["started_at"].to_list() == [
        datetime(2023, 11, 14, 22, 13, 20, 123456, tzinfo=UTC),
        datetime(1970, 1, 1, tzinfo=UTC),
        None,
    ]


def test_frame_coerces_types_and_fills_missing_columns_with_nulls() -> None:
    df = frame("fetches", [{"status": 200, "bytes": 10, "elapsed_s": 1}])
    assert df.schema == pl.Schema(SCHEMAS["fetches"])
    assert df.row(0, named=True)["status"] == 200
    assert df.row(0, named=True)["elapsed_s"] == 1.0
    assert df.row(0, named=True)["url"] is None


def test_write_shard_replaces_a_urls_shard_across_cycles(lake: Lake) -> None:
    lake.write_shard("urls", [{"url": "https://a.test/1", "due_at": 5.0}], "shard_000", "c1")
    lake.write_shard("urls", [{"url": "https://b.test/1"}], "shard_001", "c1")
    w = lake.write_shard(
        "urls", [{"url": "https://a.test/2"}, {"url": "https://a.test/3"}], "shard_000", "c2"
    )
    assert w.rows == 2
    df = lake.read("urls")
    assert df.schema == pl.Schema(SCHEMAS["urls"])
    assert cells(df, "origin_shard", "crawl_cycle", "url") == [
        ("shard_000", "c2", "https://a.test/2"),
        ("shard_000", "c2", "https://a.test/3"),
        ("shard_001", "c1", "https://b.test/1"),
    ]


def test_urls_table_is_partitioned_by_shard_only(lake: Lake) -> None:
    lake.write_shard("urls", [{"url": "https://a.test/"}], "shard_000", "c1")
    lake.write_partition("fetches", [{"fetch_id": "f"}], "c1", "shard_000")
    urls_dir = Path(lake.uri("urls"))
    fetches_dir = Path(lake.uri("fetches"))
    assert (urls_dir / "origin_shard=shard_000").is_dir()
    assert not any(p.name.startswith("crawl_cycle=") for p in urls_dir.iterdir())
    assert (fetches_dir / "crawl_cycle=c1" / "origin_shard=shard_000").is_dir()


@pytest.mark.parametrize(("cycle", "shard"), [("c'1", "shard_000"), ("c1", "shard_0' OR '1")])
def test_quotes_in_partition_values_are_refused(lake: Lake, cycle: str, shard: str) -> None:
    with pytest.raises(LakeError, match="quotes"):
        lake.write_partition("fetches", [{"fetch_id": "a"}], cycle, shard)


def test_a_partition_streams_in_chunks_as_one_commit(lake: Lake) -> None:
    """A row source bigger than one chunk is written whole, in one Delta version."""
    from atlas_pipeline.lake import CHUNK_ROWS

    total = CHUNK_ROWS * 2 + 17
    pulled: list[int] = []

    def rows():  # type: ignore[no-untyped-def]
        for i in range(total):
            pulled.append(i)
            yield {"fetch_id": f"f{i}", "url": f"http://a.test/{i}", "status": 200}

    before = lake.write_partition(
        "fetches", [{"fetch_id": "old", "url": "u"}], "c0001", "shard_000"
    )
    written = lake.write_partition("fetches", rows, "c0001", "shard_000")
    assert written.rows == total == len(pulled)
    assert written.version == before.version + 1
    back = lake.read_partition("fetches", "c0001", "shard_000")
    assert back.height == total and "old" not in back["fetch_id"].to_list()
    assert back["fetch_id"].n_unique() == total


def _fetch(url: str) -> dict[str, object]:
    return {"fetch_id": url, "url": url, "status": 200}


def test_an_older_batch_fence_never_overwrites_a_newer_write(lake: Lake) -> None:
    newer = lake.write_partition("fetches", [_fetch("a"), _fetch("b")], "c1", "s0", fence=2)
    assert (newer.rows, newer.fence, newer.superseded_by) == (2, 2, None)
    late = lake.write_partition("fetches", [_fetch("a")], "c1", "s0", fence=1)  # a zombie
    assert (late.rows, late.superseded_by, late.version) == (0, 2, newer.version)
    part = lake.read_partition("fetches", "c1", "s0")
    assert sorted(part["url"]) == ["a", "b"] and set(part["batch_fence"]) == {2}
    again = lake.write_partition("fetches", [_fetch("a"), _fetch("b")], "c1", "s0", fence=2)
    assert again.superseded_by is None  # the same fence may rewrite (a resumed writer)
    newest = lake.write_partition("fetches", [_fetch("c")], "c1", "s0", fence=3)
    assert newest.superseded_by is None
    assert lake.read_partition("fetches", "c1", "s0")["batch_fence"].to_list() == [3]


def test_fences_are_per_partition(lake: Lake) -> None:
    lake.write_partition("fetches", [_fetch("a")], "c1", "s0", fence=5)
    other = lake.write_partition("fetches", [_fetch("b")], "c1", "s1", fence=1)
    assert other.superseded_by is None and other.rows == 1


def _text(i: int, chars: int = 40) -> dict[str, object]:
    body = f"text {i} " * (chars // 7 + 1)
    return {"document_id": f"id{i:05d}", "text": body, "text_chars": len(body),
            "extraction_version": "v1"}  # fmt: skip


def test_streamed_texts_land_once_per_id_in_one_commit(lake: Lake) -> None:
    """A text source streamed with its ids: ids already held and repeats in the source are
    skipped, the rest land in one Delta version, in files written as the rows came."""
    from atlas_pipeline.lake import TEXT_CHUNK_ROWS

    first = lake.add_texts([_text(0), _text(1)], "c1", "s0")
    assert first.rows == 2
    total = TEXT_CHUNK_ROWS * 3 + 5
    pulled: list[int] = []

    def rows():  # type: ignore[no-untyped-def]
        for i in range(total):
            pulled.append(i)
            yield _text(i)
        yield _text(7)  # a second URL holding the same text

    ids = {f"id{i:05d}" for i in range(total)}
    written = lake.add_texts(rows, "c1", "s1", ids)
    assert written.rows == total - 2 and written.version == first.version + 1
    back = lake.read("document_texts")
    assert back.height == total and back["document_id"].n_unique() == total
    assert lake.texts(["id00001"])["id00001"] == _text(1)["text"]  # the first copy stands
    again = lake.add_texts(rows, "c1", "s1", ids)  # a re-run of the partition
    assert again.rows == 0 and lake.read("document_texts").height == total


def test_text_files_keep_the_text_column_without_a_dictionary(lake: Lake) -> None:
    """A page's text is a distinct long string: it is written plain (a dictionary attempt
    only costs CPU before the writer falls back) and without min/max statistics (whole texts
    compared for bounds no reader prunes by); the short columns keep both."""
    import pyarrow.parquet as pq

    lake.add_texts([_text(i, 2_000) for i in range(50)], "c1", "s0")
    files = list(Path(lake.uri("document_texts")).rglob("*.parquet"))
    assert files
    for path in files:
        meta = pq.ParquetFile(path).metadata
        for g in range(meta.num_row_groups):
            group = meta.row_group(g)
            encodings = {group.column(i).path_in_schema: set(group.column(i).encodings)
                         for i in range(group.num_columns)}  # fmt: skip
            assert not any("DICTIONARY" in e for e in encodings["text"]), encodings
            assert any("DICTIONARY" in e for e in encodings["document_id"]), encodings
            stats = {group.column(i).path_in_schema: group.column(i).is_stats_set
                     for i in range(group.num_columns)}  # fmt: skip
            assert stats["text"] is False and stats["document_id"] is True, stats


def test_texts_stream_a_row_group_at_a_time(lake: Lake) -> None:
    """`iter_texts` yields every text asked for and no other, holding one batch of them in
    Arrow memory at a time: dedupe reads a partition's texts through it."""
    import pyarrow as pa

    from atlas_pipeline.lake import TEXT_CHUNK_ROWS

    total = TEXT_CHUNK_ROWS * 64
    lake.add_texts(lambda: (_text(i, 20_000) for i in range(total)), "c1", "s0",
                   {f"id{i:05d}" for i in range(total)})  # fmt: skip
    asked = {f"id{i:05d}" for i in range(0, total, 2)} | {"id99999"}  # one the table lacks
    whole = sum(len(str(_text(i, 20_000)["text"])) for i in range(0, total, 2))
    pool = pa.proxy_memory_pool(pa.default_memory_pool())  # counts this scan's bytes only
    got = dict(lake.iter_texts(asked, memory_pool=pool))
    peak = pool.max_memory()
    assert got == {f"id{i:05d}": _text(i, 20_000)["text"] for i in range(0, total, 2)}
    # read whole, the texts asked for take 57 MB of Arrow memory; streamed, 4 MB
    assert 0 < peak < whole / 2, (peak, whole)
    assert dict(lake.iter_texts([])) == {} and dict(Lake(lake.root + "/x").iter_texts(["a"])) == {}


def test_a_text_added_by_a_concurrent_writer_is_kept_once(lake: Lake, tmp_path: Path) -> None:
    """Two writers adding the same new text at once (two shards fetching one text): each
    saw it absent; appends do not conflict, so the later one finds it twice and keeps one."""
    other = Lake(tmp_path / "lake")
    raced: list[int] = []

    def rows():  # type: ignore[no-untyped-def]
        if not raced:  # after this writer read which ids the table holds
            raced.append(other.add_texts([_text(1)], "c1", "s9").rows)
        yield _text(1)
        yield _text(2)

    written = lake.add_texts(rows, "c1", "s0", {"id00001", "id00002"})
    assert raced == [1] and written.rows == 2
    back = lake.read("document_texts")
    assert sorted(back["document_id"].to_list()) == ["id00001", "id00002"]


def test_a_partition_write_rolls_files_at_the_target_size(
    lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bounded writer closes a file once it reaches the target size, so what it holds
    is one file's worth; readers see every row, partition columns included."""
    import duckdb

    import atlas_pipeline.lake as lakemod

    monkeypatch.setattr(lakemod, "TARGET_FILE_BYTES", 64 * 1024)
    monkeypatch.setattr(lakemod, "CHUNK_ROWS", 200)
    import uuid

    rows = [{"fetch_id": f"f{i}", "url": f"http://a.test/{i}/" + uuid.uuid4().hex * 8,
             "status": 200} for i in range(3000)]  # fmt: skip
    written = lake.write_partition("fetches", rows, "c1", "s0", fence=4)
    folder = Path(lake.uri("fetches")) / "crawl_cycle=c1" / "origin_shard=s0"
    files = list(folder.glob("*.parquet"))
    sizes = sorted(f.stat().st_size for f in files)
    assert written.rows == 3000 and len(files) >= 2
    assert all(size >= 64 * 1024 for size in sizes[1:])  # each closed once it reached it
    back = lake.read_partition("fetches", "c1", "s0")
    assert back.height == 3000 and set(back["batch_fence"]) == {4}
    assert set(back["crawl_cycle"]) == {"c1"} and set(back["origin_shard"]) == {"s0"}
    pattern = f"{lake.uri('fetches')}/*/*/*.parquet"
    counted = duckdb.sql(
        f"SELECT count(*) FROM read_parquet('{pattern}', hive_partitioning = true) "
        "WHERE origin_shard = 's0'"
    ).fetchall()
    assert counted == [(3000,)]


def test_every_table_and_column_has_a_description() -> None:
    """lake_columns describes exactly the schema's tables and columns: a column added to
    SCHEMAS without words, or words left for a column that went, fail here."""
    assert lake_columns.undescribed() == []


def test_a_missing_or_stray_description_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    described = {t: dict(c) for t, c in lake_columns.COLUMN_DESCRIPTIONS.items()}
    del described["fetches"]["elapsed_s"]
    described["links"]["no_such_column"] = "words"
    monkeypatch.setattr(lake_columns, "COLUMN_DESCRIPTIONS", described)
    assert lake_columns.undescribed() == [
        "fetches.elapsed_s: no description",
        "links.no_such_column: not a column",
    ]
