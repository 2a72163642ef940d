"""Trap keys and the stateless trap checks (traps.py), and the scope guard applying them."""

from __future__ import annotations

from pathlib import Path

import pytest

from atlas_pipeline.config import config_from_mapping
from atlas_pipeline.scope import ScopeGuard
from atlas_pipeline.traps import page_number, repeats_segments, strip_session_ids, trap_keys

PAGES = frozenset({"page", "p", "offset"})


@pytest.mark.parametrize(
    ("url", "pattern", "dated", "query_key"),
    [
        ("http://a.test/calendar/2026/11", "/calendar/9/9", True, None),
        ("http://a.test/calendar/2026/11/29", "/calendar/9/9/9", True, None),
        ("http://a.test/events?month=2026-11&view=day", "/events?month=9-9&view=day", True,
         "/events?month,view"),
        ("http://a.test/d/20261129", "/d/9", True, None),
        ("http://a.test/2026/11/29/my-post", "/9/9/9/my-post", True, None),  # one URL a pattern
        ("http://a.test/news/2026/11/29/123", "/news/9/9/9/9", False, None),  # an id: not a date
        ("http://a.test/item?id=123", "/item?id=9", False, None),  # numbered: pattern cap
        ("http://a.test/shop?color=red&size=m", "/shop?color=red&size=m", False,
         "/shop?color,size"),
        ("http://a.test/search?q=atlas", "/search?q=atlas", False, "/search?q"),
        ("http://a.test/x/2026", "/x/9", False, None),  # a year alone is no date
    ],
)  # fmt: skip
def test_trap_keys(url: str, pattern: str, dated: bool, query_key: str | None) -> None:
    keys = trap_keys(url)
    assert (keys.pattern, keys.dated, keys.query_key) == (pattern, dated, query_key)


@pytest.mark.parametrize(
    ("url", "page"),
    [
        ("http://a.test/list?page=7", 7),
        ("http://a.test/list?sort=new&p=120", 120),
        ("http://a.test/blog/page/3/", 3),
        ("http://a.test/blog/page/3", 3),
        ("http://a.test/list?page=last", None),
        ("http://a.test/pages/3", None),
        ("http://a.test/list", None),
    ],
)
def test_page_numbers(url: str, page: int | None) -> None:
    assert page_number(url, PAGES) == page


@pytest.mark.parametrize(
    ("path", "repeats"),
    [
        ("/a/a/", False),
        ("/a/a/a/", True),
        ("/x/a/b/a/b/a/b/", True),
        ("/x/a/b/c/a/b/c/a/b/c/", True),
        ("/2026/11/11/", False),
        ("/docs/api/v1/api/v1/", False),
        ("/", False),
    ],
)
def test_repeating_segments(path: str, repeats: bool) -> None:
    assert repeats_segments(path, 2) is repeats


@pytest.mark.parametrize(
    ("url", "stripped"),
    [
        ("http://a.test/x?sid=abc&q=1", "http://a.test/x?q=1"),
        ("http://a.test/x;jsessionid=0AF3?q=1", "http://a.test/x?q=1"),
        ("http://a.test/x?PHPSESSID=1", "http://a.test/x"),
        ("http://a.test/x?q=1", "http://a.test/x?q=1"),
        ("http://a.test/x?sidebar=1", "http://a.test/x?sidebar=1"),
    ],
)
def test_session_ids_are_stripped(url: str, stripped: str) -> None:
    assert strip_session_ids(url, frozenset({"sid", "phpsessid"})) == stripped


def guard(tmp_path: Path, **scope: object) -> ScopeGuard:
    raw = {"seeds": ["http://a.example.test/"], "data_dir": str(tmp_path), "scope": scope}
    cfg = config_from_mapping(raw, base_dir=tmp_path)
    return ScopeGuard(cfg)


def test_the_guard_cuts_deep_pagination_and_repeating_paths(tmp_path: Path) -> None:
    g = guard(tmp_path, max_page_number=10)
    base = "http://a.example.test/list"
    assert g.judge("?page=10", base, 1, base).reason == "admitted"
    assert g.judge("?page=11", base, 1, base).reason == "pagination_cap"
    assert g.judge("/a/a/a/", base, 1, base).reason == "repeating_path"


def test_the_guard_drops_session_ids_and_allows_registrable_domains(tmp_path: Path) -> None:
    g = guard(tmp_path, allowed_domains=["example.test"])
    base = "http://a.example.test/"
    judged = g.judge("/x?sid=42&q=1", base, 1, base)
    assert judged.url == "http://a.example.test/x?q=1" and judged.reason == "admitted"
    assert judged.candidate is not None and judged.candidate.discovered_url == "/x?sid=42&q=1"
    assert g.judge("http://other.example.test/", base, 1, base).reason == "admitted"
    assert g.judge("http://example.org/", base, 1, base).reason == "host_not_allowed"


def test_a_canonical_hint_is_recorded_and_raises_priority_without_merging(tmp_path: Path) -> None:
    g = guard(tmp_path)
    page = "http://a.example.test/story?ref=home"
    rows = g.page_links([("/other", "", False)], page, page, 3, None, "/story")
    (canon, canon_cand), (link, link_cand) = rows
    assert canon["kind"] == "canonical" and canon["url"] == "http://a.example.test/story"
    assert canon_cand is not None and canon_cand.priority == 0.95  # a depth-4 link gets 0.6
    assert link["kind"] == "link" and link_cand is not None and link_cand.priority < 0.95
    itself = g.page_links([], page, page, 3, None, page)
    assert itself == []  # naming itself tells nothing
