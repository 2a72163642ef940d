"""Frontier selection as data (frontier.split_budget): due URLs in priority order, each a
revisit (R) or never fetched (N), an origin's free budget and the discovery share -> picks."""

from __future__ import annotations

import pytest

from atlas_pipeline.frontier import split_budget


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
