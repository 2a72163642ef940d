"""write_behind: a stream consumed on a thread of its own while the caller makes it."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from atlas_pipeline import delta_files
from atlas_pipeline.write_behind import Abandoned, write_behind


def test_the_consumer_gets_every_item_in_order_and_its_result_comes_back() -> None:
    assert write_behind(list, iter(range(1000)), depth=3) == list(range(1000))
    assert write_behind(list, []) == []
    assert write_behind(lambda s: None, [1, 2]) is None


def test_items_are_made_on_the_callers_thread_and_consumed_on_another() -> None:
    made_on: set[int] = set()
    consumed_on: set[int] = set()

    def items() -> Iterator[int]:
        for i in range(3):
            made_on.add(threading.get_ident())
            yield i

    def consume(stream: Iterator[int]) -> int:
        total = 0
        for i in stream:
            consumed_on.add(threading.get_ident())
            total += i
        return total

    assert write_behind(consume, items()) == 3
    assert made_on == {threading.get_ident()}
    assert consumed_on and threading.get_ident() not in consumed_on


def test_the_producer_stays_at_most_depth_items_ahead_of_a_slow_consumer() -> None:
    made: list[int] = []
    ahead: list[int] = []

    def items() -> Iterator[int]:
        for i in range(30):
            made.append(i)
            yield i

    def consume(stream: Iterator[int]) -> None:
        for i in stream:
            time.sleep(0.005)
            ahead.append(len(made) - (i + 1))

    write_behind(consume, items(), depth=2)
    # taken (i + 1), two waiting, one made and held at the full queue
    assert max(ahead) <= 3


def test_a_producer_error_abandons_the_consumer_then_reaches_the_caller() -> None:
    seen: list[int] = []
    abandoned: list[BaseException] = []

    def items() -> Iterator[int]:
        yield 1
        yield 2
        raise KeyError("the store went away")

    def consume(stream: Iterator[int]) -> None:
        try:
            for i in stream:
                seen.append(i)
        except Abandoned as exc:
            abandoned.append(exc)
            raise

    with pytest.raises(KeyError, match="the store went away"):
        write_behind(consume, items())
    assert seen == [1, 2]
    assert len(abandoned) == 1 and isinstance(abandoned[0].__cause__, KeyError)


def test_a_consumer_error_stops_the_producer_and_reaches_the_caller() -> None:
    made: list[int] = []

    def items() -> Iterator[int]:
        for i in range(10_000):
            made.append(i)
            yield i

    def consume(stream: Iterator[int]) -> None:
        next(stream)
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        write_behind(consume, items(), depth=1)
    assert len(made) < 10


def test_depth_below_one_is_refused_with_the_fix() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        write_behind(list, [1], depth=0)


def _reader(batches: Iterator[pa.RecordBatch]) -> pa.RecordBatchReader:
    schema = pa.schema([("k", pa.string()), ("v", pa.int64())])
    return pa.RecordBatchReader.from_batches(schema, batches)


def _batch(start: int, n: int) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({"k": ["p"] * n, "v": list(range(start, start + n))})


def test_write_files_encodes_off_the_callers_thread_and_keeps_every_row(tmp_path: Path) -> None:
    made_on: set[int] = set()

    def batches() -> Iterator[pa.RecordBatch]:
        for start in range(0, 5000, 500):
            made_on.add(threading.get_ident())
            yield _batch(start, 500)

    actions = delta_files.write_files(tmp_path, _reader(batches()), {"k": "p"}, 1 << 30)
    assert made_on == {threading.get_ident()}
    [action] = actions
    table = pq.read_table(tmp_path / action.path)
    assert table.column_names == ["v"]  # the partition column stays in the log
    assert table.column("v").to_pylist() == list(range(5000))


def test_write_files_removes_what_it_wrote_when_the_row_source_fails(tmp_path: Path) -> None:
    def batches() -> Iterator[pa.RecordBatch]:
        for start in range(0, 3000, 500):
            yield _batch(start, 500)
        raise RuntimeError("a record could not be read")

    with pytest.raises(RuntimeError, match="could not be read"):
        # a file past every 1,000 bytes: several files written before the failure
        delta_files.write_files(tmp_path, _reader(batches()), {"k": "p"}, 1000)
    assert list(tmp_path.rglob("*.parquet")) == []
