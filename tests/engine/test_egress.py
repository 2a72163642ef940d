"""The egress gate (SSRF defence): hosts read like browsers read them, public addresses only by
the IANA tables and is_global, a TTL cache that only holds validated answers, the pinned
resolve map, and aiohttp connecting only where the gate said. No test leaves loopback: every
name is answered by an injected lookup, except `localhost` through the real system lookup."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.abc import AbstractResolver, ResolveResult

from atlas_pipeline.egress import (
    CLOUD_METADATA,
    DnsAnswer,
    DnsCachePolicy,
    EgressGate,
    IPAddress,
    PinnedResolver,
    Reach,
    is_public,
    registry_allows,
    special_block,
    url_host,
)
from atlas_pipeline.errors import EgressRefused

ip = ipaddress.ip_address


def refusal(fn: Callable[..., Any], *args: Any) -> str:
    with pytest.raises(EgressRefused) as info:
        result = fn(*args)
        if asyncio.iscoroutine(result):
            asyncio.run(result)
    return info.value.reason


class Dns:
    """An injected lookup that records every name asked. Per name: one answer (addresses, a
    DnsAnswer, or an exception to raise), or a tuple of answers given one per call, the last
    repeating. An unknown name fails like NXDOMAIN."""

    def __init__(self, answers: dict[str, Any] | None = None) -> None:
        self.answers: dict[str, Any] = dict(answers or {})
        self.calls: list[str] = []

    async def __call__(self, name: str) -> DnsAnswer | Sequence[str]:
        self.calls.append(name)
        script = self.answers.get(name)
        if script is None:
            raise socket.gaierror(socket.EAI_NONAME, f"{name}: Name or service not known")
        if isinstance(script, tuple):
            answer, rest = script[0], script[1:]
            if rest:
                self.answers[name] = rest
        else:
            answer = script
        if isinstance(answer, Exception):
            raise answer
        return answer  # type: ignore[no-any-return]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# --- the address table ------------------------------------------------------------------------

NON_PUBLIC_ADDRESSES = [
    # IPv4 special-purpose registry
    "0.0.0.0",
    "0.1.2.3",
    "10.0.0.1",
    "10.255.255.255",
    "100.64.0.1",  # shared address space (carrier-grade NAT)
    "100.127.255.255",
    "127.0.0.1",
    "127.255.255.254",
    "169.254.0.1",
    "172.16.0.1",
    "172.31.255.255",
    "192.0.0.1",  # IETF protocol assignments
    "192.0.0.8",  # dummy address
    "192.0.0.170",  # NAT64 discovery
    "192.0.2.1",  # TEST-NET-1
    "192.88.99.1",  # deprecated 6to4 relay anycast
    "192.168.1.1",
    "198.18.0.1",  # benchmarking
    "198.19.255.255",
    "198.51.100.7",  # TEST-NET-2
    "203.0.113.9",  # TEST-NET-3
    "224.0.0.1",  # multicast
    "239.255.255.250",
    "240.0.0.1",  # reserved
    "255.255.255.255",
    # cloud metadata and platform endpoints
    "169.254.169.254",
    "169.254.170.2",
    "100.100.100.200",
    "192.0.0.192",
    "168.63.129.16",  # Azure WireServer: public-looking
    "fd00:ec2::254",
    "fd20:ce::254",
    # IPv6 special-purpose registry and address space
    "::",
    "::1",
    "::127.0.0.1",  # IPv4-compatible (deprecated)
    "::8.8.8.8",  # IPv4-compatible, even of a public address
    "::ffff:127.0.0.1",
    "::ffff:10.0.0.1",
    "::ffff:169.254.169.254",
    "::ffff:168.63.129.16",
    "64:ff9b::7f00:1",  # NAT64 of loopback
    "64:ff9b::a9fe:a9fe",  # NAT64 of metadata
    "64:ff9b:1::8.8.8.8",  # local-use NAT64 prefix, whatever it embeds
    "100::1",  # discard-only
    "2001::1",  # Teredo
    "2001:0:4136:e378:8000:63bf:3fff:fdd2",  # Teredo with an embedded client
    "2001:2::1",  # benchmarking
    "2001:10::1",  # deprecated ORCHID
    "2001:db8::1",
    "2002:7f00:1::1",  # 6to4 of loopback
    "2002:a9fe:a9fe::",  # 6to4 of metadata
    "2002:c0a8:101::1",  # 6to4 of 192.168.1.1
    "3fff::1",  # documentation (RFC 9637)
    "5f00::1",  # SRv6 SIDs
    "fc00::1",
    "fd12:3456::1",
    "fe80::1",
    "febf::1",
    "fec0::1",  # deprecated site-local
    "ff02::1",
    "fe80::1%eth0",  # zoned
    "4000::1",  # outside 2000::/3
]


@pytest.mark.parametrize("address", NON_PUBLIC_ADDRESSES)
def test_non_public_addresses_are_refused(address: str) -> None:
    assert is_public(ip(address)) is False


# Python 3.11's is_global calls all of these global; the table alone must refuse them.
@pytest.mark.parametrize(
    "address",
    [
        "224.0.0.1",
        "192.0.0.192",
        "168.63.129.16",
        "::127.0.0.1",
        "3fff::1",
        "5f00::1",
        "2002:7f00:1::1",
        "64:ff9b::7f00:1",
        "64:ff9b:1::1",
        "fec0::1",
        "192.88.99.1",
    ],
)
def test_the_registry_table_refuses_what_is_global_misses(address: str) -> None:
    assert registry_allows(ip(address)) is False


@pytest.mark.parametrize(
    ("address", "reach"),
    [
        ("192.0.0.9", Reach.GLOBAL),  # PCP anycast inside the not-global 192.0.0.0/24
        ("192.0.0.10", Reach.GLOBAL),
        ("192.0.0.11", Reach.LOCAL),
        ("2001:1::1", Reach.GLOBAL),  # inside 2001::/23
        ("2001:20::1", Reach.GLOBAL),  # ORCHIDv2
        ("2001:4:112::1", Reach.GLOBAL),
        ("2001:4:113::1", Reach.LOCAL),
        ("2001:0:1::1", Reach.LOCAL),  # Teredo, inside 2001::/23 too
        ("2a00:1450::1", Reach.GLOBAL),
        ("::ffff:1.2.3.4", Reach.EMBEDDED_V4),
        ("2002:808:808::", Reach.EMBEDDED_V4),
    ],
)
def test_the_most_specific_block_decides(address: str, reach: Reach) -> None:
    block = special_block(ip(address))
    assert block is not None and block.reach is reach


def test_every_metadata_address_is_refused_by_the_table() -> None:
    assert len(CLOUD_METADATA) >= 10
    assert not any(registry_allows(a) or is_public(a) for a in CLOUD_METADATA)


PUBLIC_ADDRESSES = [
    "8.8.8.8",
    "1.1.1.1",
    "9.9.9.9",
    "93.184.216.34",
    "172.32.0.1",  # just outside 172.16/12
    "100.63.255.255",  # just below 100.64/10
    "100.128.0.1",  # just above
    "198.20.0.1",  # just above 198.18/15
    "208.80.154.224",
    "2606:4700:4700::1111",
    "2001:4860:4860::8888",
    "2a00:1450:4001:81a::200e",
    "2620:0:862:ed1a::1",
    "::ffff:8.8.8.8",  # IPv4-mapped public, judged as IPv4
    "2002:808:808::1",  # 6to4 of a public address
    "64:ff9b::808:808",  # NAT64 of a public address
]


@pytest.mark.parametrize("address", PUBLIC_ADDRESSES)
def test_ordinary_public_addresses_pass(address: str) -> None:
    assert is_public(ip(address)) is True


# --- URLs: every spelling of a non-public destination -----------------------------------------

NP, BAD, SCHEME = "non_public_address", "bad_url", "scheme_not_allowed"

HOSTILE_URLS = [
    # schemes
    ("ftp://example.test/x", SCHEME),
    ("file:///etc/passwd", SCHEME),
    ("gopher://example.test/", SCHEME),
    ("javascript:alert(1)", SCHEME),
    ("data:text/html,hi", SCHEME),
    ("ws://example.test/", SCHEME),
    ("no-scheme.example.test/", BAD),
    ("http:///nohost", BAD),  # browsers read host "nohost", aiohttp none: ambiguous
    ("http://", BAD),
    # plain literals
    ("http://127.0.0.1/", NP),
    ("http://127.0.0.1:8080/admin", NP),
    ("HTTP://127.0.0.1/", NP),
    ("http://10.1.2.3/", NP),
    ("http://192.168.0.1/", NP),
    ("http://172.16.0.1/", NP),
    ("http://0.0.0.0/", NP),
    ("http://100.64.0.1/", NP),
    ("http://224.0.0.1/", NP),
    ("http://169.254.169.254/latest/meta-data/", NP),
    ("http://100.100.100.200/latest/meta-data/", NP),
    ("http://192.0.0.192/opc/v2/instance/", NP),
    ("http://168.63.129.16/machine?comp=goalstate", NP),
    # decimal, octal, hex and short IPv4 forms
    ("http://2130706433/", NP),
    ("http://017700000001/", NP),
    ("http://0x7f000001/", NP),
    ("http://0177.0.0.1/", NP),
    ("http://0177.0000.0000.0001/", NP),
    ("http://0x7f.0.0.1/", NP),
    ("http://0x7f.1/", NP),
    ("http://0X7F.0X0.0X0.0X1/", NP),
    ("http://127.1/", NP),
    ("http://127.0.1/", NP),
    ("http://127.000.000.001/", NP),  # leading zeros are octal: still 127.0.0.1
    ("http://0/", NP),
    ("http://0x/", NP),
    ("http://0xa9fea9fe/", NP),  # 169.254.169.254
    ("http://2852039166/", NP),  # 169.254.169.254
    ("http://0251.0376.0251.0376/", NP),  # 169.254.169.254
    ("http://169.254.43518/", NP),  # 169.254.169.254
    ("http://10.1/", NP),
    ("http://1.2.3.4.5/", BAD),  # ends in a number, not IPv4: browsers refuse it
    ("http://127.0.0.256/", BAD),
    ("http://08.0.0.1/", BAD),  # 8 is not an octal digit
    # trailing dots, whitespace, tabs and newlines (browsers drop tabs and newlines)
    ("http://127.0.0.1./", NP),
    ("http://0x7f.1./", NP),
    ("  http://127.0.0.1/", NP),
    ("http://12\t7.0.0.1/", NP),
    ("http://127.0.\n0.1/", NP),
    ("http://127.0.0.1\r/", NP),
    # userinfo and backslash tricks
    ("http://public.example@127.0.0.1/", NP),
    ("http://user:pass@127.0.0.1:80/", NP),
    ("http://a@b@10.0.0.1/", NP),
    ("http://public.example:80@169.254.169.254/", NP),
    ("http://public.example\\@127.0.0.1/", NP),  # browsers: public.example; urllib: 127.0.0.1
    ("http://127.0.0.1\\@public.example/", NP),  # browsers: 127.0.0.1; urllib: public.example
    ("http:\\\\127.0.0.1/", NP),
    ("http:/\\127.0.0.1/", NP),
    ("http:127.0.0.1/", NP),
    ("https:/127.0.0.1/", NP),
    # percent-encoded and Unicode spellings
    ("http://%31%32%37.0.0.1/", NP),
    ("http://%31%32%37%2e%30%2e%30%2e%31/", NP),
    ("http://127%2e0%2e0%2e1/", NP),
    ("http://%30x7f.1/", NP),
    ("http://\uff11\uff12\uff17.\uff10.\uff10.\uff11/", NP),  # fullwidth digits
    ("http://127\u30020\u30020\u30021/", NP),  # ideographic full stops
    ("http://127\uff0e0\uff0e0\uff0e1/", NP),  # fullwidth full stops
    ("http://\u2460\u2461\u2466.0.0.1/", NP),  # circled digits: UTS 46 maps them to 127
    ("http://127.0.0.1%00.public.example/", BAD),
    ("http://a%20b.example/", BAD),
    ("http://%ff.example/", BAD),  # not UTF-8
    # IPv6 literals
    ("http://[::1]/", NP),
    ("http://[::1]:80/", NP),
    ("http://[0:0:0:0:0:0:0:1]/", NP),
    ("http://[::]/", NP),
    ("http://[::ffff:127.0.0.1]/", NP),
    ("http://[::ffff:7f00:1]/", NP),
    ("http://[0:0:0:0:0:ffff:127.0.0.1]/", NP),
    ("http://[::ffff:a9fe:a9fe]/", NP),
    ("http://[::127.0.0.1]/", NP),
    ("http://[::7f00:1]/", NP),
    ("http://[64:ff9b::127.0.0.1]/", NP),
    ("http://[64:ff9b::a00:1]/", NP),
    ("http://[64:ff9b:1::8.8.8.8]/", NP),
    ("http://[2002:7f00:1::]/", NP),
    ("http://[2002:a9fe:a9fe::1]/", NP),
    ("http://[2001::1]/", NP),
    ("http://[2001:db8::1]/", NP),
    ("http://[3fff::1]/", NP),
    ("http://[fc00::1]/", NP),
    ("http://[fd00::1]:81/", NP),
    ("http://[fd00:ec2::254]/latest/meta-data/", NP),
    ("http://[fe80::1]/", NP),
    ("http://[fec0::1]/", NP),
    ("http://[ff02::1]/", NP),
    ("http://[fe80::1%25eth0]/", NP),  # zone id (RFC 6874 spelling)
    ("http://[fe80::1%eth0]/", NP),
    ("http://[2606:4700::1%25eth0]/", NP),  # a zone id on anything is refused
    ("http://[127.0.0.1]/", BAD),
    ("http://[::1/", BAD),
    ("http://[::1]x/", BAD),
    # malformed names and IDNA failures
    ("http://exa mple.com/", BAD),
    ("http://example..com/", BAD),
    ("http://xn--/", BAD),
    ("http://xn--a.example/", BAD),
    ("http://ex\u200dample.example/", BAD),  # joiner outside its context
    ("http://\u202eevil.example/", BAD),  # bidi override
    ("http://\ufffd.example/", BAD),
    ("http://" + "a" * 64 + ".example/", BAD),
    ("http://example.com:99999/", BAD),
    ("http://example.com:8o/", BAD),
    ("http://example.0x10/", BAD),
]


@pytest.mark.parametrize(("url", "reason"), HOSTILE_URLS)
def test_hostile_urls_are_refused_before_any_connection(url: str, reason: str) -> None:
    dns = Dns()
    gate = EgressGate({}, lookup=dns)
    assert refusal(gate.check_url, url) == reason
    assert dns.calls == []


def test_the_hostile_tables_are_big_enough() -> None:
    assert len(HOSTILE_URLS) >= 60
    assert len(NON_PUBLIC_ADDRESSES) >= 60
    assert len(PUBLIC_URLS) + len(PUBLIC_NAMES) >= 15


PUBLIC_URLS = [
    ("http://93.184.216.34/", ip("93.184.216.34")),
    ("https://8.8.8.8/dns-query", ip("8.8.8.8")),
    ("http://1.1.1.1:8080/x?y#z", ip("1.1.1.1")),
    ("https://[2606:4700:4700::1111]/", ip("2606:4700:4700::1111")),
    ("https://[2001:4860:4860::8888]:443/", ip("2001:4860:4860::8888")),
    ("http://[::ffff:8.8.8.8]/", ip("::ffff:8.8.8.8")),
    ("http://134744072/", ip("8.8.8.8")),  # a browser goes to 8.8.8.8 too
    ("https://example.com/", "example.com"),
    ("https://EXAMPLE.com./a", "example.com"),
    ("https://user:pw@example.com/", "example.com"),
    ("https://www.wikipedia.org/wiki/Main_Page", "www.wikipedia.org"),
    ("https://b\u00fccher.example/", "xn--bcher-kva.example"),
    ("https://xn--bcher-kva.example/", "xn--bcher-kva.example"),
    ("https://fa\u00df.de/", "xn--fa-hia.de"),
    ("https://\u4f8b\u3048.\u30c6\u30b9\u30c8/", "xn--r8jz45g.xn--zckzah"),
    ("http://exa\nmple.com/", "example.com"),  # browsers drop the newline
    ("https://_dmarc.example.com/", "_dmarc.example.com"),
    ("http://1e100.net/", "1e100.net"),
    ("http://127.0.0.1%2f@public.example/", "public.example"),  # %2f stays in the userinfo
]


@pytest.mark.parametrize(("url", "host"), PUBLIC_URLS)
def test_ordinary_urls_pass_the_check(url: str, host: object) -> None:
    dns = Dns()
    EgressGate({}, lookup=dns).check_url(url)
    assert url_host(url) == host
    assert dns.calls == []  # names are judged when aiohttp resolves them, not here


PUBLIC_NAMES = [
    ("example.com", ["93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946"]),
    ("www.wikipedia.org", ["208.80.154.224", "2620:0:862:ed1a::1"]),
    ("xn--bcher-kva.example", ["81.169.145.78"]),
    ("cdn.example.net", ["151.101.1.69", "151.101.65.69"]),
    ("v6only.example", ["2a00:1450:4001:81a::200e"]),
    ("nat64.example", ["64:ff9b::808:808"]),
    ("mapped.example", ["::ffff:1.1.1.1"]),
    ("dns.google", ["8.8.4.4"]),
]


@pytest.mark.parametrize(("name", "answers"), PUBLIC_NAMES)
def test_public_names_resolve_to_their_validated_addresses(name: str, answers: list[str]) -> None:
    dns = Dns({name: answers})
    gate = EgressGate({}, lookup=dns)
    assert asyncio.run(gate.addresses(name)) == [ip(a) for a in answers]
    assert asyncio.run(gate.addresses(name.upper() + ".")) == [ip(a) for a in answers]
    assert dns.calls == [name]


@pytest.mark.parametrize(
    ("answers", "reason"),
    [
        (["10.0.0.5"], NP),
        (["127.0.0.1"], NP),
        (["93.184.216.34", "127.0.0.1"], NP),  # any bad answer refuses them all
        (["2606:4700::1", "::1"], NP),
        (["169.254.169.254"], NP),
        (["168.63.129.16"], NP),
        (["fd00:ec2::254"], NP),
        (["::ffff:127.0.0.1"], NP),
        (["::ffff:7f00:1"], NP),
        (["64:ff9b::a9fe:a9fe"], NP),
        (["2002:a00:1::1"], NP),
        (["fe80::1%eth0"], NP),  # scope id from getaddrinfo, still link-local
        (["0.0.0.0"], NP),
        (["not-an-address"], NP),
        ([], "dns_failure"),
        (socket.gaierror(socket.EAI_NONAME, "nope"), "dns_failure"),
        (OSError("resolver unreachable"), "dns_failure"),
    ],
)
def test_names_whose_answers_are_not_all_public_are_refused(answers: Any, reason: str) -> None:
    gate = EgressGate({}, lookup=Dns({"evil.example": answers}))
    assert refusal(gate.addresses, "evil.example") == reason


@pytest.mark.parametrize(
    "host", ["2130706433", "0x7f.1", "127.1", "0177.0.0.1", "127.0.0.1.", "%31%32%37.0.0.1"]
)
def test_numeric_hosts_handed_to_the_resolver_are_judged_never_looked_up(host: str) -> None:
    # aiohttp hands non-canonical numeric hosts to the resolver; getaddrinfo would read them
    # as 127.0.0.1 (inet_aton), so the gate must read them first
    dns = Dns()
    assert refusal(EgressGate({}, lookup=dns).addresses, host) == NP
    assert dns.calls == []


def test_mapping_a_name_does_not_unlock_an_ip_literal() -> None:
    gate = EgressGate({"127.0.0.1": "127.0.0.1", "2130706433": "127.0.0.1"})
    assert refusal(gate.check_url, "http://127.0.0.1/") == NP
    assert refusal(gate.check_url, "http://2130706433/") == NP
    assert refusal(gate.addresses, "2130706433") == NP


def test_resolve_only_refuses_unmapped_hosts_at_check() -> None:
    gate = EgressGate({"news.test": "127.0.0.1"}, resolve_only=True)
    gate.check_url("http://news.test:8080/a")
    gate.check_url("http://NEWS.test./a")
    assert refusal(gate.check_url, "http://unmapped.example.test/") == "host_not_mapped"


@pytest.mark.parametrize("url", ["http://93.184.216.34/", "http://[2606:4700:4700::1111]/"])
def test_resolve_only_refuses_public_ip_literals(url: str) -> None:
    # resolve_only means nothing outside the map: a literal public address is still outside it
    gate = EgressGate({"news.test": "127.0.0.1"}, resolve_only=True)
    assert refusal(gate.check_url, url) == "host_not_mapped"


def test_resolve_map_matches_the_exact_host_name_only() -> None:
    dns = Dns()
    gate = EgressGate(
        {"News.Test.": "127.0.0.1", "v6.test": "::1", "b\u00fccher.test": "::1"}, lookup=dns
    )
    assert asyncio.run(gate.addresses("news.test")) == [ip("127.0.0.1")]
    assert asyncio.run(gate.addresses("NEWS.TEST.")) == [ip("127.0.0.1")]
    assert asyncio.run(gate.addresses("v6.test")) == [ip("::1")]
    assert asyncio.run(gate.addresses("xn--bcher-kva.test")) == [ip("::1")]
    assert dns.calls == []
    assert EgressGate({"\u200d.test": "127.0.0.1"}).resolve_map  # a bad IDN key never matches
    for near_miss in ("www.news.test", "news.test.evil.example", "news-test"):
        assert refusal(gate.addresses, near_miss) == "dns_failure"  # looked up, not pinned
    assert dns.calls == ["www.news.test", "news.test.evil.example", "news-test"]


def test_a_name_that_looks_like_an_address_is_judged_by_its_answers() -> None:
    dns = Dns({"127.0.0.1.nip.io": ["127.0.0.1"]})
    gate = EgressGate({}, lookup=dns)
    gate.check_url("http://127.0.0.1.nip.io/")
    assert refusal(gate.addresses, "127.0.0.1.nip.io") == NP


# --- the DNS cache ----------------------------------------------------------------------------


def test_answers_are_cached_for_their_ttl() -> None:
    clock = Clock()
    dns = Dns({"a.example": (DnsAnswer(["93.184.216.34"], ttl_s=30), DnsAnswer(["8.8.8.8"]))})
    gate = EgressGate({}, lookup=dns, clock=clock)
    assert asyncio.run(gate.addresses("a.example")) == [ip("93.184.216.34")]
    clock.now += 29.9
    assert asyncio.run(gate.addresses("a.example")) == [ip("93.184.216.34")]
    assert len(dns.calls) == 1
    clock.now += 0.1
    assert asyncio.run(gate.addresses("a.example")) == [ip("8.8.8.8")]
    assert len(dns.calls) == 2


def test_a_lookup_without_ttl_uses_the_configured_one_and_long_ttls_are_capped() -> None:
    clock = Clock()
    dns = Dns({"a.example": ["8.8.8.8"], "b.example": DnsAnswer(["1.1.1.1"], ttl_s=86400)})
    policy = DnsCachePolicy(ttl_s=10, max_ttl_s=100)
    gate = EgressGate({}, lookup=dns, dns=policy, clock=clock)

    def ask_at(t: float, *names: str) -> None:
        clock.now = 1000.0 + t
        for name in names:
            asyncio.run(gate.addresses(name))

    ask_at(0, "a.example", "b.example")
    ask_at(9.9, "a.example", "b.example")
    assert dns.calls == ["a.example", "b.example"]
    ask_at(10, "a.example", "b.example")  # a's fixed 10 s are over
    assert dns.calls == ["a.example", "b.example", "a.example"]
    ask_at(99.9, "b.example")
    assert dns.calls == ["a.example", "b.example", "a.example"]
    ask_at(100, "b.example")  # b kept 100 s, not the day its TTL asked for
    assert dns.calls == ["a.example", "b.example", "a.example", "b.example"]


def test_a_zero_ttl_is_never_cached() -> None:
    dns = Dns({"a.example": DnsAnswer(["8.8.8.8"], ttl_s=0)})
    gate = EgressGate({}, lookup=dns)
    for _ in range(3):
        asyncio.run(gate.addresses("a.example"))
    assert len(dns.calls) == 3


@pytest.mark.parametrize("bad", [["127.0.0.1"], OSError("SERVFAIL")])
def test_refusals_are_cached_briefly(bad: Any) -> None:
    clock = Clock()
    dns = Dns({"a.example": (bad, ["8.8.8.8"])})
    gate = EgressGate({}, lookup=dns, clock=clock, dns=DnsCachePolicy(negative_ttl_s=5))
    first = refusal(gate.addresses, "a.example")
    clock.now += 4.9
    assert refusal(gate.addresses, "a.example") == first
    assert len(dns.calls) == 1
    clock.now += 0.1
    assert asyncio.run(gate.addresses("a.example")) == [ip("8.8.8.8")]


def test_the_cache_never_holds_an_unvalidated_answer() -> None:
    # a public answer is cached; the loopback answer that replaces it is refused, not cached
    clock = Clock()
    dns = Dns({"a.example": (["8.8.8.8"], ["8.8.8.8", "127.0.0.1"], ["127.0.0.1"])})
    gate = EgressGate({}, lookup=dns, clock=clock, dns=DnsCachePolicy(ttl_s=60))
    assert asyncio.run(gate.addresses("a.example")) == [ip("8.8.8.8")]
    clock.now += 60
    assert refusal(gate.addresses, "a.example") == NP
    for _ in range(3):
        clock.now += 60
        assert refusal(gate.addresses, "a.example") == NP
    assert len(dns.calls) == 5


def test_concurrent_misses_share_one_lookup() -> None:
    started = 0

    async def slow(name: str) -> list[str]:
        nonlocal started
        started += 1
        await asyncio.sleep(0.05)
        return ["8.8.8.8"]

    gate = EgressGate({}, lookup=slow)

    async def many() -> list[list[IPAddress]]:
        return await asyncio.gather(*(gate.addresses("a.example") for _ in range(20)))

    assert asyncio.run(many()) == [[ip("8.8.8.8")]] * 20
    assert started == 1


def test_a_waiter_that_times_out_does_not_cancel_the_shared_lookup() -> None:
    async def slow(name: str) -> list[str]:
        await asyncio.sleep(0.1)
        return ["8.8.8.8"]

    gate = EgressGate({}, lookup=slow)

    async def scenario() -> list[IPAddress]:
        patient = asyncio.create_task(gate.addresses("a.example"))
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(gate.addresses("a.example"), 0.01)
        return await patient

    assert asyncio.run(scenario()) == [ip("8.8.8.8")]


def test_the_cache_is_bounded_oldest_first() -> None:
    dns = Dns({n: ["8.8.8.8"] for n in ("a.example", "b.example", "c.example")})
    gate = EgressGate({}, lookup=dns, dns=DnsCachePolicy(max_entries=2))
    for name in ("a.example", "b.example", "c.example", "c.example", "b.example", "a.example"):
        asyncio.run(gate.addresses(name))
    assert dns.calls == ["a.example", "b.example", "c.example", "a.example"]


def test_the_system_lookup_refuses_localhost() -> None:
    # the default lookup is the OS resolver; localhost is the only name a test may ask it
    assert refusal(EgressGate({}).addresses, "localhost") == NP


@pytest.fixture
def no_dns(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Fail loudly if anything asks the system resolver."""
    asked: list[str] = []

    def tripwire(host: Any, *args: Any, **kwargs: Any) -> Any:
        asked.append(str(host))
        raise AssertionError(f"DNS lookup of {host!r}")

    monkeypatch.setattr(socket, "getaddrinfo", tripwire)
    return asked


def test_resolve_only_refuses_an_unmapped_host_without_dns(no_dns: list[str]) -> None:
    gate = EgressGate({"news.test": "127.0.0.1"}, resolve_only=True)
    with pytest.raises(EgressRefused) as info:
        asyncio.run(gate.addresses("unmapped.example.test"))
    assert info.value.reason == "host_not_mapped"
    assert "unmapped.example.test" in str(info.value)
    assert no_dns == []


def test_tripwire_catches_a_lookup(no_dns: list[str]) -> None:
    # the no_dns fixture must really see lookups, or the test above proves nothing
    with pytest.raises(AssertionError):
        asyncio.run(EgressGate({}).addresses("unmapped.example.test"))
    assert no_dns == ["unmapped.example.test"]


# --- through aiohttp, against real servers on loopback -----------------------------------------


@dataclass
class Web:
    """aiohttp servers on one port at several loopback addresses, each logging its hits."""

    port: int
    hits: dict[str, list[str]] = field(default_factory=dict)  # bound address -> Host headers


@pytest.fixture
def loopback_web() -> Iterator[Web]:
    """`validated` on 127.0.0.2 (stand-in for a public address) and `canary` on 127.0.0.1 (what
    a rebinding would reach), the same port, served from a thread with its own loop."""
    loop = asyncio.new_event_loop()
    started = threading.Event()
    runners: list[web.AppRunner] = []
    state: dict[str, Any] = {}

    def app(label: str, log: list[str]) -> web.Application:
        async def handle(request: web.Request) -> web.Response:
            log.append(request.host)
            assert request.transport is not None
            reached = request.transport.get_extra_info("sockname")[0]
            return web.Response(text=f"{label} at {reached}")

        application = web.Application()
        application.router.add_get("/{tail:.*}", handle)
        return application

    async def start() -> None:
        for _ in range(20):  # find a port free on both addresses
            hits: dict[str, list[str]] = {"127.0.0.1": [], "127.0.0.2": []}
            canary = web.AppRunner(app("canary", hits["127.0.0.1"]))
            await canary.setup()
            await web.TCPSite(canary, "127.0.0.1", 0).start()
            port = canary.addresses[0][1]
            validated = web.AppRunner(app("validated", hits["127.0.0.2"]))
            await validated.setup()
            try:
                await web.TCPSite(validated, "127.0.0.2", port).start()
            except OSError:
                await validated.cleanup()
                await canary.cleanup()
                continue
            runners.extend([canary, validated])
            state["web"] = Web(port, hits)
            return

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(start())
        started.set()
        loop.run_forever()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert started.wait(10) and "web" in state
    yield state["web"]
    for runner in runners:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    loop.close()


STAND_IN = ip("127.0.0.2")


class StandInGate(EgressGate):
    """The production gate with one change: 127.0.0.2 counts as public, because a test may not
    reach a real public address. Everything else (lookup, cache, pinning) is untouched."""

    def address_allowed(self, address: IPAddress) -> bool:
        return address == STAND_IN or super().address_allowed(address)


async def get(gate: EgressGate, url: str, resolver: AbstractResolver | None = None) -> Any:
    """What the fetcher does: check the URL, then GET through the gate's pinned resolver on a
    fresh connection (force_close), so every request resolves again. Returns (status, body)
    or the refusal text."""
    connector = aiohttp.TCPConnector(
        resolver=resolver or PinnedResolver(gate), use_dns_cache=False, force_close=True
    )
    async with aiohttp.ClientSession(connector=connector, trust_env=False) as session:
        try:
            gate.check_url(url)
            async with session.get(url, timeout=aiohttp.ClientTimeout(total=5)) as resp:
                return resp.status, await resp.text()
        except EgressRefused as exc:
            return f"egress refused: {exc}"
        except aiohttp.ClientConnectorError as exc:
            return str(exc.os_error)


def test_dns_rebinding_never_reaches_the_second_answer(loopback_web: Web) -> None:
    """The attack: a name answers a public address when checked and loopback when connected.

    Design: two real servers on one port, `validated` on 127.0.0.2 (the stand-in public
    address; only `StandInGate.address_allowed` knows it is allowed) and `canary` on 127.0.0.1.
    The injected lookup answers 127.0.0.2 the first time and 127.0.0.1 ever after. Requests go
    through a real aiohttp session with `PinnedResolver` and a fresh connection each, so aiohttp
    asks the resolver every time. What must hold: within the TTL every connection goes to the
    address that was validated (the peer is 127.0.0.2, the lookup is not asked again); once the
    TTL runs out the loopback answer is refused; the canary never sees a request. The control
    test below shows this setup does catch a rebinding when validation and connection use two
    lookups."""
    clock = Clock()
    dns = Dns({"rebind.example": (["127.0.0.2"], ["127.0.0.1"])})
    gate = StandInGate({}, lookup=dns, dns=DnsCachePolicy(ttl_s=30), clock=clock)
    url = f"http://rebind.example:{loopback_web.port}/"

    async def scenario() -> list[Any]:
        results = [await get(gate, url) for _ in range(3)]
        results += await asyncio.gather(*(get(gate, url) for _ in range(3)))
        clock.now += 30
        results.append(await get(gate, url))
        results.append(await get(gate, url))
        return results

    results = asyncio.run(scenario())
    assert results[:6] == [(200, "validated at 127.0.0.2")] * 6
    assert all("non_public_address" in r and "127.0.0.1" in r for r in results[6:])
    assert dns.calls == ["rebind.example", "rebind.example"]  # second ask after the TTL only
    assert loopback_web.hits["127.0.0.1"] == []
    assert loopback_web.hits["127.0.0.2"] == [f"rebind.example:{loopback_web.port}"] * 6


def test_dns_rebinding_without_a_cache_is_refused_at_the_next_connection(
    loopback_web: Web,
) -> None:
    dns = Dns({"rebind.example": (DnsAnswer(["127.0.0.2"], 0), DnsAnswer(["127.0.0.1"], 0))})
    gate = StandInGate({}, lookup=dns)
    url = f"http://rebind.example:{loopback_web.port}/x"
    first, second = asyncio.run(get(gate, url)), asyncio.run(get(gate, url))
    assert first == (200, "validated at 127.0.0.2")
    assert "egress refused: non_public_address" in second
    assert loopback_web.hits["127.0.0.1"] == []


class CheckThenResolve(AbstractResolver):
    """The broken pattern the pinned resolver replaces: validate with one lookup, connect with
    another (like a gate check followed by aiohttp's own resolver)."""

    def __init__(self, gate: EgressGate, dns: Dns) -> None:
        self.gate, self.dns = gate, dns

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        await self.gate.addresses(host)  # validated...
        answer = await self.dns(host)  # ...then asked again to connect
        return [
            ResolveResult(
                hostname=host, host=str(a), port=port, family=socket.AF_INET, proto=0, flags=0
            )
            for a in answer
        ]

    async def close(self) -> None:
        return None


def test_control_check_then_resolve_is_caught_by_the_canary(loopback_web: Web) -> None:
    dns = Dns({"rebind.example": (["127.0.0.2"], ["127.0.0.1"])})
    gate = StandInGate({}, lookup=dns)
    url = f"http://rebind.example:{loopback_web.port}/"
    assert asyncio.run(get(gate, url, CheckThenResolve(gate, dns))) == (200, "canary at 127.0.0.1")
    assert loopback_web.hits["127.0.0.1"] == [f"rebind.example:{loopback_web.port}"]


LOOPBACK_SPELLINGS = [
    "http://127.0.0.1:{port}/",
    "http://2130706433:{port}/",
    "http://0x7f.1:{port}/",
    "http://0177.0.0.1:{port}/",
    "http://127.1:{port}/",
    "http://127.0.0.1.:{port}/",
    "http://%31%32%37.0.0.1:{port}/",
    "http://\uff11\uff12\uff17.\uff10.\uff10.\uff11:{port}/",
    "http://127\u30020\u30020\u30021:{port}/",
    "http://public.example@127.0.0.1:{port}/",
    "http://public.example\\@127.0.0.1:{port}/",
    "http://[::ffff:127.0.0.1]:{port}/",
    "http://localhost:{port}/",
    "http://LOCALHOST.:{port}/",
    "http://loopback.example:{port}/",  # a name whose DNS answer is loopback
]


@pytest.mark.parametrize("spelling", LOOPBACK_SPELLINGS)
def test_no_spelling_of_loopback_reaches_the_canary(loopback_web: Web, spelling: str) -> None:
    dns = Dns({"localhost": ["127.0.0.1"], "loopback.example": ["127.0.0.1"]})
    url = spelling.format(port=loopback_web.port)
    result = asyncio.run(get(EgressGate({}, lookup=dns), url))
    assert "egress refused" in result
    assert loopback_web.hits["127.0.0.1"] == []


def test_control_without_the_url_check_a_unicode_spelling_reaches_the_canary(
    loopback_web: Web,
) -> None:
    # yarl turns fullwidth digits into 127.0.0.1 and aiohttp connects to a literal without
    # asking any resolver: the URL check, not the resolver, is what stops this one
    url = f"http://\uff11\uff12\uff17.\uff10.\uff10.\uff11:{loopback_web.port}/"

    async def unchecked() -> int:
        connector = aiohttp.TCPConnector(resolver=PinnedResolver(EgressGate({})))
        async with (
            aiohttp.ClientSession(connector=connector, trust_env=False) as session,
            session.get(url, timeout=aiohttp.ClientTimeout(total=5)) as resp,
        ):
            return resp.status

    assert asyncio.run(unchecked()) == 200
    assert len(loopback_web.hits["127.0.0.1"]) == 1


def test_pinned_resolver_reaches_a_mapped_host(loopback_web: Web, no_dns: list[str]) -> None:
    gate = EgressGate({"news-a.example.test": "127.0.0.1"}, resolve_only=True)
    url = f"http://news-a.example.test:{loopback_web.port}/"
    assert asyncio.run(get(gate, url)) == (200, "canary at 127.0.0.1")
    assert loopback_web.hits["127.0.0.1"] == [f"news-a.example.test:{loopback_web.port}"]
    assert no_dns == []


def test_pinned_resolver_refuses_an_unmapped_host(loopback_web: Web, no_dns: list[str]) -> None:
    gate = EgressGate({"news-a.example.test": "127.0.0.1"}, resolve_only=True)

    async def attempt() -> None:
        connector = aiohttp.TCPConnector(resolver=PinnedResolver(gate), use_dns_cache=False)
        async with aiohttp.ClientSession(connector=connector, trust_env=False) as session:
            url = f"http://unmapped.example.test:{loopback_web.port}/"
            async with session.get(url, timeout=aiohttp.ClientTimeout(total=5)):
                pass

    with pytest.raises(aiohttp.ClientConnectorError) as info:
        asyncio.run(attempt())
    assert "egress refused" in str(info.value.os_error)
    assert "host_not_mapped" in str(info.value.os_error)
    assert no_dns == []
    assert loopback_web.hits == {"127.0.0.1": [], "127.0.0.2": []}


def test_pinned_resolver_connects_mapped_answers_over_ipv4_and_honours_the_family() -> None:
    dns = Dns({"m.example": ["::ffff:8.8.8.8", "2001:4860:4860::8888"]})
    resolver = PinnedResolver(EgressGate({}, lookup=dns))
    both = asyncio.run(resolver.resolve("m.example", 443, socket.AF_UNSPEC))
    assert [(r["host"], r["family"]) for r in both] == [
        ("8.8.8.8", socket.AF_INET),
        ("2001:4860:4860::8888", socket.AF_INET6),
    ]
    v6 = asyncio.run(resolver.resolve("m.example", 443, socket.AF_INET6))
    assert [r["host"] for r in v6] == ["2001:4860:4860::8888"]
