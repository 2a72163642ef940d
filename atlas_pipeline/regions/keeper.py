"""A region's side of ownership in one fetch batch: ask the control plane for the shard's origins
with work, renew the leases held, write the answers to the region's coordination store (where
claims read them) and keep the view that every request is checked against right before it
leaves (`refusal`).

`refresh` blocks on the network and the store, so the batch runs it off its event loop; the
egress check reads only the in-memory view. When the control plane cannot be reached nothing
is renewed, and each lease held simply runs out: the region stops dispatching to that origin
at its end, by itself, without having to hear anything.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from ..config import CrawlConfig
from ..coordination.base import CoordinationStore
from ..coordination.owners import OwnerRow
from ..errors import StoreUnavailable
from ..urls import host_of, origin_of
from .control_plane import ControlPlane, ControlPlaneUnavailable
from .ownership import Action, TakeoverRule, home_region, may_dispatch, overshoot_bound

log = logging.getLogger("atlas.regions")

SHARE_TOKEN = -1  # a pre-leased share: no control-plane lease, kept through a partition
NO_SHARE = "(shared)"  # the holder recorded for a split origin this region has no share of
FOREVER = 1e18


def takeover_rule(cfg: CrawlConfig) -> TakeoverRule:
    r = cfg.regions
    return TakeoverRule(r.lease_s, r.takeover == "immediate", r.silent_after_s, r.home_silent_s)


@dataclass
class KeeperStats:
    asks: int = 0  # control-plane calls answered
    granted: int = 0  # grants and take-overs this region received
    renewed: int = 0
    refused: int = 0
    rejected_stale: int = 0  # renewals turned away: another region holds a newer token
    unreachable: int = 0  # control-plane calls that failed


class OwnershipKeeper:
    def __init__(self, cfg: CrawlConfig, store: CoordinationStore, cycle: str, shard: int,
                 clock: Callable[[], float]) -> None:  # fmt: skip
        self.cfg, self.region = cfg, cfg.regions.name
        self.store, self.cycle, self.shard, self.clock = store, cycle, shard, clock
        self.stats = KeeperStats()
        self._plane: ControlPlane | None = None
        self._view: dict[str, tuple[int, float]] = {}  # origin -> (token, lease end)
        self._lock = threading.Lock()  # refresh runs on a thread, refusal on the loop
        self._down_since: float | None = None
        self._extra: set[str] = set()  # origins a rendered page's subrequests need
        self._keys: dict[str, int] = {}  # the leases held: bucket -> token
        self._key_of: dict[str, str] = {}  # origin -> the bucket its lease is on

    def close(self) -> None:
        if self._plane is not None:
            self._plane.close()

    def refusal(self, origin: str, lease_token: int | None, now: float) -> str | None:
        """Why a request to `origin` claimed under `lease_token` may not leave now (None: it
        may). With `lease_token` None, any lease the region holds will do (a subrequest)."""
        with self._lock:
            token, until = self._view.get(origin, (0, 0.0))
            if lease_token is None and token == 0:
                self._extra.add(origin)  # ask for it at the next renewal
        asked = token if lease_token is None else lease_token
        return may_dispatch(token, until, asked, now, self.cfg.regions.dispatch_margin_s)

    def refresh(self) -> None:
        """One round: shares from the config, then one control-plane call that renews the
        leases held, asks for the origins with work nobody holds (as last heard) and gives
        back the leases of origins whose work is done.

        A lease covers a politeness bucket (an origin; with politeness.bucket domain or ip,
        every origin of the registrable domain or address), since the bucket's gap is the
        limit: two regions holding two origins of one bucket would each keep it alone."""
        now = self.clock()
        with self._lock:
            extra = sorted(self._extra)  # subrequests' origins (another shard's, a CDN)
        wanted = self.store.ownership_wanted(self.cycle, self.shard, extra)
        rows: list[OwnerRow] = []
        regions = self.cfg.regions
        groups: dict[str, list[OwnerRow]] = {}
        for row in wanted:
            share = regions.share_of(row.origin)
            if share is None:
                groups.setdefault(row.bucket or row.origin, []).append(row)
            elif share > 0:
                rows.append(OwnerRow(row.origin, self.region, SHARE_TOKEN, FOREVER, share))
                self._hold(row.origin, SHARE_TOKEN, FOREVER)
            else:
                rows.append(OwnerRow(row.origin, NO_SHARE, SHARE_TOKEN, FOREVER, 1.0))
        asks: list[tuple[str, int, str]] = []
        homes: dict[str, str] = {}
        for key, members in groups.items():
            heard = members[0]  # one answer covers the bucket: its origins were told alike
            if heard.region not in (None, self.region) and heard.until > now:
                continue  # another region's, as last heard: ask once that has run out
            token = next((m.token for m in members if m.region == self.region), 0)
            homes[key] = home_region(key, _host(key), regions.members, regions.homes)
            asks.append((key, token, homes[key]))
        with self._lock:
            done = [(k, t) for k, t in self._keys.items() if k not in groups]
        rows += self._ask(asks, homes, groups, done, now)
        self.store.set_owners(rows)

    def release_done(self) -> None:
        """The batch is over: give back the leases of buckets with no work left in this
        region (another run of it may still be on the rest; those are renewed or lapse)."""
        with self._lock:
            extra = sorted(self._extra)
        wanted = self.store.ownership_wanted(self.cycle, self.shard, extra)
        keys = {r.bucket or r.origin for r in wanted}
        with self._lock:
            done = [(k, t) for k, t in self._keys.items() if k not in keys]
        if done and self._plane is not None:
            try:
                self._plane.release(self.region, done, self.clock())
            except ControlPlaneUnavailable as exc:
                log.warning("region %s: leases left to lapse: %s", self.region, exc)

    def _ask(self, asks: list[tuple[str, int, str]], homes: dict[str, str],
             groups: dict[str, list[OwnerRow]], done: list[tuple[str, int]],
             now: float) -> list[OwnerRow]:  # fmt: skip
        try:
            if self._plane is None:
                self._plane = ControlPlane(self.cfg.control_plane, takeover_rule(self.cfg))
            answers = self._plane.ask(self.region, asks, now)
            if done:
                self._plane.release(self.region, done, now)
        except ControlPlaneUnavailable as exc:
            self.stats.unreachable += 1
            if self._down_since is None:
                self._down_since = now
                log.warning("region %s: %s; leases held run out unrenewed", self.region, exc)
            return []
        with self._lock:
            for key, _ in done:
                self._keys.pop(key, None)
                for origin in [o for o, k in self._key_of.items() if k == key]:
                    self._view.pop(origin, None)
        if self._down_since is not None:
            log.warning("region %s: the control plane answers again after %.1f s",
                        self.region, now - self._down_since)  # fmt: skip
            self._down_since = None
        self.stats.asks += 1
        regions = self.cfg.regions
        rows = []
        for a in answers:
            v, members = a.verdict, [m.origin for m in groups[a.origin]]
            holder, until = a.holder, a.holder_until
            if v.held:
                with self._lock:
                    self._keys[a.origin] = v.token
                for origin in members:
                    self._hold(origin, v.token, v.lease_until, a.origin)
                if v.action is Action.RENEW:
                    self.stats.renewed += 1
                else:
                    self.stats.granted += 1
                    log.info("region %s holds %s (token %d, %s)", self.region, a.origin,
                             v.token, v.action.value)  # fmt: skip
            else:
                with self._lock:
                    lost = self._keys.pop(a.origin, None)
                    for origin in members:
                        self._view.pop(origin, None)
                if v.action is Action.REJECT_STALE:
                    self.stats.rejected_stale += 1
                else:
                    self.stats.refused += 1
                if lost is not None or v.action is Action.REJECT_STALE:
                    log.warning("region %s lost %s: %s", self.region, a.origin, v.detail)
                if holder not in (None, self.region) and regions.takeover == "immediate":
                    # a silent owner may be taken over before its lease ends: look again
                    # well within the silence that allows it, not only once the lease is out
                    until = min(until, now + regions.silent_after_s / 2)
                if holder is None and homes[a.origin] != self.region:
                    # its home region is up and serves it: look again once it might not be
                    holder = homes[a.origin]
                    until = now + regions.home_silent_s
            rows += [OwnerRow(origin, holder, v.token, until) for origin in members]
        return rows

    def _hold(self, origin: str, token: int, until: float, key: str | None = None) -> None:
        with self._lock:
            self._view[origin] = (token, until)
            if key is not None:
                self._key_of[origin] = key


def _host(key: str) -> str:
    """The host a lease key names: an origin's, or the key itself (a domain, an address)."""
    return host_of(key) if "://" in key else key


def refresh_quietly(keeper: OwnershipKeeper) -> None:
    """`refresh`, with a store outage logged instead of raised: the batch's own calls meet it
    and wait it out; the leases held run out meanwhile, as they should."""
    try:
        keeper.refresh()
    except StoreUnavailable as exc:
        log.warning("region %s: could not record ownership: %s", keeper.region, exc)


def handoff_bounds(cfg: CrawlConfig) -> list[str]:
    """Lines for `atlas config`: the worst overshoot of each seed origin (and each split one)
    on a handoff between regions, from the config alone (seed 003 decision 23)."""
    if not cfg.regions.name:
        return []
    r, p = cfg.regions, cfg.politeness
    gap = p.min_gap_s + (p.gap_guard_s if p.min_gap_s > 0 else 0.0)
    origins = sorted({origin_of(s) for s in cfg.seeds} | {s.origin for s in r.shares})
    lines = [f"# regions: worst overshoot on a handoff (takeover: {r.takeover}, "
             f"lease {r.lease_s:g} s), requests beyond each origin's limit:"]  # fmt: skip
    for origin in origins:
        share = r.share_of(origin)
        bound = overshoot_bound(r.lease_s, gap, p.max_in_flight, r.takeover == "immediate", share)
        home = home_region(origin, host_of(origin), r.members, r.homes)
        owner = f"shares {share:g} here" if share is not None else f"home {home}"
        lines.append(f"#   {origin}: {bound.requests:.3g} ({bound.why}; {owner})")
    return lines
