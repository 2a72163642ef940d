"""A crawl report per (cycle, shard): one self-contained HTML page next to the tables, with
the pictures that beat a table (requests per origin over the cycle against its limit, reason
codes) and the figures an operator asks first. Charts are inline SVG: nothing to install,
nothing fetched when the page is opened.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from pathlib import Path

import polars as pl

BINS = 12  # time bins per origin line
_BARS = "▁▂▃▄▅▆▇█"
_W, _H, _PAD = 640, 180, 30


@dataclass(frozen=True)
class Report:
    path: Path
    per_origin: pl.DataFrame  # origin, requests, peak_rps, limit_rps, share_429, sparkline


def origin_rates(fetches: pl.DataFrame, origins: pl.DataFrame) -> pl.DataFrame:
    """Per origin: requests, time-binned request rates, the peak bin against the origin's
    limit (1 / gap), the 429 share and a sparkline of the bins."""
    if fetches.is_empty():
        return pl.DataFrame(schema={"origin": pl.String, "requests": pl.Int64,
                                    "peak_rps": pl.Float64, "limit_rps": pl.Float64,
                                    "share_429": pl.Float64, "sparkline": pl.String,
                                    "bins": pl.List(pl.Float64)})  # fmt: skip
    t = fetches.select("origin", "status", ts=pl.col("started_at").dt.epoch("ms") / 1000.0)
    t0, t1 = float(t["ts"].min()), float(t["ts"].max())  # type: ignore[arg-type]
    width = max((t1 - t0) / BINS, 1e-6)
    gaps = dict(zip(origins["origin"].to_list(),
                    (origins["min_gap_s"] + origins["adapt_gap_s"]).to_list(), strict=True))  # fmt: skip
    rows = []
    for (origin,), g in t.group_by("origin", maintain_order=True):
        counts = [0.0] * BINS
        for ts in g["ts"].to_list():
            counts[min(int((ts - t0) / width), BINS - 1)] += 1
        rates = [c / width for c in counts]
        gap = gaps.get(origin)
        rows.append({
            "origin": origin, "requests": g.height, "peak_rps": round(max(rates), 3),
            "limit_rps": round(1.0 / gap, 3) if gap else None,
            "share_429": round(float((g["status"] == 429).sum()) / g.height, 4),
            "sparkline": _sparkline(counts), "bins": rates,
        })  # fmt: skip
    return pl.DataFrame(rows).sort("requests", descending=True)


def _sparkline(values: list[float]) -> str:
    top = max(values) or 1.0
    return "".join(_BARS[min(int(v / top * (len(_BARS) - 1)), len(_BARS) - 1)] for v in values)


def write_report(
    root: Path,
    cycle: str,
    shard: str,
    fetches: pl.DataFrame,
    origins: pl.DataFrame,
    schedule: pl.DataFrame,
    links: pl.DataFrame | None = None,
) -> Report:
    """`links` (the partition's links rows), when given, adds the paths whose query variants
    the novelty rule stopped."""
    rates = origin_rates(fetches, origins)
    reasons = fetches.group_by("reason").len().sort("len", descending=True)
    path = root / cycle / f"{shard}.html"
    path.parent.mkdir(parents=True, exist_ok=True)
    body = [
        f"<h1>Atlas crawl report: cycle {escape(cycle)}, {escape(shard)}</h1>",
        _summary(fetches, schedule),
        "<h2>Requests per origin over the cycle, against the origin's limit</h2>",
        _rate_chart(rates),
        "<h2>Fetch outcomes by reason code</h2>",
        _bar_chart(reasons["reason"].to_list(), reasons["len"].to_list()),
        "<h2>Per origin</h2>",
        _table(rates.drop("bins")),
        "<h2>Freshness by class</h2>",
        _table(_freshness(schedule)),
    ]
    if links is not None:
        body += ["<h2>Paths stopped for no novelty (trap_no_novelty)</h2>",
                 _table(stopped_paths(links))]  # fmt: skip
    html = ("<!DOCTYPE html><html><head><meta charset='utf-8'><title>Atlas "
            f"{escape(cycle)} {escape(shard)}</title><style>body{{font:14px sans-serif;"
            "margin:2em}table{border-collapse:collapse}td,th{border:1px solid #ccc;"
            "padding:2px 6px}</style></head><body>" + "\n".join(body) + "</body></html>")  # fmt: skip
    path.write_text(html, encoding="utf-8")
    return Report(path, rates.drop("bins"))


def _summary(fetches: pl.DataFrame, schedule: pl.DataFrame) -> str:
    n = fetches.height
    figures = {
        "requests": n,
        "pages fetched": int((fetches["reason"] == "fetched").sum()) if n else 0,
        "304 not modified": int((fetches["status"] == 304).sum()) if n else 0,
        "unchanged 200": int((fetches["reason"] == "content_unchanged").sum()) if n else 0,
        "MB": round(float(fetches["bytes"].sum() or 0) / 1e6, 2) if n else 0.0,
        "URLs scheduled": schedule.height,
    }
    return "<p>" + " · ".join(f"<b>{v}</b> {escape(k)}" for k, v in figures.items()) + "</p>"


def stopped_paths(links: pl.DataFrame) -> pl.DataFrame:
    """Per (origin, path): the links refused because the path's last fetched query variants
    brought nothing new (traps.judge_novelty), most refused first."""
    if links.is_empty() or "reason" not in links.columns:
        return pl.DataFrame(schema={"origin": pl.String, "path": pl.String, "refused": pl.UInt32})
    cut = links.filter(pl.col("reason") == "trap_no_novelty")
    return (
        cut.select(origin=pl.col("url").str.extract(r"^([^:]+://[^/?#]+)"),
                   path=pl.col("url").str.extract(r"^[^:]+://[^/?#]+([^?#]*)"))
        .group_by("origin", "path").agg(refused=pl.len())
        .sort(["refused", "origin", "path"], descending=[True, False, False])
    )  # fmt: skip


def _freshness(schedule: pl.DataFrame) -> pl.DataFrame:
    if schedule.is_empty():
        return pl.DataFrame({"freshness_class": [], "urls": [], "stale": []})
    return (
        schedule.group_by("freshness_class")
        .agg(urls=pl.len(), stale=pl.col("stale").sum(),
             target_h=(pl.col("target_s").first() / 3600).round(1))
        .sort("freshness_class")
    )  # fmt: skip


def _rate_chart(rates: pl.DataFrame, top_n: int = 8) -> str:
    """One line per origin (the busiest `top_n`), requests/s per bin, dashed at its limit."""
    if rates.is_empty():
        return "<p>no requests</p>"
    shown = rates.head(top_n)
    peak = max(max(max(b) for b in shown["bins"].to_list()),
               max((x for x in shown["limit_rps"].to_list() if x), default=0.0)) or 1.0  # fmt: skip
    colors = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
              "#7f7f7f"]  # fmt: skip

    def y(v: float) -> float:
        return _H - _PAD - v / peak * (_H - 2 * _PAD)

    def x(i: int) -> float:
        return _PAD + i * (_W - 2 * _PAD) / (BINS - 1)

    parts = [f"<svg width='{_W}' height='{_H + 20 * len(shown)}' role='img'>"]
    for k, row in enumerate(shown.iter_rows(named=True)):
        color = colors[k % len(colors)]
        points = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(row["bins"]))
        parts.append(f"<polyline fill='none' stroke='{color}' stroke-width='2' points='{points}'/>")
        if row["limit_rps"]:
            ly = y(row["limit_rps"])
            parts.append(f"<line x1='{_PAD}' x2='{_W - _PAD}' y1='{ly:.1f}' y2='{ly:.1f}' "
                         f"stroke='{color}' stroke-dasharray='4 3'/>")  # fmt: skip
        parts.append(f"<text x='{_PAD}' y='{_H + 14 + 20 * k}' fill='{color}'>"
                     f"{escape(row['origin'])}: peak {row['peak_rps']} req/s, limit "
                     f"{row['limit_rps']} req/s</text>")  # fmt: skip
    parts.append(f"<text x='2' y='{_PAD - 8}'>{peak:.2f} req/s</text></svg>")
    return "".join(parts)


def _bar_chart(labels: list[str], values: list[int]) -> str:
    if not values:
        return "<p>none</p>"
    top, row_h = max(values) or 1, 18
    parts = [f"<svg width='{_W}' height='{row_h * len(values) + 4}' role='img'>"]
    for i, (label, v) in enumerate(zip(labels, values, strict=True)):
        w = v / top * (_W - 260)
        parts.append(f"<text x='0' y='{i * row_h + 13}'>{escape(str(label))}</text>"
                     f"<rect x='180' y='{i * row_h + 2}' width='{w:.1f}' height='{row_h - 4}' "
                     f"fill='#1f77b4'/><text x='{186 + w:.1f}' y='{i * row_h + 13}'>{v}</text>")  # fmt: skip
    return "".join(parts) + "</svg>"


def _table(df: pl.DataFrame) -> str:
    head = "".join(f"<th>{escape(c)}</th>" for c in df.columns)
    rows = "".join(
        "<tr>" + "".join(f"<td>{escape('' if v is None else str(v))}</td>" for v in r) + "</tr>"
        for r in df.iter_rows()
    )
    return f"<table><tr>{head}</tr>{rows}</table>"
