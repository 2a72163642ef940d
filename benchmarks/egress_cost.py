"""Egress gate cost per request: what the SSRF defence adds to every fetch.

Measured in one run, on loopback only (no DNS query leaves the machine):

1. `check_url` per URL (WHATWG host parsing plus the yarl and urllib readings), in µs.
2. `is_public` per address, and `EgressGate.addresses` per cached hit and per miss (the miss
   with an injected lookup that answers at once, so it is the gate's own cost, not DNS).
3. Real GETs against an aiohttp server in a child process, a fresh connection per request so
   the resolver runs every time: the gate's path (`check_url` + `PinnedResolver`, answers
   from the gate's cache) against aiohttp's default resolver (getaddrinfo in a thread, with
   and without aiohttp's own DNS cache) on the same server, variants interleaved per round.
   The gate's path allows loopback here through a benchmark-only subclass; in a crawl,
   loopback is refused.

    .venv/bin/python benchmarks/egress_cost.py [--requests 300] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from atlas_pipeline.egress import (  # noqa: E402
    DnsCachePolicy,
    EgressGate,
    IPAddress,
    PinnedResolver,
    is_public,
    parse_host,
)
from atlas_pipeline.errors import EgressRefused  # noqa: E402

SERVER = """
import asyncio
from aiohttp import web

async def ok(request):
    return web.Response(text="ok")

async def main():
    app = web.Application()
    app.router.add_get("/", ok)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    print(runner.addresses[0][1], flush=True)
    await asyncio.Event().wait()

asyncio.run(main())
"""

DEFAULT = "aiohttp default resolver, its DNS cache on"
GATE = "gate: check_url + PinnedResolver (fetcher)"
URLS = {
    "name": "https://www.example.com/path/page.html?q=1",
    "public IPv4 literal": "http://93.184.216.34/",
    "public IPv6 literal": "http://[2606:4700:4700::1111]/",
    "IDN": "https://b\u00fccher.example/katalog",
    "refused: 0x7f.1": "http://0x7f.1/",
    "refused: userinfo@10.0.0.1": "http://public.example@10.0.0.1/",
}


def per_call_us(fn: Callable[[], object], n: int, repeats: int = 5) -> float:
    """Median over `repeats` of the mean µs per call of `n` calls."""
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        runs.append((time.perf_counter() - start) / n * 1e6)
    return statistics.median(runs)


async def per_await_us(fn: Callable[[], Awaitable[object]], n: int, repeats: int = 5) -> float:
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(n):
            await fn()
        runs.append((time.perf_counter() - start) / n * 1e6)
    return statistics.median(runs)


def check_url_costs() -> dict[str, float]:
    gate = EgressGate({})

    def checker(url: str, cold: bool = False) -> Callable[[], object]:
        def call() -> None:
            if cold:  # a host never seen before: no parsed spelling cached
                parse_host.cache_clear()
            with contextlib.suppress(EgressRefused):
                gate.check_url(url)

        return call

    costs = {label: per_call_us(checker(url), 5000) for label, url in URLS.items()}
    costs["name, first sight of the host"] = per_call_us(checker(URLS["name"], True), 5000)
    costs["IDN, first sight of the host"] = per_call_us(checker(URLS["IDN"], True), 2000)
    return costs


async def address_costs() -> dict[str, float]:
    import ipaddress

    addrs = {
        "is_public(93.184.216.34)": ipaddress.ip_address("93.184.216.34"),
        "is_public(2606:4700::1111)": ipaddress.ip_address("2606:4700::1111"),
        "is_public(::ffff:10.0.0.1)": ipaddress.ip_address("::ffff:10.0.0.1"),
    }
    out = {k: per_call_us(lambda a=a: is_public(a), 20000) for k, a in addrs.items()}  # type: ignore[misc]

    async def instant(name: str) -> list[str]:
        return ["93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946"]

    cached = EgressGate({}, lookup=instant)
    await cached.addresses("www.example.com")
    out["addresses(), cached hit"] = await per_await_us(
        lambda: cached.addresses("www.example.com"), 20000
    )
    uncached = EgressGate({}, lookup=instant, dns=DnsCachePolicy(ttl_s=0))
    out["addresses(), miss (instant lookup)"] = await per_await_us(
        lambda: uncached.addresses("www.example.com"), 5000
    )
    pinned = EgressGate({"www.example.com": "93.184.216.34"})
    out["addresses(), resolve map"] = await per_await_us(
        lambda: pinned.addresses("www.example.com"), 20000
    )
    return out


class LoopbackBenchGate(EgressGate):
    """Benchmark only: loopback counts as public so the gate's path can reach the server."""

    def address_allowed(self, ip: IPAddress) -> bool:
        return ip.is_loopback or is_public(ip)


async def get_loop(
    session: aiohttp.ClientSession, url: str, n: int, gate: EgressGate | None
) -> float:
    """µs per sequential GET (fresh connection each)."""
    start = time.perf_counter()
    for _ in range(n):
        if gate is not None:
            gate.check_url(url)
        async with session.get(url) as resp:
            await resp.read()
            assert resp.status == 200
    return (time.perf_counter() - start) / n * 1e6


async def http_costs(port: int, n: int, rounds: int) -> dict[str, list[float]]:
    url = f"http://localhost:{port}/"
    gate = LoopbackBenchGate({})  # real system lookup of localhost, then its TTL cache

    def pinned() -> aiohttp.TCPConnector:
        return aiohttp.TCPConnector(
            resolver=PinnedResolver(gate), use_dns_cache=False, force_close=True
        )

    variants: dict[str, tuple[aiohttp.TCPConnector, EgressGate | None]] = {
        DEFAULT: (aiohttp.TCPConnector(force_close=True), None),
        "aiohttp default resolver, no DNS cache": (
            aiohttp.TCPConnector(force_close=True, use_dns_cache=False),
            None,
        ),
        "PinnedResolver alone": (pinned(), None),
        GATE: (pinned(), gate),
    }
    sessions = {
        label: (aiohttp.ClientSession(connector=connector, trust_env=False), check)
        for label, (connector, check) in variants.items()
    }
    samples: dict[str, list[float]] = {label: [] for label in variants}
    order = list(sessions)
    try:
        for session, check in sessions.values():  # warm-up: first lookup, caches, imports
            await get_loop(session, url, 30, check)
        for _ in range(rounds):
            order = order[1:] + order[:1]  # rotate, so no variant always runs first
            for label in order:
                session, check = sessions[label]
                samples[label].append(await get_loop(session, url, n, check))
    finally:
        for session, _ in sessions.values():
            await session.close()
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=300, help="GETs per variant per round")
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    began = time.perf_counter()

    print("check_url per URL (µs per call, median of 5 runs)")
    for label, us in check_url_costs().items():
        print(f"  {label:<38} {us:8.2f}")

    print("address validation (µs per call)")
    for label, us in asyncio.run(address_costs()).items():
        print(f"  {label:<38} {us:8.2f}")

    server = subprocess.Popen(
        [sys.executable, "-c", SERVER], stdout=subprocess.PIPE, text=True, cwd=REPO
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        costs = asyncio.run(http_costs(port, args.requests, args.rounds))
    finally:
        server.terminate()
        server.wait(10)
    print(
        f"loopback GETs, fresh connection each (µs per GET: median and range of {args.rounds}"
        f" rounds x {args.requests}; ratio of medians to the aiohttp default)"
    )
    median = {label: statistics.median(v) for label, v in costs.items()}
    for label, runs in costs.items():
        print(
            f"  {label:<42} {median[label]:7.1f}  [{min(runs):6.1f}-{max(runs):6.1f}]"
            f"  x{median[label] / median[DEFAULT]:.3f}"
        )
    extra = median[GATE] - median[DEFAULT]
    print(
        f"gate per GET vs aiohttp default: {extra:+.1f} µs, x{median[GATE] / median[DEFAULT]:.3f}"
    )
    print(f"total {time.perf_counter() - began:.1f} s")


if __name__ == "__main__":
    main()
