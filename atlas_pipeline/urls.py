"""URL identity: conservative RFC 3986 normalization, origins and shards.

Merge only what is provably the same page (seed 000 ch. 6): case of scheme and host, default
port, fragment, dot segments, percent-encoding of unreserved characters and known tracking
parameters. Path case, query order and unknown parameters are kept.
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
from urllib.parse import urljoin, urlsplit

from tld import get_fld

from . import defaults as d

DEFAULT_PORTS = {"http": 80, "https": 443}

# RFC 3986 section 2.3 unreserved characters; section 6.2.2.2 says decode them.
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_PCT = re.compile(r"%([0-9A-Fa-f]{2})")
# Characters that may appear literally in a path or query (RFC 3986 section 3.3/3.4); others get encoded.
_PATH_SAFE = frozenset("".join(sorted(_UNRESERVED)) + "!$&'()*+,;=:@/%")
_QUERY_SAFE = _PATH_SAFE | frozenset("?")
# WHATWG URL parsing drops ASCII tab and newline anywhere in the input.
_TAB_NL = re.compile(r"[\t\n\r]")
# A host name after IDNA: dot-separated labels of letters, digits, '-' and '_' (no '%', '\\', ' ').
_HOST_NAME = re.compile(r"[a-z0-9_-]+(?:\.[a-z0-9_-]+)*")


class BadUrl(ValueError):
    """A string that cannot be a crawlable URL."""


def _pct_normalize(text: str, safe: frozenset[str]) -> str:
    # One pass, so a decoded escape can never form a new one ('%%41' -> '%25A', not '%A').
    out: list[str] = []
    i = 0
    while i < len(text):
        m = _PCT.match(text, i)
        if m:
            ch = chr(int(m.group(1), 16))
            out.append(ch if ch in _UNRESERVED else "%" + m.group(1).upper())
            i += 3
            continue
        ch = text[i]
        if ch in safe and ch != "%":
            out.append(ch)
        else:
            out.extend(f"%{b:02X}" for b in ch.encode("utf-8"))
        i += 1
    return "".join(out)


def remove_dot_segments(path: str) -> str:
    """RFC 3986 section 5.2.4."""
    out: list[str] = []
    segments = path.split("/")
    for i, seg in enumerate(segments):
        last = i == len(segments) - 1
        if seg == ".":
            if last:
                out.append("")
        elif seg == "..":
            if len(out) > 1:
                out.pop()
            if last:
                out.append("")
        else:
            out.append(seg)
    result = "/".join(out)
    return result if result.startswith("/") else "/" + result


def _host(raw: str) -> str:
    host = raw.strip().rstrip(".").lower()
    if not host:
        raise BadUrl("empty host")
    if host.startswith("["):
        return host
    try:
        # IDNA maps U+3002 and U+FF0E to '.', so strip a trailing root dot again afterwards
        ascii_host = host.encode("idna").decode("ascii").rstrip(".")
    except UnicodeError:
        raise BadUrl(f"host {raw!r} is not a valid domain name") from None
    if ":" not in ascii_host and not _HOST_NAME.fullmatch(ascii_host):  # IPv6: urlsplit checked
        raise BadUrl(f"host {raw!r} is not a valid domain name")
    return ascii_host


def _is_tracking(key: str) -> bool:
    k = key.lower()
    return k in d.TRACKING_PARAMS or k.startswith(d.TRACKING_PREFIXES)


def _query(query: str) -> str:
    if not query:
        return ""
    # decode first, so 'utm%5Fsource' is recognised as the tracking key it spells
    parts = [_pct_normalize(p, _QUERY_SAFE) for p in query.split("&")]
    return "&".join(p for p in parts if p and not _is_tracking(p.split("=", 1)[0]))


def normalize(url: str, base: str | None = None) -> str:
    """Resolve `url` against `base` (RFC 3986 section 5.2) and return its canonical spelling."""
    raw = _TAB_NL.sub("", url).strip(" \x00\x0b\x0c")
    try:
        if base is not None:
            raw = urljoin(base, raw)  # raises ValueError on a malformed [host] too
        parts = urlsplit(raw)
        port = parts.port
        raw.encode("utf-8")  # a lone surrogate cannot be percent-encoded (UnicodeEncodeError)
    except ValueError as exc:
        raise BadUrl(f"{url!r}: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS:
        raise BadUrl(f"{url!r}: scheme {scheme or '(none)'!r} is not crawlable")
    if parts.hostname is None:
        raise BadUrl(f"{url!r}: no host")
    host = _host(parts.hostname)
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    netloc = host if port in (None, DEFAULT_PORTS[scheme]) else f"{host}:{port}"
    if parts.username is not None:
        userinfo = parts.username + (f":{parts.password}" if parts.password is not None else "")
        netloc = f"{userinfo}@{netloc}"
    path = remove_dot_segments(_pct_normalize(parts.path or "/", _PATH_SAFE))
    query = _query(parts.query)
    return f"{scheme}://{netloc}{path}" + (f"?{query}" if query else "")


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
    """Path plus query: what robots rules are matched against."""
    parts = urlsplit(url)
    return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")


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
