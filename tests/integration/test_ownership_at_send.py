"""A request claimed under an ownership token the region no longer holds does not leave
(issue: regions, item 2: the token travels with the claim and is checked again right before
the request leaves, so a region that lost an origin stops within one check, not at its next
claim).

One region's batch runs through its own code (keeper, claim, send gate, fetch) on a real
store, a real control plane and the real sandbox. It claims a page of an origin it holds
under token 1; before the page is sent another region takes the origin over (token 2) and
the region's next renewal is turned away. The claimed page then goes back untried with the
reason ownership_lost, and the origin never sees the request."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from atlas_pipeline.batch import FetchBatch
from atlas_pipeline.config import config_from_mapping
from atlas_pipeline.coordination import Lease
from atlas_pipeline.crawl import Engine, plan_frontier
from atlas_pipeline.extractor_pool import ExtractorPool
from atlas_pipeline.reasons import Reason
from atlas_pipeline.regions.control_plane import ControlPlane
from atlas_pipeline.regions.keeper import OwnershipKeeper
from atlas_pipeline.regions.ownership import Action, TakeoverRule
from tests.conftest import SandboxProcess, sandbox_config
from tests.integration.test_retry_after_at_send import _claim, _fetch

# make test runs `timing` tests after the others, one at a time: a lease keeper's renewals
# are timed, and a loaded machine once let a second one land inside the test
pytestmark = pytest.mark.timing


def test_a_page_claimed_under_a_lost_token_goes_back_unsent(
    sandbox: SandboxProcess, tmp_path: Path
) -> None:
    host = sandbox.web.hosts[0]
    origin = sandbox.web.origin_url(host)
    plane_url = f"sqlite:///{tmp_path / 'plane.db'}"
    cfg = config_from_mapping(sandbox_config(
        sandbox, tmp_path, shards=1, seeds=[sandbox.url(host)],
        politeness={"min_gap_s": 0.0, "max_in_flight": 2},
        discovery={"robots_sitemaps": False},
        # the background keeper renews once at the start and then not within the test (its
        # default 5 s was sometimes reached on a loaded CI machine, and a second stale
        # renewal was counted): the one renewal turned away is the test's own
        regions={"name": "eu", "members": ["eu", "us"], "control_plane_url": plane_url,
                 "lease_s": 30.0, "renew_every_s": 15.0, "homes": {host: "eu"}},
    ), base_dir=tmp_path)  # fmt: skip
    engine = Engine.from_config(cfg)
    plan_frontier(engine, "c0001", 0)
    sandbox.log.clear()

    async def crawl(pool: ExtractorPool) -> tuple[Lease, FetchBatch]:
        batch = FetchBatch(cfg, engine.store, engine.bodies, pool, "c0001", 0)
        async with batch.running():  # its first renewal gives eu the origin, token 1
            while True:  # robots.txt first, then the seed page
                (claim,) = await _claim(batch, 1)
                if isinstance(claim, Lease):
                    break
                await _fetch(batch, claim)
            assert claim.owner_token == 1
            # us takes the origin over (eu gave it back; us asks as the home region)
            plane = ControlPlane(plane_url, TakeoverRule(30.0))
            plane.release("eu", [(origin, 1)], time.time())
            (taken,) = plane.ask("us", [(origin, 0, "us")], time.time())
            plane.close()
            assert (taken.verdict.action, taken.verdict.token) == (Action.GRANT, 2)
            await batch._keep_owners(once=True)  # eu's renewal under token 1 is turned away
            await _fetch(batch, claim)
        return claim, batch

    with ExtractorPool(1, cfg.limits.parser_cpu_s, cfg.limits.parser_memory_mb) as pool:
        claim, batch = asyncio.run(crawl(pool))
    row = next(r for r in engine.store.url_rows(0) if r["url"] == claim.url)
    engine.close()
    pages = [e for e in sandbox.log.entries() if e["path"] != "/robots.txt"]
    assert pages == []  # the origin never saw it
    assert (row["state"], row["reason"]) == ("failed_retryable", Reason.OWNERSHIP_LOST.value)
    assert batch.stats.not_owned == 1
    assert batch.stats.outcomes[Reason.OWNERSHIP_LOST.value] == 1
    assert batch.stats.ownership["rejected_stale"] == 1


def test_a_lease_covers_a_whole_domain_bucket(sandbox: SandboxProcess, tmp_path: Path) -> None:
    """With politeness.bucket domain every origin of example.test shares one clock, so one
    lease covers them all: a region never holds part of a bucket another region paces."""
    plane_url = f"sqlite:///{tmp_path / 'plane.db'}"
    cfg = config_from_mapping(sandbox_config(
        sandbox, tmp_path, shards=1, politeness={"bucket": "domain"},
        regions={"name": "eu", "members": ["eu", "us"], "control_plane_url": plane_url,
                 "homes": {"example.test": "eu"}},
    ), base_dir=tmp_path)  # fmt: skip
    engine = Engine.from_config(cfg)
    plan_frontier(engine, "c0001", 0)
    keeper = OwnershipKeeper(cfg, engine.store, "c0001", 0, time.time)
    keeper.refresh()
    now = time.time()
    owners = {(r.region, r.token, r.bucket) for r in engine.store.ownership_wanted("c0001", 0)}
    origins = [sandbox.web.origin_url(h) for h in sandbox.web.hosts]
    refusals = [keeper.refusal(o, 1, now) for o in origins]
    keeper.release_done()  # work is left: nothing is given back
    keeper.close()
    engine.close()
    plane = ControlPlane(plane_url, TakeoverRule(30.0))
    events = plane.events_after(0)
    plane.close()
    assert [(e["origin"], e["action"], e["token"]) for e in events] == [
        ("example.test", "grant", 1)]  # fmt: skip
    assert owners == {("eu", 1, "example.test")}
    assert refusals == [None] * len(origins)
