"""The crawl-wide report of a real sandbox crawl, rendered in headless Chromium: its styles
applied (computed styles, not text), one strip and one row per host, no false alarm on a
crawl that kept every gap, and an index that links every cycle."""

from __future__ import annotations

import itertools
import os
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

from tests.conftest import SandboxProcess, chromium_browser, sandbox_config, write_config
from tests.integration.test_cli import normalize_origin, run_atlas

# make test runs `timing` tests after the others, one at a time: a browser's renders, on two
# cores shared with 3 other test processes, once ended a page before its slow script left
pytestmark = pytest.mark.timing

GAP_S = 0.2


def test_the_crawl_wide_report_renders_with_its_styles_and_no_false_alarm(
    sandbox: SandboxProcess, tmp_path: Path
) -> None:
    cfg = write_config(tmp_path / "atlas.yaml", sandbox_config(
        sandbox, tmp_path, scope={"max_pages_per_origin": 4},
        politeness={"min_gap_s": GAP_S, "max_in_flight": 1}))  # fmt: skip
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "dagster_home")}
    assert run_atlas("report", "--config", str(cfg), env=env).returncode == 2  # nothing yet
    seen: dict[str, Counter[str]] = {}
    for cycle in ("c0001", "c0002"):
        sandbox.log.clear()
        res = run_atlas("crawl", "--config", str(cfg), "--cycles", "1", env=env)
        assert res.returncode == 0, res.stderr[-3000:]
        seen[cycle] = Counter(normalize_origin(e["origin"]) for e in sandbox.log.entries())
    reports = tmp_path / "lake" / "reports"
    assert f"Crawl report (HTML, each cycle across its shards, per-shard pages linked): {reports / 'index.html'}" in res.stdout  # fmt: skip
    res = run_atlas("report", "--config", str(cfg), env=env)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == [str(reports / c / "index.html") for c in seen] + [
        str(reports / "index.html")]  # fmt: skip
    bad = run_atlas("report", "--config", str(cfg), "--cycle", "c0009", env=env)
    assert bad.returncode == 2 and "cycles: c0001, c0002" in bad.stderr

    fetches = pl.read_delta(str(tmp_path / "lake" / "crawl" / "fetches"))
    with chromium_browser() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto((reports / "index.html").as_uri())
        assert page.locator("table tr").count() == 1 + len(seen)
        page.click("text=c0002")
        assert page.url == (reports / "c0002" / "index.html").as_uri()
        style = page.evaluate("""() => {
            const css = (sel, prop) => getComputedStyle(document.querySelector(sel))[prop];
            return {font: css('body', 'fontFamily'), width: css('body', 'maxWidth'),
                    collapse: css('table', 'borderCollapse'), th: css('th', 'backgroundColor'),
                    num: css('td.num', 'textAlign'), figures: css('.figures', 'display'),
                    bullet: css('.figures li', 'listStyleType'),
                    border: css('td', 'borderTopStyle'),
                    overflow: document.documentElement.scrollWidth - window.innerWidth,
                    chart: document.querySelector('svg.rates').getBoundingClientRect().width,
                    body: document.body.getBoundingClientRect().width};
        }""")
        assert "sans-serif" in style["font"] and style["width"] == "1200px"
        assert style["collapse"] == "collapse" and style["th"] == "rgb(246, 248, 250)"
        assert style["num"] == "right" and style["border"] == "solid"
        assert style["figures"] == "flex" and style["bullet"] == "none"
        assert style["overflow"] <= 0  # the page never scrolls sideways at 1280 px
        assert 0 < style["chart"] <= style["body"]
        for cycle, counts in seen.items():
            page.goto((reports / cycle / "index.html").as_uri())
            part = fetches.filter(pl.col("crawl_cycle") == cycle)
            # every gap kept, judged independently from the lake: the report raises no alarm
            for (_origin,), g in part.sort("started_at").group_by("origin"):
                starts = [t.timestamp() for t in g["started_at"]]
                assert all(b - a >= GAP_S - 1e-3 for a, b in itertools.pairwise(starts))
            assert page.locator("svg.rates g.origin").count() == len(counts)
            assert page.locator("svg.rates circle").count() == 0
            figure = page.locator(".figures li", has_text="hosts over their limit")
            assert figure.locator("b").inner_text() == "0"
            hosts = page.locator("#hosts + .wide table tr")
            assert hosts.count() == 1 + len(counts)
            shown = {hosts.nth(i).locator("td").nth(0).inner_text():
                     int(hosts.nth(i).locator("td").nth(1).inner_text())
                     for i in range(1, hosts.count())}  # fmt: skip
            assert shown == dict(counts)  # requests per host as the sandbox's own log saw them
            seeds = page.locator("#seeds + .wide table tr")
            assert seeds.count() == 1 + len(sandbox.web.seed_urls())
            page.screenshot(path=str(tmp_path / f"{cycle}.png"), full_page=True)
        assert (tmp_path / "c0001.png").stat().st_size > 10_000
