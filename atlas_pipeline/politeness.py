"""Politeness arithmetic: the origin gap, Retry-After and jittered exponential backoff.

The state (next_eligible_at, backoff_until, in-flight slots) lives in the coordination
store so every worker, process and run shares one clock per origin; this module only
computes the numbers that go into it.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
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


# ---------------------------------------------------------------- adaptive pacing (AIMD)
# Seed 003 decision 4: adapt inside a floor (the configured gap) and a ceiling
# (adaptive_max_gap_s) with additive increase and multiplicative decrease of the rate;
# decision 20: the whole origin slows down on 429 or on *repeated* 503, not on one page's
# hiccup. The rule is a pure function of (state, answer); the store keeps the state.

RATE_FLOOR_GAP_S = 0.25  # a gap of 0 has no rate to halve: AIMD works from this gap upwards
_WIDEN = frozenset({"http_429", "timeout", "network_error"})  # always an overload signal
_SERVER_ERROR = "http_5xx"


@dataclass(frozen=True, slots=True)
class Pacing:
    """An origin's adaptive pacing state, as the coordination store keeps it."""

    extra_gap_s: float = 0.0  # added to the configured gap by past overload
    latency_s: float | None = None  # moving average of healthy answers' elapsed time
    stress: float = 0.0  # moving share of 5xx answers among recent answers


@dataclass(frozen=True, slots=True)
class PacingRule:
    """The knobs of `adapt` (politeness.adaptive_max_gap_s and friends)."""

    max_gap_s: float  # the ceiling; 0 turns adaptation off
    overload_share: float = 0.5  # 5xx share at which a repeated 5xx means the origin struggles
    recover_steps: int = 10  # healthy answers that take the rate from ~0 back to the configured
    stress_weight: float = 0.2  # weight of the newest answer in `stress` (~ the last 5-10)


@dataclass(frozen=True, slots=True)
class Answer:
    """What one fetch attempt told us about its origin."""

    reason: str  # the outcome's reason code
    attempt: int = 1  # which attempt of its URL this was (1 = first)
    elapsed_s: float | None = None


def overloaded(state: Pacing, answer: Answer, rule: PacingRule) -> bool:
    """Whether `answer` (with `state` already counting it) says the origin is struggling.

    429, timeouts and refused connections always do; so does an answer far slower than the
    origin's usual one. A 5xx does only when it is repeated: the URL had failed before, and
    5xx answers are at least `overload_share` of the origin's recent ones. A page's own first
    503 is retried later without slowing the origin (its neighbours answer, so `stress`
    stays low, or its retry succeeds)."""
    if answer.reason in _WIDEN:
        return True
    if answer.reason == _SERVER_ERROR:
        return answer.attempt >= 2 and state.stress >= rule.overload_share
    latency, elapsed = state.latency_s, answer.elapsed_s
    return latency is not None and elapsed is not None and elapsed > max(2 * latency, 1.0)


def adapt(state: Pacing, answer: Answer, base_gap_s: float, rule: PacingRule) -> Pacing:
    """The origin's pacing after `answer`: an overload signal doubles its gap (halves its
    rate) up to the ceiling; a healthy answer adds 1/recover_steps of the configured rate
    back, so `recover_steps` good answers undo any widening; a 5xx that is no overload
    signal (a page's hiccup) leaves the gap as it is. Any answer that is neither a 5xx nor
    a 429, timeout or refused connection is healthy, and its time feeds the latency."""
    if rule.max_gap_s <= 0:
        return state
    error = answer.reason == _SERVER_ERROR
    weight = rule.stress_weight
    stress = (1 - weight) * state.stress + weight * (1.0 if error else 0.0)
    latency = state.latency_s
    if answer.elapsed_s is not None and not error and answer.reason not in _WIDEN:
        latency = answer.elapsed_s if latency is None else 0.8 * latency + 0.2 * answer.elapsed_s
    gap = base_gap_s + state.extra_gap_s
    if overloaded(Pacing(state.extra_gap_s, state.latency_s, stress), answer, rule):
        widened = min(rule.max_gap_s, max(2 * gap, RATE_FLOOR_GAP_S))
        return Pacing(max(0.0, widened - base_gap_s), latency, stress)
    if error:
        return Pacing(state.extra_gap_s, latency, stress)
    floor = max(base_gap_s, RATE_FLOOR_GAP_S)
    rate = 1.0 / max(gap, floor) + (1.0 / floor) / max(1, rule.recover_steps)
    # within a rounding error of the configured rate is the configured rate
    extra = 0.0 if rate * floor >= 1.0 - 1e-9 else max(0.0, 1.0 / rate - base_gap_s)
    return Pacing(extra, latency, stress)
