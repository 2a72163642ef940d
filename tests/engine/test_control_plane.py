"""The control plane on both backends: grants, renewals, take-overs and stale tokens, audited;
many askers at once never hold one origin together; an unreachable plane changes nothing."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from atlas_pipeline.regions.control_plane import ControlPlane, ControlPlaneUnavailable
from atlas_pipeline.regions.ownership import Action, TakeoverRule
from tests.tcpproxy import TcpProxy

NEWS = "http://news-a.example.test:80"
RULE = TakeoverRule(lease_s=30.0, immediate=True, silent_after_s=10.0, home_silent_s=0.0)


@pytest.fixture()
def plane(store_url: str) -> Iterator[ControlPlane]:
    cp = ControlPlane(store_url, RULE)
    yield cp
    cp.close()


def test_grant_renew_refuse_takeover_and_stale_token(plane: ControlPlane) -> None:
    eu = plane.ask("eu", [(NEWS, 0, "eu")], 1000.0)[0]
    assert (eu.verdict.action, eu.verdict.token, eu.holder) == (Action.GRANT, 1, "eu")
    us = plane.ask("us", [(NEWS, 0, "eu")], 1005.0)[0]
    assert (us.verdict.action, us.holder, us.holder_until) == (Action.REFUSE, "eu", 1030.0)
    renewed = plane.ask("eu", [(NEWS, 1, "eu")], 1008.0)[0]
    assert (renewed.verdict.action, renewed.verdict.token) == (Action.RENEW, 1)
    # eu falls silent (cut off): us takes over once it has not renewed for 10 s
    taken = plane.ask("us", [(NEWS, 0, "eu")], 1019.0)[0]
    assert (taken.verdict.action, taken.verdict.token, taken.holder) == (Action.TAKEOVER, 2, "us")
    stale = plane.ask("eu", [(NEWS, 1, "eu")], 1025.0)[0]
    assert (stale.verdict.action, stale.verdict.token, stale.holder) == (
        Action.REJECT_STALE, 2, "us")  # fmt: skip
    held = plane.holding(NEWS)
    assert held is not None and (held.region, held.token) == ("us", 2)
    assert plane.release("us", [(NEWS, 1)], 1026.0) == 0  # not under an old token
    assert plane.release("us", [(NEWS, 2)], 1026.0) == 1
    again = plane.ask("eu", [(NEWS, 0, "eu")], 1027.0)[0]
    assert (again.verdict.action, again.verdict.token) == (Action.GRANT, 3)
    audit = [(e["region"], e["action"], e["asked_token"], e["token"])
             for e in plane.events_after(0)]  # fmt: skip
    assert audit == [
        ("eu", "grant", 0, 1), ("us", "refuse", 0, 1), ("eu", "renew", 1, 1),
        ("us", "takeover", 0, 2), ("eu", "reject_stale", 1, 2), ("us", "release", 2, 2),
        ("eu", "grant", 0, 3),
    ]  # fmt: skip
    assert [e["seq"] for e in plane.events_after(5)] == [6, 7]


def test_one_call_answers_many_origins(plane: ControlPlane) -> None:
    asks = [(f"http://o{i}.example.test:80", 0, "eu") for i in range(50)]
    answers = plane.ask("eu", asks, 1000.0)
    assert [a.origin for a in answers] == [a[0] for a in asks]
    assert {a.verdict.action for a in answers} == {Action.GRANT}


def test_regions_asking_at_once_never_hold_one_origin_together(store_url: str) -> None:
    """Eight askers (four per region, each with its own connection) ask for 20 origins and
    give back what they got, over and over, all at once. In the audit (the order the control
    plane decided in) every grant carries a token above every earlier one and every renewal
    is the current holder's: no two regions ever held one origin together."""
    origins = [f"http://o{i}.example.test:80" for i in range(20)]
    rule = TakeoverRule(lease_s=30.0)
    ControlPlane(store_url, rule).close()  # schema made once, before the race
    errors: list[BaseException] = []

    def asker(region: str) -> None:
        # The race is about who holds what, not how fast the plane answers: on SQLite the
        # eight writers queue on one file lock, and a loaded CI machine kept one of them
        # waiting past the 5 s default (which a keeper rightly reports as unavailable).
        cp = ControlPlane(store_url, rule, timeout_s=120.0)
        try:
            for _ in range(15):
                got = cp.ask(region, [(o, 0, region) for o in origins], time.time())
                cp.release(region, [(a.origin, a.verdict.token) for a in got if a.verdict.held],
                           time.time())  # fmt: skip
        except BaseException as exc:
            errors.append(exc)
        finally:
            cp.close()

    threads = [threading.Thread(target=asker, args=(r,)) for r in ["eu", "us"] * 4]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    cp = ControlPlane(store_url, rule)
    try:
        events = cp.events_after(0, limit=100_000)
    finally:
        cp.close()
    holder: dict[str, tuple[str | None, int]] = {o: (None, 0) for o in origins}
    handoffs = 0
    for e in events:
        region, token = holder[e["origin"]]
        if e["action"] == "grant":
            assert e["token"] > token, e
            handoffs += region is not None and region != e["region"]
            holder[e["origin"]] = (e["region"], e["token"])
        elif e["action"] == "renew":
            assert (e["region"], e["token"]) == (region, token), e
        elif e["action"] == "release":
            assert (e["region"], e["token"]) == (region, token), e
            holder[e["origin"]] = (None, token)
    grants = sum(e["action"] == "grant" for e in events)
    assert grants > len(origins) * 8, grants  # the origins went round, again and again


def test_an_unreachable_control_plane_says_so_and_changes_nothing(tmp_path: Path,
                                                                   pg_schema_url: str) -> None:  # fmt: skip
    proxy = TcpProxy("127.0.0.1", 5432)
    url = pg_schema_url.replace("127.0.0.1:5432", f"127.0.0.1:{proxy.port}")
    cp = ControlPlane(url, RULE, timeout_s=2.0)
    try:
        assert cp.ask("eu", [(NEWS, 0, "eu")], 1000.0)[0].verdict.token == 1
        proxy.cut()
        with pytest.raises(ControlPlaneUnavailable, match="did not answer"):
            cp.ask("eu", [(NEWS, 1, "eu")], 1005.0)
        proxy.restore()
        renewed = cp.ask("eu", [(NEWS, 1, "eu")], 1010.0)[0]
        assert (renewed.verdict.action, renewed.verdict.token) == (Action.RENEW, 1)
        assert [e["action"] for e in cp.events_after(0)] == ["grant", "renew"]
    finally:
        cp.close()
        proxy.close()
