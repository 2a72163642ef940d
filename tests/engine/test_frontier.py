"""Frontier selection as data: the order of due URLs (frontier.frontier_key: priority aged
by the wait, then depth, then discovery order), and the budget split (frontier.split_budget):
due URLs in priority order, each a revisit (R) or never fetched (N), an origin's free budget
and the discovery share -> picks."""

from __future__ import annotations

import pytest

from atlas_pipeline.frontier import aged_priority, frontier_key, split_budget

NOW = 1_700_000_000.0
HOUR = 3600.0


def picks(pattern: str, free: int, share: float) -> str:
    revisit = [c == "R" for c in pattern]
    chosen = set(split_budget(revisit, free, share))
    return "".join(c if i in chosen else "." for i, c in enumerate(pattern))


@pytest.mark.parametrize(
    ("due", "free", "share", "expected", "why"),
    [
        ("RRRRRNNNNN", 10, 0.3, "RRRRRNNNNN", "room for all"),
        ("RRRRRRRRRRNNN", 10, 0.3, "RRRRRRR...NNN", "3 of 10 kept for discovery"),
        ("RRRRRRRRRR", 10, 0.3, "RRRRRRRRRR", "no new URL: revisits take the share"),
        ("NNNNNNNNNNNN", 10, 0.3, "NNNNNNNNNN..", "no revisit: discovery takes it all"),
        ("RRRRRRRRRRN", 10, 0.3, "RRRRRRRRR.N", "one new URL, its slot is kept"),
        ("RRRRRRRRRRNNNNN", 10, 0.0, "RRRRRRRRRR.....", "share 0: priority order alone"),
        ("RRRRRNNNNNNNNNN", 10, 1.0, ".....NNNNNNNNNN", "share 1: discovery first"),
        ("NRNRNRNR", 4, 0.5, "NRNR....", "priority order within the sides"),
        ("RRRNNN", 0, 0.3, "......", "no free budget"),
        ("RRRNNN", -2, 0.3, "......", "over budget already"),
        ("RRRRN", 3, 0.3, "RR..N", "ceil(0.9) = 1 slot for the new URL"),
        ("", 10, 0.3, "", "nothing due"),
    ],
)
def test_split_budget(due: str, free: int, share: float, expected: str, why: str) -> None:
    assert picks(due, free, share) == expected, why


@pytest.mark.parametrize(
    ("priority", "waited_s", "aging", "expected", "why"),
    [
        (1.0, 0.0, 0.5, 1.0, "just discovered: its own priority"),
        (1.0, HOUR, 0.5, 1.5, "an hour at 0.5 an hour"),
        (1.0, 3 * HOUR, 0.5, 2.5, "three hours"),
        (1.0, HOUR / 2, 0.5, 1.25, "by the second, not by the whole hour"),
        (1.0, 10 * HOUR, 0.0, 1.0, "aging off"),
        (-2.0, 4 * HOUR, 1.0, 2.0, "a low priority climbs too"),
        (1.0, -HOUR, 0.5, 0.5, "discovered 'later' than now (another clock): no clamp, as SQL"),
    ],
)
def test_aged_priority(
    priority: float, waited_s: float, aging: float, expected: float, why: str
) -> None:
    assert aged_priority(priority, NOW - waited_s, NOW, aging) == pytest.approx(expected), why


# (seq, priority, hours waited, depth)
OLD_LOW = (1, 0.5, 5.0, 1)
NEW_HIGH = (2, 2.0, 0.0, 1)
NEW_HIGH_DEEP = (3, 2.0, 0.0, 3)
NEW_HIGH_LATER = (4, 2.0, 0.0, 1)
NEW_MID = (5, 1.0, 0.0, 0)


@pytest.mark.parametrize(
    ("due", "aging", "order", "why"),
    [
        ([OLD_LOW, NEW_HIGH, NEW_MID], 0.0, [2, 5, 1], "no aging: priority alone"),
        ([OLD_LOW, NEW_HIGH, NEW_MID], 0.5, [1, 2, 5], "5 h at 0.5/h lifts 0.5 to 3.0"),
        ([OLD_LOW, NEW_HIGH, NEW_MID], 0.25, [2, 1, 5], "... at 0.25/h to 1.75: second"),
        ([NEW_HIGH_DEEP, NEW_HIGH], 0.0, [2, 3], "a tie: the shallower first"),
        ([NEW_HIGH_LATER, NEW_HIGH], 0.0, [2, 4], "a tie in depth too: discovery order"),
        ([NEW_HIGH_LATER, NEW_HIGH_DEEP, NEW_HIGH, NEW_MID], 0.0, [2, 4, 3, 5],
         "priority, then depth, then seq"),
        ([(6, 1.5, 1.0, 5), (7, 1.0, 2.0, 0)], 0.5, [7, 6],
         "aged into a tie (2.0 = 2.0): the shallower first, though discovered later"),
        ([], 0.5, [], "nothing due"),
    ],
)  # fmt: skip
def test_frontier_order(
    due: list[tuple[int, float, float, int]], aging: float, order: list[int], why: str
) -> None:
    rows = sorted(due, key=lambda r: frontier_key(r[1], NOW - r[2] * HOUR, r[3], r[0], NOW, aging))
    assert [r[0] for r in rows] == order, why
