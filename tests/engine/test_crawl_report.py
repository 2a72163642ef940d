"""The crawl-wide report's figures, table by table: hosts judged on the gaps between request
starts (never on requests per time bin), seeds reached or why not, time ticks, the chart."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import polars as pl
import pytest

from atlas_pipeline.crawl_report import (
    gap_points,
    host_table,
    mime_types,
    rate_chart,
    render_cycle,
    seed_table,
    time_ticks,
)
from atlas_pipeline.lake import frame
from atlas_pipeline.render_report import render_tables
from atlas_pipeline.report import origin_rates

T0 = datetime(2026, 12, 1, tzinfo=UTC)
A, B, C = "https://a.test:443", "https://b.test:443", "https://c.test:443"


def _fetch(origin: str, at_s: float, **kw: Any) -> dict[str, Any]:
    row = {"origin": origin, "url": f"{origin}/p{at_s}", "kind": "page", "status": 200,
           "reason": "fetched", "bytes": 100, "elapsed_s": 0.05,
           "content_type": "text/html; charset=utf-8",
           "started_at": (T0 + timedelta(seconds=at_s)).timestamp()}  # fmt: skip
    return {**row, **kw}


def _origins(*limits: tuple[str, float, int, str]) -> pl.DataFrame:
    return frame("origins", [{"origin": o, "min_gap_s": gap, "max_in_flight": cap,
                              "adapt_gap_s": 0.0, "robots_status": robots}
                             for o, gap, cap, robots in limits])  # fmt: skip


def test_gaps_kept_exactly_are_no_alarm_where_time_bins_raise_one() -> None:
    """Twelve requests 1.0 s apart at a 1.0 s limit: binned into 12 bins over 11 s, two starts
    share a bin and the per-shard rates show 2.2 req/s against 1.0; the gaps show 1.0."""
    fetches = frame("fetches", [_fetch(A, float(i)) for i in range(12)])
    origins = _origins((A, 1.0, 1, "ok"))
    binned = origin_rates(fetches, origins).row(0, named=True)
    assert binned["peak_rps"] > binned["limit_rps"]  # the false alarm this report does not raise
    host = host_table(fetches, origins).row(0, named=True)
    assert host["ok"] is True
    assert (host["smallest_gap_s"], host["peak_rps"], host["limit_rps"]) == (1.0, 1.0, 1.0)
    html, summary = render_cycle("c0001", fetches, origins, frame("urls", []), [])
    assert summary.over_limit == 0 and "<circle" not in html


@pytest.mark.parametrize(
    ("starts", "gap", "cap", "ok", "smallest", "peak_rps"),
    [
        ([0.0, 0.5, 1.0], 0.5, 1, True, 0.5, 2.0),  # at its own (Crawl-delay) gap
        ([0.0, 0.4, 1.0], 0.5, 1, False, 0.4, 2.5),  # one gap short
        ([0.0, 0.002, 2.0], 0.0, 2, True, 0.002, 500.0),  # throughput mode: no gap limit
        ([0.0], 1.0, 1, True, None, None),  # one request: no gap at all
    ],
)
def test_each_host_is_judged_against_its_own_limit(
    starts: list[float], gap: float, cap: int, ok: bool, smallest: float | None,
    peak_rps: float | None,
) -> None:  # fmt: skip
    fetches = frame("fetches", [_fetch(B, s, elapsed_s=0.01) for s in starts])
    row = host_table(fetches, _origins((B, gap, cap, "ok"))).row(0, named=True)
    assert (row["ok"], row["smallest_gap_s"]) == (ok, smallest)
    assert row["peak_rps"] == (None if peak_rps is None else pytest.approx(peak_rps, rel=1e-3))
    assert row["limit_rps"] == (round(1 / gap, 3) if gap else None)
    assert row["requests"] == len(starts) and row["limit_in_flight"] == cap


def test_hosts_carry_bytes_statuses_and_robots_state_busiest_first() -> None:
    fetches = frame("fetches", [
        _fetch(A, 0, status=200), _fetch(A, 2, status=404, reason="http_4xx"),
        _fetch(A, 4, status=None, reason="network_error", bytes=0),
        _fetch(C, 0, kind="robots", status=200, bytes=7),
    ])  # fmt: skip
    rows = host_table(fetches, _origins((A, 1.0, 1, "ok"), (C, 1.0, 1, "missing"))).to_dicts()
    assert [r["origin"] for r in rows] == [A, C]
    assert rows[0]["statuses"] == "200:1 404:1 none:1" and rows[0]["bytes"] == 200
    assert rows[0]["robots"] == "ok" and rows[1]["robots"] == "missing"


def test_a_url_given_back_at_the_send_gate_is_no_request() -> None:
    fetches = frame("fetches", [_fetch(A, 0), _fetch(A, 0.1, reason="deferred_origin_backoff"),
                                _fetch(A, 1.0)])  # fmt: skip
    assert gap_points(fetches)[A] == [(pytest.approx((T0 + timedelta(seconds=1)).timestamp()),
                                       pytest.approx(1.0))]  # fmt: skip
    assert host_table(fetches, _origins((A, 1.0, 1, "ok")))["requests"].item() == 2


@pytest.mark.parametrize(
    ("span", "ticks"),
    [(0.5, [0.0]), (11, [0, 2, 4, 6, 8, 10]), (60, [0, 10, 20, 30, 40, 50, 60]),
     (3600, [0, 600, 1200, 1800, 2400, 3000, 3600]), (200_000, [0, 86400, 172800])],
)  # fmt: skip
def test_time_ticks_fall_on_round_steps(span: float, ticks: list[float]) -> None:
    assert time_ticks(span) == ticks


def test_seeds_are_reached_or_say_why_not() -> None:
    urls = frame("urls", [
        {"url": f"{A}/", "state": "fetched", "reason": "fetched", "last_status": 200},
        {"url": f"{B}/", "state": "not_modified", "reason": "not_modified", "last_status": 304},
        {"url": f"{C}/", "state": "blocked", "reason": "robots_disallowed"},
    ])  # fmt: skip
    fetches = frame("fetches", [_fetch(A, 0, url=f"{A}/")])
    table = seed_table([f"{A}/", f"{B}/", f"{C}/", "https://d.test/"], urls, fetches).to_dicts()
    assert [(r["reached"], r["status"], r["why_not"]) for r in table] == [
        (True, 200, ""), (True, 304, ""), (False, None, "robots_disallowed"),
        (False, None, "never admitted: out of scope or refused (atlas inspect tells why)"),
    ]  # fmt: skip


def test_mime_types_are_counted_without_parameters() -> None:
    fetches = frame("fetches", [_fetch(A, 0), _fetch(A, 1, content_type="TEXT/HTML"),
                                _fetch(A, 2, content_type="text/plain"),
                                _fetch(A, 3, content_type=None)])  # fmt: skip
    assert dict(mime_types(fetches).iter_rows()) == {"text/html": 2, "text/plain": 1, "(none)": 1}


def test_two_hundred_origins_are_two_hundred_strips_with_one_axis() -> None:
    origins = [f"https://site-{i:03d}.test:443" for i in range(200)]
    fetches = frame("fetches", [_fetch(o, float(k) + i / 1000) for i, o in enumerate(origins)
                                for k in range(3)])  # fmt: skip
    limits = _origins(*((o, 1.0, 1, "ok") for o in origins))
    svg = rate_chart(fetches, host_table(fetches, limits))
    assert svg.count("<g class='origin'>") == 200 and svg.count("<polyline") == 200
    assert svg.count("stroke-dasharray") == 200  # each strip's own limit
    height = int(re.search(r"height='(\d+)'", svg).group(1))  # type: ignore[union-attr]
    assert height == 2 * 24 + 200 * 18  # strips of 18 px: readable at any count
    assert "+0:00" in svg and "+0:02" in svg and "<circle" not in svg


def test_a_short_gap_is_a_red_dot_on_its_own_strip() -> None:
    fetches = frame("fetches", [_fetch(A, 0), _fetch(A, 0.3), _fetch(C, 0), _fetch(C, 1)])
    html, summary = render_cycle("c0001", fetches, _origins((A, 1.0, 1, "ok"), (C, 1.0, 1, "ok")),
                                 frame("urls", []), [])  # fmt: skip
    assert html.count("<circle") == 1 and summary.over_limit == 1
    assert "<b class=bad>1</b>hosts over their limit" in html


def test_the_render_lane_section_counts_documents_subrequests_and_decisions() -> None:
    docs = frame("documents", [
        {"url": f"{A}/s{i}", "origin": A, "render_reason": r}
        for i, r in enumerate(["render_needed"] * 3 + ["render_fallback", "render_not_needed"])
    ])  # fmt: skip
    fetches = frame("fetches", [
        _fetch(A, 1.0), _fetch(A, 2.0, kind="subresource"), _fetch(A, 3.0, kind="subresource"),
        _fetch(B, 4.0, kind="subresource", reason="timeout"),
    ])  # fmt: skip
    classes = frame("render_classes", [
        {"origin": A, "page_class": "/app/*", "state": "render", "samples": 3, "raw_words": 2,
         "rendered_words": 900, "share": 2 / 900, "decided_at": 5.0, "updated_at": 5.0},
        {"origin": B, "page_class": "/", "state": "plain", "samples": 3, "raw_words": 700,
         "rendered_words": 700, "share": 1.0, "decided_at": 6.0, "updated_at": 6.0},
    ])  # fmt: skip
    tables = dict(render_tables(docs, fetches, classes))
    reasons = dict(tables["Documents by render reason"].rows())
    assert reasons == {"render_needed": 3, "render_fallback": 1, "render_not_needed": 1}
    subs = tables["Requests the browser caused, by origin and outcome"].rows()
    assert subs == [(A, "fetched", 2), (B, "timeout", 1)]  # the page itself is not one of them
    decided = tables["Page classes: render decisions"]
    assert decided["state"].to_list() == ["render", "plain"]
    assert decided["share"].to_list() == [0.002, 1.0]
    html, _ = render_cycle("c0001", fetches, _origins((A, 0.0, 2, "ok"), (B, 0.0, 2, "ok")),
                           frame("urls", []), [], render=list(tables.items()))  # fmt: skip
    assert "Render lane: Page classes: render decisions" in html and "/app/*" in html
    # a web without scripts: no section at all
    plain = frame(
        "documents", [{"url": f"{A}/p", "origin": A, "render_reason": "render_not_needed"}]
    )
    assert (
        render_tables(plain, frame("fetches", [_fetch(A, 1.0)]), frame("render_classes", [])) == []
    )
