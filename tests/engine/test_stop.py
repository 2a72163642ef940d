"""The crawl's stop rule, table by table: limits and counts in, the reason (or none) out."""

from __future__ import annotations

import pytest

from atlas_pipeline.stop import CrawlCounts, StopLimits, is_error, stop_reason

CASES = [
    (StopLimits(), CrawlCounts(10**6, 10**6, 10**6), None),
    (StopLimits(max_pages=10), CrawlCounts(9, 0, 1.0), None),
    (StopLimits(max_pages=10), CrawlCounts(10, 0, 1.0), "--max-pages 10 reached (10 fetches)"),
    (StopLimits(max_seconds=5), CrawlCounts(0, 0, 4.9), None),
    (StopLimits(max_seconds=5), CrawlCounts(0, 0, 5.0), "--max-seconds 5 reached (5.0 s)"),
    (StopLimits(max_errors=3), CrawlCounts(100, 2, 1.0), None),
    (
        StopLimits(max_errors=3),
        CrawlCounts(100, 3, 1.0),
        "--max-errors 3 reached (3 failed fetches)",
    ),
    # several met at once: pages first, then time, then errors
    (StopLimits(1, 1.0, 1), CrawlCounts(1, 1, 1.0), "--max-pages 1 reached (1 fetches)"),
    (StopLimits(None, 1.0, 1), CrawlCounts(1, 1, 1.0), "--max-seconds 1 reached (1.0 s)"),
]


@pytest.mark.parametrize(("limits", "counts", "reason"), CASES)
def test_stop_reason(limits: StopLimits, counts: CrawlCounts, reason: str | None) -> None:
    assert stop_reason(limits, counts) == reason


def test_limits_are_falsy_when_none_is_set() -> None:
    assert not StopLimits() and StopLimits(max_errors=1)


@pytest.mark.parametrize(("status", "error"), [(None, True), (200, False), (404, False),
                                               (429, False), (500, True), (503, True)])  # fmt: skip
def test_what_counts_as_an_error(status: int | None, error: bool) -> None:
    assert is_error(status) is error
