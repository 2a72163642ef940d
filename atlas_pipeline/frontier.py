"""Frontier selection: which due URLs of an origin a cycle takes (seed 000 ch. 9-10).

Pure rules over a shard's due URLs: their order (`frontier_key`: priority aged by the
time a URL has waited, then depth, then discovery order) and, per origin, which of them
its budget takes (`split_budget`). The coordination store reads the due URLs, sorts them,
calls `split_budget` and marks the picks eligible for the cycle.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def aged_priority(
    priority: float, discovered_at: float, now: float, aging_per_hour: float
) -> float:
    """A URL's priority after waiting since `discovered_at`: `aging_per_hour` more for each
    hour, so a URL the budget left out of earlier cycles climbs past newer ones."""
    return priority + aging_per_hour * (now - discovered_at) / 3600.0


def frontier_key(
    priority: float, discovered_at: float, depth: int, seq: int, now: float, aging_per_hour: float
) -> tuple[float, int, int]:
    """The sort key of a due URL: highest aged priority first, then the shallowest, then
    the first discovered (`seq`, the catalogue's insertion order)."""
    return (-aged_priority(priority, discovered_at, now, aging_per_hour), depth, seq)


def split_budget(revisit: Sequence[bool], free: int, discovery_share: float) -> list[int]:
    """The positions of the URLs to take, given for each due URL in priority order whether
    it is a revisit (fetched before) or never fetched, and the origin's free budget.

    `discovery_share` of the free budget (rounded up) is kept for never-fetched URLs and the
    rest for revisits, so neither starves the other; a share one side cannot use goes to
    the other. Within each side the priority order holds."""
    if free <= 0:
        return []
    new = sum(not r for r in revisit)
    for_new = min(new, math.ceil(free * discovery_share))
    for_old = min(len(revisit) - new, free - for_new)
    spare = free - for_new - for_old
    picked: list[int] = []
    for i, is_revisit in enumerate(revisit):
        if is_revisit and for_old > 0:
            for_old -= 1
        elif not is_revisit and for_new > 0:
            for_new -= 1
        elif spare > 0:
            spare -= 1
        else:
            continue
        picked.append(i)
    return picked
