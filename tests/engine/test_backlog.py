"""The claim size rule (backlog.claim_room), table by table: a parse backlog that limits the
claim refills by halves, so a CPU-bound batch claims several URLs a time, not one a page."""

from __future__ import annotations

import pytest

from atlas_pipeline.backlog import claim_room

CASES = [
    # net_room, parse_room, backlog -> claim; why
    (64, 8, 8, 8, "an empty backlog: claim what it holds"),
    (64, 4, 8, 4, "half free: refill"),
    (64, 3, 8, 0, "more than half full and limiting: wait for the half"),
    (64, 1, 8, 0, "one place free: a claim of one page is what this rule stops"),
    (64, 0, 8, 0, "full"),
    (64, -2, 8, 0, "over full (requests on the wire landed): nothing"),
    (2, 3, 8, 2, "the request slots limit, not the backlog: claim them at once"),
    (3, 3, 8, 3, "both limit alike: the network's room is taken as it frees"),
    (0, 8, 8, 0, "no request slot free"),
    (64, 1, 1, 1, "a backlog of one: a half is the whole"),
    (64, 2, 4, 2, "a small backlog refills by halves too"),
    (64, 1, 4, 0, "... not by ones"),
]


@pytest.mark.parametrize(("net", "parse", "backlog", "want", "why"), CASES,
                         ids=[c[-1] for c in CASES])  # fmt: skip
def test_claim_room(net: int, parse: int, backlog: int, want: int, why: str) -> None:
    assert claim_room(net, parse, backlog) == want, why
