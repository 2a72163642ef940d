"""robots.txt rules (RFC 9309) on protego, wrapped where protego and the RFC differ.

protego hides the first line behind a UTF-8 byte-order mark, parses files of any size and
has no notion of fetch outcomes; this module strips the BOM, caps the bytes parsed and maps
HTTP outcomes to a policy (seed 000 ch. 8): 2xx parse, 4xx unavailable = allow,
429 throttled, 5xx / network unreachable = disallow.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
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
        if path == "/robots.txt" or path.startswith("/robots.txt?"):
            return True
        if self.status is RobotsStatus.UNAVAILABLE:
            return True
        if self.status is not RobotsStatus.PARSED:
            return False
        return bool(_parsed(self.text).can_fetch(path, token))

    def crawl_delay(self, token: str) -> float | None:
        if self.status is not RobotsStatus.PARSED:
            return None
        delay = _parsed(self.text).crawl_delay(token)
        return float(delay) if delay is not None else None

    def sitemaps(self) -> list[str]:
        if self.status is not RobotsStatus.PARSED:
            return []
        return list(_parsed(self.text).sitemaps)


@functools.lru_cache(maxsize=4096)
def _parsed(text: str) -> Protego:
    return Protego.parse(text)


def decode_robots(body: bytes, max_bytes: int) -> str:
    """Bytes -> text: first `max_bytes` only, BOM stripped, undecodable bytes replaced."""
    text = body[:max_bytes].decode("utf-8", errors="replace")
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
