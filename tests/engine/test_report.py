"""The crawl report's figures: time-binned request rates against each origin's limit."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl

from atlas_pipeline.lake import frame
from atlas_pipeline.report import BINS, origin_rates, write_report

T0 = datetime(2026, 11, 30, tzinfo=UTC)


def _fetches() -> pl.DataFrame:
    rows = [
        {
            "origin": "https://a.test:443",
            "status": 200,
            "reason": "fetched",
            "bytes": 10,
            "started_at": (T0 + timedelta(seconds=i)).timestamp(),
        }
        for i in range(12)
    ]
    rows += [
        {
            "origin": "https://b.test:443",
            "status": 429 if i == 0 else 200,
            "reason": "fetched",
            "bytes": 5,
            "started_at": (T0 + timedelta(seconds=11 * i)).timestamp(),
        }
        for i in range(2)
    ]
    return frame("fetches", rows)  # fmt: skip


def _origins() -> pl.DataFrame:
    return frame("origins", [{"origin": "https://a.test:443", "min_gap_s": 0.5, "adapt_gap_s": 0.5},
                             {"origin": "https://b.test:443", "min_gap_s": 2.0, "adapt_gap_s": 0.0}])  # fmt: skip


def test_rates_are_binned_over_the_cycle_against_the_limit() -> None:
    rates = {r["origin"]: r for r in origin_rates(_fetches(), _origins()).iter_rows(named=True)}
    a, b = rates["https://a.test:443"], rates["https://b.test:443"]
    assert a["requests"] == 12 and abs(sum(a["bins"]) * (11 / BINS) - 12) < 1e-9  # span 0-11 s
    assert a["limit_rps"] == 1.0 and b["limit_rps"] == 0.5
    assert b["share_429"] == 0.5 and b["sparkline"][0] == "█" and b["sparkline"][-1] == "█"
    assert len(a["sparkline"]) == BINS


def test_the_report_is_one_self_contained_page(tmp_path: Path) -> None:
    report = write_report(tmp_path, "c0001", "shard_000", _fetches(), _origins(),
                          frame("recrawl_schedule", []))  # fmt: skip
    html = report.path.read_text()
    assert report.path == tmp_path / "c0001" / "shard_000.html"
    assert html.count("<svg") == 2 and "https://a.test:443" in html and "http" not in html.split(
        "<body>")[0].replace("http-equiv", "")  # fmt: skip


def test_the_report_css_is_valid(tmp_path: Path) -> None:
    """Its style sheet reaches the page as CSS: a brace doubled for an f-string in a plain
    string left `}}table{{` in it, which browsers drop along with every rule after it."""
    import re

    report = write_report(tmp_path, "c0001", "shard_000", _fetches(), _origins(),
                          frame("recrawl_schedule", []))  # fmt: skip
    css = re.search(r"<style>(.*?)</style>", report.path.read_text(), re.S)
    assert css is not None
    assert "{{" not in css.group(1) and "}}" not in css.group(1)
    rules = re.findall(r"([^{}]+)\{([^{}]*)\}", css.group(1))
    assert [selector for selector, _ in rules] == ["body", "table", "td,th"]
    assert css.group(1).count("{") == css.group(1).count("}") == 3
