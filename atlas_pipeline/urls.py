"""URL identity: RFC 3986 reference resolution and conservative normalization, origins, shards.

Merge only what is provably the same page (seed 000 ch. 6, seed 003 decision 9). A link is
resolved against its base by RFC 3986 section 5.2 (strict parser) and normalized by section
6.2.2: scheme and host case, IDNA to punycode, default port, fragment, dot segments,
percent-encoding (hex upper case, unreserved characters decoded), empty path -> "/". Only query
parameters on a tracking list (per origin, `TrackingPolicy`) are removed; path case, query
order, unknown parameters and their exact values are kept, and so is the '?' of an empty query
(section 6.2.3: an empty component's delimiter stays unless the scheme says otherwise; http's
does not). A URL with a user name or password is refused (`UserinfoRefused`), never stored or
sent with its credentials, nor silently stripped of them. Hosts are read the way the egress
gate reads them (`egress.parse_host`, WHATWG host parsing with IDNA 2008/UTS 46), so the crawl
and the gate always agree on which host a URL names.
"""

from __future__ import annotations

import functools
import hashlib
import ipaddress
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple
from urllib.parse import urlsplit

from tld import get_fld

from . import defaults as d
from .egress import HostError, parse_host

DEFAULT_PORTS = {"http": 80, "https": 443}
AUTHORITY_CACHE = 4096  # normalized authorities kept (a page links to the same few hosts)
BASE_CACHE = 256  # parsed base URLs kept (every link of a page shares one base)

# RFC 3986 Appendix B: the regular expression that splits any URI reference into scheme,
# authority, path, query and fragment; a relative reference is the same without the scheme.
_URI_REF = re.compile(r"(?:([^:/?#]+):)?(?://([^/?#]*))?([^?#]*)(?:\?([^#]*))?(?:#(.*))?", re.S)
_RELATIVE_REF = re.compile(r"(?://([^/?#]*))?([^?#]*)(?:\?([^#]*))?(?:#(.*))?", re.S)
# RFC 3986 section 3.1; a reference whose "scheme" breaks this is a relative path (as in WHATWG)
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*")
# WHATWG URL parsing: strip C0 controls and space at both ends, drop tab and newline anywhere
_C0_OR_SPACE = "".join(map(chr, range(0x21)))
_TAB_OR_NEWLINE = str.maketrans("", "", "\t\n\r")

# RFC 3986 section 2.3 unreserved characters: section 6.2.2.2 decodes them.
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
# What may stand literally in each component (sections 3.3, 3.4); anything else, and a
# '%' that starts no escape, is percent-encoded as UTF-8. A match is work to do: an escape to
# normalize or a character to encode; a component with no match is already normal.
_SUB_DELIMS = r"!$&'()*+,;="
_PCT_WORK = {
    "path": re.compile(r"%([0-9A-Fa-f]{2})|[^A-Za-z0-9\-._~" + _SUB_DELIMS + r":@/]"),
    "query": re.compile(r"%([0-9A-Fa-f]{2})|[^A-Za-z0-9\-._~" + _SUB_DELIMS + r":@/?]"),
}
# A host name after IDNA: dot-separated labels of letters, digits, '-' and '_' (DNS can look
# it up); WHATWG also allows '!', '$', '*', ... which no resolver answers.
_HOST_NAME = re.compile(r"[a-z0-9_-]+(?:\.[a-z0-9_-]+)*")
_DIGITS = frozenset("0123456789")
_DOT_SEGMENT = re.compile(r"(?:^|/)\.\.?(?:/|$)")  # a "." or ".." segment (section 5.2.4)


class BadUrl(ValueError):
    """A string that cannot be a crawlable URL."""


class UncrawlableScheme(BadUrl):
    """A URL whose scheme is not http or https (or that has none and no base to take one from)."""


class UserinfoRefused(BadUrl):
    """A URL whose authority names a user or a password (`http://user:pass@host/`): kept, the
    credentials would land in every table and be sent; dropped, two URLs would merge on a
    guess. An empty userinfo (`http://@host/`, `http://:@host/`) names no one and is no
    credential: WHATWG serializes it away, as normalize does."""


class Parts(NamedTuple):
    """The five components of a URI reference (RFC 3986 section 3); None when undefined."""

    scheme: str | None
    authority: str | None
    path: str
    query: str | None
    fragment: str | None


# --- tracking parameters -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TrackingParams:
    """Query keys that only track the visitor, dropped from a URL: exact names and name
    prefixes, compared case-insensitively once unreserved escapes are decoded ('utm%5Fsource'
    is 'utm_source'); a name in `keep` is never dropped."""

    names: frozenset[str] = frozenset(d.TRACKING_PARAMS)
    prefixes: tuple[str, ...] = d.TRACKING_PREFIXES
    keep: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        object.__setattr__(self, "names", frozenset(n.lower() for n in self.names))
        object.__setattr__(self, "prefixes", tuple(p.lower() for p in self.prefixes))
        object.__setattr__(self, "keep", frozenset(k.lower() for k in self.keep))

    def drops(self, key: str) -> bool:
        """Whether a query parameter named `key` (unreserved characters decoded) is dropped."""
        k = key.lower()
        if k in self.keep:
            return False
        return k in self.names or (bool(self.prefixes) and k.startswith(self.prefixes))

    def amended(
        self,
        add: Iterable[str] = (),
        add_prefixes: Iterable[str] = (),
        keep: Iterable[str] = (),
    ) -> TrackingParams:
        """This list plus more names and prefixes, with `keep` names exempted."""
        return TrackingParams(
            self.names | frozenset(add),
            (*self.prefixes, *add_prefixes),
            self.keep | frozenset(keep),
        )


NO_TRACKING = TrackingParams(frozenset(), (), frozenset())  # drop nothing


@dataclass(frozen=True)
class TrackingPolicy:
    """The tracking list of every origin: `default`, or the origin's own list in
    `per_origin` (keys are origins such as "https://shop.example", any spelling)."""

    default: TrackingParams = field(default_factory=TrackingParams)
    per_origin: Mapping[str, TrackingParams] = field(default_factory=dict)

    def __post_init__(self) -> None:
        canonical = {
            origin_of(normalize(o, tracking=NO_TRACKING)): p for o, p in self.per_origin.items()
        }
        object.__setattr__(self, "per_origin", canonical)

    def for_origin(self, origin: str) -> TrackingParams:
        """The list for `origin` as `origin_of` spells it (scheme://host:port)."""
        return self.per_origin.get(origin, self.default)


DEFAULT_TRACKING = TrackingPolicy()


# --- RFC 3986 section 5.2: reference resolution -----------------------------------------------


def split(reference: str) -> Parts:
    """RFC 3986 section 5.2.1 / Appendix B: the components of `reference`, as written."""
    m = _URI_REF.match(reference)
    assert m is not None  # every part of the expression is optional
    scheme = m.group(1)
    if scheme is not None and _SCHEME.fullmatch(scheme) is None:
        r = _RELATIVE_REF.match(reference)
        assert r is not None
        return Parts(None, r.group(1), r.group(2), r.group(3), r.group(4))
    return Parts(scheme, m.group(2), m.group(3), m.group(4), m.group(5))


def recompose(parts: Parts) -> str:
    """RFC 3986 section 5.3: the components joined back into a URI reference."""
    out = []
    if parts.scheme is not None:
        out.append(parts.scheme + ":")
    if parts.authority is not None:
        out.append("//" + parts.authority)
    out.append(parts.path)
    if parts.query is not None:
        out.append("?" + parts.query)
    if parts.fragment is not None:
        out.append("#" + parts.fragment)
    return "".join(out)


def remove_dot_segments(path: str) -> str:
    """RFC 3986 section 5.2.4, step for step, in one linear pass over the input buffer."""
    if _DOT_SEGMENT.search(path) is None:
        return path  # nothing for rules A-D to do: E alone copies the path
    out: list[str] = []  # output buffer as segments; all but the first start with '/'
    i, n = 0, len(path)
    while i < n:
        if path.startswith("../", i):  # A
            i += 3
        elif path.startswith(("./", "/./"), i):  # A: drop "./"; B: "/./" -> "/"
            i += 2
        elif i + 2 == n and path.endswith("/."):  # B: a final "/." -> "/"
            out.append("/")
            i = n
        elif path.startswith("/../", i):  # C: "/../" -> "/", drop the last output segment
            i += 3
            if out:
                out.pop()
        elif i + 3 == n and path.endswith("/.."):  # C: a final "/.." -> "/"
            if out:
                out.pop()
            out.append("/")
            i = n
        elif (i + 1 == n and path[i] == ".") or (i + 2 == n and path.endswith("..")):  # D
            i = n
        else:  # E: move the first segment, with its leading '/', to the output
            end = path.find("/", i + 1)
            end = n if end < 0 else end
            out.append(path[i:end])
            i = end
    return "".join(out)


def _merge(base: Parts, path: str) -> str:
    """RFC 3986 section 5.2.3."""
    if base.authority is not None and base.path == "":
        return "/" + path
    return base.path[: base.path.rfind("/") + 1] + path


def resolve_parts(ref: Parts, base: Parts) -> Parts:
    """RFC 3986 section 5.2.2 (strict: a scheme in the reference is never ignored)."""
    if ref.scheme is not None:
        return ref._replace(path=remove_dot_segments(ref.path))
    if ref.authority is not None:
        return ref._replace(scheme=base.scheme, path=remove_dot_segments(ref.path))
    if ref.path == "":
        query = ref.query if ref.query is not None else base.query
        return Parts(base.scheme, base.authority, base.path, query, ref.fragment)
    path = ref.path if ref.path.startswith("/") else _merge(base, ref.path)
    return Parts(base.scheme, base.authority, remove_dot_segments(path), ref.query, ref.fragment)


def resolve(reference: str, base: str) -> str:
    """RFC 3986 section 5.2: the target URI of `reference` against the absolute URI `base`,
    without any normalization (`urljoin` differs on "http:g", which it reads as "g")."""
    base_parts = split(base)
    if base_parts.scheme is None:
        raise BadUrl(f"base {base!r} is not an absolute URI")
    return recompose(resolve_parts(split(reference), base_parts))


# --- RFC 3986 section 6.2.2: syntax-based normalization ---------------------------------------


def _pct_escape(m: re.Match[str]) -> str:
    hexpair = m.group(1)
    if hexpair is None:
        return "".join(f"%{b:02X}" for b in m.group().encode("utf-8"))
    ch = chr(int(hexpair, 16))
    return ch if ch in _UNRESERVED else "%" + hexpair.upper()


def _pct_normalize(text: str, component: str) -> str:
    """Section 6.2.2.1-2 in one pass, so a decoded escape never forms a new one ('%%41' ->
    '%25A'): escapes get upper-case hex, unreserved ones are decoded, and characters not
    allowed literally in `component` (a bare '%', space, non-ASCII) are encoded as UTF-8."""
    pattern = _PCT_WORK[component]
    return text if pattern.search(text) is None else pattern.sub(_pct_escape, text)


def _ipv6_text(ip: ipaddress.IPv6Address) -> str:
    """RFC 5952 / WHATWG serialization, the same on every Python (3.13 changed `str` of
    IPv4-mapped addresses): lower-case hex, the first longest run of 2+ zero words as '::'."""
    words = [int.from_bytes(ip.packed[i : i + 2], "big") for i in range(0, 16, 2)]
    start, length, i = -1, 1, 0
    while i < 8:
        j = i
        while j < 8 and words[j] == 0:
            j += 1
        if j - i > length:
            start, length = i, j - i
        i = max(j, i + 1)
    text = [f"{w:x}" for w in words]
    if start < 0:
        return ":".join(text)
    return ":".join(text[:start]) + "::" + ":".join(text[start + length :])


def canonical_host(text: str) -> str:
    """The canonical spelling of a URL's host, read as the egress gate reads it (WHATWG host
    parsing: percent-decoding, IDNA UTS 46 to punycode, lower case, no trailing dot, an IPv4
    address in any spelling as a dotted quad, IPv6 in brackets); BadUrl for what no resolver
    could look up."""
    try:
        host = parse_host(text)
    except HostError as exc:
        raise BadUrl(f"bad host: {exc}") from None
    if isinstance(host, ipaddress.IPv4Address):
        return str(host)
    if isinstance(host, ipaddress.IPv6Address):
        if host.scope_id:
            raise BadUrl(f"bad host {text!r}: an IPv6 zone id is not a URL host")
        return f"[{_ipv6_text(host)}]"
    if _HOST_NAME.fullmatch(host) is None:
        raise BadUrl(f"bad host {text!r}: not a DNS name")
    return host


@functools.lru_cache(maxsize=AUTHORITY_CACHE)
def _authority(scheme: str, authority: str) -> tuple[str, str]:
    """(canonical authority, origin) of an http(s) authority."""
    if "\\" in authority:  # WHATWG ends the host at a backslash, RFC 3986 does not: ambiguous
        raise BadUrl(f"backslash in the authority {authority!r}")
    userinfo, _, hostport = authority.rpartition("@")  # the last '@' ends the userinfo
    if _names_someone(userinfo):
        raise UserinfoRefused("a user name or password in the URL (user:password@host) is refused")
    if hostport.startswith("["):
        close = hostport.find("]") + 1
        if close == 0 or (close < len(hostport) and hostport[close] != ":"):
            raise BadUrl(f"bad IPv6 literal in {authority!r}")
        host_text, port_text = hostport[:close], hostport[close + 1 :]
    else:
        host_text, _, port_text = hostport.partition(":")
    digits = port_text.lstrip("0")  # leading zeros are allowed (WHATWG), huge numbers are not
    if not _DIGITS.issuperset(port_text) or len(digits) > 5 or int(digits or "0") > 65535:
        raise BadUrl(f"bad port {port_text!r}")
    host = canonical_host(host_text)
    port = int(port_text) if port_text else DEFAULT_PORTS[scheme]
    netloc = host if port == DEFAULT_PORTS[scheme] else f"{host}:{port}"
    return netloc, f"{scheme}://{host}:{port}"


def _names_someone(userinfo: str) -> bool:
    """Whether a userinfo (as written) holds a user name or a password: anything but '' or ':'
    (WHATWG splits at the first ':'; '%3A' or '::' are a name or password of their own)."""
    return userinfo not in ("", ":")


def has_userinfo(url: str) -> bool:
    """Whether `url`, as written, names a user or password in its authority (any scheme;
    leading and trailing blanks ignored, as `normalize` ignores them)."""
    authority = split(_clean(url)).authority
    return authority is not None and _names_someone(authority.rpartition("@")[0])


def redact_userinfo(url: str) -> str:
    """`url` with the user name and password of its authority replaced by '***', for storing
    a refused link's href or showing it in a message: the credentials never leave."""
    parts = split(_clean(url))
    if parts.authority is None or not _names_someone(parts.authority.rpartition("@")[0]):
        return url
    return recompose(parts._replace(authority="***@" + parts.authority.rpartition("@")[2]))


def _clean(text: str) -> str:
    text = text.strip(_C0_OR_SPACE)
    return text.translate(_TAB_OR_NEWLINE) if "\t" in text or "\n" in text or "\r" in text else text


def _check_encodable(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise BadUrl(f"{text!r}: a lone surrogate cannot be percent-encoded") from None


@functools.lru_cache(maxsize=BASE_CACHE)
def _base_parts(base: str) -> Parts:
    _check_encodable(base)
    parts = split(_clean(base))
    if parts.scheme is None:
        raise BadUrl(f"base {base!r} is not an absolute URI")
    return parts._replace(path=_pct_normalize(parts.path, "path"))


def _query(query: str, tracking: TrackingParams) -> str:
    kept = []
    for piece in query.split("&"):
        piece = _pct_normalize(piece, "query")  # first, so 'utm%5Fsource' is the key it spells
        if not tracking.drops(piece.partition("=")[0]):
            kept.append(piece)
    return "&".join(kept)


def normalize(
    url: str,
    base: str | None = None,
    tracking: TrackingPolicy | TrackingParams = DEFAULT_TRACKING,
) -> str:
    """Resolve `url` against `base` (RFC 3986 section 5.2; pass the page's `<base href>` or
    final URL after redirects) and return its canonical spelling (section 6.2.2, plus the
    tracking parameters of its origin removed). A query written empty keeps its '?' (section
    6.2.3: `http://e.test/?` may be another page than `http://e.test/`); one emptied by
    removing tracking parameters is dropped with its '?'. `UserinfoRefused` for a URL that
    names a user or password; `UncrawlableScheme` or another `BadUrl` for what is no http(s)
    URL."""
    _check_encodable(url)
    ref = split(_clean(url))
    # Percent-encoding first (section 6.2.2.2 before 6.2.2.3): '%2E%2E' is a '..' segment.
    ref = ref._replace(path=_pct_normalize(ref.path, "path"))
    if ref.scheme is None and base is not None:
        ref = resolve_parts(ref, _base_parts(base))
    scheme = (ref.scheme or "").lower()
    if scheme not in DEFAULT_PORTS:
        raise UncrawlableScheme(f"{url!r}: scheme {scheme or '(none)'!r} is not crawlable")
    if ref.authority is None:
        raise BadUrl(f"{url!r}: no authority, so no host")
    netloc, origin = _authority(scheme, ref.authority)
    path = remove_dot_segments(ref.path) or "/"
    if ref.query is None:
        return f"{scheme}://{netloc}{path}"
    if ref.query == "":
        return f"{scheme}://{netloc}{path}?"  # an empty query, as written
    params = tracking if isinstance(tracking, TrackingParams) else tracking.for_origin(origin)
    query = _query(ref.query, params)
    return f"{scheme}://{netloc}{path}?{query}" if query else f"{scheme}://{netloc}{path}"


# --- origins and shards ------------------------------------------------------------------------


def origin_of(url: str) -> str:
    """The politeness unit: scheme://host:port, port always explicit."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    port = parts.port or DEFAULT_PORTS.get(scheme, 0)
    return f"{scheme}://{host}:{port}"


def host_of(url: str) -> str:
    return (urlsplit(url).hostname or "").lower()


def path_of(url: str) -> str:
    """Path plus query: what robots rules are matched against (an empty query keeps its '?',
    as normalize keeps it: `/?` is not `/`)."""
    parts = urlsplit(url)
    query = parts.query or url.partition("#")[0].endswith("?")
    return (parts.path or "/") + (f"?{parts.query}" if query else "")


def registrable_domain(host: str) -> str:
    """The registrable domain of `host` (public-suffix aware, the list bundled with `tld`);
    an IP address is its own; a name under a suffix the list does not know (e.g. `.test`)
    takes its last two labels, as the list's default rule `*` says."""
    host = host.lower().rstrip(".").strip("[]")
    try:
        ipaddress.ip_address(host)
        return host
    except ValueError:
        pass
    fld = get_fld(host, fix_protocol=True, fail_silently=True)
    return fld if isinstance(fld, str) else ".".join(host.split(".")[-2:])


def shard_of(origin: str, shards: int) -> int:
    """Stable origin -> shard assignment (never Python's salted hash)."""
    digest = hashlib.sha1(origin.encode("utf-8"), usedforsecurity=False).digest()
    return int.from_bytes(digest[:8], "big") % shards


def shard_key(shard: int) -> str:
    """Partition key of a shard: shard_000."""
    return f"shard_{shard:03d}"


def shard_index(key: str) -> int:
    if not re.fullmatch(r"shard_\d{3,}", key):
        raise ValueError(f"{key!r} is not a shard key like 'shard_000'")
    return int(key.removeprefix("shard_"))
