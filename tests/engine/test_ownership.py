"""The ownership rules of regions, table by table, with no database (regions/ownership.py)."""

from __future__ import annotations

import math

import pytest

from atlas_pipeline.regions.ownership import (
    Action,
    Ask,
    Holding,
    TakeoverRule,
    check_shares,
    decide,
    extra_requests,
    home_region,
    may_dispatch,
    overshoot_bound,
    share_cap,
    share_gap,
)

NOW = 1000.0
LAPSE = TakeoverRule(lease_s=30.0, home_silent_s=20.0)
AT_ONCE = TakeoverRule(lease_s=30.0, immediate=True, silent_after_s=10.0, home_silent_s=20.0)


def held(region: str | None, token: int, until: float, renewed: float = NOW - 5,
         first: float = 0.0) -> Holding:  # fmt: skip
    return Holding(region, token, until, renewed, first)


DECIDE = [
    # (why, current, ask, rule, action, token, lease_until)
    (
        "a never-held origin goes to its home region",
        None,
        Ask("eu", 0, True),
        LAPSE,
        Action.GRANT,
        1,
        NOW + 30,
    ),
    (
        "a foreign region waits for the home region's first call",
        held(None, 0, 0.0, 0.0, NOW - 5),
        Ask("us", 0, False),
        LAPSE,
        Action.REFUSE,
        0,
        0.0,
    ),
    (
        "... and gets it once the home region had its chance",
        held(None, 0, 0.0, 0.0, NOW - 25),
        Ask("us", 0, False),
        LAPSE,
        Action.GRANT,
        1,
        NOW + 30,
    ),
    (
        "the holder renews under its token",
        held("eu", 41, NOW + 10),
        Ask("eu", 41, True),
        LAPSE,
        Action.RENEW,
        41,
        NOW + 30,
    ),
    (
        "the holder renews a lapsed lease nobody took",
        held("eu", 41, NOW - 10),
        Ask("eu", 41, True),
        LAPSE,
        Action.RENEW,
        41,
        NOW + 30,
    ),
    (
        "another region is refused while the lease runs",
        held("eu", 41, NOW + 10),
        Ask("us", 0, False),
        LAPSE,
        Action.REFUSE,
        41,
        NOW + 10,
    ),
    (
        "... and takes it over, with a higher token, once it lapsed and its home went silent",
        held("eu", 41, NOW - 0.1),
        Ask("us", 0, False, NOW - 30.1),
        LAPSE,
        Action.GRANT,
        42,
        NOW + 30,
    ),
    (
        "a lease that ends exactly now has lapsed",
        held("eu", 41, NOW),
        Ask("us", 0, False, NOW - 30),
        LAPSE,
        Action.GRANT,
        42,
        NOW + 30,
    ),
    (
        "a lapsed lease is not taken while its home region still calls",
        held("eu", 41, NOW - 1),
        Ask("us", 0, False, NOW - 2),
        LAPSE,
        Action.REFUSE,
        41,
        0.0,
    ),
    (
        "the home region takes back a lapsed lease another region held",
        held("us", 42, NOW - 1),
        Ask("eu", 0, True, NOW),
        LAPSE,
        Action.GRANT,
        43,
        NOW + 30,
    ),
    (
        "scene 40: token 41 is turned away once 42 exists",
        held("us", 42, NOW + 20),
        Ask("eu", 41, True),
        LAPSE,
        Action.REJECT_STALE,
        42,
        NOW + 20,
    ),
    (
        "... even after 42's lease lapsed",
        held("us", 42, NOW - 20),
        Ask("eu", 41, True),
        LAPSE,
        Action.REJECT_STALE,
        42,
        NOW - 20,
    ),
    (
        "immediate: a silent owner is taken over before its lease ends",
        held("eu", 41, NOW + 15, renewed=NOW - 15),
        Ask("us", 0, False),
        AT_ONCE,
        Action.TAKEOVER,
        42,
        NOW + 30,
    ),
    (
        "immediate: an owner that renewed lately is not",
        held("eu", 41, NOW + 25, renewed=NOW - 5),
        Ask("us", 0, False),
        AT_ONCE,
        Action.REFUSE,
        41,
        NOW + 25,
    ),
    (
        "lapse: a silent owner keeps its lease to the end",
        held("eu", 41, NOW + 15, renewed=NOW - 15),
        Ask("us", 0, False),
        LAPSE,
        Action.REFUSE,
        41,
        NOW + 15,
    ),
    (
        "a released origin goes back to its home region, token counting on",
        held(None, 7, NOW - 1),
        Ask("eu", 0, True),
        LAPSE,
        Action.GRANT,
        8,
        NOW + 30,
    ),
    (
        "... and never to another region: finishing is not failing",
        held(None, 7, NOW - 1),
        Ask("us", 0, False, NOW - 100),
        LAPSE,
        Action.REFUSE,
        7,
        0.0,
    ),
    (
        "a new run of the holding region, knowing no token, renews",
        held("eu", 41, NOW + 10),
        Ask("eu", 0, True),
        LAPSE,
        Action.RENEW,
        41,
        NOW + 30,
    ),
]


@pytest.mark.parametrize("why,current,ask,rule,action,token,until", DECIDE,
                         ids=[row[0] for row in DECIDE])  # fmt: skip
def test_decide(why: str, current: Holding | None, ask: Ask, rule: TakeoverRule,
                action: Action, token: int, until: float) -> None:  # fmt: skip
    verdict = decide(current, ask, NOW, rule)
    assert (verdict.action, verdict.token, verdict.lease_until) == (action, token, until), why
    assert verdict.held == (action in (Action.GRANT, Action.RENEW, Action.TAKEOVER))


def test_tokens_only_grow_whatever_the_order_of_asks() -> None:
    """A walk through grants, lapses, take-overs and stale renewals: every token a region
    is given is higher than every token given before."""
    current: Holding | None = None
    given = [0]
    now = NOW
    for step, (region, stale) in enumerate(
        [("eu", False), ("us", False), ("eu", True), ("us", False), ("eu", False), ("us", True)] * 3
    ):
        now += 31  # each lease lapses before the next ask
        token = (current.token - 1 if stale else 0) if current else 0
        verdict = decide(current, Ask(region, max(token, 0), True), now, AT_ONCE)
        if verdict.held:
            assert verdict.token >= given[-1], step
            if current is None or current.region != region:
                assert verdict.token > given[-1], step
            given.append(verdict.token)
            current = Holding(region, verdict.token, verdict.lease_until, now, 0.0)
    assert given[-1] > 3


MAY_DISPATCH = [
    # (why, held token, held until, lease token, allowed)
    ("held, unexpired, same token", 42, NOW + 10, 42, True),
    ("no lease held", 0, 0.0, 42, False),
    ("claimed under an older token", 42, NOW + 10, 41, False),
    ("the lease ran out", 42, NOW - 1, 42, False),
    ("inside the clock-skew margin before the end", 42, NOW + 0.5, 42, False),
    ("just outside the margin", 42, NOW + 1.01, 42, True),
    ("a pre-leased share (token -1) never runs out", -1, 1e18, -1, True),
]


@pytest.mark.parametrize("why,token,until,lease_token,allowed", MAY_DISPATCH,
                         ids=[row[0] for row in MAY_DISPATCH])  # fmt: skip
def test_may_dispatch(why: str, token: int, until: float, lease_token: int,
                      allowed: bool) -> None:  # fmt: skip
    assert (may_dispatch(token, until, lease_token, NOW, 1.0) is None) == allowed, why


def test_home_region_by_name_then_by_a_stable_hash() -> None:
    homes = {"example.test": "us", "news-a.example.test": "eu"}
    assert home_region("http://news-a.example.test:80", "news-a.example.test", ["eu", "us"],
                       homes) == "eu"  # fmt: skip
    assert home_region("http://b.example.test:80", "b.example.test", ["eu", "us"], homes) == "us"
    hashed = {home_region(f"http://h{i}.other.test:80", f"h{i}.other.test", ["us", "eu"], {})
              for i in range(40)}  # fmt: skip
    assert hashed == {"eu", "us"}  # both regions get origins
    again = home_region("http://h7.other.test:80", "h7.other.test", ["eu", "us"], {})
    assert again == home_region("http://h7.other.test:80", "h7.other.test", ["us", "eu"], {})


SHARES = [
    ({"eu": 0.6, "us": 0.4}, None),
    ({"eu": 0.6}, None),
    ({"eu": 0.7, "us": 0.4}, "shares sum to 1.1, above the origin's whole budget (1)"),
    ({"eu": 0.5, "ap": 0.2}, "names regions not in regions.members: ap"),
    ({"eu": 0.0, "us": 0.5}, "every share must be above 0"),
]


@pytest.mark.parametrize("shares,wrong", SHARES)
def test_check_shares(shares: dict[str, float], wrong: str | None) -> None:
    assert check_shares(shares, ["eu", "us"]) == wrong


def test_seed_shares_pace_each_region_within_its_part() -> None:
    """Seed 003 decision 23: news-a at 1 per 5 s, EU 0.12/s and US 0.08/s."""
    assert share_gap(5.0, 0.6) == pytest.approx(1 / 0.12)
    assert share_gap(5.0, 0.4) == pytest.approx(1 / 0.08)
    assert share_gap(0.0, 0.4) == 0.0
    assert [share_cap(4, s) for s in (1.0, 0.5, 0.6, 0.25, 0.1)] == [4, 2, 2, 1, 1]


BOUNDS = [
    # (lease_s, gap_s, in flight, immediate, share, requests)
    (30.0, 5.0, 1, True, None, 7.0),  # seed 003: 30 s x 0.2/s = 6, plus 1 in flight
    (30.0, 5.0, 2, False, None, 2.0),  # after lapse: only what was in flight
    (30.0, 0.0, 2, True, None, math.inf),
    (30.0, 5.0, 1, True, 0.6, 0.0),  # shares: none
]


@pytest.mark.parametrize("lease_s,gap_s,cap,immediate,share,requests", BOUNDS)
def test_overshoot_bound(lease_s: float, gap_s: float, cap: int, immediate: bool,
                         share: float | None, requests: float) -> None:  # fmt: skip
    assert overshoot_bound(lease_s, gap_s, cap, immediate, share).requests == requests


EXTRA = [
    ([0.0, 1.0, 2.0, 3.0], 1.0, 0),
    ([0.0, 0.98, 2.0], 1.0, 0),  # within the tolerance
    ([0.0, 0.5, 1.0, 1.5, 2.0], 1.0, 2),  # two streams interleaved: every other one is extra
    ([0.0, 0.1, 0.2, 3.0], 1.0, 2),
    ([3.0, 0.0, 1.0], 1.0, 0),  # order of the log does not matter
    ([], 1.0, 0),
]


@pytest.mark.parametrize("starts,gap,extra", EXTRA)
def test_extra_requests(starts: list[float], gap: float, extra: int) -> None:
    assert extra_requests(starts, gap) == extra


def _regions_cfg(**regions: object) -> object:
    from pathlib import Path

    from atlas_pipeline.config import config_from_mapping

    raw = {"seeds": ["http://news-a.example.test/", "http://b.example.test/"],
           "politeness": {"min_gap_s": 5.0, "gap_guard_s": 0.0, "max_in_flight": 1},
           "regions": {"name": "eu", "members": ["eu", "us"], **regions}}  # fmt: skip
    return config_from_mapping(raw, base_dir=Path("."))


def test_atlas_config_prints_each_origins_bound_from_the_config() -> None:
    from atlas_pipeline.regions.keeper import handoff_bounds

    cfg = _regions_cfg(takeover="immediate", homes={"example.test": "us"},
                       shares=[{"origin": "http://news-a.example.test",
                                "shares": {"eu": 0.6, "us": 0.4}}])  # fmt: skip
    lines = handoff_bounds(cfg)  # type: ignore[arg-type]
    assert lines[1:] == [
        "#   http://b.example.test:80: 7 (30 s lease x 0.2/s + 1 in flight; home us)",
        "#   http://news-a.example.test:80: 0 (pre-leased shares sum to at most the origin's "
        "budget; shares 0.6 here)",
    ]
    assert handoff_bounds(_regions_cfg(name="", members=[])) == []  # type: ignore[arg-type]


BAD_REGIONS = [
    ({"name": "ap"}, "regions.name 'ap' is not in regions.members"),
    ({"lease_s": 4.0, "renew_every_s": 3.0}, "must be at most half of regions.lease_s"),
    ({"homes": {"example.test": "ap"}}, "regions.homes['example.test'] = 'ap' is not in members"),
    (
        {"shares": [{"origin": "http://news-a.example.test", "shares": {"eu": 0.7, "us": 0.4}}]},
        "shares sum to 1.1",
    ),
    ({"shares": [{"origin": "not a url", "shares": {"eu": 0.5}}]}, "is not an origin"),
    (
        {"control_plane_url": "mysql://cp/ownership"},
        "is not a control plane URL: use postgresql://user@host:5432/db or sqlite:///path",
    ),
]


@pytest.mark.parametrize("regions,message", BAD_REGIONS)
def test_a_wrong_regions_section_names_the_problem(regions: dict[str, object],
                                                   message: str) -> None:  # fmt: skip
    from atlas_pipeline.errors import ConfigError

    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("(", r"\(")):
        _regions_cfg(**regions)
