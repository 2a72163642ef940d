"""benchmarks/crawl_throughput.py's rounds (issue 16 quotes its medians): contenders take
turns running first, each number of the table is the median of its rounds, and an Atlas
round's data is deleted only after the last round. The keeper (``--keeper``) keeps each
page's body, links and text, and takes its turn in the rotation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import load_benchmark


def _row(cpu_ms: float, pages_per_s: float, pages: int, threads: str) -> dict[str, Any]:
    return {"contender": "atlas", "cpu_s_per_page": cpu_ms / 1000, "pages_per_s": pages_per_s,
            "pages": pages, "profiled": False, "thread_cpu_s": {threads: 1.0}}  # fmt: skip


def test_contenders_take_turns_running_first() -> None:
    bench = load_benchmark("crawl_throughput")
    assert [bench.round_order(i) for i in range(3)] == [
        ("atlas", "baseline"), ("baseline", "atlas"), ("atlas", "baseline")]  # fmt: skip


def test_with_the_keeper_the_three_take_turns_in_a_rotation() -> None:
    bench = load_benchmark("crawl_throughput")
    assert [bench.round_order(i, keeper=True) for i in range(4)] == [
        ("atlas", "baseline", "keeper"), ("baseline", "keeper", "atlas"),
        ("keeper", "atlas", "baseline"), ("atlas", "baseline", "keeper")]  # fmt: skip
    assert bench.parse_args(["--keeper"]).keeper and not bench.parse_args([]).keeper


def test_atlas_is_paired_with_each_contender_round_by_round() -> None:
    bench = load_benchmark("crawl_throughput")

    def rd(pps: float, cpu_ms: float) -> dict[str, Any]:
        return {"seconds": 1.0, "pages_per_s": pps, "cpu_s_per_page": cpu_ms / 1000,
                "rss_mib": 1.0, "other_cpu_s": 0.0}  # fmt: skip

    atlas = [rd(80.0, 12.0), rd(90.0, 11.0)]
    keeper = [rd(100.0, 10.0), rd(90.0, 11.0)]
    out = bench.versus(atlas, keeper, "keeper")
    assert [r["keeper"]["pages_per_s"] for r in out["rounds"]] == [100.0, 90.0]
    assert [round(r["cpu_s_per_page_ratio"], 6) for r in out["rounds"]] == [1.2, 1.0]
    assert out["paired_ratios"] == {"pages_per_s_ratio": (0.8 + 1.0) / 2,
                                    "cpu_s_per_page_ratio": (1.2 + 1.0) / 2}  # fmt: skip


def test_the_keeper_keeps_the_body_its_links_and_its_text(tmp_path: Path) -> None:
    import hashlib

    import polars as pl

    from atlas_pipeline.body_codec import BODY_SUFFIX, unpack

    bench = load_benchmark("crawl_throughput")
    bench._warm_keeper()
    para = "<p>Grain, tolls and the harbour council met on the quay at dawn.</p>" * 20
    body = (f"<html><head><title>Harbour</title></head><body><article>{para}"
            "<a href='/b'>b</a> <a href='c?x=1'>c</a></article></body></html>").encode()  # fmt: skip
    url = "http://keep.example.test/a/"
    title, text, links = bench._extract_kept(body, url, str(tmp_path))
    assert (title, text) == bench._extract(body, url) and "harbour council" in text
    assert links == ["http://keep.example.test/b", "http://keep.example.test/a/c?x=1"]
    key = hashlib.sha256(body).hexdigest()
    stored = tmp_path / key[:2] / key[2:4] / f"{key}.zst"
    assert unpack(stored.read_bytes(), BODY_SUFFIX) == body
    tables = bench._KeptTables(tmp_path)
    tables.CHUNK = 2  # three chunks: memory holds a chunk, not the crawl
    # the first chunk has no links and no title: the columns keep their string type
    for i in range(2):
        tables.add(f"{url}{i}", None, text, [])
    for i in range(2, 5):
        tables.add(f"{url}{i}", title, text, links)
    tables.close()
    texts = pl.read_parquet(tmp_path / "texts.parquet")
    assert texts["url"].to_list() == [f"{url}{i}" for i in range(5)]
    assert texts["title"].to_list() == [None, None] + [title] * 3
    assert texts["text"].to_list() == [text] * 5
    kept_links = pl.read_parquet(tmp_path / "links.parquet")
    assert kept_links.height == 6 and kept_links.schema["target"] == pl.String


def test_each_number_is_the_median_of_its_rounds() -> None:
    bench = load_benchmark("crawl_throughput")
    rows = [_row(12.5, 150.0, 9898, "a"), _row(19.0, 90.0, 9897, "b"), _row(12.1, 155.0, 9899, "c")]
    out = bench.median_row(rows)
    assert out["cpu_s_per_page"] == 12.5 / 1000 and out["pages_per_s"] == 150.0
    assert out["pages"] == 9898 and isinstance(out["pages"], int)
    assert out["profiled"] is False and out["rounds"] == 3
    # what is not a number comes from the round whose CPU per page is the median one
    assert out["thread_cpu_s"] == {"a": 1.0}
    two = bench.median_row(rows[:2])
    assert two["cpu_s_per_page"] == (12.5 + 19.0) / 2000 and two["pages"] == 9897
    assert bench.median_row(rows[:1]) == {**rows[0], "rounds": 1}


def test_the_paired_ratio_is_the_median_of_each_rounds_own_ratio() -> None:
    # the run of 2026-12-06: the medians' ratio (16.00 / 14.61 ms = 1.09x) paired Atlas's
    # third round with the baseline's second; the rounds themselves said 1.24, 1.23, 1.09
    bench = load_benchmark("crawl_throughput")
    rounds = [{"pages_per_s_ratio": p, "cpu_s_per_page_ratio": c}
              for p, c in ((0.80, 1.24), (0.80, 1.23), (0.90, 1.09))]  # fmt: skip
    assert bench.paired_ratios(rounds) == {"pages_per_s_ratio": 0.80, "cpu_s_per_page_ratio": 1.23}
    assert bench.paired_ratios(rounds[:2])["cpu_s_per_page_ratio"] == (1.24 + 1.23) / 2


def test_a_default_run_is_three_rounds_and_a_smoke_run_one() -> None:
    # one round is at the mercy of the VM: the same code gave 1.64x and then 1.00-1.31x
    bench = load_benchmark("crawl_throughput")
    assert bench.parse_args([]).repeat == 3
    assert bench.parse_args(["--quick"]).repeat == 1
    assert bench.parse_args(["--repeat", "1"]).repeat == 1
    assert bench.parse_args(["--quick", "--repeat", "5"]).repeat == 5
    assert bench.parse_args(["--run", "atlas"]).repeat == 1  # a contender's own process


def test_repeat_below_one_is_refused_naming_the_flag(capsys: Any) -> None:
    bench = load_benchmark("crawl_throughput")
    try:
        bench.parse_args(["--repeat", "0"])
    except SystemExit as exc:
        assert exc.code == 2
    else:
        raise AssertionError("--repeat 0 was accepted")
    assert "--repeat must be at least 1" in capsys.readouterr().err


def test_atlas_rounds_keep_their_data_until_the_parent_deletes_it(tmp_path: Path) -> None:
    # deleting ~20,000 files slows the file creates of the next half minute (ext4 without a
    # journal passes over recently freed inodes): a round must not leave that to the next
    bench = load_benchmark("crawl_throughput")
    urls = tmp_path / "urls.json"
    args = bench.parse_args(["--urls-file", str(urls)])
    with bench._data_dir(args) as first, bench._data_dir(args) as second:
        (first / "body").write_bytes(b"x")
    assert first != second and first.parent == second.parent == tmp_path
    assert (first / "body").read_bytes() == b"x" and second.is_dir()  # still there
    with bench._data_dir(bench.parse_args([])) as alone:  # run on its own: cleaned up
        (alone / "body").write_bytes(b"x")
    assert not alone.exists()


def test_the_lake_tail_is_split_by_step_and_the_frontier_write_is_not_in_it(
    tmp_path: Path, monkeypatch: Any
) -> None:
    import polars as pl
    from aiohttp import web

    from atlas_pipeline import crawl
    from atlas_pipeline.config import config_from_mapping
    from atlas_pipeline.coordination.operator import OperatorStore
    from atlas_pipeline.lake import Lake
    from tests.conftest import serving_app

    bench = load_benchmark("crawl_throughput")
    # _time_lake_write wraps these for the rest of its (benchmark) process: undone after
    for owner, name in (
        (Lake, "add_texts"),
        (Lake, "write_partition"),
        (OperatorStore, "partition_written"),
        (crawl, "write_fetch_partitions"),
    ):
        monkeypatch.setattr(owner, name, getattr(owner, name))  # fmt: skip
    page = "<html><body><article>" + "<p>Grain, tolls and the harbour council.</p>" * 30
    app = web.Application()

    async def handle(request: web.Request) -> web.Response:
        if request.path == "/robots.txt":
            return web.Response(text="User-agent: *\nAllow: /\n")
        return web.Response(text=f"{page}<a href='/b'>b</a></article></body></html>",
                            content_type="text/html")  # fmt: skip

    app.router.add_get("/{p:.*}", handle)
    spent, steps = bench._time_lake_write()
    with serving_app(app) as port:
        cfg = config_from_mapping(
            {"seeds": [f"http://steps.example.test:{port}/a"], "data_dir": str(tmp_path),
             "shards": 1, "politeness": {"min_gap_s": 0.0},
             "resolve": {"steps.example.test": "127.0.0.1"}, "resolve_only": True},
            base_dir=tmp_path,
        )  # fmt: skip
        engine = crawl.Engine.from_config(cfg)
        crawl.plan_frontier(engine, "c0001", 0)  # writes the frontier: not the tail
        result = crawl.fetch_shard(engine, "c0001", 0)
        engine.close()
    assert pl.read_delta(result.documents.uri).height == 2
    assert list(steps) == ["document_texts", "fetches", "documents", "links", "index_ready",
                           "records out of the store"]  # fmt: skip
    assert all(wall > 0 for wall in steps.values())
    assert spent[0] >= sum(steps.values())


def test_the_report_says_which_target_is_met_and_what_atlas_spends_beyond_the_allowance() -> None:
    bench = load_benchmark("crawl_throughput")

    def rd(pps: float, cpu_ms: float) -> dict[str, Any]:
        return {"seconds": 1.0, "pages_per_s": pps, "cpu_s_per_page": cpu_ms / 1000,
                "rss_mib": 1.0, "other_cpu_s": 0.0}  # fmt: skip

    # the rounds of 2026-12-07 16:07: Atlas 12.40/13.05/13.75 ms a page, the loop 9.30/9.66/12.41
    atlas = [rd(153.1, 12.40), rd(145.9, 13.05), rd(138.0, 13.75)]
    loop = [rd(201.3, 9.30), rd(192.5, 9.66), rd(150.2, 12.41)]
    out = bench.versus(atlas, loop, "baseline")
    assert [round(r["extra_cpu_ms_per_page"], 2) for r in out["rounds"]] == [3.10, 3.39, 1.34]
    allowed = [r["allowed_cpu_ms_per_page"] for r in out["rounds"]]
    assert allowed == pytest.approx([1.395, 1.449, 1.8615])
    assert round(out["extra_cpu_ms"]["extra"], 2) == 3.10
    assert round(out["extra_cpu_ms"]["allowed"], 2) == 1.45
    lines = bench.target_lines(out, "baseline")
    assert lines[0] == ("  targets against the baseline (paired): pages/s 0.76x, at least 0.90x: "
                        "missed; CPU s/page 1.33x, at most 1.15x: missed")  # fmt: skip
    assert lines[1] == ("  Atlas's CPU a page beyond the baseline's: 3.10 ms; 1.15x allows "
                        "1.45 ms (medians of 3 rounds)")  # fmt: skip
    # at the thresholds exactly, both are met; a hair past one, it is missed
    met = bench.versus([rd(90.0, 11.5)], [rd(100.0, 10.0)], "keeper")
    assert bench.target_lines(met, "keeper")[0].count(": met") == 2
    # judged as printed: 1.154x reads 1.15x, and the line does not call that a miss
    near = bench.target_lines(bench.versus([rd(90.0, 11.54)], [rd(100.0, 10.0)], "keeper"), "k")
    assert near[0].endswith("CPU s/page 1.15x, at most 1.15x: met")
    assert near[1].endswith("1.15x allows 1.50 ms (one round)")
    past = bench.target_lines(bench.versus([rd(89.0, 11.6)], [rd(100.0, 10.0)], "keeper"), "keeper")
    assert past[0].endswith(
        "0.89x, at least 0.90x: missed; CPU s/page 1.16x, at most 1.15x: missed"
    )
