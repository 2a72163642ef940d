"""What operators set on origins and domains: opt-out targets (suppressions), policy
overrides and the range of each setting, and what a purge removed from the store."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Suppression:
    """An opt-out target (seed 000 ch. 16): an origin (scheme://host:port), a registrable
    domain, or a URL prefix (canonical form)."""

    scope: str  # "origin" | "domain" | "prefix"
    value: str

    def matches(self, url: str) -> bool:
        from ..urls import origin_of, registrable_domain

        if self.scope == "prefix":
            return url.startswith(self.value)
        origin = origin_of(url)
        if self.scope == "origin":
            return origin == self.value
        host = origin.split("://", 1)[-1].rsplit(":", 1)[0]
        return registrable_domain(host) == self.value


POLICY_KEYS = {  # operator policy settings and the range each may take
    "min_gap_s": (0.0, 86_400.0),  # a floor on the origin's gap between request starts
    "max_in_flight": (1.0, 64.0),
    "priority": (0.0, 1.0),  # every URL of the target, and every one discovered later
    "revisit_min_s": (1.0, 365 * 86_400.0),
    "revisit_max_s": (1.0, 365 * 86_400.0),
}


def override_for(overrides: Sequence[dict[str, Any]], origin: str, key: str) -> float | None:
    """The operator's setting `key` for `origin`: an origin override over a domain one."""
    found: dict[str, float] = {}
    for o in overrides:
        value = o["settings"].get(key)
        if value is not None and Suppression(o["scope"], o["value"]).matches(origin + "/"):
            found[o["scope"]] = float(value)
    return found.get("origin", found.get("domain"))


@dataclass
class Purged:
    """What a suppression removed from the coordination store."""

    urls: int = 0
    records: int = 0
    stale_attempts: int = 0
    links_rewritten: int = 0
    origins: list[str] = field(default_factory=list)
    # (url, document id, extraction version) of every document the removed records held
    documents: list[tuple[str, str, str]] = field(default_factory=list)
    body_keys: set[str] = field(default_factory=set)
