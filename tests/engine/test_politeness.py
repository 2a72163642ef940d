"""Politeness arithmetic (seed 000 ch. 7): the origin gap, Retry-After and jittered backoff."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from email.utils import format_datetime

import pytest

from atlas_pipeline.politeness import backoff_s, origin_gap, parse_retry_after

NOW = 1_700_000_000.0


def http_date(ts: float) -> str:
    return format_datetime(datetime.fromtimestamp(ts, UTC), usegmt=True)


@pytest.mark.parametrize(
    ("min_gap", "crawl_delay", "cap", "expected"),
    [
        (1.0, None, 30.0, 1.0),  # no Crawl-delay: the configured floor
        (1.0, 5.0, 30.0, 5.0),  # Crawl-delay widens the gap
        (1.0, 100.0, 30.0, 30.0),  # ... up to the cap
        (5.0, 1.0, 30.0, 5.0),  # never narrows it
        (5.0, 100.0, 2.0, 5.0),  # a cap below the floor keeps the floor
        (0.0, 0.5, 30.0, 0.5),
        (0.0, None, 30.0, 0.0),
    ],
)
def test_origin_gap(min_gap: float, crawl_delay: float | None, cap: float, expected: float) -> None:
    assert origin_gap(min_gap, crawl_delay, cap) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("120", 120.0),
        ("0", 0.0),
        (" 30 ", 30.0),
        (http_date(NOW + 90), 90.0),
        (http_date(NOW - 90), 0.0),  # a date in the past means now
        ("Tue, 14 Nov 2023 22:14:50 GMT", 1_700_000_090.0 - NOW),
        (None, None),
        ("", None),
        ("soon", None),
        ("-5", None),
        ("1.5", None),
        ("12abc", None),
        ("Tue, 14 Nov 2023 22:14:50", None),  # no zone: not an HTTP date
        ("Tue, 99 Nov 2023 22:14:50 GMT", None),
        ("\u00b2", None),  # superscript two: str.isdigit() says True, float() refuses it
        ("\uff11\uff12", None),  # fullwidth digits are not HTTP delta-seconds
    ],
)
def test_parse_retry_after(value: str | None, expected: float | None) -> None:
    assert parse_retry_after(value, NOW) == expected


@pytest.mark.parametrize("attempt", [0, 1, 2, 3, 5, 10, 40])
def test_backoff_stays_within_its_ceiling(attempt: int) -> None:
    base, cap = 2.0, 60.0
    ceiling = min(cap, base * 2 ** max(0, attempt - 1))
    rng = random.Random(attempt)
    draws = [backoff_s(attempt, base, cap, rng) for _ in range(300)]
    assert all(0.0 <= x <= ceiling for x in draws)
    # full jitter: the draws spread over the whole range, not one fixed delay
    assert max(draws) > 0.8 * ceiling
    assert min(draws) < 0.2 * ceiling


def test_backoff_ceiling_doubles_then_caps() -> None:
    def top(attempt: int) -> float:
        rng = random.Random(7)
        return max(backoff_s(attempt, 1.0, 10.0, rng) for _ in range(2000))

    tops = [top(a) for a in (1, 2, 3, 4, 5, 6)]
    for got, ceiling in zip(tops, [1, 2, 4, 8, 10, 10], strict=True):
        assert 0.95 * ceiling <= got <= ceiling


def test_backoff_is_reproducible_with_a_seeded_rng() -> None:
    a = [backoff_s(3, 2.0, 60.0, random.Random(42)) for _ in range(3)]
    b = [backoff_s(3, 2.0, 60.0, random.Random(42)) for _ in range(3)]
    assert a == b
    assert backoff_s(3, 2.0, 60.0, random.Random(42)) != backoff_s(3, 2.0, 60.0, random.Random(43))


def test_backoff_with_zero_base_is_zero() -> None:
    assert backoff_s(5, 0.0, 60.0, random.Random(1)) == 0.0
