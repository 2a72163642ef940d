"""The politeness audit's rule: what the origin saw, judged against the origin's own limits.

A pure function over `fetches` rows, so the `politeness_audit` asset check and the crawl-wide
report judge a crawl the same way (from the request starts the lake recorded, not from the
scheduler's intent).
"""

from __future__ import annotations

import itertools
from typing import Any

import polars as pl

from .reasons import UNSENT

# Start times are taken client-side just before the request; the claim that allowed it was
# made earlier, so a real violation shows up as a clearly shorter gap, not a rounding error.
EPSILON_S = 1e-3


def politeness_violations(
    fetches: pl.DataFrame,
    min_gap_s: float,
    max_in_flight: int,
    limits: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Per origin: the smallest gap between request starts and the most requests at once
    (a URL given back at the send gate, never sent, is no request), each judged against the
    origin's own limits when `limits` has them (its `min_gap_s` floor as the store applied
    it: the global gap, Crawl-delay and any operator floor; its `max_in_flight`), else
    against the global ones."""
    if "reason" in fetches.columns:
        fetches = fetches.filter(~pl.col("reason").is_in(list(UNSENT)))
    rows: list[dict[str, Any]] = []
    for (origin,), group in fetches.sort("started_at").group_by("origin", maintain_order=True):
        starts = [t.timestamp() for t in group["started_at"].to_list()]
        ends = [s + e for s, e in zip(starts, group["elapsed_s"].to_list(), strict=True)]
        gaps = [b - a for a, b in itertools.pairwise(starts)]
        peak = _peak_overlap(starts, ends)
        rows.append({"origin": origin, "requests": len(starts), "min_gap_s": min(gaps, default=None),
                     "peak_in_flight": peak})  # fmt: skip
    out = pl.DataFrame(rows, schema={"origin": pl.String, "requests": pl.Int64,
                                     "min_gap_s": pl.Float64, "peak_in_flight": pl.Int64})  # fmt: skip
    own = pl.DataFrame(schema={"origin": pl.String, "limit_gap_s": pl.Float64,
                               "limit_in_flight": pl.Int64})  # fmt: skip
    if limits is not None and not limits.is_empty():
        own = limits.select(
            "origin",
            pl.col("min_gap_s").cast(pl.Float64).alias("limit_gap_s"),
            pl.col("max_in_flight").cast(pl.Int64).alias("limit_in_flight"),
        ).unique("origin", keep="last")
    out = out.join(own, on="origin", how="left").with_columns(
        pl.col("limit_gap_s").fill_null(min_gap_s),
        pl.col("limit_in_flight").fill_null(max_in_flight),
    )
    return out.with_columns(
        ok=(pl.col("min_gap_s").fill_null(float("inf")) >= pl.col("limit_gap_s") - EPSILON_S)
        & (pl.col("peak_in_flight") <= pl.col("limit_in_flight"))
    )


def _peak_overlap(starts: list[float], ends: list[float]) -> int:
    """Most intervals [start, end) open at once (a sweep: ends before starts at a tie)."""
    events = sorted([(s, 1) for s in starts] + [(e, -1) for e in ends], key=lambda x: (x[0], x[1]))
    peak = now = 0
    for _, step in events:
        now += step
        peak = max(peak, now)
    return peak
