"""Page-level robots directives: `<meta name="robots">`, a meta tag naming our product token,
and the `X-Robots-Tag` header, read into two decisions (noindex, nofollow).

Pure: no I/O, no parsing of HTML (the parser hands over the meta tags it found). Rules, as
Google, Nutch and StormCrawler read them:

- meta names are case-insensitive; `robots` speaks to every crawler, `<token>` (e.g. AtlasBot)
  to us, any other name to someone else;
- an `X-Robots-Tag` value is a comma list; `name: directive` names a crawler, and the rest of
  that header value (up to another prefix) is for it alone; a value without one is for all;
  several headers add up;
- `none` is `noindex, nofollow`; `all`, `index`, `follow` and unknown directives change
  nothing; valued ones (`unavailable_after: <date>`, `max-snippet: 20`) are ignored;
- directives only ever restrict: the union of everything addressed to us applies.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

# Directives that carry a value after a colon: never a crawler name.
_VALUED = frozenset({"unavailable_after", "max-snippet", "max-image-preview", "max-video-preview"})
_PREFIX = re.compile(r"^\s*([A-Za-z0-9_.\-]+)\s*:\s*(.*)$", re.S)
_WORDS = re.compile(r"[\s,;]+")
HEADER = "x-robots-tag"
HEADER_SEP = "\n"  # several X-Robots-Tag headers, kept apart in one string (no value holds one)


@dataclass(frozen=True, slots=True)
class Directives:
    """What a page asks of us: keep it out of the index; do not follow its links."""

    noindex: bool = False
    nofollow: bool = False

    def __or__(self, other: Directives) -> Directives:
        return Directives(self.noindex or other.noindex, self.nofollow or other.nofollow)


NONE = Directives()


def _words(text: str) -> Directives:
    """A directive list (commas or spaces) addressed to us."""
    noindex = nofollow = False
    for word in _WORDS.split(text.strip().lower()):
        if word in ("noindex", "none"):
            noindex = True
        if word in ("nofollow", "none"):
            nofollow = True
    return Directives(noindex, nofollow)


def header_directives(values: Iterable[str], token: str) -> Directives:
    """The X-Robots-Tag header values (one per header line) that apply to `token`."""
    me, out = token.strip().lower(), NONE
    for value in values:
        agent: str | None = None  # who the rest of this header value speaks to
        for item in value.split(","):
            m = _PREFIX.match(item)
            if m and m.group(1).lower() not in _VALUED:
                agent, item = m.group(1).lower(), m.group(2)
            elif m:  # unavailable_after: <date> and the like: not acted on
                continue
            if agent is None or agent == me:
                out |= _words(item)
    return out


def meta_directives(meta_tags: Iterable[tuple[str, str]], token: str) -> Directives:
    """The `<meta name=... content=...>` tags named `robots` or `token` (any case)."""
    names, out = {"robots", token.strip().lower()}, NONE
    for name, content in meta_tags:
        if name.strip().lower() in names:
            out |= _words(content)
    return out


def page_directives(
    headers: Iterable[str], meta_tags: Iterable[tuple[str, str]], token: str
) -> Directives:
    """Everything a page says to `token`: its X-Robots-Tag values and its meta tags."""
    return header_directives(headers, token) | meta_directives(meta_tags, token)


def header_values(joined: str | None) -> list[str]:
    """The X-Robots-Tag values a fetched response kept (HEADER_SEP between header lines)."""
    return joined.split(HEADER_SEP) if joined else []


def meta_names(token: str) -> tuple[str, ...]:
    """The lowercased meta names the parser should hand over for `token`."""
    return ("robots", token.strip().lower())
