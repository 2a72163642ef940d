"""Sitemap reading: urlsets and indexes, gzip, lastmod and priority, bounds and bad input."""

from __future__ import annotations

import gzip
from datetime import UTC, datetime

import pytest

from atlas_pipeline.scope import parent_paths, priority_from_hints
from atlas_pipeline.sitemaps import SitemapError, parse_sitemap

URLSET = b"""<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
  <url><loc>https://a.test/one</loc><lastmod>2026-11-28</lastmod><priority>0.8</priority></url>
  <url><loc> https://a.test/two </loc><lastmod>2026-11-28T10:00:00Z</lastmod></url>
  <url><loc>https://a.test/three</loc><priority>7</priority></url>
  <url><lastmod>2026-11-28</lastmod></url>
</urlset>"""
INDEX = b"""<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
  <sitemap><loc>https://a.test/s1.xml</loc></sitemap>
  <sitemap><loc>https://a.test/s2.xml.gz</loc><lastmod>2026-01-01</lastmod></sitemap>
</sitemapindex>"""


def test_a_urlset_gives_its_entries_with_hints() -> None:
    sm = parse_sitemap(URLSET, 10_000)
    assert not sm.is_index
    assert [e.loc for e in sm.entries] == ["https://a.test/one", "https://a.test/two",
                                          "https://a.test/three"]  # fmt: skip
    one, two, three = sm.entries
    assert one.priority == 0.8 and one.lastmod == datetime(2026, 11, 28, tzinfo=UTC).timestamp()
    assert two.lastmod == datetime(2026, 11, 28, 10, tzinfo=UTC).timestamp()
    assert three.priority is None  # out of range: ignored, not trusted


def test_an_index_and_gzip() -> None:
    sm = parse_sitemap(gzip.compress(INDEX), 10_000)
    assert sm.is_index and [e.loc for e in sm.entries] == ["https://a.test/s1.xml",
                                                          "https://a.test/s2.xml.gz"]  # fmt: skip


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (b"<html><body>not a sitemap</body></html>", "neither"),
        (b"<urlset><url>", "not XML"),
        (b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff\xff", "corrupt gzip"),
        (gzip.compress(URLSET * 1), None),
    ],
)
def test_bad_sitemaps_say_why(body: bytes, problem: str | None) -> None:
    if problem is None:
        assert len(parse_sitemap(body, 10_000).entries) == 3
        with pytest.raises(SitemapError, match="uncompressed"):
            parse_sitemap(body, 100)
        return
    with pytest.raises(SitemapError, match=problem):
        parse_sitemap(body, 10_000)


def test_an_entity_bomb_is_refused() -> None:
    bomb = b"""<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY a "aaaaaaaaaa">
    <!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;"><!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">
    <!ENTITY d "&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;"><!ENTITY e "&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;">
    <!ENTITY f "&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;"><!ENTITY g "&f;&f;&f;&f;&f;&f;&f;&f;&f;&f;">
    <!ENTITY h "&g;&g;&g;&g;&g;&g;&g;&g;&g;&g;"><!ENTITY i "&h;&h;&h;&h;&h;&h;&h;&h;&h;&h;">]>
    <urlset><url><loc>&i;</loc></url></urlset>"""
    with pytest.raises(SitemapError):
        parse_sitemap(bomb, 10_000)


def test_sitemap_hints_raise_priority_and_parents_ascend() -> None:
    now = datetime(2026, 11, 30, tzinfo=UTC).timestamp()
    plain = priority_from_hints(1, None, None, now)
    assert priority_from_hints(1, 1.0, None, now) > plain > priority_from_hints(1, 0.0, None, now)
    assert priority_from_hints(1, None, now - 86_400, now) == pytest.approx(plain + 0.1)
    assert parent_paths("https://a.test/a/b/c") == ["https://a.test/a/b/", "https://a.test/a/"]
    assert parent_paths("https://a.test/a/") == []
