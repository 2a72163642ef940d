"""The robots.txt of an origin only a rendered page's subrequest asks for (both backends): its
fetch is claimed like any robots task (the origin's robots lease, its bucket's slot and
clock), once however many runs ask, never while the origin is paused or backed off."""

from __future__ import annotations

from atlas_pipeline.coordination import (
    Candidate,
    CoordinationStore,
    Lease,
    OriginPolicy,
    RobotsTask,
    open_store,
)

CDN, T0, LEASE_S, GAP = "http://cdn.example.test", 1_000_000.0, 60.0, 2.0


def _open(url: str) -> CoordinationStore:
    return open_store(url, OriginPolicy(GAP, 1), 100)


def test_one_run_fetches_it_the_others_wait_and_then_know_it(store_url: str) -> None:
    a, b = _open(store_url), _open(store_url)
    try:
        task = a.claim_robots(CDN, 3, T0, LEASE_S)
        assert isinstance(task, RobotsTask) and task.origin == CDN
        assert task.gap_s >= GAP and task.expires_at == T0 + LEASE_S
        # another run asking meanwhile waits for the lease, then for the slot
        assert b.claim_robots(CDN, 3, T0 + 0.1, LEASE_S) == T0 + LEASE_S
        # a page request to it waits out the gap the robots fetch took
        at, gap = b.reserve_slot(CDN, 3, T0 + 0.1)
        assert at >= T0 + GAP and gap == task.gap_s
        a.put_robots(task, "parsed", "User-agent: *\nDisallow: /x/\n", T0 + 0.5, 3600.0,
                     backoff_until=0.0, good=True)  # fmt: skip
        assert b.claim_robots(CDN, 3, T0 + 1.0, LEASE_S) == T0 + 1.0  # known: nothing to do
        rec = b.robots(CDN)
        assert rec is not None and rec.status == "parsed" and "/x/" in rec.text
        assert a.origin_rows(3)[0]["origin"] == CDN  # an origin of its shard from now on
    finally:
        a.close()
        b.close()


def test_a_paused_or_backed_off_origin_is_not_asked(store_url: str) -> None:
    store = _open(store_url)
    try:
        store.pause("origin", CDN, "owner asked", "ops", T0)
        assert store.claim_robots(CDN, 0, T0 + 1, LEASE_S) == float("inf")
        store.resume("origin", CDN, "owner agreed", "ops", T0 + 2)
        store.push_origin_clocks([(CDN, 0.0, T0 + 30)])  # a Retry-After learnt elsewhere
        assert store.claim_robots(CDN, 0, T0 + 3, LEASE_S) == T0 + 30
        assert isinstance(store.claim_robots(CDN, 0, T0 + 30, LEASE_S), RobotsTask)
    finally:
        store.close()


def test_a_held_subrequest_slot_counts_against_the_cap_in_every_runs_claims(
    store_url: str,
) -> None:
    """Gap 0, one request at a time: while a subrequest holds the origin's slot, no run claims
    a URL of it; released (or lapsed and swept), the next claim takes it."""
    a = open_store(store_url, OriginPolicy(0.0, 1), 100)
    b = open_store(store_url, OriginPolicy(0.0, 1), 100)
    page = CDN + "/page"
    try:
        a.discover([Candidate(page, page, CDN, 0, 0, 1.0)], "c1")
        task = b.claim("c1", 0, T0, "AtlasBot", LEASE_S)
        assert isinstance(task, RobotsTask)
        b.put_robots(task, "parsed", "User-agent: *\nDisallow:\n", T0, 3600.0, backoff_until=0.0,
                     good=True)  # fmt: skip
        at, gap, slot = a.hold_slot(CDN, 0, T0 + 1, 5.0)
        assert (at, gap) == (T0 + 1, 0.0) and slot is not None
        assert not isinstance(b.claim("c1", 0, T0 + 1.1, "AtlasBot", LEASE_S), Lease)
        assert a.hold_slot(CDN, 0, T0 + 1.2, 5.0)[2] is None  # nor another subrequest
        a.release_sub_slots([slot])
        lease = b.claim("c1", 0, T0 + 1.3, "AtlasBot", LEASE_S)
        assert isinstance(lease, Lease) and lease.url == page
        b.release_slots([(lease.url, lease.fence)])
        # a slot whose holder died lapses at its time, and the sweep removes it
        _, _, lost = a.hold_slot(CDN, 0, T0 + 2, 5.0)
        assert lost is not None and a.hold_slot(CDN, 0, T0 + 6.9, 5.0)[2] is None
        a.sweep(T0 + 7.1)
        with a._tx() as c:  # the lapsed slot's row is gone, not merely ignored
            assert c.execute("SELECT COUNT(*) FROM sub_slots").fetchone()[0] == 0
        assert a.hold_slot(CDN, 0, T0 + 7.2, 5.0)[2] is not None
    finally:
        a.close()
        b.close()
