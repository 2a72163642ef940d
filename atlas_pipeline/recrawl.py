"""When to come back (seed 000 ch. 13, seed 003 decisions 15 and 16).

Each content check of a URL (a 200 whose text was compared, or a 304) adds one observation to
its history: how long since the previous check, and whether the content had changed in
between. Changes are modelled as a Poisson process; its rate is estimated from checks at
irregular intervals by maximum likelihood (Cho & Garcia-Molina, "Estimating frequency of
change", ACM TOIT 3(3), 2003, section 5):

    sum over changed checks of t_i / (exp(rate * t_i) - 1)  =  sum over unchanged checks of t_i

When every check saw a change, or none did, the equation has no finite positive root; the
bias-reduced estimator of the same paper for regular checks, -ln((n - X + 0.5) / (n + 0.5)) /
mean interval, stands in (X changes in n checks).

The next interval is clamp(mean change interval / importance, min, max) x jitter, where
importance grows with the URL's priority, and an interval grows at most `max_growth` times per
check, so one quiet check never sends a page to the maximum at once.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

Observation = tuple[float, bool]  # (seconds since the previous check, changed in between)

# Why a URL is due when it is: the recrawl_schedule table's `revisit_reason`.
FIRST_VISIT = "first_visit"  # no earlier check to compare with: the configured first interval
ADAPTIVE = "adaptive"  # the estimated change interval, scaled by importance
GROWTH_LIMITED = "growth_limited"  # quieter than estimated so far; the interval grows step by step
CLAMPED_MIN = "clamped_min"  # changes faster than the minimum interval allows
CLAMPED_MAX = "clamped_max"  # changes more slowly than the maximum interval or class target


@dataclass(frozen=True, slots=True)
class RevisitPolicy:
    """The knobs of the adaptive schedule (config section `recrawl`)."""

    first_interval_s: float
    min_interval_s: float
    max_interval_s: float
    jitter: float = 0.1
    max_growth: float = 2.0
    history: int = 32


@dataclass(frozen=True, slots=True)
class Revisit:
    """The schedule decision for one URL after one check."""

    interval_s: float
    reason: str
    rate_per_s: float | None  # the estimate behind it; None before the second check
    history: tuple[Observation, ...]


def change_rate(history: Sequence[Observation]) -> float | None:
    """Estimated changes per second from checks at irregular intervals; None without data."""
    obs = [(t, c) for t, c in history if t > 0]
    if not obs:
        return None
    changes = sum(c for _, c in obs)
    if 0 < changes < len(obs):
        return _mle(obs)
    n, mean = len(obs), sum(t for t, _ in obs) / len(obs)
    return -math.log((n - changes + 0.5) / (n + 0.5)) / mean


def _mle(obs: Sequence[Observation]) -> float:
    """The root of the likelihood equation; its left side falls as the rate grows, so the
    root is bracketed and bisected (in log space: rates span many decades)."""
    quiet = sum(t for t, changed in obs if not changed)

    def excess(rate: float) -> float:
        return sum(t / math.expm1(min(rate * t, 700.0)) for t, c in obs if c) - quiet

    lo, hi = 1e-12, 1.0
    while excess(hi) > 0:  # very frequent changes: widen until bracketed
        hi *= 10.0
    for _ in range(100):
        mid = math.sqrt(lo * hi)
        if excess(mid) > 0:
            lo = mid
        else:
            hi = mid
        if hi / lo < 1.0 + 1e-9:
            break
    return math.sqrt(lo * hi)


def importance(priority: float) -> float:
    """Revisit speed-up from priority: x2 at priority 1.0, x1 at 0.5, x0.5 at 0.0."""
    return float(2.0 ** (2.0 * (min(max(priority, 0.0), 1.0) - 0.5)))


def next_revisit(
    policy: RevisitPolicy,
    history: Sequence[Observation],
    observed: Observation | None,
    priority: float,
    last_interval_s: float | None,
    rng: random.Random,
    ceiling_s: float | None = None,
) -> Revisit:
    """The interval until the next check, after `observed` (None: nothing was compared);
    never above `ceiling_s` (the URL's freshness target), jitter included."""
    top = policy.max_interval_s if ceiling_s is None else min(policy.max_interval_s, ceiling_s)
    hist = tuple(history)
    if observed is not None:
        hist = (*hist, observed)[-policy.history :]
    rate = change_rate(hist)
    if rate is None:
        first = _bounded(_jittered(policy.first_interval_s, policy, rng), policy, top)
        return Revisit(first, FIRST_VISIT, None, hist)
    if last_interval_s is None and observed is not None:
        last_interval_s = observed[0]  # the growth limit needs a base: the gap just observed
    target = math.inf if rate <= 0 else 1.0 / rate / importance(priority)
    reason = ADAPTIVE
    if last_interval_s is not None and target > last_interval_s * policy.max_growth:
        target, reason = last_interval_s * policy.max_growth, GROWTH_LIMITED
    if target <= policy.min_interval_s:
        target, reason = policy.min_interval_s, CLAMPED_MIN
    elif target >= top:
        target, reason = top, CLAMPED_MAX
    return Revisit(_bounded(_jittered(target, policy, rng), policy, top), reason, rate, hist)


def _bounded(interval: float, policy: RevisitPolicy, top: float) -> float:
    """Jitter included, never under the minimum nor over the ceiling."""
    return max(policy.min_interval_s, min(interval, top))


def _jittered(interval: float, policy: RevisitPolicy, rng: random.Random) -> float:
    """Spread by +-jitter, so pages fetched together do not all fall due together."""
    return interval * (1.0 + policy.jitter * (2.0 * rng.random() - 1.0))


def dump_history(history: Sequence[Observation]) -> str:
    return json.dumps([[round(t, 3), int(c)] for t, c in history])


def load_history(text: str | None) -> tuple[Observation, ...]:
    if not text:
        return ()
    return tuple((float(t), bool(c)) for t, c in json.loads(text))


@dataclass(frozen=True, slots=True)
class FreshnessClass:
    """URLs at or above `min_priority` (and below the next class's) should be checked within
    `target_s` of their last check."""

    name: str
    min_priority: float
    target_s: float


def freshness_class(priority: float, classes: Sequence[FreshnessClass]) -> str:
    """The freshness class of a priority: the class with the highest `min_priority` it reaches."""
    fitting = [c for c in classes if priority >= c.min_priority]
    if not fitting:
        return min(classes, key=lambda c: c.min_priority).name
    return max(fitting, key=lambda c: c.min_priority).name


def validators_trusted(trusted: bool, checks: int, misses: int, untrusted_after: int) -> bool:
    """Whether an origin's validators are still believed, after `checks` answers to
    conditional requests of which `misses` were misleading (a 200 for unchanged content).

    Distrust needs `untrusted_after` misleading answers and more misleading than honest
    ones; it is final: an untrusted origin is fetched unconditionally from then on, so no
    later answer can clear it."""
    if not trusted:
        return False
    return not (misses >= untrusted_after and 2 * misses > checks)
