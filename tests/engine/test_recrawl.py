"""The adaptive revisit schedule (recrawl.py): the change-rate estimate from irregular checks,
the interval it leads to, freshness classes, the stored history, and a small run of
benchmarks/recrawl_simulation.py (adaptive beats fixed daily on volatile pages with fewer
fetches)."""

from __future__ import annotations

import itertools
import math
import random
import time
from types import ModuleType

import pytest

from atlas_pipeline.recrawl import (
    ADAPTIVE,
    CLAMPED_MAX,
    CLAMPED_MIN,
    FIRST_VISIT,
    GROWTH_LIMITED,
    FreshnessClass,
    Observation,
    RevisitPolicy,
    change_rate,
    dump_history,
    freshness_class,
    importance,
    load_history,
    next_revisit,
    validators_trusted,
)
from tests.conftest import load_benchmark

HOUR, DAY = 3600.0, 86400.0
POLICY = RevisitPolicy(
    first_interval_s=DAY,
    min_interval_s=600.0,
    max_interval_s=30 * DAY,
    jitter=0.1,
    max_growth=2.0,
    history=32,
)
EXACT = RevisitPolicy(DAY, 600.0, 30 * DAY, jitter=0.0, max_growth=2.0, history=32)


def _checks(rate: float, n: int, rng: random.Random, intervals: str) -> list[Observation]:
    """`n` checks of a page changing as a Poisson process at `rate`, at irregular intervals."""
    out = []
    for _ in range(n):
        t = rng.expovariate(rate) if intervals == "exponential" else rng.uniform(0.0, 2.0 / rate)
        out.append((t, rng.random() < -math.expm1(-rate * t)))  # P(a change in t) = 1 - e^-rt
    return out


# --- change_rate ------------------------------------------------------------------------------


@pytest.mark.parametrize("mean_change_s", [HOUR, DAY, 7 * DAY], ids=["hourly", "daily", "weekly"])
@pytest.mark.parametrize("intervals", ["exponential", "uniform"])
def test_change_rate_recovers_a_known_poisson_rate(mean_change_s: float, intervals: str) -> None:
    rate = 1.0 / mean_change_s
    obs = _checks(rate, 1000, random.Random(11), intervals)
    changed = sum(c for _, c in obs)
    assert 0 < changed < len(obs)  # the maximum-likelihood branch, not the fallback
    estimate = change_rate(obs)
    assert estimate is not None
    assert estimate == pytest.approx(rate, rel=0.15)
    # the naive estimate (changes seen / time watched) misses the changes that fall into one
    # check: here it is far off, so the test above does tell the MLE from it
    naive = changed / sum(t for t, _ in obs)
    assert naive < 0.8 * rate


def test_change_rate_equals_the_regular_interval_estimator_on_equal_intervals() -> None:
    # with every interval I the likelihood equation solves to -ln(1 - X/n) / I
    obs = [(2 * HOUR, True)] * 3 + [(2 * HOUR, False)] * 7
    assert change_rate(obs) == pytest.approx(-math.log(1 - 3 / 10) / (2 * HOUR), rel=1e-6)


def test_change_rate_root_satisfies_the_likelihood_equation() -> None:
    rng = random.Random(5)
    obs = [(rng.uniform(60.0, 5 * DAY), rng.random() < 0.4) for _ in range(50)]
    rate = change_rate(obs)
    assert rate is not None and rate > 0
    changed_side = sum(t / math.expm1(rate * t) for t, c in obs if c)
    quiet_side = sum(t for t, c in obs if not c)
    assert changed_side == pytest.approx(quiet_side, rel=1e-6)
    # and it is the only root: the left side is above the right just below it, under just above
    assert sum(t / math.expm1(rate * 0.99 * t) for t, c in obs if c) > quiet_side
    assert sum(t / math.expm1(rate * 1.01 * t) for t, c in obs if c) < quiet_side


def test_change_rate_without_data_is_none() -> None:
    assert change_rate([]) is None
    assert change_rate([(0.0, True), (0.0, False)]) is None  # zero-length checks carry nothing


def test_change_rate_is_zero_when_nothing_changed() -> None:
    assert change_rate([(HOUR, False)]) == 0.0
    assert change_rate([(t * HOUR, False) for t in range(1, 40)]) == 0.0


def test_change_rate_is_finite_and_high_when_everything_changed() -> None:
    obs = [(HOUR, True)] * 20
    rate = change_rate(obs)
    assert rate is not None and math.isfinite(rate)
    assert rate == pytest.approx(math.log(41) / HOUR)  # -ln(0.5 / 20.5) / mean interval
    assert rate > 3 / HOUR  # well above one change per check
    # more checks that all saw a change: more evidence of a fast page
    assert change_rate([(HOUR, True)] * 30) > rate  # type: ignore[operator]


def test_change_rate_grows_with_the_share_of_changed_checks() -> None:
    rates = [change_rate([(HOUR, True)] * k + [(HOUR, False)] * (10 - k)) for k in range(11)]
    assert rates[0] == 0.0
    assert all(a < b for a, b in itertools.pairwise(rates))  # type: ignore[operator]


# --- next_revisit ---------------------------------------------------------------------------


def test_first_visit_uses_the_first_interval() -> None:
    rng = random.Random(1)
    plan = next_revisit(POLICY, (), None, 0.5, None, rng)
    assert plan.reason == FIRST_VISIT
    assert plan.rate_per_s is None and plan.history == ()
    assert DAY * 0.9 <= plan.interval_s <= DAY * 1.1
    exact = next_revisit(EXACT, (), None, 0.5, None, rng)
    assert (exact.reason, exact.interval_s) == (FIRST_VISIT, DAY)
    # nothing compared yet (a fetch that brought no comparable content): still the first visit
    assert next_revisit(EXACT, [(0.0, False)], None, 0.5, None, rng).reason == FIRST_VISIT
    # a freshness target under the first interval wins, jitter included
    for _ in range(50):
        assert (
            next_revisit(POLICY, (), None, 0.5, None, rng, ceiling_s=6 * HOUR).interval_s
            <= 6 * HOUR
        )


def test_adaptive_interval_is_the_estimated_change_interval() -> None:
    hist = [(2 * HOUR, True)] * 3 + [(2 * HOUR, False)] * 7
    plan = next_revisit(EXACT, hist, None, 0.5, 4 * HOUR, random.Random(1))
    assert plan.reason == ADAPTIVE
    assert plan.rate_per_s == pytest.approx(change_rate(hist))
    assert plan.interval_s == pytest.approx(1.0 / change_rate(hist))  # type: ignore[operator]


def test_a_longer_estimate_is_reached_step_by_step() -> None:
    hist = [(2 * HOUR, True)] * 3 + [(2 * HOUR, False)] * 7  # estimate ~5.6 h
    plan = next_revisit(EXACT, hist, None, 0.5, 2 * HOUR, random.Random(1))
    assert (plan.reason, plan.interval_s) == (GROWTH_LIMITED, 4 * HOUR)
    assert plan.rate_per_s == pytest.approx(change_rate(hist))


def test_volatile_page_is_clamped_to_the_minimum() -> None:
    rng = random.Random(2)
    hist = [(HOUR, True)] * 20 + [(60.0, True), (30.0, False)]  # changes every few minutes
    for _ in range(50):
        plan = next_revisit(POLICY, hist, (HOUR, True), 0.5, HOUR, rng)
        assert plan.reason == CLAMPED_MIN
        assert 600.0 * 0.9 <= plan.interval_s <= 600.0 * 1.1
    assert next_revisit(EXACT, hist, (HOUR, True), 0.5, HOUR, rng).interval_s == 600.0
    # just under the minimum (an estimated change every ~7 minutes) is clamped too
    near = [(600.0, True)] * 3 + [(600.0, False)]
    assert 1.0 / change_rate(near) == pytest.approx(600 / math.log(4))  # type: ignore[operator]
    assert next_revisit(EXACT, near, None, 0.5, 600.0, rng).interval_s == 600.0
    assert next_revisit(EXACT, near, None, 0.5, 600.0, rng).reason == CLAMPED_MIN


@pytest.mark.parametrize("policy", [EXACT, POLICY], ids=["no_jitter", "jitter"])
def test_quiet_page_grows_step_by_step_to_the_maximum(policy: RevisitPolicy) -> None:
    rng = random.Random(3)
    plan = next_revisit(policy, (), None, 0.5, None, rng)
    reasons, intervals = [plan.reason], [plan.interval_s]
    for _ in range(12):
        plan = next_revisit(
            policy, plan.history, (plan.interval_s, False), 0.5, plan.interval_s, rng
        )
        reasons.append(plan.reason)
        intervals.append(plan.interval_s)
    assert reasons[0] == FIRST_VISIT
    # doubling from ~1 day: 2, 4, 8, 16 days, then the 30-day maximum
    assert reasons[1:5] == [GROWTH_LIMITED] * 4
    assert reasons[-1] == CLAMPED_MAX and set(reasons[5:]) == {CLAMPED_MAX}
    for prev, cur in itertools.pairwise(intervals):
        assert cur <= prev * policy.max_growth * (1 + policy.jitter) + 1e-6
        assert cur <= policy.max_interval_s
    if policy.jitter == 0:
        assert intervals[:5] == [DAY, 2 * DAY, 4 * DAY, 8 * DAY, 16 * DAY]
        assert intervals[-1] == 30 * DAY
    else:
        assert intervals[-1] >= 30 * DAY * (1 - policy.jitter)


def test_one_quiet_check_never_jumps_to_the_maximum() -> None:
    plan = next_revisit(EXACT, (), (DAY, False), 0.5, DAY, random.Random(4))
    assert (plan.reason, plan.interval_s) == (GROWTH_LIMITED, 2 * DAY)


def test_ceiling_caps_the_interval_jitter_included() -> None:
    rng = random.Random(5)
    quiet = [(DAY, False)] * 10
    seen = set()
    for _ in range(200):
        plan = next_revisit(POLICY, quiet, None, 0.5, 20 * DAY, rng, ceiling_s=7 * DAY)
        assert plan.reason == CLAMPED_MAX
        assert 7 * DAY * 0.9 <= plan.interval_s <= 7 * DAY
        seen.add(plan.interval_s)
    assert len(seen) > 50  # jitter below the ceiling still spreads the pages
    # a ceiling above the policy's maximum does not lift it
    plan = next_revisit(EXACT, quiet, None, 0.5, 60 * DAY, rng, ceiling_s=90 * DAY)
    assert plan.interval_s == 30 * DAY


def test_jitter_spreads_within_bounds() -> None:
    rng = random.Random(6)
    hist = [(2 * HOUR, True)] * 3 + [(2 * HOUR, False)] * 7
    target = 1.0 / change_rate(hist)  # type: ignore[operator]
    draws = [next_revisit(POLICY, hist, None, 0.5, target, rng).interval_s for _ in range(500)]
    assert all(target * 0.9 - 1e-6 <= x <= target * 1.1 + 1e-6 for x in draws)
    assert len(set(draws)) == len(draws)
    assert min(draws) < target * 0.95 and max(draws) > target * 1.05  # both sides, widely
    # the same seed gives the same draws
    again = random.Random(6)
    assert [
        next_revisit(POLICY, hist, None, 0.5, target, again).interval_s for _ in range(500)
    ] == draws


def test_higher_priority_revisits_sooner() -> None:
    hist = [(2 * HOUR, True)] * 3 + [(2 * HOUR, False)] * 7
    rng = random.Random(7)
    by_priority = {
        p: next_revisit(EXACT, hist, None, p, DAY, rng).interval_s for p in (0.0, 0.5, 0.9, 1.0)
    }
    assert by_priority[1.0] < by_priority[0.9] < by_priority[0.5] < by_priority[0.0]
    assert by_priority[0.5] / by_priority[1.0] == pytest.approx(2.0)
    assert by_priority[0.5] / by_priority[0.0] == pytest.approx(0.5)
    assert importance(0.5) == 1.0 and importance(1.0) == 2.0 and importance(0.0) == 0.5
    assert importance(7.0) == 2.0 and importance(-3.0) == 0.5  # out-of-range priorities clamp


def test_history_keeps_the_latest_checks_only() -> None:
    rng = random.Random(8)
    hist: tuple[Observation, ...] = ()
    for k in range(1, 41):
        hist = next_revisit(POLICY, hist, (float(k), k % 3 == 0), 0.5, float(k), rng).history
        assert len(hist) == min(k, POLICY.history)
    assert hist == tuple((float(k), k % 3 == 0) for k in range(9, 41))
    # the rate comes from the kept checks only
    plan = next_revisit(POLICY, hist, None, 0.5, 40.0, rng)
    assert plan.rate_per_s == pytest.approx(change_rate(hist))


def test_history_round_trips() -> None:
    hist: tuple[Observation, ...] = ((3600.0, True), (86400.5, False), (0.125, True))
    text = dump_history(hist)
    assert load_history(text) == hist
    assert all(type(c) is bool for _, c in load_history(text))
    assert (
        load_history(None) == () and load_history("") == () and load_history(dump_history(())) == ()
    )
    assert load_history(dump_history([(1.23456789, True)])) == ((1.235, True),)  # ms precision


# --- freshness classes -------------------------------------------------------------------------

CLASSES = [
    FreshnessClass("normal", 0.3, 7 * DAY),
    FreshnessClass("important", 0.8, DAY),
    FreshnessClass("low", 0.0, 30 * DAY),
]


@pytest.mark.parametrize(
    ("priority", "name"),
    [(1.0, "important"), (0.8, "important"), (0.79, "normal"), (0.3, "normal"),
     (0.29, "low"), (0.0, "low")],
)  # fmt: skip
def test_freshness_class_is_the_highest_reached(priority: float, name: str) -> None:
    assert freshness_class(priority, CLASSES) == name
    assert freshness_class(priority, list(reversed(CLASSES))) == name


def test_freshness_class_below_every_class_is_the_lowest() -> None:
    classes = [FreshnessClass("a", 0.2, DAY), FreshnessClass("b", 0.6, HOUR)]
    assert freshness_class(0.1, classes) == "a"


# --- the simulation (benchmarks/recrawl_simulation.py), small ------------------------------------


def _simulation() -> ModuleType:
    return load_benchmark("recrawl_simulation")  # type: ignore[no-any-return]


def test_simulation_adaptive_beats_fixed_daily_with_fewer_fetches() -> None:
    sim = _simulation()
    start = time.perf_counter()
    r = sim.simulate(pages=400, days=30, seed=3, budget=0.65)
    assert time.perf_counter() - start < 20
    fixed, adaptive = r["fixed"], r["adaptive"]
    assert fixed["all"]["fetches_per_day"] == pytest.approx(400, rel=0.02)
    assert adaptive["all"]["fetches_per_day"] < fixed["all"]["fetches_per_day"]
    # within the budget: revisits per day at most the budget, plus the first fetches
    assert adaptive["all"]["fetches_per_day"] <= r["budget_per_day"] + 400 / 30 + 1
    assert adaptive["volatile"]["pages"] > 0
    assert adaptive["volatile"]["mean_age_h"] <= fixed["volatile"]["mean_age_h"]
    assert (
        adaptive["volatile"]["mean_age_h_last_week"]
        < 0.25 * fixed["volatile"]["mean_age_h_last_week"]
    )


def test_simulation_staleness_is_exact() -> None:
    sim = _simulation()
    page = sim.Page("x", HOUR, changes=[10.0, 20.0, 50.0], first_fetch=0.0)
    # fetched at 0 and 30: stale from 10 to 30 (age 0..20), then from 50 to 100 (age 0..50)
    age, stale = sim.staleness(page, [0.0, 30.0], 0.0, 100.0)
    assert age == pytest.approx(20**2 / 2 + 50**2 / 2)
    assert stale == pytest.approx(20 + 50)
    # a window from 60: age runs 10..50 there
    age, stale = sim.staleness(page, [0.0, 30.0], 60.0, 100.0)
    assert age == pytest.approx((50**2 - 10**2) / 2)
    assert stale == pytest.approx(40)
    # a fetch at the instant of a change sees it
    assert sim.staleness(page, [0.0, 10.0, 20.0, 50.0], 0.0, 50.0) == (0.0, 0.0)


def test_jitter_never_takes_an_interval_under_the_minimum() -> None:
    rng = random.Random(0)
    fast = [(60.0, True)] * 5 + [(30.0, False)]
    got = [next_revisit(POLICY, fast, None, 0.5, 600.0, rng) for _ in range(500)]
    assert {r.reason for r in got} == {CLAMPED_MIN}
    assert min(r.interval_s for r in got) >= POLICY.min_interval_s
    short_first = RevisitPolicy(60.0, 600.0, 30 * 86400.0, 0.1, 2.0, 32)
    assert next_revisit(short_first, (), None, 0.5, None, rng).interval_s == 600.0


def test_one_quiet_check_without_a_previous_interval_grows_from_the_gap_observed() -> None:
    plan = next_revisit(POLICY, (), (86400.0, False), 0.5, None, random.Random(0))
    assert plan.reason == GROWTH_LIMITED
    assert plan.interval_s <= 2 * 86400.0 * (1 + POLICY.jitter)


@pytest.mark.parametrize(
    ("trusted", "checks", "misses", "expected", "why"),
    [
        (True, 0, 0, True, "no answer yet"),
        (True, 10, 2, True, "fewer misses than the bar"),
        (True, 3, 3, False, "three misleading answers of three"),
        (True, 6, 3, True, "as many honest as misleading: given the benefit"),
        (True, 5, 3, False, "more misleading than honest"),
        (True, 100, 40, True, "many misses but mostly honest"),
        (True, 7, 4, False, "4 of 7"),
        (False, 100, 0, False, "distrust is final"),
    ],
)
def test_validators_trusted(
    trusted: bool, checks: int, misses: int, expected: bool, why: str
) -> None:
    assert validators_trusted(trusted, checks, misses, untrusted_after=3) is expected, why
