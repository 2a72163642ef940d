"""Politeness arithmetic: the origin gap, Retry-After and jittered exponential backoff.

The state (next_eligible_at, backoff_until, in-flight slots) lives in the coordination
store so every worker, process and run shares one clock per origin; this module only
computes the numbers that go into it, and the claim scheduler's decision (`may_claim`:
clock, backoff, slots, class quota and starvation bound) from what the store read.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from email.utils import parsedate_to_datetime


def origin_gap(min_gap_s: float, crawl_delay_s: float | None, cap_s: float) -> float:
    """Seconds between request starts: the configured floor, widened by a capped Crawl-delay."""
    if crawl_delay_s is None:
        return min_gap_s
    return max(min_gap_s, min(crawl_delay_s, cap_s))


def send_delay(now: float, last_sent: float | None, gap_s: float, backoff_until: float) -> float:
    """Seconds a claimed request must still wait before its bytes may leave.

    The gap is a promise about what the origin sees, so it runs from the previous request's
    actual send, or the start of its answer (`last_sent`, as politeness.gap_from says), not
    from the claims: a request that left late holds the next one back by as much. A backoff
    learnt after the claim (a 429 or 503 with Retry-After that answered another request in
    flight) is waited out too. A gap of 0 spaces nothing."""
    after_gap = last_sent + gap_s if gap_s > 0 and last_sent is not None else now
    return max(0.0, after_gap - now, backoff_until - now)


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
    """Equal-jitter exponential backoff: uniform(c / 2, c), c = min(cap, base * 2**(attempt-1)).

    The floor doubles with the ceiling (seed 003 decision 20: immediate retries hammer a
    server that is already failing). Full jitter, uniform(0, c), could send a URL's second
    and third attempts within a second of its first, so one overload of a few requests spent
    every attempt of the pages it hit; half of the range still spreads retries apart."""
    ceiling = min(cap_s, base_s * (2 ** max(0, attempt - 1)))
    return (rng or random).uniform(ceiling / 2, ceiling)


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


# ---------------------------------------------------------------- the claim scheduler
# Seed 000 ch. 10: ready origins are served longest-waiting first (aging of origins); a
# fairness class over its quota of recent attempts waits while another class with eligible
# work is under its own, unless the origin has waited past the starvation bound. The store
# reads the origins' clocks, slots and the classes' scores, calls `may_claim`, and writes
# the claims and the scores back.

SCORE_FLOOR = 1e-3  # a class score decayed below this is forgotten (no row kept for it)


@dataclass(frozen=True, slots=True)
class OriginSlot:
    """One origin as the claim scheduler sees it, as the coordination store keeps it."""

    fair_class: str
    next_eligible_at: float = 0.0  # its clock: the earliest start of its next request
    backoff_until: float = 0.0
    in_flight: int = 0  # requests holding one of its slots
    max_in_flight: int = 1
    robots_lease_until: float = 0.0  # a robots.txt fetch holds a slot until then
    robots_expires_at: float = math.inf  # its robots policy is good until then


@dataclass(frozen=True, slots=True)
class FairnessRule:
    """The knobs of `may_claim` (politeness.class_quota and friends)."""

    class_quota: float = 1.0  # most share of recent attempts per class while others wait
    starvation_bound_s: float = 30.0  # an origin waiting this long is served, quota or not


@dataclass(frozen=True, slots=True)
class Decision:
    """Whether the scheduler claims for an origin now, and why (not)."""

    claim: bool
    reason: str  # "ok", "starved" | "not_due", "backoff", "no_capacity", "over_quota"


def has_capacity(origin: OriginSlot, now: float) -> bool:
    """A free in-flight slot, and no robots fetch in progress for an expired policy (a
    robots fetch in progress holds one slot)."""
    robots_busy = origin.robots_lease_until > now
    if robots_busy and origin.robots_expires_at <= now:
        return False
    return origin.in_flight + int(robots_busy) < origin.max_in_flight


def waited_s(origin: OriginSlot, now: float) -> float:
    """How long the origin has been eligible (its clock is when it became so)."""
    return now - origin.next_eligible_at


def claim_order(origins: Sequence[OriginSlot]) -> list[int]:
    """The positions of `origins` longest-waiting first (earliest clock); ties keep their
    order."""
    return sorted(range(len(origins)), key=lambda i: origins[i].next_eligible_at)


def waiting_classes(pending: Mapping[str, int]) -> set[str]:
    """The classes that still have ready origins not yet served."""
    return {cls for cls, n in pending.items() if n > 0}


def class_scores(
    usage: Iterable[tuple[str, float, float]], now: float, half_life_s: float
) -> dict[str, float]:
    """Recent attempts per class, from stored (class, score, at) rows, decayed to `now`."""
    return {cls: decayed(score, at, now, half_life_s) for cls, score, at in usage}


def kept_scores(scores: Mapping[str, float]) -> dict[str, float]:
    """The class scores worth storing: those not decayed (or never grown) past the floor."""
    return {cls: v for cls, v in scores.items() if v > SCORE_FLOOR}


def may_claim(
    origin: OriginSlot,
    scores: Mapping[str, float],
    waiting: set[str],
    now: float,
    rule: FairnessRule,
) -> Decision:
    """Whether to claim for `origin` now: its clock and backoff allow a request, it has a
    free slot, and its class is not over quota while another class in `waiting` is under
    its own, unless the origin has waited past the starvation bound (which beats the
    quota)."""
    if origin.next_eligible_at > now:
        return Decision(False, "not_due")
    if origin.backoff_until > now:
        return Decision(False, "backoff")
    if not has_capacity(origin, now):
        return Decision(False, "no_capacity")
    if waited_s(origin, now) >= rule.starvation_bound_s:
        return Decision(True, "starved")
    if over_quota(origin.fair_class, scores, rule.class_quota, waiting):
        return Decision(False, "over_quota")
    return Decision(True, "ok")


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
