"""The SQLite coordination store (seed 000 ch. 7 and 9): discovery, frontier, origin buckets,
robots before pages, leases, fencing and sweeping. Time is passed in explicitly, never slept."""

from __future__ import annotations

import itertools
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from atlas_pipeline.coordination import (
    Candidate,
    CoordinationStore,
    Drained,
    Lease,
    OriginPolicy,
    Outcome,
    RobotsTask,
    SqliteStore,
    UrlState,
    Wait,
    open_store,
)
from atlas_pipeline.coordination.migrate import LATEST, revision_numbers
from atlas_pipeline.errors import CoordinationError, StoreUnavailable
from atlas_pipeline.records import FetchRecord
from atlas_pipeline.urls import origin_of

TOKEN = "AtlasBot"
CYCLE = "c1"
SHARD = 0
T0 = 1_000_000.0
LEASE_S = 60.0
TTL = 86_400.0
NEWS = "https://news-a.example.test:443"
DOCS = "https://docs-b.example.test:443"


def cand(url: str, priority: float = 1.0, depth: int = 0) -> Candidate:
    return Candidate(
        url=url,
        discovered_url=url,
        origin=origin_of(url),
        shard=SHARD,
        depth=depth,
        priority=priority,
    )


def outcome(status: int = 200, reason: str = "fetched", due_at: float = T0 + TTL) -> Outcome:
    return Outcome(
        state=UrlState.FETCHED,
        reason=reason,
        due_at=due_at,
        status=status,
        record=FetchRecord(fetch_id=f"f-{status}-{reason}-{due_at}"),
    )


# The contract runs on both backends: every test that builds its store with make_store()
# runs once on SQLite and once on PostgreSQL (a private schema per test).
_backend_url: dict[str, str] = {}


@pytest.fixture(autouse=True, params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        _backend_url["url"] = f"sqlite:///{tmp_path / 'coord.db'}"
        yield "sqlite"
    else:
        _backend_url["url"] = request.getfixturevalue("pg_schema_url")
        yield "postgres"
    _backend_url.clear()


def make_store(tmp_path: Path, gap: float = 5.0, max_in_flight: int = 1, budget: int = 100):
    return open_store(_backend_url["url"], OriginPolicy(gap, max_in_flight), budget)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    s = make_store(tmp_path)
    assert isinstance(s, SqliteStore)
    yield s
    s.close()


def claim(store: CoordinationStore, now: float, lease_s: float = LEASE_S):
    return store.claim(CYCLE, SHARD, now, TOKEN, lease_s)


def rows_by_url(store: CoordinationStore) -> dict[str, dict]:
    return {r["url"]: r for r in store.url_rows(SHARD)}


def put_robots(
    store: CoordinationStore,
    task: RobotsTask,
    now: float,
    text: str = "User-agent: *\nDisallow:\n",
    status: str = "parsed",
    ttl_s: float = TTL,
):
    return store.put_robots(task, status, text, now, ttl_s, backoff_until=0.0, good=True)


def ready_origin(
    store: CoordinationStore, urls: list[str], now: float = T0, text: str | None = None
) -> float:
    """Discover `urls` (one origin) into CYCLE, serve its robots task; return when a page may go."""
    store.discover([cand(u) for u in urls], CYCLE)
    task = claim(store, now)
    assert isinstance(task, RobotsTask)
    put_robots(store, task, now, **({} if text is None else {"text": text}))
    return now + 5.0  # the robots fetch took the origin's first gap


# discovery -----------------------------------------------------------------------------


def test_discover_is_insert_if_absent(store: SqliteStore) -> None:
    url = "https://news-a.example.test/a"
    assert store.discover([cand(url)], CYCLE) == ["admitted"]
    other = Candidate(url, "HTTPS://NEWS-A.example.test/a", origin_of(url), SHARD, 3, 9.0)
    assert store.discover([other], CYCLE) == ["already_known"]
    rows = store.url_rows(SHARD)
    assert len(rows) == 1
    assert rows[0]["discovered_url"] == url  # the first spelling stays
    assert rows[0]["depth"] == 0


def test_discover_without_cycle_leaves_url_discovered(store: SqliteStore) -> None:
    assert store.discover([cand("https://news-a.example.test/a")], None) == ["admitted"]
    row = store.url_rows(SHARD)[0]
    assert row["state"] == "discovered"
    assert row["cycle"] is None


def test_discover_respects_the_per_origin_cycle_budget(tmp_path: Path) -> None:
    store = make_store(tmp_path, budget=2)
    news = [cand(f"https://news-a.example.test/{i}") for i in range(3)]
    assert store.discover(news[:1], CYCLE) == ["admitted"]
    assert store.discover([*news[1:], cand("https://docs-b.example.test/x")], CYCLE) == [
        "admitted",
        "origin_budget_exhausted",
        "admitted",  # another origin has its own budget
    ]
    rows = rows_by_url(store)
    over = rows["https://news-a.example.test/2"]
    assert over["state"] == "discovered"
    assert over["cycle"] is None
    assert rows["https://news-a.example.test/1"]["cycle"] == CYCLE
    # the next cycle's budget is fresh
    assert store.discover([cand("https://news-a.example.test/3")], "c2") == ["admitted"]


def test_blocked_candidate_keeps_its_state_and_reason(store: SqliteStore) -> None:
    c = Candidate(
        "https://news-a.example.test/x",
        "https://news-a.example.test/x",
        NEWS,
        SHARD,
        1,
        1.0,
        state=UrlState.BLOCKED,
        reason="robots_disallowed",
        robots_version=4,
    )
    assert store.discover([c], CYCLE) == ["robots_disallowed"]
    row = store.url_rows(SHARD)[0]
    assert (row["state"], row["reason"], row["robots_version"]) == (
        "blocked",
        "robots_disallowed",
        4,
    )
    assert isinstance(claim(store, T0), Drained)


# frontier ------------------------------------------------------------------------------


def test_select_frontier_queues_due_urls_and_is_idempotent(tmp_path: Path) -> None:
    store = make_store(tmp_path, budget=2)
    store.discover([cand(f"https://news-a.example.test/{i}") for i in range(3)], None)
    store.discover([cand("https://docs-b.example.test/x")], None)
    first = store.select_frontier(CYCLE, SHARD, T0)
    assert sorted(r["url"] for r in first) == [
        "https://docs-b.example.test/x",
        "https://news-a.example.test/0",
        "https://news-a.example.test/1",
    ]
    assert {(r["state"], r["reason"]) for r in first} == {("eligible", "admitted")}
    again = store.select_frontier(CYCLE, SHARD, T0 + 1)
    assert again == first
    assert rows_by_url(store)["https://news-a.example.test/2"]["state"] == "discovered"
    # other shards are untouched
    assert store.select_frontier(CYCLE, 1, T0) == []


def test_select_frontier_requeues_fetched_urls_only_when_due(store: SqliteStore) -> None:
    urls = ["https://news-a.example.test/old", "https://news-a.example.test/fresh"]
    now = ready_origin(store, urls)
    for due in (T0 + 100, T0 + 10_000):
        lease = claim(store, now)
        assert isinstance(lease, Lease)
        assert store.commit(lease, outcome(due_at=due), CYCLE, now)
        now += 5
    nxt = store.select_frontier("c2", SHARD, T0 + 500)
    assert [(r["url"], r["reason"]) for r in nxt] == [(urls[0], "revisit_due")]


# claims, robots first, the origin clock ------------------------------------------------


@pytest.mark.parametrize("max_in_flight", [1, 3])
def test_first_claim_of_an_origin_is_its_robots_task(tmp_path: Path, max_in_flight: int) -> None:
    store = make_store(tmp_path, gap=0.0, max_in_flight=max_in_flight)
    store.discover([cand("https://news-a.example.test/a")], CYCLE)
    task = claim(store, T0)
    assert isinstance(task, RobotsTask)
    assert task.origin == NEWS
    assert task.expires_at == T0 + LEASE_S
    # while the robots fetch runs, no page of that origin is handed out (however many slots)
    assert isinstance(claim(store, T0 + 1), Wait)
    assert isinstance(claim(store, T0 + 59), Wait)
    assert store.robots(NEWS) is None
    rec = put_robots(store, task, T0 + 2)
    assert rec.version == 1
    assert rec.status == "parsed"
    lease = claim(store, T0 + 2)
    assert isinstance(lease, Lease)
    assert lease.url == "https://news-a.example.test/a"
    assert lease.robots_version == 1


def test_robots_is_fetched_again_after_it_expires(store: SqliteStore) -> None:
    store.discover([cand("https://news-a.example.test/a")], CYCLE)
    task = claim(store, T0)
    assert isinstance(task, RobotsTask)
    put_robots(store, task, T0, ttl_s=50.0)
    lease = claim(store, T0 + 49)
    assert isinstance(lease, Lease)
    store.commit(lease, outcome(), CYCLE, T0 + 50)
    store.discover([cand("https://news-a.example.test/b")], CYCLE)
    assert isinstance(claim(store, T0 + 60, lease_s=1.0), RobotsTask)


def test_an_abandoned_robots_task_is_handed_out_again_after_its_lease(store: SqliteStore) -> None:
    store.discover([cand("https://news-a.example.test/a")], CYCLE)
    first = claim(store, T0, lease_s=10.0)
    assert isinstance(first, RobotsTask)
    assert isinstance(claim(store, T0 + 9), Wait)
    second = claim(store, T0 + 10, lease_s=10.0)
    assert isinstance(second, RobotsTask)
    assert second.lease_id != first.lease_id
    with pytest.raises(CoordinationError):
        put_robots(store, first, T0 + 11)  # the late worker lost its task
    assert put_robots(store, second, T0 + 11).version == 1


def test_put_robots_with_a_stale_task_is_refused(store: SqliteStore) -> None:
    store.discover([cand("https://news-a.example.test/a")], CYCLE)
    task = claim(store, T0)
    assert isinstance(task, RobotsTask)
    put_robots(store, task, T0)
    with pytest.raises(CoordinationError, match="no longer current"):
        put_robots(store, task, T0 + 1)


def test_claim_advances_the_origin_clock_by_the_gap(tmp_path: Path) -> None:
    store = make_store(tmp_path, gap=5.0, max_in_flight=4)
    now = ready_origin(store, [f"https://news-a.example.test/{i}" for i in range(3)])
    first = claim(store, now)
    assert isinstance(first, Lease)
    half = claim(store, now + 2.5)
    assert half == Wait(now + 5.0)
    second = claim(store, now + 5.0)
    assert isinstance(second, Lease)
    assert second.url != first.url
    assert claim(store, now + 9.99) == Wait(now + 10.0)


def test_robots_fetch_takes_the_first_gap(store: SqliteStore) -> None:
    store.discover([cand("https://news-a.example.test/a")], CYCLE)
    task = claim(store, T0)
    assert isinstance(task, RobotsTask)
    put_robots(store, task, T0 + 0.1)
    assert claim(store, T0 + 1) == Wait(T0 + 5.0)


def test_max_in_flight_is_respected_until_the_slot_is_freed(tmp_path: Path) -> None:
    store = make_store(tmp_path, gap=0.0, max_in_flight=1)
    now = ready_origin(store, ["https://news-a.example.test/a", "https://news-a.example.test/b"])
    first = claim(store, now)
    assert isinstance(first, Lease)
    held = claim(store, now + 1)
    assert isinstance(held, Wait)
    assert held.until <= now + 1 + 1.0  # poll soon: the slot could be freed any moment
    store.release_slots([(first.url, first.fence)])
    second = claim(store, now + 1)
    assert isinstance(second, Lease)
    assert second.url != first.url


def test_two_slots_allow_two_requests_in_flight(tmp_path: Path) -> None:
    store = make_store(tmp_path, gap=0.0, max_in_flight=2)
    now = ready_origin(store, [f"https://news-a.example.test/{i}" for i in range(3)])
    assert isinstance(claim(store, now), Lease)
    assert isinstance(claim(store, now), Lease)
    assert isinstance(claim(store, now), Wait)


def test_releasing_a_slot_with_a_stale_fence_does_not_free_it(tmp_path: Path) -> None:
    store = make_store(tmp_path, gap=0.0, max_in_flight=1)
    now = ready_origin(store, ["https://news-a.example.test/a", "https://news-a.example.test/b"])
    first = claim(store, now)
    assert isinstance(first, Lease)
    store.release_slots([(first.url, first.fence - 1)])
    assert isinstance(claim(store, now), Wait)


@pytest.mark.parametrize("delayed", [NEWS, DOCS])
def test_the_origin_with_the_earliest_clock_is_chosen(tmp_path: Path, delayed: str) -> None:
    store = make_store(tmp_path, gap=5.0, max_in_flight=1)
    store.discover(
        [cand("https://news-a.example.test/a"), cand("https://docs-b.example.test/a")], CYCLE
    )
    for _ in range(2):
        task = claim(store, T0)
        assert isinstance(task, RobotsTask)
        put_robots(store, task, T0)
    store.push_origin_clocks([(delayed, 0.0, T0 + 20)])
    other = DOCS if delayed == NEWS else NEWS
    # both clocks are in the future: wait for the earlier one
    assert claim(store, T0 + 1) == Wait(T0 + 5.0)
    lease = claim(store, T0 + 30)  # both eligible now; the earlier clock goes first
    assert isinstance(lease, Lease)
    assert lease.origin == other
    lease2 = claim(store, T0 + 30)
    assert isinstance(lease2, Lease)
    assert lease2.origin == delayed


def test_higher_priority_url_is_claimed_first(store: SqliteStore) -> None:
    store.discover(
        [
            cand("https://news-a.example.test/low", priority=0.1),
            cand("https://news-a.example.test/high", priority=0.9),
        ],
        CYCLE,
    )
    task = claim(store, T0)
    assert isinstance(task, RobotsTask)
    put_robots(store, task, T0)
    lease = claim(store, T0 + 5)
    assert isinstance(lease, Lease)
    assert lease.url == "https://news-a.example.test/high"


def test_robots_disallowed_url_is_blocked_at_claim(store: SqliteStore) -> None:
    text = "User-agent: *\nDisallow: /account/\n"
    private, public = "https://news-a.example.test/account/orders", "https://news-a.example.test/p"
    store.discover([cand(private, priority=0.9), cand(public, priority=0.1)], CYCLE)
    task = claim(store, T0)
    assert isinstance(task, RobotsTask)
    version = put_robots(store, task, T0, text=text).version
    lease = claim(store, T0 + 5)
    assert isinstance(lease, Lease)
    assert lease.url == public
    row = rows_by_url(store)[private]
    assert row["state"] == "blocked"
    assert row["reason"] == "robots_disallowed"
    assert row["robots_version"] == version
    assert row["attempts"] == 0
    assert row["fence"] == 0


def test_origin_with_only_blocked_urls_drains(store: SqliteStore) -> None:
    ready = ready_origin(
        store, ["https://news-a.example.test/x"], text="User-agent: *\nDisallow: /\n"
    )
    first = claim(store, ready)
    assert isinstance(first, Wait)  # looked, blocked everything, nothing leased
    assert isinstance(claim(store, ready), Drained)
    assert rows_by_url(store)["https://news-a.example.test/x"]["state"] == "blocked"


def test_lease_carries_robots_version_in_force(store: SqliteStore) -> None:
    store.discover(
        [cand("https://news-a.example.test/a"), cand("https://news-a.example.test/b")], CYCLE
    )
    task = claim(store, T0)
    assert isinstance(task, RobotsTask)
    put_robots(store, task, T0, ttl_s=10.0)
    first = claim(store, T0 + 5)
    assert isinstance(first, Lease)
    assert first.robots_version == 1
    store.commit(first, outcome(), CYCLE, T0 + 6)
    task = claim(store, T0 + 20)
    assert isinstance(task, RobotsTask)
    # the rules changed while /b was queued: the pre-fetch recheck blocks it
    rec = put_robots(store, task, T0 + 20, text="User-agent: *\nDisallow: /b\n")
    assert rec.version == 2
    assert isinstance(claim(store, T0 + 30), Wait)
    row = rows_by_url(store)["https://news-a.example.test/b"]
    assert (row["state"], row["robots_version"]) == ("blocked", 2)


# robots versions ---------------------------------------------------------------------


def test_robots_version_grows_only_when_the_text_changes(store: SqliteStore) -> None:
    store.discover([cand(f"https://news-a.example.test/{i}") for i in range(5)], CYCLE)
    texts = [
        "User-agent: *\nDisallow: /x\n",
        "User-agent: *\nDisallow: /x\n",  # same: same version
        "User-agent: *\nDisallow: /y\n",  # changed: +1
        "User-agent: *\nDisallow: /y\n",
    ]
    versions = []
    now = T0
    for text in texts:
        task = claim(store, now, lease_s=1.0)
        assert isinstance(task, RobotsTask), task
        versions.append(put_robots(store, task, now, text=text, ttl_s=1.0).version)
        rec = store.robots(NEWS)
        assert rec is not None
        assert (rec.version, rec.text) == (versions[-1], text)
        now += 10
    assert versions == [1, 1, 2, 2]


def test_robots_version_grows_when_only_the_status_changes(store: SqliteStore) -> None:
    store.discover([cand("https://news-a.example.test/a")], CYCLE)
    task = claim(store, T0, lease_s=1.0)
    assert isinstance(task, RobotsTask)
    assert put_robots(store, task, T0, text="", status="unavailable", ttl_s=1.0).version == 1
    task = claim(store, T0 + 10, lease_s=1.0)
    assert isinstance(task, RobotsTask)
    assert put_robots(store, task, T0 + 10, text="", status="unreachable", ttl_s=1.0).version == 2


def test_robots_good_at_tracks_only_good_fetches(store: SqliteStore) -> None:
    store.discover([cand("https://news-a.example.test/a")], CYCLE)
    assert store.robots_good_at(NEWS) is None
    task = claim(store, T0, lease_s=1.0)
    assert isinstance(task, RobotsTask)
    store.put_robots(task, "parsed", "", T0, 1.0, 0.0, good=True)
    task = claim(store, T0 + 10, lease_s=1.0)
    assert isinstance(task, RobotsTask)
    store.put_robots(task, "unreachable", "", T0 + 10, 1.0, 0.0, good=False)
    assert store.robots_good_at(NEWS) == T0


def test_put_robots_sets_gap_and_backoff(store: SqliteStore) -> None:
    store.discover([cand("https://news-a.example.test/a")], CYCLE)
    task = claim(store, T0)
    assert isinstance(task, RobotsTask)
    store.put_robots(task, "parsed", "", T0, TTL, backoff_until=T0 + 100, min_gap_s=30.0)
    assert claim(store, T0 + 50) == Wait(T0 + 100)
    first = claim(store, T0 + 100)
    assert isinstance(first, Lease)
    store.release_slots([(first.url, first.fence)])
    store.discover([cand("https://news-a.example.test/b")], CYCLE)
    assert claim(store, T0 + 110) == Wait(T0 + 130)  # the new (Crawl-delay) gap


# fencing, commits and the sweeper --------------------------------------------------------


def test_commit_with_the_current_fence_succeeds(store: SqliteStore) -> None:
    now = ready_origin(store, ["https://news-a.example.test/a"])
    lease = claim(store, now)
    assert isinstance(lease, Lease)
    assert (lease.fence, lease.attempts) == (1, 1)
    assert store.commit(lease, outcome(status=200), CYCLE, now + 1)
    row = rows_by_url(store)[lease.url]
    assert (row["state"], row["last_status"], row["fence"]) == ("fetched", 200, 1)
    assert [r["record"]["fetch_id"] for r in store.fetch_records(CYCLE, SHARD)] == [
        outcome(status=200).record.fetch_id
    ]
    assert store.stale_attempts() == []
    assert isinstance(claim(store, now + 100), Drained)


def _expired_and_reclaimed(store: SqliteStore) -> tuple[Lease, Lease, float]:
    now = ready_origin(store, ["https://news-a.example.test/a"])
    old = claim(store, now, lease_s=10.0)
    assert isinstance(old, Lease)
    assert store.sweep(now + 10.0) == 1
    new = claim(store, now + 10.0)
    assert isinstance(new, Lease)
    assert new.url == old.url
    return old, new, now + 10.0


@pytest.mark.parametrize("newer_commits_first", [True, False])
def test_stale_fence_commit_is_rejected(store: SqliteStore, newer_commits_first: bool) -> None:
    old, new, now = _expired_and_reclaimed(store)
    assert new.fence == old.fence + 1
    assert new.attempts == 2  # the sweep kept the first attempt
    stale = outcome(status=500, reason="http_5xx", due_at=now + 60)
    fresh = outcome(status=200, reason="fetched", due_at=now + TTL)
    if newer_commits_first:
        assert store.commit(new, fresh, CYCLE, now + 1) is True
        assert store.commit(old, stale, CYCLE, now + 2) is False
    else:
        assert store.commit(old, stale, CYCLE, now + 1) is False
        assert store.commit(new, fresh, CYCLE, now + 2) is True
    row = rows_by_url(store)[new.url]
    assert (row["state"], row["reason"], row["last_status"]) == ("fetched", "fetched", 200)
    assert row["due_at"] == now + TTL
    assert row["fence"] == new.fence
    stale_rows = store.stale_attempts()
    assert [(r["url"], r["fence"], r["cycle"]) for r in stale_rows] == [(old.url, old.fence, CYCLE)]
    recorded = [r["record"]["fetch_id"] for r in store.fetch_records(CYCLE, SHARD)]
    assert recorded == [fresh.record.fetch_id]


def test_double_commit_of_the_same_lease_is_stale(store: SqliteStore) -> None:
    now = ready_origin(store, ["https://news-a.example.test/a"])
    lease = claim(store, now)
    assert isinstance(lease, Lease)
    assert store.commit(lease, outcome(status=200), CYCLE, now + 1)
    assert not store.commit(lease, outcome(status=503, reason="x"), CYCLE, now + 2)
    assert rows_by_url(store)[lease.url]["last_status"] == 200


def test_sweep_returns_only_expired_leases_and_keeps_attempts(store: SqliteStore) -> None:
    now = ready_origin(store, ["https://news-a.example.test/a"])
    lease = claim(store, now, lease_s=10.0)
    assert isinstance(lease, Lease)
    assert store.sweep(now + 9.9) == 0
    assert rows_by_url(store)[lease.url]["state"] == "leased"
    assert store.sweep(now + 10.0) == 1
    row = rows_by_url(store)[lease.url]
    assert (row["state"], row["reason"], row["attempts"]) == ("eligible", "lease_expired", 1)
    assert store.sweep(now + 20) == 0


def test_expired_lease_frees_its_slot_even_before_a_sweep(tmp_path: Path) -> None:
    store = make_store(tmp_path, gap=0.0, max_in_flight=1)
    now = ready_origin(store, ["https://news-a.example.test/a", "https://news-a.example.test/b"])
    first = claim(store, now, lease_s=10.0)
    assert isinstance(first, Lease)
    assert isinstance(claim(store, now + 5), Wait)
    second = claim(store, now + 10)
    assert isinstance(second, Lease)
    assert second.url != first.url


def test_leased_url_makes_claim_wait_not_drain(store: SqliteStore) -> None:
    now = ready_origin(store, ["https://news-a.example.test/a"])
    lease = claim(store, now, lease_s=10.0)
    assert isinstance(lease, Lease)
    store.release_slots([(lease.url, lease.fence)])
    waiting = claim(store, now + 1)
    assert isinstance(waiting, Wait)
    assert waiting.until <= lease.expires_at


def test_failed_retryable_url_is_claimed_again_when_due(store: SqliteStore) -> None:
    now = ready_origin(store, ["https://news-a.example.test/a"])
    lease = claim(store, now)
    assert isinstance(lease, Lease)
    retry = Outcome(
        UrlState.FAILED_RETRYABLE, "http_5xx", now + 100, 503, record=FetchRecord(fetch_id="r")
    )
    assert store.commit(lease, retry, CYCLE, now)
    assert claim(store, now + 50) == Wait(now + 100)
    again = claim(store, now + 100)
    assert isinstance(again, Lease)
    assert (again.url, again.attempts, again.fence) == (lease.url, 2, 2)


def test_commit_discovers_links(store: SqliteStore) -> None:
    now = ready_origin(store, ["https://news-a.example.test/a"])
    lease = claim(store, now)
    assert isinstance(lease, Lease)
    links = [
        (
            {"url": "https://news-a.example.test/b", "reason": "?"},
            cand("https://news-a.example.test/b", depth=1),
        ),
        (
            {"url": "https://news-a.example.test/a", "reason": "?"},
            cand("https://news-a.example.test/a", depth=1),
        ),
        ({"url": "mailto:x@y", "reason": "scheme_not_allowed"}, None),
    ]
    res = Outcome(
        UrlState.FETCHED, "fetched", now + TTL, 200, record=FetchRecord(fetch_id="f"), links=links
    )
    assert store.commit(lease, res, CYCLE, now + 1)
    [rec] = store.fetch_records(CYCLE, SHARD)
    assert [r["reason"] for r in rec["links"]] == [
        "admitted",
        "already_known",
        "scheme_not_allowed",
    ]
    assert rows_by_url(store)["https://news-a.example.test/b"]["state"] == "eligible"
    # a pass over the records may read only the parts it needs: the same values, nothing else
    [links_only] = store.fetch_records(CYCLE, SHARD, ("links",))
    assert links_only == {"fetch_id": "f", "links": rec["links"]}
    [both] = store.fetch_records(CYCLE, SHARD, ("document", "record"))
    assert both == {"fetch_id": "f", "record": rec["record"], "document": None}
    assert rec["fetch_id"] == rec["record"]["fetch_id"] == "f"
    with pytest.raises(ValueError, match="unknown record parts"):
        list(store.fetch_records(CYCLE, SHARD, ("record", "body")))


def test_backoff_defers_claims_until_it_ends(tmp_path: Path) -> None:
    store = make_store(tmp_path, gap=5.0, max_in_flight=2)
    now = ready_origin(store, [f"https://news-a.example.test/{i}" for i in range(2)])
    store.push_origin_clocks([(NEWS, 0.0, now + 60)])
    assert claim(store, now) == Wait(now + 60)
    assert claim(store, now + 59.9) == Wait(now + 60)
    assert isinstance(claim(store, now + 60), Lease)
    # an earlier backoff never shortens a later one
    store.push_origin_clocks([(NEWS, 0.0, now + 200)])
    store.push_origin_clocks([(NEWS, 0.0, now + 100)])
    assert claim(store, now + 150) == Wait(now + 200)


def test_drained_when_nothing_is_left(store: SqliteStore) -> None:
    assert isinstance(claim(store, T0), Drained)
    now = ready_origin(store, ["https://news-a.example.test/a"])
    lease = claim(store, now)
    assert isinstance(lease, Lease)
    store.commit(lease, outcome(), CYCLE, now)
    assert isinstance(claim(store, now + 1000), Drained)
    # another cycle or shard has nothing either
    assert isinstance(store.claim("c9", SHARD, now, TOKEN, LEASE_S), Drained)
    assert isinstance(store.claim(CYCLE, 3, now, TOKEN, LEASE_S), Drained)


def test_defer_remaining_relabels_only_open_urls(store: SqliteStore) -> None:
    now = ready_origin(store, ["https://news-a.example.test/a", "https://news-a.example.test/b"])
    lease = claim(store, now)
    assert isinstance(lease, Lease)
    store.commit(lease, outcome(), CYCLE, now)
    assert store.defer_remaining(CYCLE, SHARD, "deferred_origin_backoff") == 1
    rows = {r["url"]: r["reason"] for r in store.frontier_rows(CYCLE, SHARD)}
    assert rows == {
        lease.url: "fetched",
        "https://news-a.example.test/b": "deferred_origin_backoff",
    }


# opening, migrations, concurrency ---------------------------------------------------------


def test_unopenable_path_raises_a_one_line_coordination_error(tmp_path: Path) -> None:
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    url = f"sqlite:///{blocker}/sub/coord.db"
    with pytest.raises(CoordinationError) as info:
        open_store(url, OriginPolicy(1.0, 1), 10)
    msg = str(info.value)
    assert url in msg
    assert "\n" not in msg
    assert info.value.__cause__ is None


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:relative.db", "mysql://x/y", "coord.db"])
def test_malformed_coordination_url(url: str) -> None:
    with pytest.raises(CoordinationError) as info:
        open_store(url, OriginPolicy(1.0, 1), 10)
    assert repr(url) in str(info.value)


@pytest.mark.sqlite_only
def test_migrations_are_recorded_once(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    assert isinstance(store, SqliteStore)
    assert store.schema_version() == LATEST
    store.discover([cand("https://news-a.example.test/a")], CYCLE)
    store.close()
    db = tmp_path / "coord.db"
    with sqlite3.connect(db) as conn:
        before = conn.execute("SELECT version, applied_at FROM schema_migrations").fetchall()
    assert [v for v, _ in before] == revision_numbers()
    reopened = make_store(tmp_path)
    assert isinstance(reopened, SqliteStore)
    assert reopened.schema_version() == LATEST
    assert len(reopened.url_rows(SHARD)) == 1  # data survives a reopen
    reopened.close()
    with sqlite3.connect(db) as conn:
        after = conn.execute("SELECT version, applied_at FROM schema_migrations").fetchall()
    assert after == before


def test_state_is_shared_between_store_instances(tmp_path: Path) -> None:
    a = make_store(tmp_path)
    b = make_store(tmp_path)
    now = ready_origin(a, ["https://news-a.example.test/a", "https://news-a.example.test/b"])
    lease = claim(b, now)
    assert isinstance(lease, Lease)
    assert isinstance(claim(a, now), Wait)  # b's claim advanced the shared clock
    assert a.commit(lease, outcome(), CYCLE, now)
    assert rows_by_url(b)[lease.url]["state"] == "fetched"


@pytest.mark.parametrize("workers", [2, 8])
def test_concurrent_claims_on_one_origin_grant_exactly_one_lease(
    tmp_path: Path, workers: int
) -> None:
    # gap > 0 and several slots, so only the atomic clock advance can stop a second lease
    setup = make_store(tmp_path, gap=5.0, max_in_flight=workers)
    now = ready_origin(setup, [f"https://news-a.example.test/{i}" for i in range(workers)])
    setup.close()
    stores = [make_store(tmp_path, gap=5.0, max_in_flight=workers) for _ in range(workers)]
    barrier = threading.Barrier(workers)
    results: list[object] = [None] * workers
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            barrier.wait(timeout=10)
            results[i] = claim(stores[i], now)
        except BaseException as exc:  # surfaced below
            errors.append(exc)
        finally:
            stores[i].close()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not errors
    leases = [r for r in results if isinstance(r, Lease)]
    waits = [r for r in results if isinstance(r, Wait)]
    assert len(leases) == 1
    assert waits == [Wait(now + 5.0)] * (workers - 1)


def test_gap_guard_is_added_to_non_zero_gaps_only(tmp_path: Path) -> None:
    guarded = open_store(f"sqlite:///{tmp_path / 'g.db'}", OriginPolicy(5.0, 4, 0.25), 100)
    now = ready_origin(guarded, [f"https://news-a.example.test/{i}" for i in range(3)])
    assert claim(guarded, now) == Wait(now + 0.25)  # the robots claim reserved 5 + 0.25
    lease = claim(guarded, now + 0.25)
    assert isinstance(lease, Lease)
    assert (lease.claimed_at, lease.gap_s) == (now + 0.25, 5.25)
    assert claim(guarded, now + 0.25) == Wait(now + 5.5)
    no_gap = open_store(f"sqlite:///{tmp_path / 'n.db'}", OriginPolicy(0.0, 4, 0.25), 100)
    ready_origin(no_gap, [f"https://news-a.example.test/{i}" for i in range(2)])
    first = claim(no_gap, T0)
    assert isinstance(first, Lease)
    assert first.gap_s == 0.0
    assert isinstance(claim(no_gap, T0), Lease)


@pytest.mark.postgres_only
def test_postgres_migrations_are_recorded_once_and_data_survives_a_reopen(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    store.discover([cand("https://news-a.example.test/a")], CYCLE)
    versions = [r[0] for r in store._conn().execute("SELECT version FROM schema_migrations")]
    store.close()
    reopened = make_store(tmp_path)
    assert (
        versions
        == revision_numbers()
        == [r[0] for r in reopened._conn().execute("SELECT version FROM schema_migrations")]
    )
    assert reopened.schema_version() == LATEST
    assert len(reopened.url_rows(SHARD)) == 1
    reopened.close()


def test_robots_backoff_also_holds_the_origin_clock(tmp_path: Path) -> None:
    """A robots 5xx backs the origin off: no claim, not even a robots retry, until it ends."""
    store = make_store(tmp_path, gap=1.0)
    store.discover([cand("https://news-a.example.test/a")], CYCLE)
    task = claim(store, T0)
    assert isinstance(task, RobotsTask)
    store.put_robots(task, "unreachable", "", T0, 600.0, T0 + 600.0)
    assert claim(store, T0 + 599) == Wait(T0 + 600.0)
    assert isinstance(claim(store, T0 + 600), RobotsTask)


def test_a_lease_can_be_extended_once_with_its_current_fence(tmp_path: Path) -> None:
    store = make_store(tmp_path, gap=0.0)
    store.discover([cand("https://news-a.example.test/a")], CYCLE)
    put_robots(store, claim(store, T0), T0)
    lease = claim(store, T0)
    assert isinstance(lease, Lease)
    extended = store.extend_lease(lease, T0 + 50, LEASE_S)
    assert extended is not None and extended.expires_at == T0 + 50 + LEASE_S
    assert store.sweep(lease.expires_at + 1) == 0  # the old expiry no longer frees it
    assert store.extend_lease(extended, T0 + 60, LEASE_S) is None  # only once
    assert store.commit(extended, outcome(), CYCLE, T0 + 70)


def test_a_stale_or_expired_lease_cannot_be_extended(tmp_path: Path) -> None:
    store = make_store(tmp_path, gap=0.0)
    store.discover([cand("https://news-a.example.test/a")], CYCLE)
    put_robots(store, claim(store, T0), T0)
    old = claim(store, T0)
    assert isinstance(old, Lease)
    assert store.extend_lease(old, old.expires_at + 1, LEASE_S) is None  # expired
    store.sweep(old.expires_at + 1)
    new = claim(store, old.expires_at + 2)
    assert isinstance(new, Lease) and new.fence == old.fence + 1
    assert store.extend_lease(old, old.expires_at + 3, LEASE_S) is None  # stale fence
    assert store.extend_lease(new, old.expires_at + 3, LEASE_S) is not None


# batched claims and group commits --------------------------------------------------------


def claim_batch(store: CoordinationStore, now: float, limit: int, release=()):  # type: ignore[no-untyped-def]
    return store.claim_batch(CYCLE, SHARD, now, TOKEN, LEASE_S, limit, release)


def test_claim_batch_fills_an_origins_free_slots_when_it_has_no_gap(tmp_path: Path) -> None:
    store = make_store(tmp_path, gap=0.0, max_in_flight=3)
    now = ready_origin(store, [f"https://news-a.example.test/{i}" for i in range(5)])
    got = claim_batch(store, now, 8)
    assert isinstance(got, list) and len(got) == 3  # the origin's three slots, no more
    assert all(isinstance(x, Lease) for x in got)
    assert len({x.url for x in got}) == 3
    assert [x.fence for x in got] == [1, 1, 1]
    assert isinstance(claim_batch(store, now, 8), Wait)
    states = [r["state"] for r in store.url_rows(SHARD)]
    assert states.count("leased") == 3


def test_claim_batch_takes_one_url_per_origin_with_a_gap_and_advances_each_clock(
    tmp_path: Path,
) -> None:
    store = make_store(tmp_path, gap=5.0, max_in_flight=4)
    urls = [f"{base}/{i}" for base in ("https://news-a.example.test", "https://docs-b.example.test")
            for i in range(3)]  # fmt: skip
    store.discover([cand(u) for u in urls], CYCLE)
    tasks = claim_batch(store, T0, 8)
    assert isinstance(tasks, list) and {type(t) for t in tasks} == {RobotsTask}
    assert {t.origin for t in tasks} == {NEWS, DOCS}
    for t in tasks:
        put_robots(store, t, T0)
    got = claim_batch(store, T0 + 5, 8)
    assert isinstance(got, list)
    assert sorted(x.origin for x in got) == sorted([NEWS, DOCS])  # one each: the gap holds
    assert claim_batch(store, T0 + 5, 8) == Wait(T0 + 10)


def test_a_claim_reads_the_rows_it_leases_and_widens_only_past_blocked_ones(
    tmp_path: Path,
) -> None:
    store = make_store(tmp_path, gap=0.0, max_in_flight=3)
    looks: list[int] = []
    due_rows = store._due_rows  # type: ignore[attr-defined]

    def spy(c, origin, cycle, now, limit):  # type: ignore[no-untyped-def]
        looks.append(limit)
        return due_rows(c, origin, cycle, now, limit)

    store._due_rows = spy  # type: ignore[attr-defined]
    text = "User-agent: *\nDisallow: /private/\n"
    urls = [f"https://news-a.example.test/{i}" for i in range(40)]
    urls += [f"https://news-a.example.test/private/{i}" for i in range(2)]
    store.discover([cand(u, priority=0.5) for u in urls[:40]], CYCLE)
    store.discover([cand(u, priority=0.9) for u in urls[40:]], CYCLE)  # best, and blocked
    now = ready_origin(store, [], text=text)
    got = claim_batch(store, now, 3)
    assert isinstance(got, list) and len(got) == 3
    assert all("/private/" not in x.url for x in got)
    # the best three held two blocked URLs: the look widened to the scan window once
    assert looks == [3, 16 + 3 - 1]
    looks.clear()
    released = [(x.url, x.fence) for x in got if isinstance(x, Lease)]
    again = claim_batch(store, now, 3, release=released)
    assert isinstance(again, list) and len(again) == 3
    assert looks == [3]  # nothing passed over: three rows read for three leases
    assert {r["url"]: r["state"] for r in store.url_rows(SHARD)}[urls[40]] == "blocked"


def test_claim_batch_gives_back_finished_slots_first(tmp_path: Path) -> None:
    store = make_store(tmp_path, gap=0.0, max_in_flight=1)
    now = ready_origin(store, ["https://news-a.example.test/a", "https://news-a.example.test/b"])
    [first] = claim_batch(store, now, 4)
    assert isinstance(claim_batch(store, now, 4), Wait)
    got = claim_batch(store, now, 4, release=[(first.url, first.fence)])
    assert isinstance(got, list) and [x.url for x in got] != [first.url]
    stale = claim_batch(store, now, 4, release=[(first.url, first.fence - 1)])
    assert isinstance(stale, Wait)  # a stale fence frees nothing


def test_commit_batch_applies_current_leases_and_records_stale_ones_in_order(
    store: SqliteStore,
) -> None:
    old, new, now = _expired_and_reclaimed(store)
    store.discover([cand("https://news-a.example.test/c")], CYCLE)
    link = "https://news-a.example.test/new"
    page = lambda fid: Outcome(  # noqa: E731
        UrlState.FETCHED, "fetched", now + TTL, 200, record=FetchRecord(fetch_id=fid),
        links=[({"url": link, "reason": "?"}, cand(link, depth=1))],
    )  # fmt: skip
    assert store.commit_batch([(old, page("old")), (new, page("new"))], CYCLE, now + 1) == [
        False,
        True,
    ]
    assert [r["fence"] for r in store.stale_attempts()] == [old.fence]
    [rec] = store.fetch_records(CYCLE, SHARD)
    assert rec["record"]["fetch_id"] == "new"
    assert [r["reason"] for r in rec["links"]] == ["admitted"]
    assert store.commit_batch([], CYCLE, now) == []


def test_commit_batch_discovers_a_link_offered_by_two_pages_once(tmp_path: Path) -> None:
    store = make_store(tmp_path, gap=0.0, max_in_flight=2)
    now = ready_origin(store, ["https://news-a.example.test/a", "https://news-a.example.test/b"])
    leases = claim_batch(store, now, 2)
    assert isinstance(leases, list) and len(leases) == 2
    link = "https://news-a.example.test/shared"
    results = [
        (x, Outcome(UrlState.FETCHED, "fetched", now + TTL, 200, record=FetchRecord(fetch_id=x.url),
                    links=[({"url": link, "reason": "?"}, cand(link, depth=1))]))
        for x in leases
    ]  # fmt: skip
    assert store.commit_batch(results, CYCLE, now + 1) == [True, True]
    reasons = sorted(r["links"][0]["reason"] for r in store.fetch_records(CYCLE, SHARD))
    assert reasons == ["admitted", "already_known"]
    assert [r["url"] for r in store.url_rows(SHARD)].count(link) == 1


def test_push_origin_clocks_only_moves_forward_and_holds_backoff(tmp_path: Path) -> None:
    store = make_store(tmp_path, gap=5.0, max_in_flight=4)
    now = ready_origin(store, [f"https://news-a.example.test/{i}" for i in range(3)])
    store.push_origin_clocks([(NEWS, now + 20, 0.0)])
    assert claim(store, now) == Wait(now + 20)
    store.push_origin_clocks([(NEWS, now + 1, 0.0)])
    assert claim(store, now + 10) == Wait(now + 20)
    store.push_origin_clocks([(NEWS, 0.0, now + 50)])  # a 429's backoff
    assert claim(store, now + 30) == Wait(now + 50)


def _claim_while_held(
    store: CoordinationStore, held: str, now: float, limit: int, timeout_s: float
) -> tuple[bool, list[object]]:
    """A claim run while another PostgreSQL connection holds origin `held`'s row (a claimer
    mid-claim): whether it was still waiting after `timeout_s`, and what it answered."""
    import psycopg

    holder = psycopg.connect(_backend_url["url"], autocommit=False)
    got: list[object] = []
    claimer = threading.Thread(target=lambda: got.append(claim_batch(store, now, limit)))
    try:
        holder.execute("SELECT 1 FROM origins WHERE origin = %s FOR UPDATE", (held,))
        claimer.start()
        claimer.join(timeout=timeout_s)
        waiting = claimer.is_alive()
    finally:
        holder.rollback()
        holder.close()
        if claimer.ident is not None:
            claimer.join(timeout=10)
    return waiting, got


@pytest.mark.postgres_only
def test_a_claim_passes_origins_another_claimer_holds_and_never_takes_them(
    tmp_path: Path,
) -> None:
    """Claims of one shard run side by side on PostgreSQL: while one claimer holds origin A's
    row (mid-claim), another claim neither waits for it nor leases A; it takes B at once."""

    store = make_store(tmp_path, gap=1.0, max_in_flight=1)
    a, b = "https://news-a.example.test:443", "https://docs-b.example.test:443"
    now = ready_origin(store, ["https://news-a.example.test/1", "https://news-a.example.test/2"])
    now = ready_origin(
        store, ["https://docs-b.example.test/1", "https://docs-b.example.test/2"], now
    )
    waiting, got = _claim_while_held(store, a, now, 8, timeout_s=2.0)
    assert not waiting, "the claim queued behind the held origin"
    assert isinstance(got[0], list) and [x.origin for x in got[0]] == [b], got
    later = claim_batch(store, now, 8)  # released: A is claimable again, B waits its gap
    assert isinstance(later, list) and [x.origin for x in later] == [a], later
    store.close()


@pytest.mark.postgres_only
def test_a_claim_holding_an_origin_it_found_full_never_waits_for_another(
    tmp_path: Path,
) -> None:
    """A claim locks origin A and finds its slot leased by a claimer that committed after
    its look, while origin B is held mid-claim: it answers at once, holding A, instead of
    queueing for B. Waiting there, with A held out of origin order, closed lock cycles with
    other claims and commits (deadlocks in the CI of 79e4916)."""

    from atlas_pipeline.coordination.postgres import PostgresStore

    a, b = "https://news-a.example.test:443", "https://docs-b.example.test:443"
    setup = make_store(tmp_path, gap=0.0, max_in_flight=1)
    now = ready_origin(setup, ["https://news-a.example.test/1", "https://news-a.example.test/2"])
    now = ready_origin(
        setup, ["https://docs-b.example.test/1", "https://docs-b.example.test/2"], now
    )
    rival = make_store(tmp_path, gap=0.0, max_in_flight=1)
    raced: list[object] = []

    class Overtaken(PostgresStore):
        def _take_origins(self, c: Any, part: list[Any], now: float, params: dict[str, Any],
                          wait: bool) -> dict[str, Any]:  # fmt: skip
            if not raced:  # between this claim's look and its locks: A's slot is leased
                raced.append(claim_batch(rival, now, 8))
            return super()._take_origins(c, part, now, params, wait)

    store = Overtaken(_backend_url["url"], OriginPolicy(0.0, 1), 100)
    waiting, got = _claim_while_held(store, b, now, 2, timeout_s=3.0)
    assert isinstance(raced[0], list) and [x.origin for x in raced[0]] == [a], raced
    assert not waiting, "the claim holding A queued behind the held B"
    assert isinstance(got[0], Wait), got
    later = claim_batch(store, now, 2)  # B is free again; A's slot is still leased
    assert isinstance(later, list) and [x.origin for x in later] == [b], later
    for s in (store, rival, setup):
        s.close()


@pytest.mark.parametrize("workers", [8])
def test_concurrent_claim_batches_never_lease_a_url_twice(tmp_path: Path, workers: int) -> None:
    setup = make_store(tmp_path, gap=0.0, max_in_flight=4)
    urls = [f"https://o{o}.example.test/{i}" for o in range(6) for i in range(10)]
    setup.discover([cand(u) for u in urls], CYCLE)
    tasks = claim_batch(setup, T0, 100)
    assert isinstance(tasks, list)
    for t in tasks:
        assert isinstance(t, RobotsTask)
        put_robots(setup, t, T0)
    setup.close()
    leased: list[str] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(workers)

    def work() -> None:
        store = make_store(tmp_path, gap=0.0, max_in_flight=4)
        try:
            barrier.wait(timeout=10)
            for _ in range(20):
                got = claim_batch(store, T0 + 1, 3)
                if not isinstance(got, list):
                    continue
                leased.extend(x.url for x in got if isinstance(x, Lease))
                store.commit_batch(
                    [(x, outcome()) for x in got if isinstance(x, Lease)], CYCLE, T0 + 1
                )
        except BaseException as exc:  # surfaced below
            errors.append(exc)
        finally:
            store.close()

    threads = [threading.Thread(target=work) for _ in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors
    assert sorted(leased) == sorted(urls)  # every URL exactly once


@pytest.mark.sqlite_only
def test_a_locked_database_is_an_outage_not_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "coord.db"
    store = SqliteStore(path, OriginPolicy(0.0, 1), 100, busy_timeout_s=0.1)
    now = ready_origin(store, ["https://news-a.example.test/a"])
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")
    with pytest.raises(StoreUnavailable, match="locked"):
        claim(store, now)
    blocker.execute("ROLLBACK")
    assert isinstance(claim(store, now), Lease)  # nothing was applied by the failed call


def test_batch_leases_give_each_run_of_a_partition_the_next_fence(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    assert store.batch_lease(CYCLE, SHARD) is None
    first = store.acquire_batch(CYCLE, SHARD, "run-1", T0)
    retry = store.acquire_batch(CYCLE, SHARD, "run-1-retry", T0 + 1)
    other = store.acquire_batch(CYCLE, SHARD + 1, "run-2", T0)
    assert (first.fence, retry.fence, other.fence) == (1, 2, 1)
    assert store.batch_lease(CYCLE, SHARD) == retry
    assert store.acquire_batch("c2", SHARD, "run-3", T0).fence == 1


def test_referenced_bodies_cover_committed_records_and_current_versions(
    store: SqliteStore,
) -> None:
    now = ready_origin(store, ["https://news-a.example.test/a"])
    lease = claim(store, now)
    assert isinstance(lease, Lease)
    res = Outcome(UrlState.FETCHED, "fetched", now + TTL, 200, content_hash="k1",
                  record=FetchRecord(fetch_id="f1", body_key="k1"))  # fmt: skip
    assert store.commit(lease, res, CYCLE, now + 1)
    assert store.referenced_bodies() == {"k1"}


# operator pauses -------------------------------------------------------------------------


def test_a_paused_origin_is_skipped_from_the_next_claim_and_resumes(tmp_path: Path) -> None:
    store = make_store(tmp_path, gap=0.0, max_in_flight=1)
    now = ready_origin(store, ["https://news-a.example.test/a", "https://news-a.example.test/b"])
    store.discover([cand("https://docs-b.example.test/x")], CYCLE)
    store.pause("origin", NEWS, "complaint #12", "ops@atlas", now)
    got = claim_batch(store, now, 8)
    assert isinstance(got, list) and {x.origin for x in got} == {DOCS}  # news-a skipped
    for x in got:
        assert isinstance(x, RobotsTask)
        put_robots(store, x, now)
    lease = claim(store, now + 1)
    assert isinstance(lease, Lease) and lease.origin == DOCS
    store.commit(lease, outcome(), CYCLE, now + 1)
    assert isinstance(claim(store, now + 2), Drained)  # only paused work is left
    assert store.mark_paused(CYCLE, SHARD) == 2
    assert {r["reason"] for r in store.url_rows(SHARD) if r["origin"] == NEWS} == {
        "operator_paused"
    }
    assert store.resume("origin", NEWS, "resolved", "ops@atlas", now + 3)
    assert not store.resume("origin", NEWS, "again", "ops@atlas", now + 3)
    assert isinstance(claim(store, now + 3), Lease)
    log = [(r["action"], r["value"], r["reason"], r["who"]) for r in store.operator_log()]
    assert log == [("pause", NEWS, "complaint #12", "ops@atlas"),
                   ("resume", NEWS, "resolved", "ops@atlas")]  # fmt: skip


def test_a_domain_pause_covers_every_origin_of_the_registrable_domain(tmp_path: Path) -> None:
    store = make_store(tmp_path, gap=0.0, max_in_flight=1)
    urls = ["https://a.shop.example.test/1", "http://b.shop.example.test:8080/2",
            "https://other.example.org/3"]  # fmt: skip
    store.discover([cand(u) for u in urls], CYCLE)
    store.pause("domain", "example.test", "opt-out request", "ops", T0)
    assert store.pauses()[0]["value"] == "example.test"
    got = claim_batch(store, T0, 8)
    assert isinstance(got, list) and [x.origin for x in got] == ["https://other.example.org:443"]
    with pytest.raises(CoordinationError, match="reason"):
        store.pause("origin", NEWS, " ", "ops", T0)


def test_a_big_origin_cannot_starve_small_ones(tmp_path: Path) -> None:
    """Origin-first scheduling (earliest clock first, then that origin's best URL): with one
    origin holding 90% of the URLs and room for two requests at a time, every small origin
    is served within the first round over the origins (the starvation bound)."""
    store = make_store(tmp_path, gap=0.0, max_in_flight=4)
    big = [f"https://big.example.test/{i}" for i in range(90)]
    small = [f"https://small-{i}.example.test/" for i in range(10)]
    store.discover([cand(u) for u in big + small], CYCLE)
    tasks = claim_batch(store, T0, 100)
    assert isinstance(tasks, list) and len(tasks) == 11
    for t in tasks:
        assert isinstance(t, RobotsTask)
        put_robots(store, t, T0)
    served: list[str] = []
    now = T0 + 1
    while True:
        got = claim_batch(store, now, 2)  # a global concurrency cap of two
        if not isinstance(got, list):
            break
        served += [x.origin for x in got]
        store.commit_batch([(x, outcome()) for x in got if isinstance(x, Lease)], CYCLE, now)
        now += 0.01
    assert len(served) == 100
    first_round = served[: 2 * 11]  # two slots per turn, eleven origins
    assert {origin_of(u) for u in small} <= set(first_round)


def _serve(
    store: CoordinationStore, now: float, step: float, limit: int, until: Any = None
) -> list[tuple[float, str]]:
    """Claim `limit` at a time and commit at once until drained (or `until(served)`)."""
    served: list[tuple[float, str]] = []
    while until is None or not until(served):
        got = claim_batch(store, now, limit)
        if not isinstance(got, list):
            if isinstance(got, Drained):
                break
            now = max(now + step, got.until)
            continue
        for x in got:
            if isinstance(x, RobotsTask):
                put_robots(store, x, now)
            else:
                served.append((now, x.origin))
        store.commit_batch([(x, outcome()) for x in got if isinstance(x, Lease)], CYCLE, now)
        now += step
    return served


def _big(run: str) -> list[str]:  # one class: the registrable domain bigpub-{run}.test
    return [f"https://s{i}.bigpub-{run}.test/" for i in range(12)]


def _small(run: str) -> list[str]:  # four classes of one origin each
    return [f"https://small-{i}-{run}.test/" for i in range(4)]


def _fair_store(run: str, quota: float, bound_s: float = 30.0) -> CoordinationStore:
    """A store (shared by the runs of one test, hence `run` in the host names) holding twelve
    origins of one publisher and four small sites, twenty URLs each."""
    store = open_store(
        _backend_url["url"],
        OriginPolicy(0.0, 1, class_quota=quota, starvation_bound_s=bound_s),
        10_000,
    )
    store.discover([cand(f"{o}{n}") for o in _big(run) + _small(run) for n in range(20)], CYCLE)
    return store


def _big_share_while_all_wait(served: list[tuple[float, str]], run: str) -> float:
    """The big class's share of attempts up to the moment the first small origin ran dry."""
    left = {origin_of(o): 20 for o in _small(run)}
    n_big = 0
    for i, (_, origin) in enumerate(served):
        if origin in left:
            left[origin] -= 1
            if not left[origin]:
                return n_big / (i + 1)
        else:
            n_big += 1
    raise AssertionError("a small origin never ran dry")


def test_a_class_quota_keeps_a_big_publisher_to_its_share(tmp_path: Path) -> None:
    """Twelve origins of one publisher (one class) and four small sites: with a 25% class
    quota the publisher takes at most a quarter of attempts while the small ones have work
    (without it, three quarters), and its unused share goes to it once they are done."""
    served = _serve(_fair_store("a", 0.25), T0, 0.01, 2)
    assert len(served) == 16 * 20  # nothing left behind
    assert _big_share_while_all_wait(served, "a") <= 0.25 + 1 / 40
    unfair = _serve(_fair_store("b", 1.0), T0, 0.01, 2)
    assert _big_share_while_all_wait(unfair, "b") >= 0.6


def _max_wait(served: list[tuple[float, str]], origins: list[str]) -> float:
    """Longest any of `origins` waited for a claim (all are eligible from the first one on)."""
    last = {origin_of(o): served[0][0] for o in origins}
    worst = 0.0
    for at, origin in [*served, (served[-1][0], "")]:
        for o in last if not origin else [origin] if origin in last else []:
            worst = max(worst, at - last[o])
            last[o] = at
    return worst


def test_the_starvation_bound_beats_the_class_quota(tmp_path: Path) -> None:
    """Held back by the quota, each origin of the big class would wait ~3 s for its turn;
    with a 1 s starvation bound none waits longer than the bound and one claim step."""
    step = 0.1
    some = lambda served: len(served) >= 60  # noqa: E731  (every small origin still has work)
    held = _serve(_fair_store("a", 0.25, bound_s=1e9), T0, step, 2, until=some)
    assert _max_wait(held, _big("a")) > 2.0
    bounded = _serve(_fair_store("b", 0.25, bound_s=1.0), T0, step, 2, until=some)
    assert _max_wait(bounded, _big("b")) <= 1.0 + step + 1e-6


def test_ip_buckets_share_one_clock_and_regroup_when_the_config_changes(tmp_path: Path) -> None:
    """politeness.bucket: ip: origins on one address are one bucket (one robots fetch at a
    time here); reopening with per-origin buckets splits them again."""
    resolve = (("a.example.test", "192.0.2.7"), ("b.example.org", "192.0.2.7"),
               ("c.example.net", "192.0.2.8"))  # fmt: skip
    urls = ["https://a.example.test/", "https://b.example.org/", "https://c.example.net/"]
    store = open_store(_backend_url["url"], OriginPolicy(5.0, 1, bucket="ip", resolve=resolve), 9)
    store.discover([cand(u) for u in urls], CYCLE)
    got = claim_batch(store, T0, 8)
    assert isinstance(got, list) and len(got) == 2  # one per address
    shared = {origin_of(urls[0]), origin_of(urls[1])}
    assert len({x.origin for x in got} & shared) == 1
    # the other origin on 192.0.2.7 waits: the robots fetch holds its address's only slot
    assert isinstance(claim_batch(store, T0 + 10, 8), Wait)
    store.close()
    store = open_store(_backend_url["url"], OriginPolicy(5.0, 1), 9)
    again = claim_batch(store, T0 + 10, 8)
    assert isinstance(again, list) and {x.origin for x in again} == shared - {
        got[0].origin,
        got[1].origin,
    }


def test_aging_lets_a_long_queued_url_overtake_fresher_higher_priority_ones(
    tmp_path: Path,
) -> None:
    store = open_store(_backend_url["url"], OriginPolicy(5.0, 1, aging_per_hour=0.01), 1)
    old, new = "https://news-a.example.test/old", "https://news-a.example.test/new"
    store.discover([cand(old, priority=0.5), cand(new, priority=0.9)], None)
    now = time.time()
    assert [r["url"] for r in store.select_frontier("c1", SHARD, now)] == [new]
    assert isinstance(store, SqliteStore)
    with store._tx() as c:  # as if `old` had been discovered 50 hours ago
        c.execute(
            "UPDATE urls SET discovered_at = :t WHERE url = :u", {"t": now - 50 * 3600, "u": old}
        )
    assert [r["url"] for r in store.select_frontier("c2", SHARD, now)] == [old]


# adaptive pacing (AIMD) ------------------------------------------------------------------


def _commit_one(store: CoordinationStore, now: float, reason: str, elapsed: float = 0.1) -> Lease:
    lease = claim(store, now)
    assert isinstance(lease, Lease), lease
    state = UrlState.FAILED_RETRYABLE if reason != "fetched" else UrlState.FETCHED
    res = Outcome(state, reason, now, 200, record=FetchRecord(fetch_id=f"{now}", elapsed_s=elapsed))
    assert store.commit(lease, res, CYCLE, now)
    return lease


def test_errors_widen_an_origins_gap_and_successes_narrow_it(tmp_path: Path) -> None:
    # Each failed URL is due at once, so the next claim takes it again (attempt 2, 3, ...).
    store = open_store(_backend_url["url"], OriginPolicy(1.0, 1, 0.0, 5.0), 100)
    now = ready_origin(store, [f"https://news-a.example.test/{i}" for i in range(30)])
    now += 1.0
    assert _commit_one(store, now, "http_5xx").gap_s == 1.0
    now += 1.0
    assert _commit_one(store, now, "timeout").gap_s == 1.0  # a page's first 5xx: no slowdown
    # the widening holds back the very next request: its slot moved with the gap
    assert claim(store, now + 1.0) == Wait(now + 2.0)
    now += 2.0
    assert _commit_one(store, now, "http_429").gap_s == 2.0  # doubled by the timeout
    assert claim(store, now + 2.0) == Wait(now + 4.0)
    now += 4.0
    assert _commit_one(store, now, "timeout").gap_s == 4.0
    gaps = []
    for _ in range(12):
        now += 5.0
        gaps.append(_commit_one(store, now, "fetched").gap_s)
    assert gaps[0] == 5.0  # capped at adaptive_max_gap_s
    # additive increase of the rate: each success adds a tenth of the configured 1/s
    assert gaps[1:9] == pytest.approx([1 / (0.2 + 0.1 * k) for k in range(1, 9)])
    assert gaps[8:] == [1.0] * 4 and gaps == sorted(gaps, reverse=True)


def test_a_burst_of_503s_slows_the_origin_only_when_they_repeat_and_health_undoes_it(
    tmp_path: Path,
) -> None:
    store = open_store(_backend_url["url"], OriginPolicy(1.0, 1, 0.0, 60.0), 100)
    now = ready_origin(store, [f"https://news-a.example.test/{i}" for i in range(40)])
    gaps: list[float] = []
    starts: list[float] = []

    def answer(reason: str, due_in: float) -> Lease:
        nonlocal now
        lease = claim(store, now)
        if isinstance(lease, Wait):  # a widening held back this very request
            now = lease.until
            lease = claim(store, now)
        assert isinstance(lease, Lease), lease
        gaps.append(lease.gap_s)
        starts.append(now)
        state = UrlState.FETCHED if reason == "fetched" else UrlState.FAILED_RETRYABLE
        res = Outcome(state, reason, now + due_in, 200, record=FetchRecord(fetch_id=f"{now}"))
        assert store.commit(lease, res, CYCLE, now)
        now += lease.gap_s  # the pace it was claimed at: too early once a widening followed
        return lease

    for _ in range(8):  # every page's first request fails (a page-level hiccup)
        assert answer("http_5xx", due_in=20).attempts == 1
    assert gaps == [1.0] * 8  # ... and the origin keeps its pace
    now += 20
    for _ in range(5):  # now their retries fail too: the origin itself struggles
        assert answer("http_5xx", due_in=3600).attempts == 2
    assert gaps[8:] == [1.0, 2.0, 4.0, 8.0, 16.0]  # each repeated 5xx halves the rate
    for _ in range(12):
        answer("fetched", due_in=3600)
    assert gaps[13] == 32.0
    assert gaps[14:] == sorted(gaps[14:], reverse=True) and gaps[-1] == 1.0 == gaps[-2]
    # from the origin's side: a widened gap held from the very request after the overload
    spacing = [b - a for a, b in itertools.pairwise(starts)]
    paced = [max(a, b) for a, b in itertools.pairwise(gaps)]
    assert spacing[:7] + spacing[8:] == pytest.approx(paced[:7] + paced[8:])  # 7: the 20 s pause


def test_a_slow_answer_widens_the_gap_like_an_error(tmp_path: Path) -> None:
    store = open_store(_backend_url["url"], OriginPolicy(1.0, 1, 0.0, 30.0), 100)
    now = ready_origin(store, [f"https://news-a.example.test/{i}" for i in range(5)]) + 1
    _commit_one(store, now, "fetched", elapsed=0.2)  # the latency baseline
    assert _commit_one(store, now + 1, "fetched", elapsed=5.0).gap_s == 1.0  # 25x the usual
    assert claim(store, now + 2) == Wait(now + 3)  # the next request waits the doubled gap
    assert _commit_one(store, now + 3, "fetched", elapsed=0.2).gap_s == 2.0  # doubled by it


def test_adaptation_off_keeps_the_gap(tmp_path: Path) -> None:
    store = make_store(tmp_path, gap=1.0, max_in_flight=1)  # adaptive_max_gap_s 0
    now = ready_origin(store, [f"https://news-a.example.test/{i}" for i in range(3)]) + 1
    _commit_one(store, now, "http_5xx")
    assert _commit_one(store, now + 1, "http_5xx").gap_s == 1.0


def test_urls_blocked_by_robots_are_judged_again_when_the_rules_change(tmp_path: Path) -> None:
    store = make_store(tmp_path, gap=0.0, max_in_flight=1)
    urls = ["https://news-a.example.test/a", "https://news-a.example.test/b"]
    store.discover([cand(u) for u in urls], CYCLE)
    task = claim(store, T0, lease_s=10.0)
    assert isinstance(task, RobotsTask)
    store.put_robots(task, "parsed", "User-agent: *\nDisallow: /\n", T0, 100.0, 0.0, good=True)
    assert claim(store, T0 + 1) == Wait(T0 + 1)  # both blocked at claim: look again at once
    assert isinstance(claim(store, T0 + 1), Drained)
    assert {r["reason"] for r in store.url_rows(SHARD)} == {"robots_disallowed"}
    # the next cycle, once the policy is due for a refresh: robots.txt first, then the URLs
    queued = {r["url"]: r["reason"] for r in store.select_frontier("c2", SHARD, T0 + 101)}
    assert queued == dict.fromkeys(urls, "robots_recheck")
    task = store.claim("c2", SHARD, T0 + 101, TOKEN, LEASE_S)
    assert isinstance(task, RobotsTask)
    store.put_robots(task, "parsed", "User-agent: *\nDisallow: /b\n", T0 + 101, 100.0, 0.0)
    lease = store.claim("c2", SHARD, T0 + 102, TOKEN, LEASE_S)
    assert isinstance(lease, Lease) and lease.url == urls[0]  # allowed by the new rules
    store.commit(lease, outcome(), "c2", T0 + 102)
    store.claim("c2", SHARD, T0 + 103, TOKEN, LEASE_S)
    assert rows_by_url(store)[urls[1]]["state"] == "blocked"  # still disallowed: blocked again
    assert rows_by_url(store)[urls[1]]["robots_version"] == lease.robots_version


def test_changed_rules_release_robots_blocked_urls_within_the_cycle(store: SqliteStore) -> None:
    urls = ["https://news-a.example.test/a", "https://news-a.example.test/b"]
    store.discover([cand(u) for u in urls], CYCLE)
    task = claim(store, T0, lease_s=10.0)
    assert isinstance(task, RobotsTask)
    store.put_robots(task, "parsed", "User-agent: *\nDisallow: /a\n", T0, 10.0, 0.0)
    lease = claim(store, T0 + 5)  # /a blocked at claim, /b leased
    assert isinstance(lease, Lease) and lease.url == urls[1]
    store.commit(lease, outcome(), CYCLE, T0 + 6)
    task = claim(store, T0 + 11, lease_s=10.0)  # expired while /a is blocked: no work, no task
    assert isinstance(task, Drained)
    store.discover([cand("https://news-a.example.test/c")], CYCLE)  # new work: robots first
    task = claim(store, T0 + 11, lease_s=10.0)
    assert isinstance(task, RobotsTask)
    store.put_robots(task, "parsed", "User-agent: *\nDisallow:\n", T0 + 11, 100.0, 0.0)
    assert rows_by_url(store)[urls[0]]["reason"] == "robots_recheck"
    got = set()
    for t in (T0 + 16, T0 + 21):
        lease = claim(store, t)
        assert isinstance(lease, Lease)
        got.add(lease.url)
        store.commit(lease, outcome(), CYCLE, t)
    assert got == {urls[0], "https://news-a.example.test/c"}


# stricter buckets ------------------------------------------------------------------------


def _two_shop_origins(bucket: str, gap: float, max_in_flight: int = 1) -> CoordinationStore:
    store = open_store(_backend_url["url"], OriginPolicy(gap, max_in_flight, 0.0, 0.0, bucket), 100)
    urls = [f"https://{h}.shop.example.test/{i}" for h in ("a", "b") for i in range(3)]
    store.discover([cand(u) for u in [*urls, "https://other.example.org/x"]], CYCLE)
    tasks = claim_batch(store, T0, 8)
    assert isinstance(tasks, list)
    for t in tasks:
        assert isinstance(t, RobotsTask)
        put_robots(store, t, T0)
    return store


def test_a_domain_bucket_gives_its_origins_one_clock(tmp_path: Path) -> None:
    store = _two_shop_origins("domain", gap=5.0)
    # the robots fetches took the domain's first gap: a.shop, b.shop and other each got one,
    # but a and b share a clock, so only one of them was handed out (see the task count)
    got = claim_batch(store, T0 + 10, 8)
    assert isinstance(got, list)
    shops = [x for x in got if "shop" in x.origin]
    assert len(shops) == 1 and any("other" in x.origin for x in got)
    store.commit_batch([(x, outcome()) for x in got if isinstance(x, Lease)], CYCLE, T0 + 10)
    assert claim_batch(store, T0 + 10, 8) == Wait(T0 + 15)  # b.shop waits out a.shop's gap
    nxt = claim_batch(store, T0 + 15, 8)
    assert isinstance(nxt, list) and len([x for x in nxt if "shop" in x.origin]) == 1


def test_a_domain_bucket_shares_one_in_flight_cap(tmp_path: Path) -> None:
    store = _two_shop_origins("domain", gap=0.0, max_in_flight=1)
    got = claim_batch(store, T0 + 1, 8)
    assert isinstance(got, list)
    assert len([x for x in got if "shop" in x.origin]) == 1  # not one per origin
    again = claim_batch(store, T0 + 1, 8)
    assert not isinstance(again, list) or not any("shop" in x.origin for x in again)


def test_origin_buckets_keep_origins_apart(tmp_path: Path) -> None:
    store = _two_shop_origins("origin", gap=5.0)
    got = claim_batch(store, T0 + 10, 8)
    assert isinstance(got, list)
    assert len({x.origin for x in got if "shop" in x.origin}) == 2


def test_a_redirect_target_carries_its_chain_to_its_claim(tmp_path: Path) -> None:
    store = make_store(tmp_path, gap=0.0)
    chain = ("https://news-a.example.test/old", "https://news-a.example.test/older")
    target = "https://docs-b.example.test/new"
    store.discover([Candidate(target, target, origin_of(target), SHARD, 1, 1.0, via=chain)], CYCLE)
    task = claim(store, T0)
    assert isinstance(task, RobotsTask)
    put_robots(store, task, T0)
    lease = claim(store, T0 + 1)
    assert isinstance(lease, Lease) and lease.redirect_chain == chain


def test_reserve_hop_takes_an_origins_clock_like_a_claim(tmp_path: Path) -> None:
    """A robots.txt redirect into another origin: the hop starts only when that origin's
    clock and cap allow, and moves its clock; a paused origin is never due."""
    store = make_store(tmp_path, gap=5.0)
    assert store.reserve_hop(DOCS, SHARD, T0) == T0  # unknown until now: registered, taken
    assert store.reserve_hop(DOCS, SHARD, T0 + 1) == pytest.approx(T0 + 5.0)
    assert store.reserve_hop(DOCS, SHARD, T0 + 5.0) == T0 + 5.0
    store.discover([cand("https://docs-b.example.test/a")], CYCLE)
    assert isinstance(claim_batch(store, T0 + 6, 8), Wait)  # the hop holds the clock
    ready_origin(store, ["https://news-a.example.test/x"], now=T0 + 20)
    got = claim_batch(store, T0 + 25, 8)
    assert isinstance(got, list) and {type(x) for x in got} == {Lease, RobotsTask}
    # news-a's page and docs-b's robots.txt are in flight: each origin's only slot is taken
    assert store.reserve_hop(NEWS, SHARD, T0 + 40) == pytest.approx(T0 + 40 + 0.25)
    assert store.reserve_hop(DOCS, SHARD, T0 + 40) == pytest.approx(T0 + 40 + 0.25)
    store.pause("origin", DOCS, "complaint", "ops", T0)
    assert store.reserve_hop(DOCS, SHARD, T0 + 100) == float("inf")


def test_reserve_slot_says_the_gap_it_applied(tmp_path: Path) -> None:
    """A rendered page's subrequest takes its origin's slot like a hop; the gap comes back with
    the answer, so a request that leaves late can move the clock from its own start."""
    store = make_store(tmp_path, gap=2.0)
    ready_origin(store, ["https://news-a.example.test/x"], now=T0)
    assert isinstance(claim(store, T0 + 20), Lease)
    # the page's request is in flight: the origin's only slot is taken, whoever asks
    assert store.reserve_slot(NEWS, SHARD, T0 + 30) == (pytest.approx(T0 + 30.25), 2.0)
    lease_fence = next(r["fence"] for r in store.url_rows(SHARD) if r["url"].endswith("/x"))
    store.release_slots([("https://news-a.example.test/x", lease_fence)])  # its body arrived
    assert store.reserve_slot(NEWS, SHARD, T0 + 31) == (T0 + 31, 2.0)
    assert store.reserve_slot(NEWS, SHARD, T0 + 32) == (pytest.approx(T0 + 33.0), 2.0)


def test_trap_caps_bound_calendars_facets_and_numbered_urls(tmp_path: Path) -> None:
    """Distinct URLs per trap key are counted in the catalogue itself: past a cap the rest
    are cut with the cap's reason, however many batches (or runs) offer them."""
    from atlas_pipeline.coordination import TrapCaps

    store = open_store(_backend_url["url"], OriginPolicy(0.0, 1), 10**6, TrapCaps(5, 8, 3))
    months = [
        f"https://news-a.example.test/calendar/{2000 + i // 12}/{i % 12 + 1}" for i in range(40)
    ]
    facets = [
        f"https://news-a.example.test/shop?color=c{i}&size=s{j}" for i in range(4) for j in range(4)
    ]
    items = [f"https://news-a.example.test/item?id={i}" for i in range(20)]
    got = []
    for batch in (months[:2], months[2:], facets[:3], facets[3:], items[:5], items[5:]):
        got += store.discover([cand(u) for u in batch], CYCLE)
    assert got.count("calendar_cap") == 40 - 3
    assert got.count("query_variant_cap") == 16 - 5
    assert got.count("path_pattern_cap") == 20 - 8
    assert got.count("admitted") == 3 + 5 + 8
    # a cut URL was not stored; offering the calendar again changes nothing
    again = store.discover([cand(u) for u in months], CYCLE)
    assert again[:3] == ["already_known"] * 3 and set(again[3:]) == {"calendar_cap"}
    other = store.discover([cand("https://docs-b.example.test/calendar/2001/1")], CYCLE)
    assert other == ["admitted"]  # caps are per origin


def test_trap_counters_of_an_older_catalogue_are_counted_on_upgrade(tmp_path: Path) -> None:
    """A catalogue from before the counters (revision 0014) gets them counted once by that
    revision, so caps already reached stay reached."""
    import sqlalchemy as sa

    from atlas_pipeline.coordination import TrapCaps
    from atlas_pipeline.coordination.migrate import engine_for, upgrade
    from atlas_pipeline.coordination.sqlite import url_digest
    from atlas_pipeline.traps import trap_keys

    caps = TrapCaps(query_variants=5, pattern_urls=8, calendar_urls=3)
    months = [f"https://news-a.example.test/calendar/2001/{m}" for m in range(1, 13)]
    engine = engine_for(_backend_url["url"])
    upgrade(engine, "0013")  # as a pre-14 store looks: trap keys as columns, no counters
    origin = "https://news-a.example.test:443"
    with engine.begin() as c:
        c.execute(sa.text("""INSERT INTO origins (origin, shard, min_gap_s, max_in_flight,
                                 registrable_domain, bucket, fair_class)
                             VALUES (:o, 0, 0, 1, 'example.test', :o, 'example.test')"""),
                  {"o": origin})  # fmt: skip
        c.execute(
            sa.text("""INSERT INTO urls (url, discovered_url, origin, shard, depth, priority,
                           state, reason, cycle, discovered_at, trap_pattern, trap_query,
                           url_hash)
                       VALUES (:u, :u, :o, 0, 0, 1.0, 'eligible', 'admitted', :c, :t, :p, :q,
                               :h)"""),
            [{"u": u, "o": origin, "c": CYCLE, "t": T0, "p": trap_keys(u).pattern,
              "q": trap_keys(u).query_key, "h": url_digest(u)} for u in months[:3]],
        )  # fmt: skip
    engine.dispose()
    reopened = open_store(_backend_url["url"], OriginPolicy(0.0, 1), 10**6, caps)
    assert set(reopened.discover([cand(u) for u in months[3:]], CYCLE)) == {"calendar_cap"}
    with reopened._tx() as c:
        rows = c.execute("SELECT kind, n FROM trap_counts").fetchall()
    assert [(r[0], r[1]) for r in rows] == [("pattern", 3)]
    reopened.close()


def test_the_bloom_prefilter_never_drops_or_duplicates_a_url(tmp_path: Path) -> None:
    """A prefilter loaded before another process added a URL says "not known" about it: the
    insert-if-absent still refuses the duplicate, and the decision says so."""
    from atlas_pipeline.coordination import TrapCaps

    url = _backend_url["url"]
    mine = open_store(url, OriginPolicy(0.0, 1), 10**6, TrapCaps(bloom_capacity=1000))
    other = open_store(url, OriginPolicy(0.0, 1), 10**6)
    first = [f"https://news-a.example.test/{i}" for i in range(10)]
    assert mine.discover([cand(u) for u in first], CYCLE) == ["admitted"] * 10  # loads the filter
    other.discover([cand("https://news-a.example.test/late")], CYCLE)
    again = mine.discover([cand(u) for u in [*first[:3], "https://news-a.example.test/late",
                                             "https://news-a.example.test/new"]], CYCLE)  # fmt: skip
    assert again == ["already_known"] * 4 + ["admitted"]
    assert len([r for r in mine.url_rows(SHARD) if r["url"].endswith("/late")]) == 1


def _discover_in_process(url: str, urls: list[str], seed: int, go: str) -> list[str]:
    import random as _random
    from pathlib import Path as _Path

    store = open_store(url, OriginPolicy(0.0, 1), 10**6)
    mine = list(urls)
    _random.Random(seed).shuffle(mine)
    while not _Path(go).exists():  # start together
        time.sleep(0.005)
    decisions = []
    for i in range(0, len(mine), 20):
        decisions += store.discover([cand(u) for u in mine[i : i + 20]], CYCLE)
    store.close()
    return decisions


def test_concurrent_discovery_from_processes_stores_each_url_once(tmp_path: Path) -> None:
    """Four processes offer the same 300 URLs at once, each in its own order: every URL is
    stored once and admitted exactly once in total; the others hear already_known."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    urls = [f"https://o{i % 7}.example.test/p/{i}" for i in range(300)]
    make_store(tmp_path).close()  # migrated before the race
    go = tmp_path / "go"
    # concurrent.futures, not multiprocessing.Pool: a Pool worker that dies holding the task
    # queue's lock leaves Pool.terminate() waiting forever on its siblings (seen in CI)
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=4, mp_context=ctx) as pool:
        pending = [pool.submit(_discover_in_process, _backend_url["url"], urls, s, str(go))
                   for s in range(4)]  # fmt: skip
        time.sleep(1.0)  # the workers import and open their stores
        go.touch()
        results = [p.result(timeout=120) for p in pending]
    assert sum(r.count("admitted") for r in results) == len(urls)
    assert all(set(r) <= {"admitted", "already_known"} for r in results)
    store = make_store(tmp_path)
    rows = [r["url"] for r in store.url_rows(SHARD)]
    assert sorted(rows) == sorted(urls)


def test_a_shared_digest_never_makes_two_urls_one(tmp_path: Path) -> None:
    """URLs are looked up by the full string: two URLs with one digest (forced here: SHA-256
    gives none to find) stay two, the new one admitted, the known one known."""
    from atlas_pipeline.coordination.sqlite import url_digest

    store = make_store(tmp_path)
    assert isinstance(store, SqliteStore)
    a, b = "https://news-a.example.test/a", "https://news-a.example.test/b"
    assert store.discover([cand(a)], CYCLE) == ["admitted"]
    with store._tx() as c:
        c.execute("UPDATE urls SET url_hash = :h WHERE url = :u", {"h": url_digest(b), "u": a})
    assert store.discover([cand(b), cand(a)], CYCLE) == ["admitted", "already_known"]
    rows = [r["url"] for r in store.url_rows(SHARD)]
    assert sorted(rows) == [a, b]


@pytest.mark.parametrize(("revisits", "new", "picked"), [
    (20, 20, (7, 3)),  # both sides waiting: 30 % of the budget is kept for discovery
    (20, 0, (10, 0)),  # nothing new: revisits take the whole budget
    (0, 20, (0, 10)),  # nothing due again: discovery takes it
    (20, 1, (9, 1)),  # discovery's unused share is lent to revisits
])  # fmt: skip
def test_the_cycle_budget_is_split_between_revisits_and_discovery(
    revisits: int, new: int, picked: tuple[int, int]
) -> None:
    policy = OriginPolicy(0.0, 1, discovery_share=0.3)
    store = open_store(_backend_url["url"], policy, 10)
    old = [f"https://news-a.example.test/old-{i}" for i in range(revisits)]
    fresh = [f"https://news-a.example.test/new-{i}" for i in range(new)]
    # the revisits outrank the new URLs, so without the reserve they would take every slot
    store.discover([cand(u, priority=0.9) for u in old], None)
    store.discover([cand(u, priority=0.1) for u in fresh], None)
    with store._tx() as c:  # as after an earlier cycle fetched them, now due again
        c.executemany(
            "UPDATE urls SET state = 'fetched', due_at = :t WHERE url = :u",
            [{"t": T0, "u": u} for u in old],
        )
    rows = store.select_frontier("c2", SHARD, T0 + 1)
    got = (sum("/old-" in r["url"] for r in rows), sum("/new-" in r["url"] for r in rows))
    assert got == picked
    store.close()


def test_a_suppression_purges_the_store_and_blocks_at_once(tmp_path: Path) -> None:
    """The store purge commits with the suppression: queue rows, records, outlinks naming the
    origin and an in-flight lease's late commit leave nothing behind; discovery refuses it."""
    from atlas_pipeline.coordination import Suppression

    store = make_store(tmp_path, gap=0.0, max_in_flight=4)
    gone = ["https://docs-b.example.test/a", "https://docs-b.example.test/b"]
    now = ready_origin(store, gone)
    kept = "https://news-a.example.test/x"
    later = ready_origin(store, [kept], now + 1)
    leases = {x.url: x for x in (claim(store, later) for _ in range(3)) if isinstance(x, Lease)}
    lease, page = leases[gone[0]], leases[kept]
    link = {"href": gone[1], "url": gone[1], "reason": "admitted"}
    store.commit(page, Outcome(UrlState.FETCHED, "fetched", T0 + TTL, status=200,
                               record=FetchRecord(fetch_id="f-kept", url=kept),
                               links=[(link, None)]), CYCLE, later)  # fmt: skip
    purged = store.suppress(Suppression("origin", DOCS), "owner asked", "ticket 7", "ops", later)
    assert purged.urls == 2 and purged.links_rewritten == 1 and purged.origins == [DOCS]
    assert not store.commit(lease, outcome(), CYCLE, later + 1)  # its row is gone
    assert set(rows_by_url(store)) == {kept}
    assert store.discover([cand(gone[0]), cand("https://docs-b.example.test/new")], CYCLE) == [
        "suppressed", "suppressed"]  # fmt: skip
    records = list(store.fetch_records(CYCLE, SHARD))
    assert [r["links"] for r in records] == [[]]
    with store._tx() as c:
        assert c.execute("SELECT COUNT(*) FROM stale_attempts").fetchone()[0] == 0
        assert (
            c.execute("SELECT COUNT(*) FROM origins WHERE origin = :o", {"o": DOCS}).fetchone()[0]
            == 0
        )
    assert [e["action"] for e in store.operator_log()] == ["suppress", "purge_store"]
    with pytest.raises(CoordinationError, match="verified"):
        store.suppress(Suppression("origin", NEWS), "why", " ", "ops", later)


def test_operator_policy_is_versioned_audited_and_applied(tmp_path: Path) -> None:
    """A domain's rate limits and priority apply to its origins and URLs at once and to those
    discovered later; an origin setting beats the domain's; every change is a new version."""
    from atlas_pipeline.coordination import Suppression
    from atlas_pipeline.coordination.overrides import override_for

    store = make_store(tmp_path, gap=1.0, max_in_flight=4)
    store.discover([cand("https://news-a.example.test/a"), cand("https://docs-b.example.test/b")],
                   CYCLE)  # fmt: skip
    domain = Suppression("domain", "example.test")
    assert store.set_policy(domain, {"min_gap_s": 5.0, "priority": 0.9}, "partner asked", "ops",
                            T0) == 1  # fmt: skip
    assert store.set_policy(Suppression("origin", NEWS), {"max_in_flight": 1, "priority": 0.2},
                            "complaint", "ops", T0 + 1) == 1  # fmt: skip
    assert store.set_policy(domain, {"priority": None, "revisit_min_s": 3600.0}, "tune", "ops",
                            T0 + 2) == 2  # fmt: skip
    overrides = store.policy_overrides()
    assert override_for(overrides, NEWS, "priority") == 0.2  # the origin's own setting wins
    assert override_for(overrides, DOCS, "priority") is None  # removed in version 2
    assert override_for(overrides, DOCS, "revisit_min_s") == 3600.0
    origins = {r["origin"]: r for r in store.origin_rows(SHARD)}
    assert origins[NEWS]["min_gap_s"] == 5.0 and origins[DOCS]["min_gap_s"] == 5.0
    assert origins[NEWS]["max_in_flight"] == 1 and origins[DOCS]["max_in_flight"] == 4
    assert rows_by_url(store)["https://news-a.example.test/a"]["priority"] == 0.2
    store.discover([cand("https://news-a.example.test/later", priority=0.5)], CYCLE)
    assert rows_by_url(store)["https://news-a.example.test/later"]["priority"] == 0.2
    # a robots refresh recomputes the gap from the config and Crawl-delay: the floor holds
    task = claim(store, T0 + 10)
    assert isinstance(task, RobotsTask)
    store.put_robots(task, "parsed", "User-agent: *\nDisallow:\n", T0 + 10, TTL, 0.0,
                     min_gap_s=1.0, good=True)  # fmt: skip
    assert {r["origin"]: r for r in store.origin_rows(SHARD)}[task.origin]["min_gap_s"] == 5.0
    log = [e for e in store.operator_log() if e["action"] == "set_policy"]
    assert [e["reason"].split(":")[0] for e in log] == ["v1", "v1", "v2"]
    assert '"priority": 0.9' in log[2]["reason"] and "tune" in log[2]["reason"]
    with pytest.raises(CoordinationError, match="outside"):
        store.set_policy(domain, {"priority": 3.0}, "typo", "ops", T0)
    with pytest.raises(CoordinationError, match="unknown policy setting"):
        store.set_policy(domain, {"speed": 1.0}, "typo", "ops", T0)
