"""The egress gate: every connection goes to a validated, pinned address (SSRF defence).

Only http and https; every address a name resolves to must be public, unless the operator
mapped that exact host name in `resolve` (the only way to reach loopback, for sandboxes).
The check runs inside aiohttp's resolver, so the address validated is the address connected
to; IP-literal URLs never reach a resolver and are checked before the request.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from urllib.parse import urlsplit

from aiohttp.abc import AbstractResolver, ResolveResult

from .errors import EgressRefused

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


def is_public(ip: IPAddress) -> bool:
    """True only for globally routable unicast addresses (IPv4-mapped IPv6 judged as IPv4)."""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return is_public(ip.ipv4_mapped)
    return bool(
        ip.is_global
        and not ip.is_multicast
        and not ip.is_private
        and not ip.is_loopback
        and not ip.is_link_local
        and not ip.is_reserved
        and not ip.is_unspecified
    )


class EgressGate:
    """Decides which addresses a host may be reached at."""

    def __init__(self, resolve: dict[str, str], resolve_only: bool = False) -> None:
        self.resolve_map = {
            h.lower().rstrip("."): ipaddress.ip_address(ip) for h, ip in resolve.items()
        }
        self.resolve_only = resolve_only

    def check_url(self, url: str) -> None:
        """Refuse non-http(s) URLs and non-public IP literals before any connection."""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https"):
            raise EgressRefused("scheme_not_allowed", f"{parts.scheme!r} in {url}")
        host = (parts.hostname or "").lower().rstrip(".")
        if not host:
            raise EgressRefused("bad_url", f"no host in {url}")
        if self.resolve_only and host not in self.resolve_map:  # IP literals included
            raise EgressRefused("host_not_mapped", f"{host} is not in resolve")
        try:
            literal = ipaddress.ip_address(host)
        except ValueError:
            return
        if not is_public(literal):
            raise EgressRefused("non_public_address", f"{host} is not a public address")

    async def addresses(self, host: str) -> list[IPAddress]:
        """Every address `host` may be connected to; refuse if any is non-public."""
        name = host.lower().rstrip(".")
        pinned = self.resolve_map.get(name)
        if pinned is not None:
            return [pinned]
        if self.resolve_only:
            raise EgressRefused("host_not_mapped", f"{name} is not in resolve")
        loop = asyncio.get_running_loop()
        try:
            infos = await loop.getaddrinfo(name, None, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise EgressRefused("dns_failure", f"{name}: {exc}") from None
        ips = [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]
        bad = [str(ip) for ip in ips if not is_public(ip)]
        if bad or not ips:
            raise EgressRefused("non_public_address", f"{name} resolves to {', '.join(bad)}")
        return list(dict.fromkeys(ips))


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
        return [
            ResolveResult(
                hostname=host,
                host=str(ip),
                port=port,
                family=socket.AF_INET6 if ip.version == 6 else socket.AF_INET,
                proto=0,
                flags=socket.AI_NUMERICHOST,
            )
            for ip in ips
        ]

    async def close(self) -> None:
        return None
