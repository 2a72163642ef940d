"""The crawl-wide report: one HTML page per cycle across every shard, and an index of cycles.

Heritrix's report set, for one cycle: hosts (requests, bytes, statuses, rate against the
origin's own limit, robots state), response codes, MIME types, seeds (reached, or why not) and
reason codes. Read from the lake only (`fetches`, `origins`, `urls`), so it answers for any
crawl whose lake it can open, and judged with the same rule as the `politeness_audit` check
(`audit.politeness_violations`), so the two never disagree.

The rate chart is computed from the gaps between request starts, not from requests counted
per time bin: a bin that holds the end of one gap and the start of the next doubles a rate
that was never sent (the per-shard report's false alarms). Each origin gets its own strip,
its rate drawn as a share of its limit, so 200 origins stay 200 readable lines.
"""

from __future__ import annotations

import itertools
import json
import os
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from html import escape
from pathlib import Path

import polars as pl

from .audit import EPSILON_S as _EPSILON_S
from .audit import politeness_violations
from .lake import Lake
from .reasons import UNSENT
from .render_report import render_tables

CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif;
       color: #1f2328; margin: 0 auto; padding: 1.5em 2em; max-width: 1200px; }
h1 { font-size: 1.6em; margin: 0 0 .3em; }
h2 { font-size: 1.2em; margin: 1.6em 0 .5em; border-bottom: 1px solid #d0d7de;
     padding-bottom: .2em; }
nav { margin: .5em 0 1em; }
nav a { margin-right: 1em; }
.figures { display: flex; flex-wrap: wrap; gap: .6em; margin: 1em 0; padding: 0; }
.figures li { list-style: none; background: #f6f8fa; border: 1px solid #d0d7de;
              border-radius: 6px; padding: .4em .8em; }
.figures b { display: block; font-size: 1.3em; }
table { border-collapse: collapse; margin: .5em 0; font-variant-numeric: tabular-nums; }
th, td { border: 1px solid #d0d7de; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f6f8fa; font-weight: 600; }
tr:nth-child(even) td { background: #fbfcfd; }
td.num, th.num { text-align: right; }
.bad { color: #cf222e; font-weight: 600; }
.ok { color: #1a7f37; }
.wide { overflow-x: auto; max-width: 100%; }
.nowrap { white-space: nowrap; }
svg text.peak { fill: #59636e; }
svg text { font: 11px system-ui, Helvetica, Arial, sans-serif; fill: #1f2328; }
.note { color: #59636e; max-width: 60em; }
"""

_LABEL_W, _PLOT_W, _PEAK_W, _AXIS_H = 290, 600, 230, 24
_CLIP = 1.5  # rates above 1.5x the limit are drawn at the strip's top (and marked red)


@dataclass(frozen=True)
class CycleSummary:
    """What the index page shows of one cycle."""

    cycle: str
    requests: int
    pages: int
    hosts: int
    over_limit: int
    bytes: int


def _unsent(fetches: pl.DataFrame) -> pl.DataFrame:
    # a URL given back at the send gate never left: it is no request the origin saw
    return fetches.filter(~pl.col("reason").is_in(list(UNSENT)))


def host_table(fetches: pl.DataFrame, origins: pl.DataFrame) -> pl.DataFrame:
    """Per origin: requests, bytes, status counts, robots state, the smallest gap between two
    request starts and the peak rate it means (1 / gap), against the origin's own limit."""
    sent = _unsent(fetches)
    limits = origins if origins.height else None
    audit = politeness_violations(sent, 0.0, 1 << 30, limits)
    statuses = (
        sent.with_columns(pl.col("status").cast(pl.String).fill_null("none"))
        .group_by("origin", "status").len().sort(["origin", "status"])
        .group_by("origin", maintain_order=True)
        .agg(statuses=pl.concat_str(pl.col("status"), pl.lit(":"), pl.col("len").cast(pl.String))
             .str.join(" "))
    )  # fmt: skip
    volume = sent.group_by("origin").agg(bytes=pl.col("bytes").fill_null(0).sum())
    robots = (
        origins.select("origin", "robots_status")
        if origins.height
        else pl.DataFrame(schema={"origin": pl.String, "robots_status": pl.String})
    )
    out = (
        audit.join(volume, on="origin", how="left")
        .join(statuses, on="origin", how="left")
        .join(robots.unique("origin", keep="last"), on="origin", how="left")
    )
    return out.select(
        "origin",
        "requests",
        "bytes",
        "statuses",
        pl.col("robots_status").fill_null("unknown").alias("robots"),
        pl.col("limit_gap_s"),
        pl.col("min_gap_s").round(3).alias("smallest_gap_s"),
        _rate(pl.col("min_gap_s")).alias("peak_rps"),
        _rate(pl.col("limit_gap_s")).alias("limit_rps"),
        "peak_in_flight",
        "limit_in_flight",
        "ok",
    ).sort(["requests", "origin"], descending=[True, False])


def host_view(hosts: pl.DataFrame) -> pl.DataFrame:
    """The hosts table as the page shows it: readable headings, in-flight as peak / cap."""
    return hosts.select(
        "origin", "requests",
        (pl.col("bytes") / 1000).round(1).alias("kB"), "statuses", "robots",
        pl.col("smallest_gap_s").alias("smallest gap s"),
        pl.col("limit_gap_s").alias("gap limit s"),
        pl.col("peak_rps").alias("peak req/s"), pl.col("limit_rps").alias("limit req/s"),
        pl.format("{} / {}", "peak_in_flight", "limit_in_flight").alias("in flight / cap"),
        pl.col("ok").alias("within limit"),
    )  # fmt: skip


def _rate(gap: pl.Expr) -> pl.Expr:
    return pl.when(gap > 0).then((1.0 / gap).round(3)).otherwise(None)


def gap_points(fetches: pl.DataFrame) -> dict[str, list[tuple[float, float]]]:
    """Per origin, for every request start after its first: (start, seconds since the
    origin's previous start). The chart draws 1 / gap at each start."""
    out: dict[str, list[tuple[float, float]]] = {}
    sent = _unsent(fetches).sort("started_at")
    for (origin,), group in sent.group_by("origin", maintain_order=True):
        starts = [t.timestamp() for t in group["started_at"].to_list()]
        out[str(origin)] = [(b, b - a) for a, b in itertools.pairwise(starts)]
    return out


def time_ticks(span_s: float, most: int = 8) -> list[float]:
    """Tick offsets (seconds from the cycle's first request) at a round step, at most `most`."""
    steps = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 86400)
    step = next((s for s in steps if span_s / s <= most - 1), steps[-1])
    return [float(i * step) for i in range(int(span_s // step) + 1)]


def _clock(offset_s: float) -> str:
    minutes, seconds = divmod(round(offset_s), 60)
    hours, minutes = divmod(minutes, 60)
    return f"+{hours}:{minutes:02d}:{seconds:02d}" if hours else f"+{minutes}:{seconds:02d}"


def strip_height(origins: int) -> int:
    """Taller strips for a few origins, never under 18 px (200 origins: 3,600 px of strips)."""
    return max(18, min(48, 480 // max(origins, 1)))


def rate_chart(fetches: pl.DataFrame, hosts: pl.DataFrame) -> str:
    """One strip per origin (busiest first): its rate at each request start (1 / the gap to
    the previous start) as a share of its limit (dashed), red dots where a gap was shorter
    than the limit, its peak against its limit at the right; one time axis, top and bottom."""
    points = gap_points(fetches)
    if not points or fetches.is_empty():
        return "<p>no requests</p>"
    starts = [float(t.timestamp()) for t in _unsent(fetches)["started_at"].to_list()]
    t0, t1 = min(starts), max(starts)
    span = max(t1 - t0, 1.0)
    by_origin = {r["origin"]: r for r in hosts.iter_rows(named=True)}
    # an origin without a gap limit (throughput mode) is drawn against the fastest one seen
    fastest = max((1 / g for ps in points.values() for _, g in ps if g > 0), default=1.0)
    order = [o for o in hosts["origin"].to_list() if o in points]
    strip = strip_height(len(order))
    height = _AXIS_H * 2 + strip * len(order)
    right = _LABEL_W + _PLOT_W

    def x(t: float) -> float:
        return _LABEL_W + (t - t0) / span * _PLOT_W

    parts = [f"<svg class='rates' width='{right + _PEAK_W}' height='{height}' role='img' "
             "aria-label='request rate per origin over the cycle'>"]  # fmt: skip
    for tick in time_ticks(span):
        tx = x(t0 + tick)
        parts.append(f"<line x1='{tx:.1f}' x2='{tx:.1f}' y1='{_AXIS_H - 4}' "
                     f"y2='{height - _AXIS_H + 4}' stroke='#eaeef2'/>")  # fmt: skip
        for ty in (_AXIS_H - 8, height - 6):
            parts.append(f"<text x='{tx:.1f}' y='{ty}' text-anchor='middle'>{_clock(tick)}</text>")
    for k, origin in enumerate(order):
        host = by_origin[origin]
        bottom = _AXIS_H + (k + 1) * strip - 3
        gap_limit = host["limit_gap_s"] or 0.0

        def y(share: float, bottom: float = bottom) -> float:
            return bottom - min(share, _CLIP) / _CLIP * (strip - 5)

        label = origin if len(origin) <= 44 else origin[:41] + "…"
        peak = f"peak {host['peak_rps']} of {host['limit_rps']} req/s" if gap_limit > 0 else (
            f"peak {host['peak_rps']} req/s, no gap limit")  # fmt: skip
        parts.append(f"<g class='origin'><text x='0' y='{bottom - 2:.1f}'>{escape(label)}</text>"
                     f"<line x1='{_LABEL_W}' x2='{right}' y1='{bottom:.1f}' y2='{bottom:.1f}' "
                     f"stroke='#d0d7de'/><text x='{right + 8}' y='{bottom - 2:.1f}' "
                     f"class='peak'>{escape(peak)}</text>")  # fmt: skip
        if gap_limit > 0:
            ly = y(1.0)
            parts.append(f"<line x1='{_LABEL_W}' x2='{right}' y1='{ly:.1f}' y2='{ly:.1f}' "
                         "stroke='#8c959f' stroke-dasharray='3 3'/>")  # fmt: skip
        coords, over = [], []
        for t, gap in points[origin]:
            rate = 1 / gap if gap > 0 else float("inf")
            share = rate * gap_limit if gap_limit > 0 else rate / fastest
            coords.append(f"{x(t):.1f},{y(share):.1f}")
            if gap_limit > 0 and gap < gap_limit - _EPSILON_S:
                over.append(f"<circle cx='{x(t):.1f}' cy='{y(share):.1f}' r='3' fill='#cf222e'/>")
        parts.append(f"<polyline fill='none' stroke='#0969da' stroke-width='1.5' "
                     f"stroke-linejoin='round' points='{' '.join(coords)}'/>")  # fmt: skip
        parts.extend(over)
        parts.append("</g>")
    return "".join(parts) + "</svg>"


def seed_table(seeds: Sequence[str], urls: pl.DataFrame, fetches: pl.DataFrame) -> pl.DataFrame:
    """Per seed: reached (a 2xx or 304 answer in this cycle or an earlier one) or why not,
    from the catalogue's state and reason and the cycle's last answer."""
    rows = []
    known = {r["url"]: r for r in urls.iter_rows(named=True)} if urls.height else {}
    answered = (
        {r["url"]: r for r in fetches.sort("started_at").iter_rows(named=True)}
        if fetches.height
        else {}
    )
    for seed in seeds:
        row, last = known.get(seed), answered.get(seed)
        status = (last or {}).get("status") or (row or {}).get("last_status")
        reached = status is not None and (200 <= status < 300 or status == 304)
        if row is None:
            why = "never admitted: out of scope or refused (atlas inspect tells why)"
        elif reached:
            why = ""
        else:
            why = str((last or {}).get("reason") or row.get("reason") or row.get("state"))
        rows.append({"seed": seed, "reached": reached, "status": status,
                     "state": None if row is None else row.get("state"), "why_not": why})  # fmt: skip
    return pl.DataFrame(rows, schema={"seed": pl.String, "reached": pl.Boolean,
                                      "status": pl.Int64, "state": pl.String,
                                      "why_not": pl.String})  # fmt: skip


def _counted(df: pl.DataFrame, column: str, label: str) -> pl.DataFrame:
    if df.is_empty():
        return pl.DataFrame(schema={label: pl.String, "requests": pl.UInt32})
    return (
        df.select(pl.col(column).cast(pl.String).fill_null("(none)").alias(label))
        .group_by(label).agg(requests=pl.len())
        .sort(["requests", label], descending=[True, False])
    )  # fmt: skip


def mime_types(fetches: pl.DataFrame) -> pl.DataFrame:
    typed = fetches.with_columns(
        pl.col("content_type").str.split(";").list.first().str.strip_chars().str.to_lowercase()
    )
    return _counted(typed, "content_type", "mime_type")


def _table(df: pl.DataFrame, classes: dict[str, str] | None = None) -> str:
    numeric = {c for c, t in df.schema.items() if t.is_numeric()}
    head = "".join(f"<th class='num'>{escape(c)}</th>" if c in numeric else f"<th>{escape(c)}</th>"
                   for c in df.columns)  # fmt: skip
    body = []
    for row in df.iter_rows(named=True):
        cells = []
        for c, v in row.items():
            css = ["num"] if c in numeric else []
            if isinstance(v, bool):
                css.append("ok" if v else "bad")
                v = "yes" if v else "no"
            css += [classes[c]] if classes and c in classes else []
            attr = f" class='{' '.join(css)}'" if css else ""
            cells.append(f"<td{attr}>{escape('' if v is None else str(v))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<div class='wide'><table><tr>{head}</tr>{''.join(body)}</table></div>"


def _figure(name: str, value: object) -> str:
    alarm = name == "hosts over their limit" and value != 0
    return f"<li><b{' class=bad' if alarm else ''}>{escape(str(value))}</b>{escape(name)}</li>"


def _page(title: str, body: list[str]) -> str:
    return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            f"<meta name='viewport' content='width=device-width'><title>{escape(title)}</title>"
            f"<style>{CSS}</style></head><body>" + "\n".join(body) + "</body></html>")  # fmt: skip


def _write(path: Path, html: str) -> None:
    # atomic: shards of a cycle may rewrite the page at the same moment
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(html)
    os.replace(tmp, path)


def render_cycle(
    cycle: str,
    fetches: pl.DataFrame,
    origins: pl.DataFrame,
    urls: pl.DataFrame,
    seeds: Sequence[str],
    shard_pages: Sequence[str] = (),
    render: Sequence[tuple[str, pl.DataFrame]] = (),
) -> tuple[str, CycleSummary]:
    hosts = host_table(fetches, origins)
    sent = _unsent(fetches)
    over = int((~hosts["ok"]).sum()) if hosts.height else 0
    summary = CycleSummary(
        cycle=cycle, requests=sent.height, hosts=hosts.height, over_limit=over,
        pages=int(((sent["kind"] == "page") & (sent["reason"] == "fetched")).sum()),
        bytes=int(sent["bytes"].fill_null(0).sum()),
    )  # fmt: skip
    seeds_df = seed_table(seeds, urls, fetches)
    figures = {"requests": summary.requests, "pages fetched": summary.pages,
               "hosts": summary.hosts, "MB": round(summary.bytes / 1e6, 2),
               "hosts over their limit": over,
               "seeds reached": f"{int(seeds_df['reached'].sum())} of {seeds_df.height}"}  # fmt: skip
    shards = " ".join(f"<a href='{escape(p)}'>{escape(Path(p).stem)}</a>" for p in shard_pages)
    body = [
        "<nav><a href='../index.html'>all cycles</a>"
        + (f" · shard reports: {shards}" if shards else "")
        + "</nav>",
        f"<h1>Atlas crawl report: cycle {escape(cycle)}, all shards</h1>",
        "<ul class='figures'>" + "".join(_figure(k, v) for k, v in figures.items()) + "</ul>",
        "<h2 id='rates'>Request rate per origin against its limit</h2>",
        "<p class='note'>Each strip is one origin. At every request start the line is the rate "
        "that start meant (1 / seconds since the origin's previous start) as a share of the "
        "origin's own limit: the dashed line is the limit, red dots are gaps shorter than it. "
        "Origins without a gap limit are drawn against the fastest origin.</p>",
        "<div class='wide'>" + rate_chart(fetches, hosts) + "</div>",
        "<h2 id='hosts'>Hosts</h2>",
        _table(host_view(hosts), {"origin": "nowrap", "statuses": "nowrap"}),
        "<h2 id='codes'>Response codes</h2>",
        _table(_counted(sent, "status", "status")),
        "<h2 id='mime'>MIME types</h2>",
        _table(mime_types(sent)),
        "<h2 id='seeds'>Seeds</h2>",
        _table(seeds_df),
        "<h2 id='reasons'>Reason codes of the cycle's fetches</h2>",
        _table(_counted(fetches, "reason", "reason")),
    ]
    for n, (heading, table) in enumerate(render):  # the render lane, where it had work
        body += [f"<h2 id='render-{n}'>Render lane: {escape(heading)}</h2>", _table(table)]
    return _page(f"Atlas {cycle}", body), summary


def write_reports(root: Path, lake: Lake, seeds: Sequence[str],
                  cycles: Sequence[str] | None = None) -> list[Path]:  # fmt: skip
    """Write `<root>/<cycle>/index.html` for each of `cycles` (default: every cycle with
    fetches) and `<root>/index.html` linking every cycle; returns the pages written, the
    index last. A cycle not asked for is listed from the summary its page was written with
    (`summary.json` beside it), so a report of the latest cycle reads that cycle only."""
    known = lake.cycles("fetches")
    wanted = known if cycles is None else [c for c in known if c in cycles]
    origins = lake.read("origins")
    urls = lake.read("urls")
    classes = lake.read("render_classes")
    written, summaries = [], []
    for cycle in known:
        saved = root / cycle / "summary.json"
        if cycle not in wanted and saved.exists():
            summaries.append(CycleSummary(**json.loads(saved.read_text(encoding="utf-8"))))
            continue
        pages = sorted(p.name for p in (root / cycle).glob("shard*.html"))
        fetches = lake.read_cycle("fetches", cycle)
        lane = render_tables(lake.read_cycle("documents", cycle), fetches, classes)
        html, summary = render_cycle(cycle, fetches, origins, urls, seeds, pages, lane)
        summaries.append(summary)
        _write(root / cycle / "index.html", html)
        _write(saved, json.dumps(asdict(summary)))
        written.append(root / cycle / "index.html")
    _write(root / "index.html", render_index(summaries))
    return [*written, root / "index.html"]


def render_index(summaries: Sequence[CycleSummary]) -> str:
    rows = pl.DataFrame(
        [{"cycle": s.cycle, "requests": s.requests, "pages": s.pages, "hosts": s.hosts,
          "MB": round(s.bytes / 1e6, 2), "hosts_over_limit": s.over_limit} for s in summaries],
        schema={"cycle": pl.String, "requests": pl.Int64, "pages": pl.Int64, "hosts": pl.Int64,
                "MB": pl.Float64, "hosts_over_limit": pl.Int64},
    )  # fmt: skip
    table = _table(rows)
    for s in summaries:  # link each cycle's cell to its page
        table = table.replace(f"<td>{escape(s.cycle)}</td>",
                              f"<td><a href='{escape(s.cycle)}/index.html'>{escape(s.cycle)}</a></td>", 1)  # fmt: skip
    return _page("Atlas crawl reports", ["<h1>Atlas crawl reports</h1>", table])
