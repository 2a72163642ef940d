"""Crawler traps (seed 001 ch. 15): the shapes of URL spaces that never end, and the keys the
scope guard and the coordination store count them by.

Stateless checks (pagination depth, repeating path segments, session ids) need only the URL.
Stateful caps count distinct URLs per key in the store's URL catalogue, so every shard and
run shares one count: distinct worded query strings of one path and key set (faceted
filters, search terms), distinct worded query strings of one path whatever their keys
(filters added and removed in any order make every subset and order of keys a new key set),
and distinct URLs of one digit pattern, with a much lower cap when the digits look like dates
(calendars). Which cap (if any) refuses a new URL is `trap_cut`, a pure function of its keys
and its origin's counters; the store reads the counters, calls it and counts the URLs it
takes.

The novelty rule (`judge_novelty`) stops a path's variants once the last K of them fetched
brought nothing new: no new URL that is not itself a variant, no document text not already
held. It is a pure function of the path's stored state and one fetch; the store keeps the
state, calls it at commit time and writes its decision; `variant_room` keeps the claims of a
path's variants from running ahead of it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import unquote, urlsplit

from .reasons import Reason

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
    # the path alone, under the same condition: every key set of one path counts together
    path_key: str | None = None


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
        path_key=parts.path if worded else None,
    )


# ---------------------------------------------------------------- the trap caps
TRAP_KINDS = ("pattern", "query", "path")  # the store's counters: one per kind a URL has a key of
STOPPED = "stopped"  # counts[(STOPPED, path)] > 0: the novelty rule stopped the path's variants


def trap_key(keys: TrapKeys, kind: str) -> str | None:
    """The key a URL is counted under for counter `kind` (None: not counted there)."""
    if kind == "pattern":
        return keys.pattern
    return keys.query_key if kind == "query" else keys.path_key


def counted_keys(keys: TrapKeys) -> list[tuple[str, str]]:
    """The (kind, key) counters a URL is counted under, in the order the caps are judged."""
    return [(kind, key) for kind in TRAP_KINDS if (key := trap_key(keys, kind)) is not None]


class Caps(Protocol):
    """Distinct URLs the catalogue takes per trap key of an origin (the store's TrapCaps)."""

    @property
    def query_variants(self) -> int: ...
    @property
    def pattern_urls(self) -> int: ...
    @property
    def calendar_urls(self) -> int: ...
    @property
    def path_variants(self) -> int: ...


def trap_cut(keys: TrapKeys, counts: Mapping[tuple[str, str], int], caps: Caps) -> str | None:
    """The reason a new URL with `keys` is refused, or None when the catalogue takes it.

    `counts` holds, for the URL's origin, the URLs already in the catalogue per (kind, key)
    (missing: none) and (STOPPED, path) > 0 when the novelty rule stopped the path. The
    first reason that holds wins: the path is stopped (trap_no_novelty); its digit pattern
    is full (calendar_cap for dated digits, whose cap is lower, else path_pattern_cap); its
    path and key set has its worded query strings (query_variant_cap); its path has them,
    all key sets together (path_variant_cap). A cap of N takes N URLs: at N the next goes."""
    if keys.path_key is not None and counts.get((STOPPED, keys.path_key), 0) > 0:
        return Reason.TRAP_NO_NOVELTY.value
    caps_of = {
        "pattern": (caps.calendar_urls, Reason.CALENDAR_CAP) if keys.dated
        else (caps.pattern_urls, Reason.PATTERN_CAP),
        "query": (caps.query_variants, Reason.QUERY_VARIANT_CAP),
        "path": (caps.path_variants, Reason.PATH_VARIANT_CAP),
    }  # fmt: skip
    for kind, key in counted_keys(keys):
        cap, reason = caps_of[kind]
        if counts.get((kind, key), 0) >= cap:
            return reason.value
    return None


@dataclass(frozen=True, slots=True)
class Novelty:
    """The novelty rule's state of one (origin, path), as the store keeps it."""

    fetched: int = 0  # variants of the path fetched (and committed)
    barren: int = 0  # of the latest of them, how many in a row brought nothing new
    stopped: bool = False  # new variants of the path are refused (trap_no_novelty)


@dataclass(frozen=True, slots=True)
class VariantFetch:
    """What one committed fetch of a variant brought."""

    new_urls: int  # URLs its links added to the catalogue that are not variants themselves
    new_content: bool  # it gave a document whose text no other URL held


def judge_novelty(state: Novelty, event: VariantFetch, window: int) -> Novelty:
    """The path's state after `event`: stopped while the last `window` fetched variants
    brought no new non-variant URL and no new document text; anything new starts the count
    again (and lifts a stop: the path is worth its variants again)."""
    barren = 0 if event.new_urls > 0 or event.new_content else state.barren + 1
    return Novelty(state.fetched + 1, barren, barren >= max(window, 1))


def query_key_path(query_key: str) -> str:
    """The path key of a URL whose query key (`TrapKeys.query_key`, "path?keys") is given: the
    store keeps the query key, and a path never holds a '?'."""
    return query_key.partition("?")[0]


def variant_room(state: Novelty, uncommitted: int, window: int) -> int:
    """How many more variants of a path a claim may lease now: as many as could still come
    back barren before the rule stops the path, less those leased whose results are not yet
    committed (their verdict is not in). Claims and commits are grouped for throughput, so
    without this a path's variants run ahead of the rule: every one claimed before the
    commits that record the last ones' lack of novelty land is fetched anyway. With nothing
    of the path uncommitted one variant may always go, so a stopped path's variants kept
    from an earlier cycle are still refetched, one at a time, and a cycle always drains."""
    room = max(window, 1) - state.barren - uncommitted
    return max(room, 1 if uncommitted == 0 else 0)


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


_TOKEN = re.compile(r"[A-Za-z0-9_\-+/=.]{16,}")  # hex, base64, base64url, Tomcat's ".node1"
_TOKEN_MIN_DISTINCT = 6
# the path parameters of servlet containers, PHP and friends: /cart;jsessionid=0A1B...
_PATH_SESSION = re.compile(r";(?:jsessionid|phpsessid|sid|sessionid)=([^/;?#]*)", re.I)


def looks_like_session_token(value: str) -> bool:
    """Whether a session parameter's value looks like a session token rather than a word or a
    number. The rule: at least 16 characters once percent-escapes are decoded, every one of
    them from [A-Za-z0-9_-+/=.], at least 6 of them distinct, and both a digit and a letter
    among them. A 16-hex `sid` or a 32-hex PHPSESSID is a token; `shoes`, `12`, the empty
    value, `averyveryverylongword` (no digit), a 20-digit number (no letter: an id) and
    `aaaaaaaa11111111` (2 distinct characters) are not. A key alone is no proof."""
    text = unquote(value)
    return (
        _TOKEN.fullmatch(text) is not None
        and len(set(text)) >= _TOKEN_MIN_DISTINCT
        and any(c.isdigit() for c in text)
        and any(c.isalpha() for c in text)
    )


def strip_session_ids(url: str, params: frozenset[str]) -> str:
    """`url` (canonical) without its session ids: a session id names a visitor, not a page, and
    gives every view of a page a new URL. A query parameter goes when its key is in `params`
    (lower case) and its value `looks_like_session_token`; a ;jsessionid= (;phpsessid=, ;sid=,
    ;sessionid=) path parameter when its value does. Everything else stays as written: empty
    pieces, an empty query's '?'; a query emptied by the stripping loses its '?'."""

    def path_param(m: re.Match[str]) -> str:
        return "" if looks_like_session_token(m.group(1)) else m.group()

    def is_session(piece: str) -> bool:
        key, eq, value = piece.partition("=")
        return bool(eq) and key.lower() in params and looks_like_session_token(value)

    rest, hashmark, fragment = url.partition("#")
    head, mark, query = rest.partition("?")
    at = head.find("/", head.find("//") + 2) if "//" in head else -1  # where the path starts
    path = head[at:] if at >= 0 else ""
    new_path = _PATH_SESSION.sub(path_param, path) if ";" in path else path
    pieces = query.split("&")
    kept = [p for p in pieces if not is_session(p)]
    if new_path == path and len(kept) == len(pieces):
        return url
    tail = mark + query
    if len(kept) < len(pieces):
        joined = "&".join(kept)
        tail = f"?{joined}" if joined else ""
    return head[: len(head) - len(path)] + new_path + tail + hashmark + fragment
