"""How much a fetch batch claims in one turn of its loop.

A claim's cost to the store is mostly fixed (a look at up to 64 ready origins, the fairness
scores, a transaction), whatever number of URLs it takes. When extraction is what limits a
batch (a fast web, few cores), its parse backlog frees one page at a time, and claiming as
each frees made one claim a page: on a 50 x 200 sandbox crawl, 1.3 URLs a claim. So a
backlog that limits the claim is refilled by halves; half a backlog is still a few pages
queued for each worker, enough to cover a claim and its requests.
"""

from __future__ import annotations


def claim_room(net_room: int, parse_room: int, backlog: int) -> int:
    """URLs to claim now: `net_room` free request slots, `parse_room` free places in a parse
    backlog of `backlog` pages. 0 while the backlog limits and is more than half full."""
    room = min(net_room, parse_room)
    if room <= 0:
        return 0
    if parse_room < net_room and 2 * parse_room < backlog:
        return 0
    return room
