"""Fixed daily revisits vs the adaptive schedule (`atlas_pipeline.recrawl`) on synthetic pages.

Seed 003 decision 15 compares the two on paper; this runs it. `--pages` pages (default 4000)
in three classes, each page changing as a Poisson process with its own known mean interval
between changes, drawn uniformly from the class's range:

    volatile   3 %   every 1-2 hours      (news front pages)
    daily-ish 27 %   every 2-3 days
    stable    70 %   every 20-40 days     (about monthly)

over `--days` days (default 30). Every page is first fetched once at a uniform random time in
the first day (discovery, outside any budget, the same instants for both policies); after that:

* **fixed daily**: every page is fetched again exactly every 24 h after its first fetch.
* **adaptive**: the engine's own `next_revisit(RevisitPolicy, ...)` sets each page's next due
  time after every fetch, fed exactly what the fetcher feeds it (batch.py `_checked`): the
  stored history, the observation (seconds since the previous fetch, whether the content
  changed in between), priority 0.5 (importance 1), the previous planned interval, a seeded
  rng. The crawler runs one cycle per simulated hour; a cycle takes the pages due at its start,
  most overdue first, at most budget/24 of them (the daily budget spread evenly, fractions
  carried over), and fetches them evenly spread over the hour. Pages left over wait for the
  next cycle. The budget defaults to 65 % of fixed daily's N fetches per day (`--budget`).

Staleness is the *age* of Cho & Garcia-Molina ("Synchronizing a database to improve
freshness", SIGMOD 2000): at time t a page whose last fetch was at f has age
    A(t) = t - c   where c is its first change after f, if c <= t;   A(t) = 0 otherwise,
i.e. how long our copy has been out of date. For every page it is integrated exactly, from the
simulated change and fetch instants (between consecutive fetches f_k < f_k+1 with first change
c in between, the integral is (f_k+1 - c)^2 / 2, and the stale time f_k+1 - c), over a window.
"mean age" is the sum of these integrals over a class's pages divided by the sum of their window
lengths (the time-average age of a page of the class); "stale" is the same ratio for the stale
time (the share of time a copy is out of date). Two windows are reported: from each page's
first fetch to the end ("whole run", including the adaptive schedule's learning period) and the
last 7 days ("last wk", steady state). A fetch sees the content as it is at that instant.

    .venv/bin/python benchmarks/recrawl_simulation.py                  # 4000 pages, 30 days
    .venv/bin/python benchmarks/recrawl_simulation.py --pages 400 --days 10 --seed 3 --budget 0.5
"""

from __future__ import annotations

import argparse
import heapq
import math
import random
import sys
import time
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from atlas_pipeline import defaults as d  # noqa: E402
from atlas_pipeline.recrawl import Observation, RevisitPolicy, next_revisit  # noqa: E402

HOUR = 3600.0
DAY = 24 * HOUR


@dataclass(frozen=True, slots=True)
class PageClass:
    name: str
    share: float  # of all pages
    mean_change_s: tuple[float, float]  # each page's mean change interval is uniform in this


CLASSES = (
    PageClass("volatile", 0.03, (1 * HOUR, 2 * HOUR)),
    PageClass("daily-ish", 0.27, (2 * DAY, 3 * DAY)),
    PageClass("stable", 0.70, (20 * DAY, 40 * DAY)),
)

# The engine's defaults (config section `recrawl`, and `revisit_interval_s` for the first one).
POLICY = RevisitPolicy(
    first_interval_s=d.REVISIT_INTERVAL_S,
    min_interval_s=d.MIN_REVISIT_S,
    max_interval_s=d.MAX_REVISIT_S,
    jitter=d.REVISIT_JITTER,
    max_growth=d.REVISIT_MAX_GROWTH,
    history=d.CHANGE_HISTORY,
)
PRIORITY = 0.5  # importance 1: the interval aims at the estimated mean change interval
STEADY_S = 7 * DAY  # the "last wk" window


@dataclass(slots=True)
class Page:
    cls: str
    mean_change_s: float
    changes: list[float]  # sorted change instants in [0, horizon)
    first_fetch: float


def make_pages(pages: int, days: float, seed: int) -> list[Page]:
    """`pages` pages, split over CLASSES by share, with Poisson change instants over `days`."""
    rng = random.Random(seed)
    horizon = days * DAY
    counts = [round(pages * c.share) for c in CLASSES]
    counts[-1] = pages - sum(counts[:-1])
    out: list[Page] = []
    for cls, n in zip(CLASSES, counts, strict=True):
        for _ in range(n):
            mean = rng.uniform(*cls.mean_change_s)
            changes, t = [], rng.expovariate(1.0 / mean)
            while t < horizon:
                changes.append(t)
                t += rng.expovariate(1.0 / mean)
            out.append(Page(cls.name, mean, changes, rng.uniform(0.0, min(DAY, horizon))))
    return out


def _changed(page: Page, since: float, now: float) -> bool:
    """Did the page change in (since, now]?"""
    return bisect_right(page.changes, now) > bisect_right(page.changes, since)


def fixed_daily(pages: Sequence[Page], horizon: float) -> list[list[float]]:
    """Fetch instants of every page: its first fetch, then every 24 h."""
    return [
        [p.first_fetch + k * DAY for k in range(math.ceil((horizon - p.first_fetch) / DAY))]
        for p in pages
    ]


def adaptive(
    pages: Sequence[Page],
    horizon: float,
    budget_per_day: float,
    policy: RevisitPolicy,
    seed: int,
) -> tuple[list[list[float]], dict[str, int], dict[str, float]]:
    """Fetch instants of every page under `next_revisit`, hourly cycles within the budget;
    also how often each revisit reason was given, and how much the budget held pages back."""
    rng = random.Random(seed)
    fetches: list[list[float]] = [[] for _ in pages]
    history: list[tuple[Observation, ...]] = [() for _ in pages]
    planned: list[float | None] = [None] * len(pages)
    reasons: dict[str, int] = {}
    due: list[tuple[float, int]] = []  # heap of (due instant, page index)
    discovery = sorted(range(len(pages)), key=lambda i: pages[i].first_fetch)
    next_new = 0
    late = {"revisits": 0, "wait_s": 0.0, "cycles": 0, "cycles_full": 0}

    def fetch(i: int, now: float) -> None:
        page, seen = pages[i], fetches[i]
        observed = (now - seen[-1], _changed(page, seen[-1], now)) if seen else None
        plan = next_revisit(policy, history[i], observed, PRIORITY, planned[i], rng)
        seen.append(now)
        history[i], planned[i] = plan.history, plan.interval_s
        reasons[plan.reason] = reasons.get(plan.reason, 0) + 1
        heapq.heappush(due, (now + plan.interval_s, i))

    for hour in range(math.ceil(horizon / HOUR)):
        start = hour * HOUR
        end = min(start + HOUR, horizon)
        # revisits: the pages due at the cycle's start, most overdue first, within the budget
        cap = math.floor((hour + 1) * budget_per_day / 24) - math.floor(hour * budget_per_day / 24)
        batch = []
        while due and due[0][0] <= start and len(batch) < cap:
            when, i = heapq.heappop(due)
            batch.append(i)
            late["wait_s"] += start - when  # past due when the cycle claims it
        late["revisits"] += len(batch)
        late["cycles"] += 1
        late["cycles_full"] += bool(due and due[0][0] <= start)  # due pages left for later
        # discoveries: first fetches at their own instants, outside the budget
        events = [(start + (k + 0.5) * HOUR / len(batch), i) for k, i in enumerate(batch)]
        while next_new < len(discovery) and pages[discovery[next_new]].first_fetch < end:
            events.append((pages[discovery[next_new]].first_fetch, discovery[next_new]))
            next_new += 1
        for now, i in sorted(events):
            if now < horizon:
                fetch(i, now)
    return fetches, reasons, late


def staleness(page: Page, fetched: Sequence[float], w0: float, w1: float) -> tuple[float, float]:
    """The exact integrals of age and of being stale over [w0, w1] (w0 >= the first fetch)."""
    age = stale = 0.0
    for k, f in enumerate(fetched):
        seg_end = min(fetched[k + 1] if k + 1 < len(fetched) else w1, w1)
        if seg_end <= w0:
            continue
        idx = bisect_right(page.changes, f)
        if idx == len(page.changes) or page.changes[idx] >= seg_end:
            continue
        c = page.changes[idx]
        lo = max(c, w0)  # age is t - c; integrate it over [lo, seg_end]
        age += ((seg_end - c) ** 2 - (lo - c) ** 2) / 2.0
        stale += seg_end - lo
    return age, stale


def summarize(
    pages: Sequence[Page], fetches: Sequence[Sequence[float]], horizon: float
) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    days = horizon / DAY
    for cls in [c.name for c in CLASSES] + ["all"]:
        idx = [i for i, p in enumerate(pages) if cls in ("all", p.cls)]
        n_fetch = sum(len(fetches[i]) for i in idx)
        tot = {"age": 0.0, "stale": 0.0, "t": 0.0, "age_ss": 0.0, "stale_ss": 0.0, "t_ss": 0.0}
        for i in idx:
            p, f = pages[i], fetches[i]
            a, s = staleness(p, f, p.first_fetch, horizon)
            tot["age"], tot["stale"], tot["t"] = (
                tot["age"] + a,
                tot["stale"] + s,
                tot["t"] + horizon - p.first_fetch,
            )
            w0 = max(p.first_fetch, horizon - STEADY_S)
            a, s = staleness(p, f, w0, horizon)
            tot["age_ss"], tot["stale_ss"], tot["t_ss"] = (
                tot["age_ss"] + a,
                tot["stale_ss"] + s,
                tot["t_ss"] + horizon - w0,
            )
        out[cls] = {
            "pages": len(idx),
            "fetches_per_day": n_fetch / days,
            "mean_age_h": tot["age"] / tot["t"] / HOUR if tot["t"] else 0.0,
            "stale_share": tot["stale"] / tot["t"] if tot["t"] else 0.0,
            "mean_age_h_last_week": tot["age_ss"] / tot["t_ss"] / HOUR if tot["t_ss"] else 0.0,
            "stale_share_last_week": tot["stale_ss"] / tot["t_ss"] if tot["t_ss"] else 0.0,
        }
    return out


def simulate(
    pages: int = 4000,
    days: float = 30.0,
    seed: int = 7,
    budget: float = 0.65,
    policy: RevisitPolicy = POLICY,
) -> dict[str, object]:
    """Both policies on the same pages. `budget`: the adaptive schedule's revisits per day as a
    share of the page count (fixed daily's revisits per day). Returns per policy and class:
    pages, fetches_per_day, mean_age_h, stale_share (and *_last_week), plus the settings."""
    horizon = days * DAY
    population = make_pages(pages, days, seed)
    budget_per_day = budget * pages
    fixed = fixed_daily(population, horizon)
    adapt, reasons, late = adaptive(population, horizon, budget_per_day, policy, seed + 1)
    return {
        "pages": pages,
        "days": days,
        "seed": seed,
        "budget_per_day": budget_per_day,
        "policy": policy,
        "reasons": reasons,
        "budget_bound_cycles": late["cycles_full"],
        "cycles": late["cycles"],
        "mean_wait_past_due_s": late["wait_s"] / late["revisits"] if late["revisits"] else 0.0,
        "fixed": summarize(population, fixed, horizon),
        "adaptive": summarize(population, adapt, horizon),
    }


def _h(seconds: float) -> str:
    if seconds >= DAY:
        return f"{seconds / DAY:g} d"
    return f"{seconds / HOUR:g} h" if seconds >= HOUR else f"{seconds / 60:g} min"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pages", type=int, default=4000, help="synthetic pages (default 4000)")
    ap.add_argument("--days", type=float, default=30.0, help="simulated days (default 30)")
    ap.add_argument("--seed", type=int, default=7, help="seed of pages, changes and jitter")
    ap.add_argument("--budget", type=float, default=0.65,
                    help="adaptive revisits per day as a share of the pages (default 0.65)")  # fmt: skip
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    r = simulate(args.pages, args.days, args.seed, args.budget)
    took = time.perf_counter() - t0
    p: RevisitPolicy = r["policy"]  # type: ignore[assignment]
    fixed: dict[str, dict[str, float]] = r["fixed"]  # type: ignore[assignment]
    adapt: dict[str, dict[str, float]] = r["adaptive"]  # type: ignore[assignment]
    print(f"{args.pages} pages, {args.days:g} days, seed {args.seed}; simulated in {took:.1f} s")
    for c in CLASSES:
        lo, hi = c.mean_change_s
        print(
            f"  {c.name:<9} {c.share:>4.0%} of pages, a change every {_h(lo)} - {_h(hi)} (Poisson)"
        )
    print(f"adaptive: RevisitPolicy(first {_h(p.first_interval_s)}, min {_h(p.min_interval_s)}, "
          f"max {_h(p.max_interval_s)}, jitter +-{p.jitter:.0%}, growth x{p.max_growth:g}/check, "
          f"history {p.history}), priority {PRIORITY}, no ceiling; hourly cycles, budget "
          f"{r['budget_per_day']:,.0f} revisits/day ({args.budget:.0%} of fixed daily), most "
          "overdue first")  # fmt: skip
    print("          first fetches (discovery, day 0) count in both policies' totals")
    reasons = ", ".join(f"{k} {v}" for k, v in sorted(r["reasons"].items()))  # type: ignore[attr-defined]
    print(f"          revisit reasons: {reasons}")
    print(f"          cycles that left due pages for later (budget bound): "
          f"{r['budget_bound_cycles']} of {r['cycles']}; a revisit waited on average "
          f"{r['mean_wait_past_due_s'] / 60:.1f} min past its due time (hourly cycles included)")  # fmt: skip
    print()
    head = (f"{'policy':<12}{'class':<10}{'pages':>6}{'fetch/day':>11}{'fetch/page/day':>15}"
            f"{'mean age h':>12}{'stale':>8}{'age h last wk':>15}{'stale last wk':>14}")  # fmt: skip
    print(head)
    print("-" * len(head))
    for name, res in (("fixed daily", fixed), ("adaptive", adapt)):
        for cls, v in res.items():
            per_page = v["fetches_per_day"] / v["pages"] if v["pages"] else 0.0
            print(f"{name:<12}{cls:<10}{v['pages']:>6.0f}{v['fetches_per_day']:>11,.0f}"
                  f"{per_page:>15.2f}{v['mean_age_h']:>12.2f}{v['stale_share']:>8.1%}"
                  f"{v['mean_age_h_last_week']:>15.2f}{v['stale_share_last_week']:>14.1%}")  # fmt: skip
    print()

    def ratio(a: float, b: float) -> str:
        return f"{a / b:.3f}" if b else "n/a"

    print("adaptive / fixed daily:")
    print(
        f"  fetches per day (all)          {ratio(adapt['all']['fetches_per_day'], fixed['all']['fetches_per_day'])}"
    )
    for cls in [c.name for c in CLASSES]:
        print(f"  mean age, {cls:<9} whole run  {ratio(adapt[cls]['mean_age_h'], fixed[cls]['mean_age_h'])}"
              f"   last week {ratio(adapt[cls]['mean_age_h_last_week'], fixed[cls]['mean_age_h_last_week'])}")  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1:])
