"""benchmarks/crawl_throughput.py's rounds (issue 16 quotes its medians): contenders take
turns running first, and each number of the table is the median of its rounds."""

from __future__ import annotations

from typing import Any

from tests.conftest import load_benchmark


def _row(cpu_ms: float, pages_per_s: float, pages: int, threads: str) -> dict[str, Any]:
    return {"contender": "atlas", "cpu_s_per_page": cpu_ms / 1000, "pages_per_s": pages_per_s,
            "pages": pages, "profiled": False, "thread_cpu_s": {threads: 1.0}}  # fmt: skip


def test_contenders_take_turns_running_first() -> None:
    bench = load_benchmark("crawl_throughput")
    assert [bench.round_order(i) for i in range(3)] == [
        ("atlas", "baseline"), ("baseline", "atlas"), ("atlas", "baseline")]  # fmt: skip


def test_each_number_is_the_median_of_its_rounds() -> None:
    bench = load_benchmark("crawl_throughput")
    rows = [_row(12.5, 150.0, 9898, "a"), _row(19.0, 90.0, 9897, "b"), _row(12.1, 155.0, 9899, "c")]
    out = bench.median_row(rows)
    assert out["cpu_s_per_page"] == 12.5 / 1000 and out["pages_per_s"] == 150.0
    assert out["pages"] == 9898 and isinstance(out["pages"], int)
    assert out["profiled"] is False and out["rounds"] == 3
    # what is not a number comes from the round whose CPU per page is the median one
    assert out["thread_cpu_s"] == {"a": 1.0}
    two = bench.median_row(rows[:2])
    assert two["cpu_s_per_page"] == (12.5 + 19.0) / 2000 and two["pages"] == 9897
    assert bench.median_row(rows[:1]) == {**rows[0], "rounds": 1}


def test_repeat_below_one_is_refused_naming_the_flag(capsys: Any) -> None:
    bench = load_benchmark("crawl_throughput")
    try:
        bench.parse_args(["--repeat", "0"])
    except SystemExit as exc:
        assert exc.code == 2
    else:
        raise AssertionError("--repeat 0 was accepted")
    assert "--repeat must be at least 1" in capsys.readouterr().err
