"""The egress gate (SSRF defence): public addresses only, pinned resolve map, no DNS in
resolve_only mode, and aiohttp connecting only where the gate says."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import threading
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from atlas_pipeline.egress import EgressGate, PinnedResolver, is_public
from atlas_pipeline.errors import EgressRefused


@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("8.8.8.8", True),
        ("1.1.1.1", True),
        ("93.184.216.34", True),
        ("172.32.0.1", True),  # just outside 172.16/12
        ("2606:4700:4700::1111", True),
        ("2001:4860:4860::8888", True),
        ("::ffff:8.8.8.8", True),  # IPv4-mapped public judged as IPv4
        ("10.0.0.1", False),
        ("10.255.255.255", False),
        ("172.16.0.1", False),
        ("172.31.255.255", False),
        ("192.168.1.1", False),
        ("127.0.0.1", False),
        ("127.255.255.254", False),
        ("169.254.169.254", False),  # cloud metadata
        ("100.64.0.1", False),  # carrier-grade NAT
        ("100.127.255.255", False),
        ("0.0.0.0", False),
        ("224.0.0.1", False),
        ("239.255.255.250", False),
        ("255.255.255.255", False),
        ("192.0.2.1", False),  # documentation
        ("198.18.0.1", False),  # benchmarking
        ("::1", False),
        ("::", False),
        ("fe80::1", False),
        ("febf::1", False),  # end of fe80::/10
        ("fc00::1", False),
        ("fd12:3456::1", False),
        ("ff02::1", False),
        ("2001:db8::1", False),
        ("::ffff:127.0.0.1", False),
        ("::ffff:10.0.0.1", False),
        ("::ffff:169.254.169.254", False),
    ],
)
def test_is_public(address: str, public: bool) -> None:
    assert is_public(ipaddress.ip_address(address)) is public


def refused(fn: Any, *args: Any) -> str:
    with pytest.raises(EgressRefused) as info:
        fn(*args)
    return info.value.reason


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("ftp://example.test/x", "scheme_not_allowed"),
        ("file:///etc/passwd", "scheme_not_allowed"),
        ("gopher://example.test/", "scheme_not_allowed"),
        ("http:///nohost", "bad_url"),
        ("http://127.0.0.1/", "non_public_address"),
        ("http://127.0.0.1:8080/admin", "non_public_address"),
        ("http://10.1.2.3/", "non_public_address"),
        ("http://169.254.169.254/latest/meta-data/", "non_public_address"),
        ("http://[::1]/", "non_public_address"),
        ("http://[::ffff:127.0.0.1]/", "non_public_address"),
        ("http://[fd00::1]:81/", "non_public_address"),
        ("http://0.0.0.0/", "non_public_address"),
    ],
)
def test_check_url_refuses_before_any_connection(url: str, reason: str) -> None:
    assert refused(EgressGate({}).check_url, url) == reason


@pytest.mark.parametrize(
    "url", ["http://93.184.216.34/", "https://[2606:4700:4700::1111]/", "https://example.test/x"]
)
def test_check_url_lets_public_destinations_through(url: str) -> None:
    EgressGate({}).check_url(url)


def test_mapping_a_name_does_not_unlock_an_ip_literal() -> None:
    gate = EgressGate({"127.0.0.1": "127.0.0.1"})
    assert refused(gate.check_url, "http://127.0.0.1/") == "non_public_address"


def test_resolve_only_refuses_unmapped_hosts_at_check() -> None:
    gate = EgressGate({"news.test": "127.0.0.1"}, resolve_only=True)
    gate.check_url("http://news.test:8080/a")
    gate.check_url("http://NEWS.test./a")
    assert refused(gate.check_url, "http://unmapped.example.test/") == "host_not_mapped"


@pytest.mark.parametrize("url", ["http://93.184.216.34/", "http://[2606:4700:4700::1111]/"])
def test_resolve_only_refuses_public_ip_literals(url: str) -> None:
    # resolve_only means nothing outside the map: a literal public address is still outside it
    gate = EgressGate({"news.test": "127.0.0.1"}, resolve_only=True)
    assert refused(gate.check_url, url) == "host_not_mapped"


@pytest.fixture
def no_dns(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Fail loudly if anything asks the system resolver."""
    asked: list[str] = []

    def tripwire(host: Any, *args: Any, **kwargs: Any) -> Any:
        asked.append(str(host))
        raise AssertionError(f"DNS lookup of {host!r}")

    monkeypatch.setattr(socket, "getaddrinfo", tripwire)
    return asked


def test_resolve_map_pins_a_host_even_to_loopback(no_dns: list[str]) -> None:
    gate = EgressGate({"News.Test.": "127.0.0.1", "v6.test": "::1"})
    assert asyncio.run(gate.addresses("news.test")) == [ipaddress.ip_address("127.0.0.1")]
    assert asyncio.run(gate.addresses("NEWS.TEST.")) == [ipaddress.ip_address("127.0.0.1")]
    assert asyncio.run(gate.addresses("v6.test")) == [ipaddress.ip_address("::1")]
    assert no_dns == []


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


def fake_dns(monkeypatch: pytest.MonkeyPatch, answers: list[str]) -> None:
    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> list[Any]:
        if not answers:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [
            (
                socket.AF_INET6 if ":" in a else socket.AF_INET,
                socket.SOCK_STREAM,
                6,
                "",
                (a, 0, 0, 0) if ":" in a else (a, 0),
            )
            for a in answers
        ]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


@pytest.mark.parametrize(
    ("answers", "reason"),
    [
        (["10.0.0.5"], "non_public_address"),
        (["93.184.216.34", "127.0.0.1"], "non_public_address"),  # any bad answer refuses all
        (["fe80::1%eth0"], "non_public_address"),  # scope id stripped, still link-local
        ([], "dns_failure"),
    ],
)
def test_dns_answers_must_all_be_public(
    monkeypatch: pytest.MonkeyPatch, answers: list[str], reason: str
) -> None:
    fake_dns(monkeypatch, answers)
    with pytest.raises(EgressRefused) as info:
        asyncio.run(EgressGate({}).addresses("rebinding.example.test"))
    assert info.value.reason == reason


def test_public_dns_answers_are_deduplicated(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_dns(monkeypatch, ["93.184.216.34", "93.184.216.34", "2606:2800:220:1::1"])
    ips = asyncio.run(EgressGate({}).addresses("example.test"))
    assert ips == [
        ipaddress.ip_address("93.184.216.34"),
        ipaddress.ip_address("2606:2800:220:1::1"),
    ]


# through aiohttp, against a real server on loopback ------------------------------------------


@pytest.fixture
def loopback_port() -> Iterator[int]:
    """A tiny aiohttp server on 127.0.0.1, run on its own loop in a thread."""
    loop = asyncio.new_event_loop()
    started = threading.Event()
    state: dict[str, Any] = {}

    async def hello(request: web.Request) -> web.Response:
        return web.Response(text=f"hello {request.host}")

    async def start() -> None:
        app = web.Application()
        app.router.add_get("/", hello)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        state["runner"] = runner
        state["port"] = runner.addresses[0][1]

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(start())
        started.set()
        loop.run_forever()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert started.wait(10)
    yield int(state["port"])
    asyncio.run_coroutine_threadsafe(state["runner"].cleanup(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    loop.close()


async def get(gate: EgressGate, url: str) -> tuple[int, str]:
    connector = aiohttp.TCPConnector(resolver=PinnedResolver(gate), use_dns_cache=False)
    async with aiohttp.ClientSession(connector=connector, trust_env=False) as session:
        gate.check_url(url)
        async with session.get(url, timeout=aiohttp.ClientTimeout(total=5)) as resp:
            return resp.status, await resp.text()


def test_pinned_resolver_reaches_a_mapped_host(loopback_port: int, no_dns: list[str]) -> None:
    gate = EgressGate({"news-a.example.test": "127.0.0.1"}, resolve_only=True)
    status, text = asyncio.run(get(gate, f"http://news-a.example.test:{loopback_port}/"))
    assert status == 200
    assert text == f"hello news-a.example.test:{loopback_port}"
    assert no_dns == []


def test_pinned_resolver_refuses_an_unmapped_host(loopback_port: int, no_dns: list[str]) -> None:
    gate = EgressGate({"news-a.example.test": "127.0.0.1"}, resolve_only=True)

    async def attempt() -> None:
        connector = aiohttp.TCPConnector(resolver=PinnedResolver(gate), use_dns_cache=False)
        async with aiohttp.ClientSession(connector=connector, trust_env=False) as session:
            url = f"http://unmapped.example.test:{loopback_port}/"
            async with session.get(url, timeout=aiohttp.ClientTimeout(total=5)):
                pass

    with pytest.raises(aiohttp.ClientConnectorError) as info:
        asyncio.run(attempt())
    assert "egress refused" in str(info.value.os_error)
    assert "host_not_mapped" in str(info.value.os_error)
    assert no_dns == []


def test_pinned_resolver_refuses_a_name_that_resolves_to_loopback(
    loopback_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a public-looking name whose DNS answer is loopback (DNS rebinding) never connects
    fake_dns(monkeypatch, ["127.0.0.1"])
    gate = EgressGate({})

    async def attempt() -> None:
        connector = aiohttp.TCPConnector(resolver=PinnedResolver(gate), use_dns_cache=False)
        async with aiohttp.ClientSession(connector=connector, trust_env=False) as session:
            url = f"http://rebind.example.test:{loopback_port}/"
            async with session.get(url, timeout=aiohttp.ClientTimeout(total=5)):
                pass

    with pytest.raises(aiohttp.ClientConnectorError) as info:
        asyncio.run(attempt())
    assert "non_public_address" in str(info.value.os_error)
