"""The safety checks judge data: they fail on a gap or concurrency violation they are shown."""

from __future__ import annotations

from datetime import UTC, datetime

import polars as pl

from assets.checks import politeness_violations


def fetches(rows: list[tuple[str, float, float]]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "origin": [o for o, _, _ in rows],
            "started_at": [datetime.fromtimestamp(s, UTC) for _, s, _ in rows],
            "elapsed_s": [e for _, _, e in rows],
        }
    )


def test_spaced_sequential_requests_pass() -> None:
    df = fetches([("a", 0.0, 0.1), ("a", 1.0, 0.1), ("b", 0.0, 0.5), ("b", 1.2, 0.1)])
    report = politeness_violations(df, min_gap_s=1.0, max_in_flight=1)
    assert report["ok"].all()
    assert report.filter(pl.col("origin") == "a")["min_gap_s"].item() == 1.0


def test_a_short_gap_fails_only_its_origin() -> None:
    df = fetches([("a", 0.0, 0.1), ("a", 0.9, 0.1), ("b", 0.0, 0.1), ("b", 2.0, 0.1)])
    report = politeness_violations(df, min_gap_s=1.0, max_in_flight=1)
    assert dict(report.select("origin", "ok").iter_rows()) == {"a": False, "b": True}


def test_overlapping_requests_beyond_the_cap_fail() -> None:
    df = fetches([("a", 0.0, 5.0), ("a", 1.0, 5.0), ("a", 2.0, 5.0), ("a", 10.0, 0.1)])
    report = politeness_violations(df, min_gap_s=1.0, max_in_flight=2)
    assert report["peak_in_flight"].item() == 3 and not report["ok"].item()
    assert politeness_violations(df, min_gap_s=1.0, max_in_flight=3)["ok"].item()


def test_a_url_given_back_untried_at_the_send_gate_is_no_request() -> None:
    df = fetches([("a", 0.0, 0.1), ("a", 0.2, 0.0), ("a", 1.0, 0.1)]).with_columns(
        reason=pl.Series(["fetched", "deferred_origin_backoff", "fetched"])
    )
    report = politeness_violations(df, min_gap_s=1.0, max_in_flight=1)
    assert report.select("requests", "min_gap_s", "ok").row(0) == (2, 1.0, True)
    sent = df.with_columns(reason=pl.lit("fetched"))  # the same row as a request: a violation
    assert not politeness_violations(sent, min_gap_s=1.0, max_in_flight=1)["ok"].item()


def test_each_origin_is_judged_against_its_own_limits() -> None:
    """An origin whose robots.txt asks for a 3 s Crawl-delay (its floor in the store) fails
    at 2 s gaps that pass for the others at the global 1 s; one with an operator cap of 2 in
    flight passes at 2; an origin the store has no row for falls back to the global limits."""
    df = fetches([("slow", 0.0, 0.1), ("slow", 2.0, 0.1), ("wide", 0.0, 5.0), ("wide", 1.0, 5.0),
                  ("fast", 0.0, 0.1), ("fast", 1.0, 0.1), ("new", 0.0, 0.1), ("new", 0.5, 0.1)])  # fmt: skip
    limits = pl.DataFrame({"origin": ["slow", "wide", "fast"], "min_gap_s": [3.0, 1.0, 1.0],
                           "max_in_flight": [1, 2, 1]})  # fmt: skip
    report = politeness_violations(df, min_gap_s=1.0, max_in_flight=1, limits=limits)
    ok = dict(report.select("origin", "ok").iter_rows())
    assert ok == {"slow": False, "wide": True, "fast": True, "new": False}
    gaps = dict(report.select("origin", "limit_gap_s").iter_rows())
    assert gaps == {"slow": 3.0, "wide": 1.0, "fast": 1.0, "new": 1.0}
    # without the store's limits, the global ones judge everyone (the old, wrong answers)
    plain = dict(politeness_violations(df, 1.0, 1).select("origin", "ok").iter_rows())
    assert plain == {"slow": True, "wide": False, "fast": True, "new": False}
