"""The egress gate: every connection goes to a validated, pinned address (SSRF defence).

Only http and https. A URL's host is read the way browsers read it (WHATWG URL host parsing),
and the host aiohttp (yarl) and urllib see must be the same host, so no parser differential
can send the connection somewhere the check did not look. An IP literal, in any spelling, is
judged before the request; a name is resolved inside aiohttp's resolver (`PinnedResolver`), so
the address validated is the address connected to. Every answer must be public by the IANA
special-purpose registries *and* `ipaddress.is_global`; validated answers are cached for their
TTL, refusals briefly. The operator's `resolve` map (exact host name) is the only exception.
"""

from __future__ import annotations

import asyncio
import enum
import functools
import ipaddress
import re
import socket
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from urllib.parse import unquote_to_bytes, urlsplit

import idna
from aiohttp.abc import AbstractResolver, ResolveResult
from yarl import URL

from .defaults import DNS_CACHE_ENTRIES, DNS_MAX_TTL_S, DNS_NEGATIVE_TTL_S, DNS_TTL_S
from .errors import EgressRefused

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
Host = str | IPAddress  # a domain (ASCII, lower case, no trailing dot) or an IP literal

HOST_PARSE_CACHE = 4096  # parsed host spellings kept (a crawl sees the same hosts again and again)


# --- address policy ------------------------------------------------------------------------


class Reach(enum.Enum):
    """How a special-purpose block is judged."""

    GLOBAL = "globally reachable"  # the registry says True; is_global must still agree
    LOCAL = "not globally reachable"  # False or N/A in the registry, or outside global space
    EMBEDDED_V4 = "judged by the IPv4 address it embeds"


@dataclass(frozen=True, slots=True)
class SpecialBlock:
    """One row of the special-purpose table."""

    network: IPNetwork
    name: str
    source: str
    reach: Reach


_G, _L, _E = Reach.GLOBAL, Reach.LOCAL, Reach.EMBEDDED_V4

# IANA IPv4 Special-Purpose Address Registry (RFC 6890, RFC 8190),
# https://www.iana.org/assignments/iana-ipv4-special-registry/ , with its "Globally Reachable"
# column; plus multicast (IANA multicast registry) which the special registry leaves out.
# The longest matching prefix decides, so globally reachable sub-blocks sit beside their parent.
_IPV4_SPECIAL: tuple[tuple[str, str, str, Reach], ...] = (
    ("0.0.0.0/8", "This network", "RFC 791", _L),
    ("10.0.0.0/8", "Private-Use", "RFC 1918", _L),
    ("100.64.0.0/10", "Shared Address Space", "RFC 6598", _L),
    ("127.0.0.0/8", "Loopback", "RFC 1122", _L),
    ("169.254.0.0/16", "Link Local", "RFC 3927", _L),
    ("172.16.0.0/12", "Private-Use", "RFC 1918", _L),
    ("192.0.0.0/24", "IETF Protocol Assignments", "RFC 6890", _L),
    ("192.0.0.0/29", "IPv4 Service Continuity Prefix", "RFC 7335", _L),
    ("192.0.0.8/32", "IPv4 dummy address", "RFC 7600", _L),
    ("192.0.0.9/32", "Port Control Protocol Anycast", "RFC 7723", _G),
    ("192.0.0.10/32", "Traversal Using Relays around NAT Anycast", "RFC 8155", _G),
    ("192.0.0.170/31", "NAT64/DNS64 Discovery", "RFC 8880", _L),
    ("192.0.2.0/24", "Documentation (TEST-NET-1)", "RFC 5737", _L),
    ("192.31.196.0/24", "AS112-v4", "RFC 7535", _G),
    ("192.52.193.0/24", "AMT", "RFC 7450", _G),
    ("192.88.99.0/24", "Deprecated (6to4 Relay Anycast)", "RFC 7526", _L),
    ("192.168.0.0/16", "Private-Use", "RFC 1918", _L),
    ("192.175.48.0/24", "Direct Delegation AS112 Service", "RFC 7534", _G),
    ("198.18.0.0/15", "Benchmarking", "RFC 2544", _L),
    ("198.51.100.0/24", "Documentation (TEST-NET-2)", "RFC 5737", _L),
    ("203.0.113.0/24", "Documentation (TEST-NET-3)", "RFC 5737", _L),
    ("224.0.0.0/4", "Multicast", "RFC 5771", _L),
    ("240.0.0.0/4", "Reserved", "RFC 1112", _L),
    ("255.255.255.255/32", "Limited Broadcast", "RFC 8190", _L),
)

# IANA IPv6 Special-Purpose Address Registry (RFC 6890, RFC 8190),
# https://www.iana.org/assignments/iana-ipv6-special-registry/ , and the IPv6 Address Space
# registry (only 2000::/3 is global unicast; the rest is reserved, local or multicast).
# Forms that carry an IPv4 address (mapped, NAT64 well-known prefix, 6to4) are judged by it,
# because that is where the packets end up. Teredo (N/A in the registry) embeds an obfuscated
# client address and relays to anywhere: refused whole.
_IPV6_SPECIAL: tuple[tuple[str, str, str, Reach], ...] = (
    ("::/0", "Outside global unicast 2000::/3", "RFC 4291, IANA IPv6 Address Space", _L),
    ("::/96", "Deprecated IPv4-compatible", "RFC 4291 2.5.5.1", _L),
    ("::/128", "Unspecified Address", "RFC 4291", _L),
    ("::1/128", "Loopback Address", "RFC 4291", _L),
    ("::ffff:0:0/96", "IPv4-mapped Address", "RFC 4291", _E),
    ("64:ff9b::/96", "IPv4-IPv6 Translation (well-known prefix)", "RFC 6052", _E),
    ("64:ff9b:1::/48", "IPv4-IPv6 Translation (local use)", "RFC 8215", _L),
    ("100::/64", "Discard-Only Address Block", "RFC 6666", _L),
    ("100:0:0:1::/64", "Dummy IPv6 Prefix", "RFC 9780", _L),
    ("2000::/3", "Global Unicast", "RFC 4291", _G),
    ("2001::/23", "IETF Protocol Assignments", "RFC 2928", _L),
    ("2001::/32", "TEREDO", "RFC 4380, RFC 8190", _L),
    ("2001:1::1/128", "Port Control Protocol Anycast", "RFC 7723", _G),
    ("2001:1::2/128", "Traversal Using Relays around NAT Anycast", "RFC 8155", _G),
    ("2001:1::3/128", "DNS-SD Service Registration Protocol Anycast", "RFC 9665", _G),
    ("2001:2::/48", "Benchmarking", "RFC 5180", _L),
    ("2001:3::/32", "AMT", "RFC 7450", _G),
    ("2001:4:112::/48", "AS112-v6", "RFC 7535", _G),
    ("2001:10::/28", "Deprecated (previously ORCHID)", "RFC 4843", _L),
    ("2001:20::/28", "ORCHIDv2", "RFC 7343", _G),
    ("2001:30::/28", "Drone Remote ID Protocol Entity Tags (DETs)", "RFC 9374", _G),
    ("2001:db8::/32", "Documentation", "RFC 3849", _L),
    ("2002::/16", "6to4", "RFC 3056", _E),
    ("2620:4f:8000::/48", "Direct Delegation AS112 Service", "RFC 7534", _G),
    ("3fff::/20", "Documentation", "RFC 9637", _L),
    ("5f00::/16", "Segment Routing (SRv6) SIDs", "RFC 9602", _L),
    ("fc00::/7", "Unique-Local", "RFC 4193, RFC 8190", _L),
    ("fe80::/10", "Link-Local Unicast", "RFC 4291", _L),
    ("fec0::/10", "Deprecated Site-Local", "RFC 3879", _L),
    ("ff00::/8", "Multicast", "RFC 4291", _L),
)

# Cloud instance metadata and platform endpoints: never a crawl target. Most sit in blocks
# refused above; they are listed so the policy says so explicitly, and because one of them
# (Azure's 168.63.129.16) is an ordinary-looking public address.
CLOUD_METADATA: dict[IPAddress, str] = {
    ipaddress.ip_address(a): who
    for a, who in (
        ("169.254.169.254", "AWS, GCP, Azure, OpenStack, Oracle, DigitalOcean... metadata"),
        ("169.254.170.2", "AWS ECS task metadata and credentials"),
        ("169.254.169.253", "AWS VPC DNS resolver"),
        ("169.254.169.123", "AWS time sync"),
        ("169.254.0.23", "Tencent Cloud metadata"),
        ("100.100.100.200", "Alibaba Cloud metadata"),
        ("192.0.0.192", "Oracle Cloud metadata"),
        ("168.63.129.16", "Azure WireServer and platform DNS (public, reachable from VMs)"),
        ("fd00:ec2::254", "AWS instance metadata over IPv6"),
        ("fd00:ec2::253", "AWS VPC DNS resolver over IPv6"),
        ("fd00:ec2::123", "AWS time sync over IPv6"),
        ("fd20:ce::254", "GCP metadata over IPv6"),
    )
}


def _index(
    rows: tuple[tuple[str, str, str, Reach], ...],
) -> list[tuple[int, dict[int, SpecialBlock]]]:
    """Blocks grouped by prefix length, longest first: a lookup is one dict probe per length."""
    by_len: dict[int, dict[int, SpecialBlock]] = {}
    for cidr, name, source, reach in rows:
        net = ipaddress.ip_network(cidr)
        by_len.setdefault(net.prefixlen, {})[int(net.network_address)] = SpecialBlock(
            net, name, source, reach
        )
    return sorted(by_len.items(), reverse=True)


_SPECIAL_INDEX = {4: _index(_IPV4_SPECIAL), 6: _index(_IPV6_SPECIAL)}
_BITS = {4: 32, 6: 128}
_NAT64_WKP = int(ipaddress.IPv6Address("64:ff9b::")) >> 32  # the /96 prefix, RFC 6052


def special_block(ip: IPAddress) -> SpecialBlock | None:
    """The most specific special-purpose block holding `ip`, if any."""
    value, bits = int(ip), _BITS[ip.version]
    for prefixlen, blocks in _SPECIAL_INDEX[ip.version]:
        shift = bits - prefixlen
        block = blocks.get(value >> shift << shift)
        if block is not None:
            return block
    return None


def embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv4-mapped, NAT64 (64:ff9b::/96) or 6to4 address carries."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if int(ip) >> 32 == _NAT64_WKP:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def registry_allows(ip: IPAddress) -> bool:
    """The table's verdict alone: not cloud metadata, not zoned, and not in a special-purpose
    block that is not globally reachable (an embedded IPv4 address judged in its place)."""
    if ip in CLOUD_METADATA:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.scope_id:
        return False  # a zone id only makes sense for link-local and site-local neighbours
    block = special_block(ip)
    if block is None or block.reach is Reach.GLOBAL:
        return True
    if block.reach is Reach.EMBEDDED_V4 and isinstance(ip, ipaddress.IPv6Address):
        v4 = embedded_ipv4(ip)
        return v4 is not None and registry_allows(v4)
    return False


def is_public(ip: IPAddress) -> bool:
    """True only if the special-purpose table allows `ip` *and* `is_global` agrees (for an
    address carrying IPv4, that IPv4's `is_global`: Python calls every mapped address private)."""
    if not registry_allows(ip):
        return False
    v4 = embedded_ipv4(ip) if isinstance(ip, ipaddress.IPv6Address) else None
    return bool((v4 if v4 is not None else ip).is_global)


# --- host parsing (WHATWG URL Standard, "host parsing" and "IPv4 parser") ---------------------


class HostError(ValueError):
    """A host that browsers would refuse, or that cannot be a DNS name."""


# https://url.spec.whatwg.org/#forbidden-domain-code-point
_FORBIDDEN_DOMAIN = frozenset("\x00\t\n\r #/:<>?@[\\]^|%\x7f") | frozenset(map(chr, range(0x20)))
_C0_OR_SPACE = "".join(map(chr, range(0x21)))  # stripped from both ends of a URL
_TAB_OR_NEWLINE = str.maketrans("", "", "\t\n\r")  # removed anywhere in a URL
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")  # https://url.spec.whatwg.org/#scheme-state
_AUTHORITY_END = re.compile(r"[/\\?#]")  # special schemes end the authority at a backslash too
_IPV6_CHARS = re.compile(r"[0-9A-Fa-f:.]+")
_RADIX_DIGITS = {10: frozenset("0123456789"), 8: frozenset("01234567")}
_RADIX_DIGITS[16] = frozenset("0123456789abcdefABCDEF")


def _ipv4_number(part: str) -> int | None:
    """WHATWG IPv4 number parser: 0x.. hex, 0.. octal, else decimal; None on failure."""
    if not part:
        return None
    radix = 10
    if part[:2] in ("0x", "0X"):
        part, radix = part[2:], 16
    elif len(part) > 1 and part[0] == "0":
        part, radix = part[1:], 8
    if not part:
        return 0
    if not _RADIX_DIGITS[radix].issuperset(part):
        return None
    return int(part, radix)


def _ends_in_number(domain: str) -> bool:
    parts = domain.split(".")
    if parts[-1] == "":
        if len(parts) == 1:
            return False
        parts.pop()
    last = parts[-1]
    return bool(last and _RADIX_DIGITS[10].issuperset(last)) or _ipv4_number(last) is not None


def _parse_ipv4(domain: str) -> ipaddress.IPv4Address:
    """WHATWG IPv4 parser: 1 to 4 parts, each decimal, octal or hex; the last fills the rest."""
    parts = domain.split(".")
    if parts[-1] == "" and len(parts) > 1:
        parts.pop()
    numbers = [_ipv4_number(p) for p in parts]
    if len(parts) > 4 or any(n is None for n in numbers):
        raise HostError(f"{domain!r} ends in a number but is not an IPv4 address")
    nums = [n for n in numbers if n is not None]
    if any(n > 255 for n in nums[:-1]) or nums[-1] >= 256 ** (5 - len(nums)):
        raise HostError(f"{domain!r}: IPv4 part out of range")
    value = nums[-1] + sum(n << (8 * (3 - i)) for i, n in enumerate(nums[:-1]))
    return ipaddress.IPv4Address(value)


def _parse_ipv6(text: str) -> ipaddress.IPv6Address:
    """An IPv6 literal; a zone id (`%eth0`, `%25eth0`) is kept, and `is_public` refuses it."""
    address, percent, zone = text.partition("%")
    if not _IPV6_CHARS.fullmatch(address) or (percent and not zone):
        raise HostError(f"[{text}] is not an IPv6 address")
    try:
        return ipaddress.IPv6Address(f"{address}%{zone}" if percent else address)
    except ValueError as exc:
        raise HostError(f"[{text}]: {exc}") from None


@functools.lru_cache(maxsize=HOST_PARSE_CACHE)
def parse_host(text: str) -> Host:
    """WHATWG host parsing for http(s): percent-decode, IDNA (UTS 46) to ASCII, then an IPv4
    literal in any spelling if the name ends in a number; else a DNS name without its trailing
    dot. Raise HostError for whatever a browser or DNS would refuse."""
    if text.startswith("["):
        if not text.endswith("]"):
            raise HostError(f"unclosed bracket in {text!r}")
        return _parse_ipv6(text[1:-1])
    domain = unquote_to_bytes(text).decode("utf-8", "replace")
    if not domain.isascii():
        try:  # the same call yarl makes, so both read a Unicode host alike
            domain = idna.encode(domain, uts46=True).decode("ascii")
        except (idna.IDNAError, UnicodeError) as exc:
            raise HostError(f"{text!r} fails IDNA: {exc}") from None
    domain = domain.lower()
    if not domain or not _FORBIDDEN_DOMAIN.isdisjoint(domain):
        raise HostError(f"{text!r} is empty or has a forbidden character")
    if _ends_in_number(domain):
        return _parse_ipv4(domain)
    name = domain[:-1] if domain.endswith(".") else domain
    labels = name.split(".")
    if len(name) > 253 or any(not 0 < len(label) <= 63 for label in labels):
        raise HostError(f"{text!r} is not a DNS name (empty or overlong label)")
    for label in labels:
        if label.startswith("xn--"):
            try:
                idna.decode(label)
            except (idna.IDNAError, UnicodeError) as exc:
                raise HostError(f"{text!r}: bad punycode label {label!r}: {exc}") from None
    return name


def _whatwg_host(url: str) -> tuple[str, str]:
    """(scheme, host text) of `url` as a browser splits it; port checked, userinfo dropped."""
    url = url.strip(_C0_OR_SPACE).translate(_TAB_OR_NEWLINE)
    match = _SCHEME.match(url)
    if match is None:
        raise HostError(f"no scheme in {url!r}")
    scheme = match.group()[:-1].lower()
    if scheme not in ("http", "https"):
        return scheme, ""
    rest = url[match.end() :].lstrip("/\\")  # special schemes skip any run of / and \
    end = _AUTHORITY_END.search(rest)
    authority = rest[: end.start()] if end else rest
    hostport = authority.rpartition("@")[2]  # the last @ ends the userinfo
    if hostport.startswith("["):
        close = hostport.find("]")
        if close < 0:
            raise HostError(f"unclosed bracket in {url!r}")
        host, after = hostport[: close + 1], hostport[close + 1 :]
        if after and not after.startswith(":"):
            raise HostError(f"junk after ] in {url!r}")
        port = after[1:]
    else:
        host, _, port = hostport.partition(":")
    if port and (not _RADIX_DIGITS[10].issuperset(port) or int(port) > 65535):
        raise HostError(f"bad port {port!r} in {url!r}")
    if not host:
        raise HostError(f"no host in {url!r}")
    return scheme, host


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def _yarl_host(url: str) -> str | None:
    return URL(url).raw_host  # what aiohttp connects to (or passes to the resolver)


def _urllib_host(url: str) -> str | None:
    return urlsplit(url).hostname  # what urls.py, scope and robots think the host is


def url_host(url: str, judge: Callable[[IPAddress], bool] = is_public) -> Host:
    """The host of an http(s) URL, read three ways that must agree: as a browser does (WHATWG),
    as aiohttp will connect (yarl) and as the rest of the engine splits URLs (urllib). Refuse
    other schemes, unparsable or ambiguous hosts, and an IP literal `judge` refuses in any
    reading."""
    try:
        scheme, whatwg = _whatwg_host(url)
    except HostError as exc:
        raise EgressRefused("bad_url", str(exc)) from None
    if scheme not in ("http", "https"):
        raise EgressRefused("scheme_not_allowed", f"{scheme!r} in {url}")
    readings: list[Host] = []
    errors: list[str] = []
    for text in (whatwg, _yarl_host, _urllib_host):
        try:
            host = text if isinstance(text, str) else text(url)
            if not host:
                raise HostError("no host")
            readings.append(parse_host(_bracketed(host)))
        except (HostError, ValueError, UnicodeError) as exc:  # yarl and urllib raise ValueError
            errors.append(f"{type(exc).__name__}: {exc}")
    bad = [str(h) for h in dict.fromkeys(readings) if not isinstance(h, str) and not judge(h)]
    if bad:
        raise EgressRefused("non_public_address", f"{bad[0]} is not a public address ({url})")
    if errors:
        raise EgressRefused("bad_url", f"{url}: {errors[0]}")
    if any(h != readings[0] for h in readings):
        shown = ", ".join(map(str, readings))
        raise EgressRefused("bad_url", f"parsers disagree on the host of {url}: {shown}")
    return readings[0]


# --- DNS -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DnsAnswer:
    """What a lookup found: addresses as text, and their TTL in seconds when it is known."""

    addresses: Sequence[str]
    ttl_s: float | None = None


Lookup = Callable[[str], Awaitable[DnsAnswer | Sequence[str]]]


@dataclass(frozen=True, slots=True)
class DnsCachePolicy:
    """How long answers are trusted (seconds) and how many names are kept."""

    ttl_s: float = DNS_TTL_S
    max_ttl_s: float = DNS_MAX_TTL_S
    negative_ttl_s: float = DNS_NEGATIVE_TTL_S
    max_entries: int = DNS_CACHE_ENTRIES


async def system_lookup(name: str) -> DnsAnswer:
    """The OS resolver (getaddrinfo, /etc/hosts included); it reports no TTL, so the cache
    uses `DnsCachePolicy.ttl_s`. aiodns/pycares, which do report TTLs, are not installed."""
    infos = await asyncio.get_running_loop().getaddrinfo(name, None, type=socket.SOCK_STREAM)
    return DnsAnswer([str(info[4][0]) for info in infos])


@dataclass(frozen=True, slots=True)
class _Cached:
    """A validated answer or a refusal, until `expires_at` (gate clock)."""

    expires_at: float
    ips: tuple[IPAddress, ...] = ()
    reason: str = ""
    detail: str = ""

    def unwrap(self) -> list[IPAddress]:
        if self.reason:
            raise EgressRefused(self.reason, self.detail)
        return list(self.ips)


def _map_key(host: str) -> str:
    """Resolve-map keys: lower case, no trailing dot, IDNs in their ASCII form."""
    key = host.strip().lower().rstrip(".")
    if key.isascii():
        return key
    try:
        return idna.encode(key, uts46=True).decode("ascii")
    except (idna.IDNAError, UnicodeError):
        return key  # no URL host can take this form, so it simply never matches


class EgressGate:
    """Decides which addresses a host may be reached at, and caches what DNS said."""

    def __init__(
        self,
        resolve: dict[str, str],
        resolve_only: bool = False,
        *,
        lookup: Lookup | None = None,
        dns: DnsCachePolicy | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.resolve_map = {_map_key(h): ipaddress.ip_address(ip) for h, ip in resolve.items()}
        self.resolve_only = resolve_only
        self.lookup: Lookup = lookup or system_lookup
        self.dns = dns or DnsCachePolicy()
        self.clock = clock
        self._cache: dict[str, _Cached] = {}
        self._pending: dict[str, asyncio.Task[_Cached]] = {}

    def address_allowed(self, ip: IPAddress) -> bool:
        """The address policy; the only seam for a test that needs a stand-in public address."""
        return is_public(ip)

    def check_url(self, url: str) -> None:
        """Refuse non-http(s) URLs, ambiguous hosts and non-public IP literals before any
        connection; names pass here and are judged by `addresses` when aiohttp resolves them."""
        host = url_host(url, self.address_allowed)
        if self.resolve_only and str(host) not in self.resolve_map:  # IP literals included
            raise EgressRefused("host_not_mapped", f"{host} is not in resolve")

    async def addresses(self, host: str) -> list[IPAddress]:
        """Every address `host` may be connected to; refuse if any answer is non-public."""
        try:
            parsed = parse_host(_bracketed(host))
        except HostError as exc:
            raise EgressRefused("bad_url", str(exc)) from None
        if not isinstance(parsed, str):  # a literal in some spelling: judged, never resolved
            if self.resolve_only and str(parsed) not in self.resolve_map:
                raise EgressRefused("host_not_mapped", f"{parsed} is not in resolve")
            if not self.address_allowed(parsed):
                raise EgressRefused("non_public_address", f"{host} is not a public address")
            return [parsed]
        pinned = self.resolve_map.get(parsed)
        if pinned is not None:
            return [pinned]
        if self.resolve_only:
            raise EgressRefused("host_not_mapped", f"{parsed} is not in resolve")
        entry = self._cache.get(parsed)
        if entry is None or entry.expires_at <= self.clock():
            entry = await self._resolve(parsed)
        return entry.unwrap()

    async def _resolve(self, name: str) -> _Cached:
        """One lookup per name at a time: concurrent requests share it (and its answer)."""
        loop = asyncio.get_running_loop()
        task = self._pending.get(name)
        if task is None or task.get_loop() is not loop:
            task = loop.create_task(self._lookup_and_validate(name))
            self._pending[name] = task
            task.add_done_callback(lambda done: self._forget(name, done))
        # shielded: a caller that times out must not cancel the lookup the others await
        return await asyncio.shield(task)

    def _forget(self, name: str, task: asyncio.Task[_Cached]) -> None:
        if self._pending.get(name) is task:
            del self._pending[name]

    async def _lookup_and_validate(self, name: str) -> _Cached:
        try:
            answer = await self.lookup(name)
        except OSError as exc:
            return self._store(name, self.dns.negative_ttl_s, "dns_failure", f"{name}: {exc}")
        if not isinstance(answer, DnsAnswer):
            answer = DnsAnswer(answer)
        ips: list[IPAddress] = []
        bad: list[str] = []
        for text in answer.addresses:
            try:
                ip = ipaddress.ip_address(text)
            except ValueError:
                bad.append(repr(text))
                continue
            if self.address_allowed(ip):
                ips.append(ip)
            else:
                bad.append(str(ip))
        if bad or not ips:
            reason = "non_public_address" if bad else "dns_failure"
            detail = f"{name} resolves to {', '.join(bad) or 'nothing'}"
            return self._store(name, self.dns.negative_ttl_s, reason, detail)
        ttl = min(self.dns.ttl_s if answer.ttl_s is None else answer.ttl_s, self.dns.max_ttl_s)
        return self._store(name, ttl, ips=tuple(dict.fromkeys(ips)))

    def _store(
        self,
        name: str,
        ttl: float,
        reason: str = "",
        detail: str = "",
        ips: tuple[IPAddress, ...] = (),
    ) -> _Cached:
        """Cache a refusal, or addresses `_lookup_and_validate` has just validated (the only
        caller), for `ttl` seconds; a TTL of 0 is used once and not kept."""
        entry = _Cached(self.clock() + ttl, ips, reason, detail)
        self._cache.pop(name, None)
        if ttl > 0:
            while len(self._cache) >= self.dns.max_entries > 0:
                del self._cache[next(iter(self._cache))]  # oldest first
            self._cache[name] = entry
        return entry


class PinnedResolver(AbstractResolver):
    """aiohttp resolver that only ever returns addresses the gate validated."""

    def __init__(self, gate: EgressGate) -> None:
        self.gate = gate

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        try:
            ips = await self.gate.addresses(host)
        except EgressRefused as exc:
            raise OSError(f"egress refused: {exc}") from exc
        results: list[ResolveResult] = []
        for ip in ips:
            if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
                ip = ip.ipv4_mapped  # connect over IPv4 to the address that was judged
            ip_family = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
            if family in (socket.AF_INET, socket.AF_INET6) and ip_family != family:
                continue
            results.append(
                ResolveResult(
                    hostname=host,
                    host=str(ip),
                    port=port,
                    family=ip_family,
                    proto=0,
                    flags=socket.AI_NUMERICHOST,
                )
            )
        if not results:
            raise OSError(f"{host}: no validated address of family {family!r}")
        return results

    async def close(self) -> None:
        return None
