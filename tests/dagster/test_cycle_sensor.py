"""The cycle sensor (issue 17, parts 1 and 5): at each cron tick it finishes what an earlier
cycle left unfinished, then requests the next cycle's partition and its shard runs in one
SensorResult; a repeated evaluation adds nothing, and a cycle waits while runs still go."""

from __future__ import annotations

import datetime
import time
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.test_utils import create_run_for_test

from assets.definitions import CRAWL_JOB
from assets.partitions import CYCLE_PARTITIONS
from assets.sensors import CycleCursor, build_cycle_sensor, latest_tick
from atlas_pipeline.config import load_config
from atlas_pipeline.crawl import Engine
from resources.config import AtlasCrawl
from tests.conftest import write_config


def ts(text: str) -> float:
    return datetime.datetime.fromisoformat(text).replace(tzinfo=datetime.UTC).timestamp()


@pytest.mark.parametrize(
    ("cron", "now", "tick"),
    [
        ("0 */6 * * *", "2026-12-02T05:59:59", "2026-12-02T00:00:00"),
        ("0 */6 * * *", "2026-12-02T06:00:00", "2026-12-02T06:00:00"),
        ("0 */6 * * *", "2026-12-02T06:00:01", "2026-12-02T06:00:00"),
        ("*/15 * * * *", "2026-12-02T10:44:00", "2026-12-02T10:30:00"),
        ("0 3 * * 1", "2026-12-02T12:00:00", "2026-11-30T03:00:00"),  # Monday before
        ("0 0 1 * *", "2026-12-02T00:00:00", "2026-12-01T00:00:00"),
    ],
)
def test_latest_tick(cron: str, now: str, tick: str) -> None:
    assert latest_tick(cron, ts(now)) == ts(tick)


@pytest.fixture()
def setup(tmp_path: Path) -> Iterator[tuple[dg.DagsterInstance, AtlasCrawl, Path]]:
    cfg = write_config(tmp_path / "atlas.yaml", {"seeds": ["http://a.example.test/"],
                       "data_dir": str(tmp_path), "shards": 3,
                       "freshness": {"cycle_cron": "*/5 * * * *"}})  # fmt: skip
    with dg.instance_for_test() as instance:
        yield instance, AtlasCrawl(config_path=str(cfg)), cfg


def evaluate(instance: dg.DagsterInstance, atlas: AtlasCrawl, cursor: str | None) -> object:
    sensor = build_cycle_sensor(CRAWL_JOB)
    context = dg.build_sensor_context(instance=instance, cursor=cursor,
                                      resources={"atlas": atlas})  # fmt: skip
    return sensor(context)


def test_first_evaluation_waits_for_the_next_tick(setup: tuple) -> None:  # type: ignore[type-arg]
    instance, atlas, _ = setup
    result = evaluate(instance, atlas, None)
    assert isinstance(result, dg.SensorResult)
    assert not result.run_requests and not result.dynamic_partitions_requests
    assert CycleCursor.parse(result.cursor) == CycleCursor(latest_tick("*/5 * * * *", time.time()))


def test_a_tick_adds_the_cycle_and_its_runs_together(setup: tuple) -> None:  # type: ignore[type-arg]
    instance, atlas, _ = setup
    before = latest_tick("*/5 * * * *", time.time()) - 300
    result = evaluate(instance, atlas, CycleCursor(before).dump())
    assert isinstance(result, dg.SensorResult)
    (request,) = result.dynamic_partitions_requests or []
    assert isinstance(request, dg.AddDynamicPartitionsRequest)
    assert request.partitions_def_name == CYCLE_PARTITIONS and list(request.partition_keys) == [
        "c0001"
    ]
    keys = [str(r.partition_key) for r in result.run_requests or []]
    assert keys == ["c0001|shard_000", "c0001|shard_001", "c0001|shard_002"]
    assert len({r.run_key for r in result.run_requests or []}) == 3
    cursor = CycleCursor.parse(result.cursor)
    assert cursor is not None and cursor.handled > before
    # nothing was added while evaluating: the partition comes with the result
    assert instance.get_dynamic_partitions(CYCLE_PARTITIONS) == []
    # the same tick again: nothing
    again = evaluate(instance, atlas, result.cursor)
    assert isinstance(again, dg.SkipReason)


def test_a_cycle_waits_while_a_run_still_goes(setup: tuple) -> None:  # type: ignore[type-arg]
    instance, atlas, _ = setup
    run = create_run_for_test(instance, job_name=CRAWL_JOB, status=dg.DagsterRunStatus.STARTED)
    before = latest_tick("*/5 * * * *", time.time()) - 300
    result = evaluate(instance, atlas, CycleCursor(before).dump())
    assert isinstance(result, dg.SkipReason) and run.run_id in (result.skip_message or "")


def test_unfinished_partitions_are_sent_again_first_once_per_tick(setup: tuple) -> None:  # type: ignore[type-arg]
    instance, atlas, cfg_path = setup
    instance.add_dynamic_partitions(CYCLE_PARTITIONS, ["c0001"])
    engine = Engine.from_config(load_config(str(cfg_path)))
    try:  # a batch that claimed and never wrote the lake (its run was killed)
        engine.store.acquire_batch("c0001", 1, "killed-run", time.time())
    finally:
        engine.close()
    before = latest_tick("*/5 * * * *", time.time()) - 300
    first = evaluate(instance, atlas, CycleCursor(before).dump())
    assert isinstance(first, dg.SensorResult)
    assert [str(r.partition_key) for r in first.run_requests or []] == ["c0001|shard_001"]
    assert not first.dynamic_partitions_requests
    cursor = CycleCursor.parse(first.cursor)
    assert cursor is not None and cursor.handled == before and cursor.finishing is not None
    # that run failed again: the next evaluation of the same tick starts the new cycle anyway
    second = evaluate(instance, atlas, first.cursor)
    assert isinstance(second, dg.SensorResult)
    assert [r.partition_keys for r in second.dynamic_partitions_requests or []] == [["c0002"]]
    assert len(second.run_requests or []) == 3
