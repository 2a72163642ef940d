"""Crawler traps (seed 001 ch. 15): the shapes of URL spaces that never end, and the keys the
scope guard and the coordination store count them by.

Stateless checks (pagination depth, repeating path segments, session ids) need only the URL.
Stateful caps count distinct URLs per key in the store's URL catalogue, so every shard and
run shares one count: distinct worded query strings of one path and key set (faceted
filters, search terms), and distinct URLs of one digit pattern, with a much lower cap when
the digits look like dates (calendars).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

_DIGITS = re.compile(r"\d+")
# /2026/11, /2026/11/29, 2026-11, 2026-11-29, 20261129: years 1900-2199 with a month after
_DATE = re.compile(
    r"(?:19|20|21)\d\d(?:[/_-](?:1[0-2]|0?[1-9])(?:[/_-](?:3[01]|[12]\d|0?[1-9]))?"
    r"|(?:1[0-2]|0[1-9])(?:3[01]|[12]\d|0[1-9])?)(?!\d)"
)
_PAGE_PATH = re.compile(r"/(?:page|p|seite|pagina)/(\d+)(?:/|$)", re.I)


@dataclass(frozen=True, slots=True)
class TrapKeys:
    """The keys a URL is counted under in the store."""

    pattern: str  # path and query with every digit run replaced by '9'
    dated: bool  # its digits look like a date (calendar pages)
    # path and query key set when some query value is not a number (filter combinations,
    # search terms); numbered queries such as ?id=123 are counted by `pattern` instead
    query_key: str | None


def trap_keys(url: str) -> TrapKeys:
    parts = urlsplit(url)
    pairs = [p.partition("=") for p in parts.query.split("&") if p]
    worded = any(v and not v.isdigit() for _, _, v in pairs)
    keys = ",".join(sorted({k for k, _, _ in pairs}))
    shape = parts.path + ("?" + parts.query if parts.query else "")
    # a date is all the digits there are: a calendar page, not an article with an id
    undated = _DATE.sub("", shape)
    return TrapKeys(
        pattern=_DIGITS.sub("9", shape),
        dated=undated != shape and not _DIGITS.search(undated),
        query_key=f"{parts.path}?{keys}" if worded else None,
    )


def page_number(url: str, page_keys: frozenset[str]) -> int | None:
    """The page number a pagination link asks for (?page=N or /page/N), if any."""
    parts = urlsplit(url)
    for pair in parts.query.split("&"):
        key, _, value = pair.partition("=")
        if key.lower() in page_keys and value.isdigit():
            return int(value)
    m = _PAGE_PATH.search(parts.path)
    return int(m.group(1)) if m else None


def repeats_segments(path: str, max_repeats: int) -> bool:
    """True when a run of 1-3 path segments repeats more than `max_repeats` times in a row
    (/a/a/a/, /a/b/a/b/a/b/): relative links feeding on themselves."""
    segs = [s for s in path.split("/") if s]
    for width in (1, 2, 3):
        for start in range(len(segs) - width):
            unit, run = segs[start : start + width], 1
            at = start + width
            while segs[at : at + width] == unit:
                run += 1
                at += width
            if run > max_repeats:
                return True
    return False


def strip_session_ids(url: str, params: frozenset[str]) -> str:
    """`url` without session-id query parameters and ;jsessionid=-style path parameters: a
    session id names a visitor, not a page, and gives every view of a page a new URL."""
    parts = urlsplit(url)
    path = re.sub(r";(?:jsessionid|phpsessid|sid|sessionid)=[^/?#]*", "", parts.path, flags=re.I)
    kept = [p for p in parts.query.split("&") if p and p.split("=", 1)[0].lower() not in params]
    query = "&".join(kept)
    if path == parts.path and query == parts.query:
        return url
    return f"{parts.scheme}://{parts.netloc}{path}" + (f"?{query}" if query else "")
