"""Politeness arithmetic (seed 000 ch. 7): the origin gap, Retry-After and jittered backoff."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import UTC, datetime
from email.utils import format_datetime
from typing import Any

import pytest

from atlas_pipeline.politeness import (
    Answer,
    Decision,
    FairnessRule,
    OriginSlot,
    Pacing,
    PacingRule,
    adapt,
    backoff_s,
    claim_order,
    class_scores,
    decayed,
    has_capacity,
    kept_scores,
    may_claim,
    origin_gap,
    over_quota,
    overloaded,
    parse_retry_after,
    send_delay,
    waiting_classes,
)

NOW = 1_700_000_000.0


def http_date(ts: float) -> str:
    return format_datetime(datetime.fromtimestamp(ts, UTC), usegmt=True)


@pytest.mark.parametrize(
    ("now", "last_sent", "gap", "backoff_until", "expected", "why"),
    [
        (10.0, None, 1.0, 0.0, 0.0, "nothing sent yet in this batch: the claim's clock decides"),
        (10.0, 9.0, 1.0, 0.0, 0.0, "the gap has run since the last send"),
        (10.0, 9.5, 1.0, 0.0, 0.5, "the last request left late: this one waits the rest"),
        (10.0, 10.0, 1.0, 0.0, 1.0, "the last request just left"),
        (10.0, 9.99, 0.0, 0.0, 0.0, "gap 0: only the in-flight cap spaces requests"),
        (10.0, 9.0, 1.0, 15.0, 5.0, "a Retry-After learnt after the claim is waited out"),
        (10.0, 9.9, 1.0, 10.5, 0.9, "the longer of gap and backoff"),
        (10.0, None, 0.0, 9.0, 0.0, "a backoff that ended"),
        (10.0, 11.0, 1.0, 0.0, 2.0, "a send recorded ahead (clock skew guard): still spaced"),
    ],
)
def test_send_delay(
    now: float, last_sent: float | None, gap: float, backoff_until: float, expected: float, why: str
) -> None:
    assert send_delay(now, last_sent, gap, backoff_until) == pytest.approx(expected), why


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
    assert all(ceiling / 2 <= x <= ceiling for x in draws)
    # equal jitter: the draws spread over the upper half, not one fixed delay, and never
    # come back sooner than half the ceiling (no near-immediate retry into a failing server)
    assert max(draws) > 0.95 * ceiling
    assert min(draws) < 0.55 * ceiling


@pytest.mark.parametrize(("attempt", "floor"), [(1, 5.0), (2, 10.0), (3, 20.0), (4, 40.0),
                                                (7, 300.0), (12, 300.0)])  # fmt: skip
def test_backoff_floor_doubles_with_each_attempt_then_caps(attempt: int, floor: float) -> None:
    rng = random.Random(attempt)
    assert min(backoff_s(attempt, 10.0, 600.0, rng) for _ in range(2000)) >= floor


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


# adaptive pacing (AIMD, seed 003 decisions 4 and 20) -------------------------------------
RULE = PacingRule(max_gap_s=60.0, overload_share=0.5, recover_steps=10, stress_weight=0.2)
CALM = Pacing()
STRESSED = Pacing(stress=0.8)  # most recent answers were 5xx


@pytest.mark.parametrize(
    ("state", "answer", "base", "expected_gap", "why"),
    [
        (CALM, Answer("fetched", 1, 0.1), 1.0, 1.0, "healthy at the floor stays there"),
        (CALM, Answer("http_429"), 1.0, 2.0, "429 halves the rate"),
        (CALM, Answer("timeout"), 1.0, 2.0, "a timeout halves the rate"),
        (CALM, Answer("network_error"), 1.0, 2.0, "a refused connection halves the rate"),
        (CALM, Answer("http_5xx", 1), 1.0, 1.0, "a page's first 5xx: no origin slowdown"),
        (CALM, Answer("http_5xx", 2), 1.0, 1.0, "a repeated 5xx among healthy answers"),
        (STRESSED, Answer("http_5xx", 1), 1.0, 1.0, "first 5xx of a URL, even when others fail"),
        (STRESSED, Answer("http_5xx", 2), 1.0, 2.0, "repeated 5xx while 5xx dominate: overload"),
        (Pacing(stress=0.45), Answer("http_5xx", 3), 1.0, 2.0, "this 5xx tips the share"),
        (Pacing(stress=0.3), Answer("http_5xx", 3), 1.0, 1.0, "share still under the bar"),
        (Pacing(40.0), Answer("http_429"), 1.0, 60.0, "the ceiling holds"),
        (Pacing(59.0), Answer("timeout"), 1.0, 60.0, "already at the ceiling"),
        (CALM, Answer("http_429"), 0.0, 0.25, "a zero gap widens from the rate floor"),
        (Pacing(0.25), Answer("fetched"), 0.0, 0.0, "one success undoes the floor widening"),
        (Pacing(59.0), Answer("fetched"), 1.0, 1 / (1 / 60 + 0.1), "additive: +1/10 of the rate"),
        (Pacing(4.0), Answer("fetched"), 1.0, 1 / (0.2 + 0.1), "from 5 s to 3.33 s"),
        (Pacing(0.05), Answer("fetched"), 1.0, 1.0, "the last step lands on the floor"),
        (Pacing(4.0), Answer("http_4xx"), 1.0, 1 / 0.3, "a 404 is a healthy answer"),
        (Pacing(4.0), Answer("http_5xx", 1), 1.0, 5.0, "a hiccup neither slows nor speeds"),
        (Pacing(1.0, 0.2), Answer("fetched", 1, 5.0), 1.0, 4.0, "25x the usual time: overload"),
        (Pacing(1.0, 0.2), Answer("fetched", 1, 0.9), 1.0, 1 / 0.6, "under 1 s is never slow"),
        (Pacing(0.0, None), Answer("fetched", 1, 30.0), 1.0, 1.0, "no baseline yet: not slow"),
    ],
)
def test_adapt(state: Pacing, answer: Answer, base: float, expected_gap: float, why: str) -> None:
    after = adapt(state, answer, base, RULE)
    assert base + after.extra_gap_s == pytest.approx(expected_gap), why


@pytest.mark.parametrize(
    ("stress", "reason", "expected"),
    [(0.0, "http_5xx", 0.2), (0.5, "http_5xx", 0.6), (1.0, "fetched", 0.8), (0.5, "http_429", 0.4)],
)
def test_stress_is_a_moving_share_of_5xx(stress: float, reason: str, expected: float) -> None:
    assert adapt(Pacing(stress=stress), Answer(reason), 1.0, RULE).stress == pytest.approx(expected)


def test_latency_follows_healthy_answers_only() -> None:
    state = adapt(Pacing(), Answer("fetched", 1, 0.5), 1.0, RULE)
    assert state.latency_s == 0.5
    assert adapt(state, Answer("fetched", 1, 1.0), 1.0, RULE).latency_s == pytest.approx(0.6)
    for reason in ("http_5xx", "timeout", "http_429", "network_error"):
        assert adapt(state, Answer(reason, 2, 9.0), 1.0, RULE).latency_s == 0.5, reason


def test_adaptation_off_changes_nothing() -> None:
    off = PacingRule(max_gap_s=0.0)
    assert adapt(STRESSED, Answer("http_5xx", 3), 1.0, off) == STRESSED


def test_recover_steps_healthy_answers_undo_the_ceiling() -> None:
    state = Pacing(59.0)
    gaps = []
    for _ in range(10):
        state = adapt(state, Answer("fetched", 1, 0.1), 1.0, RULE)
        gaps.append(1.0 + state.extra_gap_s)
    assert gaps == sorted(gaps, reverse=True) and gaps[-1] == 1.0 and gaps[-2] > 1.0


@pytest.mark.parametrize(
    ("state", "answer", "expected"),
    [
        (CALM, Answer("http_429"), True),
        (CALM, Answer("fetched", 1, 0.1), False),
        (Pacing(stress=0.5), Answer("http_5xx", 2), True),  # at the bar counts
        (Pacing(stress=0.49), Answer("http_5xx", 2), False),
        (Pacing(stress=1.0), Answer("http_5xx", 1), False),
        (Pacing(latency_s=0.2), Answer("not_modified", 1, 1.01), True),
        (Pacing(latency_s=2.0), Answer("fetched", 1, 3.9), False),  # under twice the usual
    ],
)
def test_overloaded(state: Pacing, answer: Answer, expected: bool) -> None:
    assert overloaded(state, answer, RULE) is expected


# the claim scheduler's fairness (seed 000 ch. 10) ----------------------------------------
@pytest.mark.parametrize(
    ("score", "at", "now", "half_life", "expected"),
    [
        (8.0, NOW, NOW, 60.0, 8.0),  # no time passed
        (8.0, NOW, NOW + 60, 60.0, 4.0),  # one half-life: half
        (8.0, NOW, NOW + 120, 60.0, 2.0),  # two: a quarter
        (8.0, NOW, NOW + 30, 60.0, 8.0 * 0.5**0.5),  # smooth in between
        (8.0, NOW, NOW + 60, 120.0, 8.0 * 0.5**0.5),  # a longer window decays slower
        (8.0, NOW + 50, NOW, 60.0, 8.0),  # stamped in the future (another clock): no growth
        (0.0, NOW, NOW + 60, 60.0, 0.0),
    ],
)
def test_decayed(score: float, at: float, now: float, half_life: float, expected: float) -> None:
    assert decayed(score, at, now, half_life) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("cls", "scores", "quota", "waiting", "expected", "why"),
    [
        ("a", {"a": 9.0, "b": 1.0}, 0.5, {"b"}, True, "over its share while b waits"),
        ("a", {"a": 9.0, "b": 1.0}, 1.0, {"b"}, False, "quota 1: off"),
        ("a", {"a": 9.0, "b": 1.0}, 0.5, set(), False, "nobody else waits"),
        ("a", {"a": 9.0, "b": 1.0}, 0.5, {"a"}, False, "only its own class waits"),
        ("a", {"a": 5.0, "b": 5.0}, 0.5, {"b"}, False, "at the quota is not over it"),
        ("a", {"a": 6.0, "b": 4.0}, 0.5, {"b"}, True, "just over"),
        ("a", {"a": 6.0, "b": 4.0}, 0.5, {"c"}, True, "a class with no score is under"),
        ("a", {"a": 6.0, "b": 4.0}, 0.3, {"b"}, False, "the waiting class is over its own"),
        ("a", {"a": 7.0, "b": 3.0}, 0.3, {"b"}, True, "the waiting class at its quota is under"),
        ("b", {"a": 9.0, "b": 1.0}, 0.5, {"a"}, False, "the small class is never held back"),
        ("a", {}, 0.5, {"b"}, False, "no recent attempts at all"),
        ("a", {"a": 0.0, "b": 0.0}, 0.5, {"b"}, False, "all scores decayed to zero"),
    ],
)
def test_over_quota(
    cls: str, scores: dict[str, float], quota: float, waiting: set[str], expected: bool, why: str
) -> None:
    assert over_quota(cls, scores, quota, waiting) is expected, why


ONE = OriginSlot("a", next_eligible_at=NOW - 1.0)  # class a, due a second ago, 1 free slot


def slot(**changes: Any) -> OriginSlot:
    return replace(ONE, **changes)


@pytest.mark.parametrize(
    ("origin", "expected", "why"),
    [
        (slot(in_flight=0, max_in_flight=1), True, "a free slot"),
        (slot(in_flight=1, max_in_flight=1), False, "every slot taken"),
        (slot(in_flight=1, max_in_flight=2), True, "one of two taken"),
        (slot(in_flight=2, max_in_flight=1), False, "over the cap (a lowered max_in_flight)"),
        (slot(robots_lease_until=NOW + 5, robots_expires_at=NOW - 1, max_in_flight=2), False,
         "robots fetch in progress for an expired policy: wait for it, free slots or not"),
        (slot(robots_lease_until=NOW + 5, robots_expires_at=NOW, max_in_flight=2), False,
         "a policy expiring now is expired"),
        (slot(robots_lease_until=NOW + 5, robots_expires_at=NOW + 60, max_in_flight=2), True,
         "a refresh ahead of expiry holds one slot of two"),
        (slot(robots_lease_until=NOW + 5, robots_expires_at=NOW + 60, max_in_flight=1), False,
         "... and the only one"),
        (slot(robots_lease_until=NOW, robots_expires_at=NOW - 1), True,
         "a robots lease ending now holds nothing"),
    ],
)  # fmt: skip
def test_has_capacity(origin: OriginSlot, expected: bool, why: str) -> None:
    assert has_capacity(origin, NOW) is expected, why


FAIR = FairnessRule(class_quota=0.5, starvation_bound_s=30.0)
BIG = {"a": 9.0, "b": 1.0}  # class a took 90% of recent attempts


@pytest.mark.parametrize(
    ("origin", "scores", "waiting", "rule", "claim", "reason"),
    [
        (slot(), {}, set(), FAIR, True, "ok"),
        (slot(fair_class="b"), BIG, {"a", "b"}, FAIR, True, "ok"),
        (slot(), BIG, {"b"}, FAIR, False, "over_quota"),
        (slot(), BIG, set(), FAIR, True, "ok"),  # nobody waits: the quota does not hold back
        (slot(), BIG, {"b"}, FairnessRule(class_quota=1.0), True, "ok"),  # quota off
        (slot(next_eligible_at=NOW - 30.0), BIG, {"b"}, FAIR, True, "starved"),  # at the bound
        (slot(next_eligible_at=NOW - 29.9), BIG, {"b"}, FAIR, False, "over_quota"),
        (slot(next_eligible_at=NOW - 300.0), {}, set(), FAIR, True, "starved"),
        (slot(next_eligible_at=NOW + 1.0), {}, set(), FAIR, False, "not_due"),
        (slot(next_eligible_at=NOW), {}, set(), FAIR, True, "ok"),  # due now
        (slot(backoff_until=NOW + 5.0), {}, set(), FAIR, False, "backoff"),
        (slot(backoff_until=NOW), {}, set(), FAIR, True, "ok"),
        (slot(in_flight=1), {}, set(), FAIR, False, "no_capacity"),
        (slot(in_flight=1, next_eligible_at=NOW - 300.0), {}, set(), FAIR, False, "no_capacity"),
        (slot(next_eligible_at=NOW + 1.0, backoff_until=NOW + 5.0, in_flight=1), BIG, {"b"},
         FAIR, False, "not_due"),  # the clock is judged first
        (slot(backoff_until=NOW + 5.0, in_flight=1), BIG, {"b"}, FAIR, False, "backoff"),
        (slot(in_flight=1), BIG, {"b"}, FAIR, False, "no_capacity"),  # capacity before quota
    ],
)  # fmt: skip
def test_may_claim(
    origin: OriginSlot,
    scores: dict[str, float],
    waiting: set[str],
    rule: FairnessRule,
    claim: bool,
    reason: str,
) -> None:
    assert may_claim(origin, scores, waiting, NOW, rule) == Decision(claim, reason)


@pytest.mark.parametrize(
    ("clocks", "order"),
    [
        ([5.0, 1.0, 3.0], [1, 2, 0]),  # the earliest clock has waited longest
        ([1.0, 1.0, 0.5, 1.0], [2, 0, 1, 3]),  # ties keep the order given
        ([], []),
    ],
)
def test_claim_order_is_longest_waiting_first(clocks: list[float], order: list[int]) -> None:
    origins = [slot(next_eligible_at=NOW - 10 + t) for t in clocks]
    assert claim_order(origins) == order


@pytest.mark.parametrize(
    ("pending", "waiting"),
    [({"a": 2, "b": 0, "c": 1}, {"a", "c"}), ({"a": 0}, set()), ({"a": -1}, set()), ({}, set())],
)
def test_waiting_classes(pending: dict[str, int], waiting: set[str]) -> None:
    assert waiting_classes(pending) == waiting


def test_class_scores_decay_each_stored_row_and_forget_the_faded() -> None:
    rows = [("a", 8.0, NOW - 60), ("b", 1.0, NOW), ("c", 0.002, NOW - 60)]
    scores = class_scores(rows, NOW, 60.0)
    assert scores == pytest.approx({"a": 4.0, "b": 1.0, "c": 0.001})
    assert class_scores([], NOW, 60.0) == {}
    # the floor itself is forgotten: only scores above it are stored
    assert kept_scores({"a": 0.0011, "b": 0.001, "c": 0.0, "d": -1.0}) == {"a": 0.0011}
