"""The rules of origin ownership across regions (seed 000 ch. 16, 003 decisions 22-23), as pure
functions: who may hold an origin's bucket, with which token, whether a request may leave, and
how far a handoff can overshoot the origin's limit.

An origin is owned by one region at a time through a lease from the control plane. Each grant
to a new holder carries a token one higher than any before it, so a region that lost the origin
while cut off is recognised by its older token and turned away (scene 40). A region dispatches
only while its lease is unexpired, less a margin for clock skew, so when it cannot renew it
stops by itself at expiry; a take-over waits for that lapse unless the config accepts the
bounded overshoot of taking over at once. Busy origins may instead be split into pre-leased
shares of their budget, which every region keeps through a partition.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum


class Action(StrEnum):
    """What the control plane did with an ask; each is an audit row of the `ownership` table."""

    GRANT = "grant"  # a first lease, or one after the last holder's lapsed
    RENEW = "renew"  # the holder's lease extended, same token
    TAKEOVER = "takeover"  # another region's lease ended early: the owner fell silent
    REFUSE = "refuse"  # held by another region, or the home region has first call
    REJECT_STALE = "reject_stale"  # the ask carried a token older than the current one
    RELEASE = "release"  # the holder gave the origin up


@dataclass(frozen=True, slots=True)
class Holding:
    """The control plane's row for one origin."""

    region: str | None  # None: never held, or released
    token: int  # the newest token granted (0: never)
    lease_until: float
    renewed_at: float  # the holder's last grant or renewal
    first_asked_at: float  # when any region first asked for it


@dataclass(frozen=True, slots=True)
class Ask:
    region: str
    token: int  # the token the region holds (0: none)
    home: bool  # the origin's home region is the asker
    home_seen_at: float | None = None  # the home region's last call to the control plane


@dataclass(frozen=True, slots=True)
class TakeoverRule:
    lease_s: float
    immediate: bool = False  # take over a silent owner before its lease lapses
    silent_after_s: float = 0.0  # with `immediate`: no renewal for this long = silent
    home_silent_s: float = 0.0  # a home region silent this long is down: others step in


@dataclass(frozen=True, slots=True)
class Verdict:
    action: Action
    token: int  # the lease's token (granted), or the current one (refused or rejected)
    lease_until: float
    detail: str

    @property
    def held(self) -> bool:
        return self.action in (Action.GRANT, Action.RENEW, Action.TAKEOVER)


def decide(current: Holding | None, ask: Ask, now: float, rule: TakeoverRule) -> Verdict:
    """The control plane's answer to one region asking for (or renewing) one origin.

    An origin's home region serves it whenever nobody else holds a lease; another region
    steps in only when a lease lapsed (its holder stopped renewing mid-work) while the home
    region is down (silent for `home_silent_s`), or when the home region never asked for it
    in that long: two live regions never both crawl one origin. A holder that finished its
    work releases the origin (region None, token kept); a released origin waits for its home
    region, since finishing is not failing."""
    until = now + rule.lease_s
    if current is None:
        current = Holding(None, 0, 0.0, 0.0, now)
    if 0 < ask.token < current.token:
        return Verdict(Action.REJECT_STALE, current.token, current.lease_until,
                       f"token {ask.token} is older than {current.token}")  # fmt: skip
    if current.region == ask.region and current.token > 0:
        # the holder, lapsed or not: no other region got a token since, so the old one holds
        return Verdict(Action.RENEW, current.token, until, "renewed")
    seen = current.first_asked_at if ask.home_seen_at is None else ask.home_seen_at
    home_down = ask.home or now - seen >= rule.home_silent_s
    if current.region is not None and current.lease_until > now:
        silent = now - current.renewed_at
        if rule.immediate and silent >= rule.silent_after_s:
            return Verdict(Action.TAKEOVER, current.token + 1, until,
                           f"{current.region} silent for {silent:.1f} s")  # fmt: skip
        return Verdict(Action.REFUSE, current.token, current.lease_until,
                       f"held by {current.region}")  # fmt: skip
    if not ask.home and current.region is None and current.token > 0:
        # the holder finished its work and gave it back: not a failure to step in for
        return Verdict(Action.REFUSE, current.token, 0.0,
                       "released by its last holder; its home region serves it next")  # fmt: skip
    if not home_down:
        return Verdict(Action.REFUSE, current.token, 0.0, "its home region is up and serves it")
    detail = f"after {current.region}'s lease lapsed" if current.region else "granted"
    return Verdict(Action.GRANT, current.token + 1, until, detail)


def may_dispatch(
    held_token: int, held_until: float, lease_token: int, now: float, margin_s: float
) -> str | None:
    """Whether a request claimed under `lease_token` may leave now, given the lease the region
    holds (`held_token` 0: none). None: it may; else why not (the egress check, 001 ch. 10)."""
    if held_token == 0:
        return "the region holds no lease on the origin"
    if lease_token != held_token:
        return f"claimed under token {lease_token}, the region's lease is token {held_token}"
    if now >= held_until - margin_s:
        return "the region's lease has run out (it could not be renewed)"
    return None


def home_region(origin: str, host: str, regions: Sequence[str],
                homes: Mapping[str, str]) -> str:  # fmt: skip
    """The region that has first call on an origin: its host (or a parent domain) named in
    `homes`, else a stable hash of the origin over the regions."""
    labels = host.split(".")
    for i in range(len(labels)):
        named = homes.get(".".join(labels[i:]))
        if named is not None:
            return named
    return sorted(regions)[zlib.crc32(origin.encode()) % len(regions)]


def share_gap(gap_s: float, share: float) -> float:
    """A region's gap for its share of an origin whose own gap is `gap_s`."""
    return gap_s / share if gap_s > 0 else 0.0


def share_cap(max_in_flight: int, share: float) -> int:
    """A region's in-flight cap for its share: at least one request, or nothing moves."""
    return max(1, math.floor(max_in_flight * share + 1e-9))


def check_shares(shares: Mapping[str, float], regions: Iterable[str]) -> str | None:
    """Why a split of an origin's budget is wrong, or None."""
    known = set(regions)
    unknown = sorted(set(shares) - known)
    if unknown:
        return f"names regions not in regions.members: {', '.join(unknown)}"
    if any(s <= 0 for s in shares.values()):
        return "every share must be above 0"
    total = sum(shares.values())
    if total > 1 + 1e-9:
        return f"shares sum to {total:g}, above the origin's whole budget (1)"
    return None


@dataclass(frozen=True, slots=True)
class Bound:
    """The worst overshoot of one origin on a handoff: requests beyond its limit."""

    requests: float  # math.inf when the origin has no gap (no rate to bound it by)
    why: str


def overshoot_bound(lease_s: float, gap_s: float, max_in_flight: int, immediate: bool,
                    share: float | None = None) -> Bound:  # fmt: skip
    """Seed 003 decision 23: a take-over at once lets the old owner go on for up to a lease,
    so lease length x rate extra requests, plus those in flight; one after the lapse leaves
    only the requests in flight. A pre-leased share is kept through a partition: none."""
    if share is not None:
        return Bound(0.0, "pre-leased shares sum to at most the origin's budget")
    if not immediate:
        return Bound(float(max_in_flight), f"take-over after lapse: the {max_in_flight} in flight")
    if gap_s <= 0:
        return Bound(math.inf, "no gap: the rate is bounded only by the in-flight cap")
    rate = 1.0 / gap_s
    extra = lease_s * rate + max_in_flight
    return Bound(extra, f"{lease_s:g} s lease x {rate:.3g}/s + {max_in_flight} in flight")


def extra_requests(starts: Iterable[float], gap_s: float, tolerance_s: float = 0.05) -> int:
    """Requests beyond what an origin's gap allows, as the origin saw them: walking the starts
    in order, one that came less than the gap (less the tolerance) after the last request
    that kept the gap is extra."""
    extra, last = 0, -math.inf
    for t in sorted(starts):
        if t - last >= gap_s - tolerance_s:
            last = t
        else:
            extra += 1
    return extra
