"""robots.txt rules (RFC 9309), with the fetch-outcome policy of seed 000 ch. 8.

protego 0.7.0 departs from RFC 9309 in its core: it matches a group whose name is a prefix
of the product token ("User-agent: Atlas" binds AtlasBot) and strips "*" from names; it
doubles every "$" rule with a literal-"$" twin ("Disallow: /a$" also blocks "/a$b"); it
adds an implicit "Allow: <dir>/$" for every "Allow: <dir>/index.html"; it splits lines on
Unicode separators (NEL, U+2028) as well as CR/LF; it reads lines without a colon and
misspelt directives as rules; and it decodes percent-encoded reserved characters ("%3F"
matches "?"). So group formation, group selection and path matching are implemented here,
to the letter of RFC 9309 section 2.2; protego still reads the Sitemap lines, which are
site-wide and outside the matching rules.

Groups (2.2, 2.2.4): only a User-agent line that follows a group member (Allow, Disallow, or
the Crawl-delay this module reads) starts a new group; Sitemap, unknown records, comments and
blank lines never end one, so "User-agent: FooBot / Foo: x / User-agent: *" is one group.
Product tokens (2.2.1): a crawler's token must be a whole identifier ([A-Za-z_-]+, matched
case-insensitively), so "Bot2000" never takes the group of "User-agent: Bot".

HTTP outcomes map to a policy: 2xx parse, 4xx unavailable = allow, 429 throttled,
5xx / network unreachable = disallow.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, field
from enum import StrEnum

from protego import Protego

from .urls import path_of


class RobotsStatus(StrEnum):
    """What the last robots.txt fetch established for an origin."""

    PARSED = "parsed"  # 2xx: rules apply
    UNAVAILABLE = "unavailable"  # 4xx (not 429): no rules published, allow all
    UNREACHABLE = "unreachable"  # 5xx, timeout, network: fetch nothing
    THROTTLED = "throttled"  # 429: back off, establish nothing


@dataclass(frozen=True, slots=True)
class RobotsPolicy:
    """The policy in force for one origin; `version` grows whenever the effective rules change."""

    origin: str
    version: int
    status: RobotsStatus
    text: str = ""

    def allows(self, url: str, token: str) -> bool:
        path = path_of(url)
        # RFC 9309 2.2.2: "The /robots.txt URI is implicitly allowed."
        if path == "/robots.txt" or path.startswith("/robots.txt?"):
            return True
        if self.status is RobotsStatus.UNAVAILABLE:
            return True
        if self.status is not RobotsStatus.PARSED:
            return False
        group = _parsed(self.text).group_for(token)
        return group is None or group.allows(path)

    def crawl_delay(self, token: str) -> float | None:
        if self.status is not RobotsStatus.PARSED:
            return None
        group = _parsed(self.text).group_for(token)
        return group.crawl_delay if group is not None else None

    def sitemaps(self) -> list[str]:
        if self.status is not RobotsStatus.PARSED:
            return []
        return list(_protego(self.text).sitemaps)


# ---------------------------------------------------------------- percent-encoding

_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
# RFC 3986 reserved characters, kept literal; "*" and "$" are handled apart (see below).
_RESERVED = frozenset(":/?#[]@!&'()+,;=")
_HEX = frozenset("0123456789ABCDEFabcdef")
# Already normal: only unreserved and reserved characters, no "%", "*" or "$".
_PLAIN = re.compile(r"[A-Za-z0-9\-._~:/?#\[\]@!&'()+,;=]*").fullmatch


def _normalize(text: str, *, pattern: bool) -> str:
    """The form a path or a rule is compared in (RFC 9309 2.2.2 and 2.2.3).

    Characters outside ASCII (and controls, spaces, ...) are percent-encoded as UTF-8; an
    escape of an unreserved character is decoded ("%7E" is "~"); an escape of a reserved
    character stays encoded ("%2F" is not "/", "%3F" is not "?"); hex digits are upper-cased.
    A literal "*" or "$" in a URI compares as "%2A" / "%24": 2.2.3 says a rule matches those
    characters verbatim by writing them percent-encoded. In a rule, "*" stays the wildcard.
    """
    if _PLAIN(text):
        return text
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        digits = text[i + 1 : i + 3]
        if ch == "%" and len(digits) == 2 and set(digits) <= _HEX:
            octet = int(digits, 16)
            out.append(chr(octet) if chr(octet) in _UNRESERVED else f"%{octet:02X}")
            i += 3
            continue
        if ch in _UNRESERVED or ch in _RESERVED or (pattern and ch == "*"):
            out.append(ch)
        else:  # "%" not starting an escape, "*" / "$" in a URI, non-ASCII, controls, ...
            out.extend(f"%{b:02X}" for b in ch.encode("utf-8", "surrogatepass"))
        i += 1
    return "".join(out)


# ---------------------------------------------------------------- rules and groups


@dataclass(frozen=True, slots=True)
class _Rule:
    allow: bool
    parts: tuple[str, ...]  # the normalized pattern split on "*"
    anchored: bool  # the pattern ended with "$"
    octets: int  # length of the normalized pattern: what "most specific" compares

    @classmethod
    def parse(cls, value: str, *, allow: bool) -> _Rule | None:
        # RFC 9309 2.2.3: "$" designates the end of the match pattern, so only a final "$"
        # anchors; a "$" anywhere else is an ordinary character (normalized to "%24").
        anchored = value.endswith("$")
        body = _normalize(value[:-1] if anchored else value, pattern=True)
        if not body and not anchored:
            return None  # RFC 9309 2.2.2: an empty rule matches nothing ("Disallow:" allows all)
        octets = len(body) + anchored
        return cls(allow, tuple(re.sub(r"\*+", "*", body).split("*")), anchored, octets)

    def matches(self, path: str) -> bool:
        """RFC 9309 2.2.2/2.2.3: match from the first octet of the path; "*" is any run of
        characters; a final "$" pins the end. Leftmost matching of the literal pieces is exact
        for "*"-only patterns and linear, unlike a backtracking regex."""
        parts = self.parts
        first = parts[0]
        if not path.startswith(first):
            return False
        if len(parts) == 1:
            return len(path) == len(first) if self.anchored else True
        pos = len(first)
        for part in parts[1:-1]:
            found = path.find(part, pos)
            if found == -1:
                return False
            pos = found + len(part)
        last = parts[-1]
        if self.anchored:
            return len(path) - len(last) >= pos and path.endswith(last)
        return path.find(last, pos) != -1


@dataclass(slots=True)
class _Group:
    rules: list[_Rule] = field(default_factory=list)
    crawl_delay: float | None = None

    def allows(self, path: str) -> bool:
        # RFC 9309 2.2.2: the most specific match (most octets) wins; an allow rule wins a
        # tie with an equivalent disallow rule; no match means allowed.
        target = _normalize(path, pattern=False)
        best: tuple[int, bool] | None = None
        for rule in self.rules:
            if rule.matches(target):
                key = (rule.octets, rule.allow)
                if best is None or key > best:
                    best = key
        return best is None or best[1]


# RFC 9309 2.2.1: product-token = identifier / "*"; identifier = 1*(ALPHA / "-" / "_").
_IDENTIFIER = re.compile(r"[A-Za-z_-]+")
# RFC 9309 2.2: EOL = CR / LF / CRLF; nothing else ends a line (str.splitlines would also
# split on NEL, U+2028, form feed, ...).
_EOL = re.compile(r"\r\n|\r|\n")
_WS = " \t"  # RFC 9309 2.2: WS = %x20 / %x09


@functools.lru_cache(maxsize=64)  # asked twice per link judged, of one or two user agents
def crawler_token(user_agent: str) -> str | None:
    """The robots product token of a crawler's User-Agent, case kept: the name before the
    first "/" ("AtlasBot/1.0 (+https://...)" -> "AtlasBot"). None unless that whole name is
    an RFC 9309 2.2.1 identifier ([A-Za-z_-]+): no line can name "Bot2000" or "Bötli", and
    cutting them to "Bot" / "B" would bind the group of another crawler."""
    name = user_agent.strip(_WS).split("/", 1)[0].strip(_WS)
    return name if _IDENTIFIER.fullmatch(name) else None


def _line_token(value: str) -> str | None:
    """The lower-cased product token a User-agent line names, "*" for the catch-all, None if
    it names none. As in Google's robotstxt (ExtractUserAgent) the leading identifier is the
    token and a version or comment after it is not ("AtlasBot/1.0", "AtlasBot (x)" name
    AtlasBot); but an identifier running on into a letter or digit is only the start of
    another name, so "User-agent: Bot2000" names no crawler rather than "Bot"."""
    value = value.strip(_WS)
    if value[:1] == "*" and value[1:2] in ("", " ", "\t"):
        return "*"
    found = _IDENTIFIER.match(value)
    if found is None or value[found.end() : found.end() + 1].isalnum():
        return None
    return found[0].lower()


@dataclass(slots=True)
class _Robots:
    groups: dict[str, _Group] = field(default_factory=dict)

    def group_for(self, token: str) -> _Group | None:
        # RFC 9309 2.2.1: the group naming the crawler's product token (case-insensitively),
        # else the "*" group, else no rules apply. "*" never adds to a specific group. A
        # token that is not a whole identifier (crawler_token) can only have the "*" group.
        name = crawler_token(token)
        if name is not None and name.lower() in self.groups:
            return self.groups[name.lower()]
        return self.groups.get("*")


def _parse(text: str) -> _Robots:
    robots = _Robots()
    agents: list[_Group] = []  # the groups the lines being read belong to
    in_rules = False  # a group member has been read since the last User-agent line
    for raw in _EOL.split(text.removeprefix("\ufeff")):
        # RFC 9309 2.2.3: "#" starts a comment, anywhere on a line.
        line = raw.split("#", 1)[0]
        name, colon, value = line.partition(":")
        if not colon:
            continue  # not "field: value": not a record
        name, value = name.strip(_WS).lower(), value.strip(_WS)
        if name == "user-agent":
            # RFC 9309 2.2 (ABNF): group = startgroupline *(startgroupline / emptyline)
            # *(rule / emptyline), so a User-agent line after a rule starts a new group and
            # consecutive ones (blank lines between them too) share one. 2.2.4: other
            # records "MUST NOT interfere" with grouping ("a Sitemaps record MUST NOT
            # terminate a group"), so only the group members below set `in_rules`; an
            # unknown record between "User-agent: FooBot" and "User-agent: *" left FooBot
            # an empty group, allowed everything. A line naming no token still ends a group.
            if in_rules:
                agents, in_rules = [], False
            token = _line_token(value)
            if token is not None:
                # RFC 9309 2.2.1: groups naming the same product token are combined.
                agents.append(robots.groups.setdefault(token, _Group()))
            continue
        if name in ("allow", "disallow"):
            in_rules = True  # even an empty "Disallow:" is a rule (2.2 ABNF empty-pattern)
            # Rules before the first User-agent line belong to no group and are ignored.
            rule = _Rule.parse(value, allow=name == "allow")
            if rule is not None:
                for group in agents:
                    group.rules.append(rule)
        elif name == "crawl-delay":
            # Not part of RFC 9309 (2.2.4 "other records"); read for the politeness gap and,
            # being per group here, a member of its group: a User-agent line after it starts
            # a new group ("User-agent: * / Crawl-delay: 9 / User-agent: AtlasBot" is two).
            in_rules = True
            delay = _seconds(value)
            if delay is not None:
                for group in agents:
                    group.crawl_delay = delay
        # Any other field (Sitemap, Host, misspellings, ...) is ignored here, grouping
        # included (2.2.4); so are lines that are not "field: value" (blank, comment-only).
    return robots


def _seconds(value: str) -> float | None:
    try:
        seconds = float(value)
    except ValueError:
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


@functools.lru_cache(maxsize=4096)
def _parsed(text: str) -> _Robots:
    return _parse(text)


@functools.lru_cache(maxsize=256)
def _protego(text: str) -> Protego:
    return Protego.parse(text.removeprefix("\ufeff"))


def decode_robots(body: bytes, max_bytes: int) -> str:
    """Bytes -> text: first `max_bytes` only, BOM stripped, undecodable bytes replaced.

    A line cut by the limit is dropped: its rule would be a prefix of the one written
    ("Allow: /public-docs" read as "Allow: /pub"), which can allow more than the site does.
    """
    cut = body[:max_bytes]
    if len(body) > max_bytes and body[max_bytes : max_bytes + 1] not in (b"\n", b"\r"):
        end = max(cut.rfind(b"\n"), cut.rfind(b"\r"))
        cut = cut[: end + 1]
    text = cut.decode("utf-8", errors="replace")
    return text.lstrip("\ufeff")


def status_for_http(status: int) -> RobotsStatus:
    """RFC 9309 section 2.3.1: map the final HTTP status of a robots.txt fetch to an outcome."""
    if 200 <= status < 300:
        return RobotsStatus.PARSED
    if status == 429:
        return RobotsStatus.THROTTLED
    if 400 <= status < 500:
        return RobotsStatus.UNAVAILABLE
    return RobotsStatus.UNREACHABLE
