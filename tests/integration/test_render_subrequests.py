"""A rendered page's subrequests go through what every Atlas request goes through: method,
egress (address literals), the robots rules of their own origin (none in time: refused), the
origin's bucket in the coordination store (gap, cap, pause), then the capped fetch; each
request that left is reported as a record. Real store, real loopback server, no browser."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from aiohttp import web

from atlas_pipeline.config import CrawlConfig
from atlas_pipeline.coordination import OriginPolicy, open_store
from atlas_pipeline.egress import EgressGate
from atlas_pipeline.fetcher import make_session
from atlas_pipeline.records import FetchRecord
from atlas_pipeline.render import SubRequest
from atlas_pipeline.render_fetch import PageContext, SubrequestGate, SubSend
from atlas_pipeline.robots import RobotsPolicy, RobotsStatus
from tests.conftest import serving_app

GAP = 0.5
SITE, CDN, OTHER = "site.example.test", "cdn.example.test", "other.example.test"


@contextmanager
def two_origins() -> Iterator[tuple[int, list[tuple[str, str, float]]]]:
    """One loopback server answering for both names (by Host), logging what it served. It
    runs on a loop of its own, so its clock is the request's arrival: on the client's loop a
    slow callback would date a request late and shorten the gap to the next one."""
    seen: list[tuple[str, str, float]] = []

    async def any_path(request: web.Request) -> web.Response:
        seen.append((request.host.split(":")[0], request.path, time.time()))
        if request.path.startswith("/slow/"):
            await asyncio.sleep(1.0)
        return web.json_response({"path": request.path})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", any_path)
    with serving_app(app) as port:
        yield port, seen


def test_subrequests_are_judged_paced_and_recorded_like_any_request(tmp_path: Path) -> None:
    async def go() -> None:
        with two_origins() as (port, seen):
            cfg = CrawlConfig(seeds=[f"http://{SITE}:{port}/"], data_dir=tmp_path, shards=1,
                              resolve={SITE: "127.0.0.1", CDN: "127.0.0.1", OTHER: "127.0.0.1"}, resolve_only=True)  # fmt: skip
            site, cdn = f"http://{SITE}:{port}", f"http://{CDN}:{port}"
            store = open_store(f"sqlite:///{tmp_path / 'c.db'}", OriginPolicy(GAP, 1), 100)
            policies = {site: RobotsPolicy(site, 1, RobotsStatus.PARSED,
                                           "User-agent: *\nDisallow: /private\n"),
                        cdn: RobotsPolicy(cdn, 2, RobotsStatus.PARSED,
                                          "User-agent: *\nDisallow: /forbidden.js\n")}  # fmt: skip
            records: list[FetchRecord] = []
            gate = EgressGate(cfg.resolve, cfg.resolve_only)

            async def robots(origin: str, _deadline: float) -> RobotsPolicy | None:
                return policies.get(origin)

            async def reserve(origin: str, shard: int, now: float,
                              hold_s: float) -> tuple[float, float, str | None]:  # fmt: skip
                return await asyncio.to_thread(store.hold_slot, origin, shard, now, hold_s)

            async def release(slot: str) -> None:
                await asyncio.to_thread(store.release_sub_slots, [slot])

            locks: dict[str, asyncio.Lock] = {}
            held: dict[str, asyncio.Lock] = {}
            last_sent: dict[str, float] = {}

            async def turn(origin: str, gap: float, key: str, deadline: float) -> Any:
                lock = locks.setdefault(origin, asyncio.Lock())  # as the batch's
                await lock.acquire()
                held[key] = lock
                while (wait := last_sent.get(origin, 0.0) + gap - time.time()) > 0:
                    if time.time() + wait > deadline:
                        held.pop(key).release()
                        return None
                    await asyncio.sleep(wait)
                return lambda: held.pop(key).release() if key in held else None

            def on_sent(ctx: SubSend) -> None:  # as the batch's
                ctx.sent_at = last_sent[ctx.origin] = time.time()
                store.push_origin_clocks([(ctx.origin, ctx.sent_at + ctx.gap_s, 0.0)])
                if ctx.lease_id in held:
                    held.pop(ctx.lease_id).release()

            def on_answered(ctx: SubSend) -> None:  # as the batch's: gap_from = answer
                now = last_sent[ctx.origin] = time.time()
                store.push_origin_clocks([(ctx.origin, now + ctx.gap_s, 0.0)])

            async with make_session(cfg, gate, on_sent, on_answered) as session:
                sub = SubrequestGate(cfg, session, gate, robots, reserve, release, turn,
                                     time.time, records.append)  # fmt: skip
                page = PageContext(f"{site}/page", time.time() + 10)

                def ask(url: str, method: str = "GET", kind: str = "fetch") -> Any:
                    return sub.answer(SubRequest(url, method, kind, {}, page.url), page)

                first = await ask(f"{site}/api/a.json")
                second = await ask(f"{site}/api/b.json")  # the gap runs from the first
                assert (first.reason, first.status, second.reason) == ("fetched", 200, "fetched")
                assert first.headers["content-type"].startswith("application/json")
                soon = PageContext(page.url, time.time() + 0.1)  # the gap outlasts it
                busy = await sub.answer(SubRequest(f"{site}/api/d.json", "GET", "fetch", {},
                                                   page.url), soon)  # fmt: skip
                assert busy.reason == "render_origin_busy"
                cdn_ok = await ask(f"{cdn}/lib.js", kind="script")
                refused = [
                    (await ask(f"{site}/private/x")).reason,
                    (await ask(f"{cdn}/forbidden.js", kind="script")).reason,
                    (await ask(f"http://{OTHER}:{port}/x")).reason,  # robots unknown
                    (await ask(f"{site}/api/c.json", method="POST")).reason,
                    (await ask("http://169.254.169.254/latest/meta-data/")).reason,
                    (await ask(f"http://127.0.0.1:{port}/canary")).reason,
                    (await ask("javascript:alert(1)")).reason,
                ]
                assert cdn_ok.reason == "fetched"
                assert refused == ["robots_disallowed", "robots_disallowed",
                                   "render_robots_unknown", "render_method_refused",
                                   "egress_refused", "egress_refused", "render_url_refused"]  # fmt: skip
                store.pause("origin", cdn, "complaint", "ops", time.time())
                assert (await ask(f"{cdn}/lib2.js")).reason == "origin_paused"
                # in flight, a subrequest holds one of its origin's slots for every run: with
                # the cap of 1 taken, another run's reservation waits (its clock allows it)
                await asyncio.sleep(GAP)
                slow = asyncio.create_task(ask(f"{site}/slow/e.json"))
                while not any(p == "/slow/e.json" for _, p, _ in seen):
                    await asyncio.sleep(0.02)
                other = open_store(f"sqlite:///{tmp_path / 'c.db'}", OriginPolicy(GAP, 1), 100)
                later = time.time() + GAP + 0.2  # past the clock its reservation moved
                at, _, held_slot = other.hold_slot(site, 0, later, 5.0)
                assert held_slot is None and at > later  # no free slot: only the cap says so
                assert (await slow).reason == "fetched"
                at, _, held_slot = other.hold_slot(site, 0, time.time() + GAP + 0.05, 5.0)
                assert held_slot is not None  # given back with its answer
                other.release_sub_slots([held_slot])
                other.close()
            # the server saw exactly the requests that were answered, the gap held between them
            assert [(h, p) for h, p, _ in seen] == [(SITE, "/api/a.json"), (SITE, "/api/b.json"),
                                                   (CDN, "/lib.js"), (SITE, "/slow/e.json")]  # fmt: skip
            assert seen[1][2] - seen[0][2] >= GAP
            assert [(r.kind, r.origin, r.reason, r.status) for r in records] == [
                ("subresource", site, "fetched", 200), ("subresource", site, "fetched", 200),
                ("subresource", cdn, "fetched", 200), ("subresource", site, "fetched", 200)]  # fmt: skip
            assert {r.original_url for r in records} == {page.url}
            assert [r.robots_version for r in records] == [1, 1, 2, 1]
            store.close()

    asyncio.run(go())
