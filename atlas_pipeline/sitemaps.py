"""Sitemaps (sitemaps.org protocol 0.9): an index of sitemaps, or a set of URLs with optional
<lastmod> and <priority>, plain or gzip-compressed. Read with the standard library's expat
(entity-expansion protection included), bounded in bytes and entries."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from datetime import UTC, datetime

from .fetcher import Inflater

MAX_ENTRIES = 50_000  # the protocol's limit per file


@dataclass(frozen=True, slots=True)
class SitemapEntry:
    loc: str
    lastmod: float | None  # epoch seconds
    priority: float | None  # 0.0-1.0, as the site rates its own pages


@dataclass(frozen=True, slots=True)
class Sitemap:
    is_index: bool  # entries are sitemaps, not pages
    entries: list[SitemapEntry]


class SitemapError(ValueError):
    """Not a sitemap we can read; the message says why."""


def parse_sitemap(body: bytes, max_bytes: int) -> Sitemap:
    if body[:2] == b"\x1f\x8b":
        try:
            body = Inflater("gzip")(body, max_bytes + 1)
        except Exception as exc:  # zlib.error: a corrupt .gz
            raise SitemapError(f"corrupt gzip: {exc}") from None
        if len(body) > max_bytes:
            raise SitemapError(f"more than {max_bytes} bytes uncompressed")
    try:
        root = ET.fromstring(body)
    except ET.ParseError as exc:
        raise SitemapError(f"not XML: {exc}") from None
    tag = _local(root.tag)
    if tag not in ("urlset", "sitemapindex"):
        raise SitemapError(f"root element <{tag}> is neither <urlset> nor <sitemapindex>")
    item = "sitemap" if tag == "sitemapindex" else "url"
    entries = []
    for node in root:
        if _local(node.tag) != item:
            continue
        fields = {_local(child.tag): (child.text or "").strip() for child in node}
        if fields.get("loc"):
            entries.append(
                SitemapEntry(
                    fields["loc"], _when(fields.get("lastmod")), _rate(fields.get("priority"))
                )
            )
        if len(entries) >= MAX_ENTRIES:
            break
    return Sitemap(tag == "sitemapindex", entries)


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _when(text: str | None) -> float | None:
    """W3C datetime (YYYY, YYYY-MM-DD, or with a time and zone) as epoch seconds."""
    if not text:
        return None
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()


def _rate(text: str | None) -> float | None:
    try:
        value = float(text) if text else None
    except ValueError:
        return None
    return None if value is None or not 0.0 <= value <= 1.0 else value
