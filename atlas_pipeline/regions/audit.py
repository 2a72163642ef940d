"""Regions in the lake: the control plane's audit for a partition's origins (the `ownership`
table), and the handoff rule the `handoff_overshoot` check applies to the requests of every
region: each exclusive origin's union of request starts against its gap plus the bound
`ownership.overshoot_bound` computes, each split origin's per-region starts against the
region's share."""

from __future__ import annotations

import itertools
from typing import Any

import polars as pl

from ..config import CrawlConfig
from ..reasons import UNSENT
from .control_plane import ControlPlane
from .keeper import takeover_rule
from .ownership import extra_requests, overshoot_bound, share_gap

TOLERANCE_S = 1e-3  # start times are stamped client-side as each request leaves


def ownership_rows(cfg: CrawlConfig, origins: list[str], since: float) -> list[dict[str, Any]]:
    """Every control-plane answer about `origins` since `since` (epoch s), any region's."""
    if not cfg.regions.name or not origins:
        return []
    plane = ControlPlane(cfg.control_plane, takeover_rule(cfg))
    try:
        events = plane.events_for(origins, since)
    finally:
        plane.close()
    return [{**e, "answered_at": e["at"], "reported_by": cfg.regions.name} for e in events]


def handoff_overshoot(fetches: dict[str, pl.DataFrame], cfg: CrawlConfig,
                      gaps: dict[str, float]) -> pl.DataFrame:  # fmt: skip
    """Per origin (and, for a split one, per region): the requests the origin saw from every
    region in `fetches` (region -> its fetch rows), those beyond its limit, and the bound."""
    r, p = cfg.regions, cfg.politeness
    sent = [
        f.filter(~pl.col("reason").is_in(list(UNSENT))).select(
            "origin", pl.col("started_at").dt.epoch("us").truediv(1e6).alias("t"),
            pl.lit(region).alias("region"))
        for region, f in fetches.items() if f.height
    ]  # fmt: skip
    rows: list[dict[str, Any]] = []
    if sent:
        union = pl.concat(sent).sort("t")
        for (origin,), group in union.group_by("origin", maintain_order=True):
            gap = gaps.get(origin, p.min_gap_s)
            split = next((s.shares for s in r.shares if s.origin == origin), None)
            if split is None:
                bound = overshoot_bound(r.lease_s, gap, p.max_in_flight, r.takeover == "immediate")
                starts = group["t"].to_list()
                rows.append(_row(origin, "*", starts, gap, bound.requests, group))
                continue
            for (region,), mine in group.group_by("region", maintain_order=True):
                own_gap = share_gap(gap, split.get(region, 0.0) or 1.0)
                rows.append(_row(origin, region, mine["t"].to_list(), own_gap, 0.0, mine))
    schema = {"origin": pl.String, "region": pl.String, "regions": pl.Int64,
              "requests": pl.Int64, "gap_s": pl.Float64, "min_gap_s": pl.Float64,
              "extra": pl.Int64, "bound": pl.Float64, "ok": pl.Boolean}  # fmt: skip
    return pl.DataFrame(rows, schema=schema)


def _row(origin: str, region: str, starts: list[float], gap: float, bound: float,
         group: pl.DataFrame) -> dict[str, Any]:  # fmt: skip
    extra = extra_requests(starts, gap, TOLERANCE_S)
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    return {"origin": origin, "region": region, "regions": group["region"].n_unique(),
            "requests": len(starts), "gap_s": gap, "min_gap_s": min(gaps, default=None),
            "extra": extra, "bound": bound, "ok": extra <= bound}  # fmt: skip
