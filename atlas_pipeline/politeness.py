"""Politeness arithmetic: the origin gap, Retry-After and jittered exponential backoff.

The state (next_eligible_at, backoff_until, in-flight slots) lives in the coordination
store so every worker, process and run shares one clock per origin; this module only
computes the numbers that go into it.
"""

from __future__ import annotations

import random
from email.utils import parsedate_to_datetime


def origin_gap(min_gap_s: float, crawl_delay_s: float | None, cap_s: float) -> float:
    """Seconds between request starts: the configured floor, widened by a capped Crawl-delay."""
    if crawl_delay_s is None:
        return min_gap_s
    return max(min_gap_s, min(crawl_delay_s, cap_s))


def parse_retry_after(value: str | None, now: float) -> float | None:
    """Retry-After as seconds from now: delta-seconds or an HTTP date; None if absent or bad."""
    if not value:
        return None
    value = value.strip()
    # delta-seconds are ASCII digits: str.isdigit() alone accepts '²', which float() rejects
    if value.isascii() and value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - now)


def backoff_s(attempt: int, base_s: float, cap_s: float, rng: random.Random | None = None) -> float:
    """Full-jitter exponential backoff: uniform(0, min(cap, base * 2**(attempt-1)))."""
    ceiling = min(cap_s, base_s * (2 ** max(0, attempt - 1)))
    return (rng or random).uniform(0.0, ceiling)
