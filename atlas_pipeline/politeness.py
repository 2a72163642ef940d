"""Politeness arithmetic: the origin gap, Retry-After and jittered exponential backoff.

The state (next_eligible_at, backoff_until, in-flight slots) lives in the coordination
store so every worker, process and run shares one clock per origin; this module only
computes the numbers that go into it.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
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


def bucket_of(origin: str, mode: str, domain: str, ip_of: Callable[[str], str]) -> str:
    """The politeness bucket an origin's requests share a clock and cap with."""
    if mode == "domain":
        return domain
    if mode == "ip":
        return "ip:" + ip_of(host_of(origin))
    return origin


def class_of(origin: str, domain: str, classes: Mapping[str, str]) -> str:
    """An origin's fairness class: named by its host or registrable domain, else the domain."""
    return classes.get(host_of(origin)) or classes.get(domain) or domain


def host_of(origin: str) -> str:
    return origin.split("://", 1)[-1].rsplit(":", 1)[0].strip("[]")


def decayed(score: float, at: float, now: float, half_life_s: float) -> float:
    """A count of recent attempts that halves every `half_life_s` (a sliding share window)."""
    return float(score * 0.5 ** (max(0.0, now - at) / half_life_s))


def over_quota(cls: str, scores: Mapping[str, float], quota: float, waiting: set[str]) -> bool:
    """Class quota (seed 000 ch. 10): `cls` already took more than `quota` of recent attempts
    while a class in `waiting` (others with eligible work) is under its own quota."""
    total = sum(scores.values())
    if quota >= 1.0 or total <= 0 or scores.get(cls, 0.0) / total <= quota:
        return False
    return any(o != cls and scores.get(o, 0.0) / total <= quota for o in waiting)
