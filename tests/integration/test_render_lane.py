"""The render lane on real headless Chromium against a real loopback server: the page's
document comes from the bytes already fetched, every other request goes through the caller's
fetch (or is refused there, and never reaches the server), text-less resource types never
leave, and a page that does not fit the lane falls back with its reason."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trafilatura
from aiohttp import ClientSession, web

from atlas_pipeline.browser import chromium_path
from atlas_pipeline.render import LaneLimits, RenderLane, SubAnswer, SubRequest

# make test runs `timing` tests after the others, one at a time: a browser's renders, on two
# cores shared with 3 other test processes, once ended a page before its slow script left
pytestmark = pytest.mark.timing

ARTICLE = ("The harbour lights came on one by one while the ferry crossed the bay, and the "
           "old captain counted them aloud as he had done every evening for forty years.")  # fmt: skip
SHELL = f"""<!DOCTYPE html><html><head><title>Shell</title></head><body><main id=app></main>
<img src="/pixel.png"><script>
const words = {[ord(c) for c in ARTICLE]};
const p = document.createElement('p'); p.textContent = String.fromCharCode(...words);
document.getElementById('app').appendChild(p);
</script></body></html>"""
XHR_SHELL = """<!DOCTYPE html><html><head><title>Xhr</title></head><body><main id=app></main>
<script src="/forbidden.js"></script><script>
fetch('/api/article.json').then(r => r.json()).then(j => {
  const p = document.createElement('p'); p.textContent = j.text;
  document.getElementById('app').appendChild(p); });
</script></body></html>"""
NEVER = """<!DOCTYPE html><html><body><main id=app></main><script>
document.getElementById('app').textContent = 'drawn before the drip';
</script><img src="/drip.gif"><script src="/drip.js"></script></body></html>"""


def _need_browser() -> None:
    if chromium_path() is None:
        if os.environ.get("CI"):
            pytest.fail("Chromium is not installed; run scripts/ensure_chromium.sh")
        pytest.skip("Chromium is not installed (apt-get install -y chromium)")


@asynccontextmanager
async def loopback_site() -> AsyncIterator[tuple[str, list[str]]]:
    seen: list[str] = []

    async def article(_: web.Request) -> web.Response:
        return web.json_response({"text": ARTICLE})

    async def script(_: web.Request) -> web.Response:
        return web.Response(text="document.body.append('FORBIDDEN-SCRIPT-RAN')",
                            content_type="application/javascript")  # fmt: skip

    async def drip(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "application/javascript"})
        await resp.prepare(request)
        while True:  # never ends: the page's load event never fires
            await resp.write(b" ")
            await asyncio.sleep(0.2)

    @web.middleware
    async def log(request: web.Request, handler: Any) -> web.StreamResponse:
        seen.append(request.path)
        return await handler(request)  # type: ignore[no-any-return]

    app = web.Application(middlewares=[log])
    app.router.add_get("/api/article.json", article)
    app.router.add_get("/forbidden.js", script)
    app.router.add_get("/drip.js", drip)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}", seen
    finally:
        await runner.cleanup()


def fetcher(session: ClientSession, refuse: set[str]) -> Any:
    async def fetch(req: SubRequest) -> SubAnswer:
        if any(req.url.endswith(path) for path in refuse):
            return SubAnswer("robots_disallowed")
        async with session.get(req.url) as resp:
            body = await resp.read()
            return SubAnswer("fetched", resp.status, dict(resp.headers), body)

    return fetch


def test_script_built_text_is_rendered_with_no_request_the_caller_did_not_answer() -> None:
    _need_browser()
    assert ARTICLE not in (trafilatura.extract(SHELL) or "")  # the raw HTML lacks it

    async def go() -> None:
        async with loopback_site() as (base, seen), ClientSession() as http, \
                RenderLane(LaneLimits(), "AtlasBot/1.0") as lane:  # fmt: skip
            fetch = fetcher(http, refuse={"/forbidden.js"})
            inline = await lane.render(f"{base}/shell", SHELL.encode(), "text/html", fetch)
            assert inline.reason == "rendered" and inline.complete
            assert ARTICLE in (trafilatura.extract(inline.html) or "")
            assert [(o.resource_type, o.reason) for o in inline.subrequests] == [
                ("image", "render_resource_type")]  # fmt: skip
            xhr = await lane.render(f"{base}/xhr", XHR_SHELL.encode(), "text/html", fetch)
            assert xhr.reason == "rendered" and ARTICLE in (xhr.html or "")
            assert "FORBIDDEN-SCRIPT-RAN" not in (xhr.html or "")
            kinds = {o.url.removeprefix(base): (o.resource_type, o.reason, o.status)
                     for o in xhr.subrequests}  # fmt: skip
            assert kinds == {"/forbidden.js": ("script", "robots_disallowed", None),
                             "/api/article.json": ("fetch", "fetched", 200)}  # fmt: skip
            # the server saw only what the caller fetched: no document, no image, no script
            assert seen == ["/api/article.json"]
            assert lane.stats.rendered == 2 and lane.stats.seconds > 0

    asyncio.run(go())


def test_pages_that_do_not_fit_the_lane_fall_back_with_their_reason() -> None:
    _need_browser()

    async def go() -> None:
        limits = LaneLimits(concurrency=1, queue=0, navigation_timeout_s=2, settle_s=0.5,
                            page_timeout_s=6)  # fmt: skip
        async with loopback_site() as (base, _), ClientSession() as http, \
                RenderLane(limits, "AtlasBot/1.0") as lane:  # fmt: skip
            fetch = fetcher(http, refuse=set())
            slow = lane.render(f"{base}/never", NEVER.encode(), "text/html", fetch)
            quick = lane.render(f"{base}/shell", SHELL.encode(), "text/html", fetch)
            started = asyncio.get_running_loop().time()
            never, busy = await asyncio.gather(slow, quick)
            took = asyncio.get_running_loop().time() - started
            assert busy.reason == "render_lane_busy" and busy.html is None
            # a page that never stops loading: its DOM as it stood, within the caps
            assert never.reason == "rendered" and not never.complete
            assert "drawn before the drip" in (never.html or "") and took < 6 + 1
            assert lane.stats.fallbacks == {"render_lane_busy": 1}
        async with RenderLane(LaneLimits(budget_s=0), "AtlasBot/1.0") as spent:
            out = await spent.render(f"{base}/shell", SHELL.encode(), "text/html", fetch)
            assert out.reason == "render_budget_spent"
        async with RenderLane(LaneLimits(), "AtlasBot/1.0", executable="/nonexistent") as gone:
            assert not gone.available and "did not start" in (gone.unavailable_reason or "")
            out = await gone.render(f"{base}/shell", SHELL.encode(), "text/html", fetch)
            assert out.reason == "render_unavailable"

    asyncio.run(go())


# grows by 32 MiB every 50 ms (each array filled, so its pages are really held) while a script
# that never ends keeps it loading: only its caps, or the memory watch, can end it
HOG = """<!DOCTYPE html><html><body><main id=app>hungry</main><script>
window.hoard = [];
setInterval(() => window.hoard.push(new Float64Array(4 << 20).fill(Math.random())), 50);
</script><script async src="/drip.js"></script></body></html>"""


def test_a_page_over_the_browser_memory_cap_falls_back_and_the_lane_goes_on() -> None:
    _need_browser()
    from atlas_pipeline.browser_memory import group_pss

    async def go() -> None:
        limits = LaneLimits(navigation_timeout_s=20, settle_s=20, page_timeout_s=30,
                            max_browser_bytes=700 * 2**20, memory_check_s=0.1)  # fmt: skip
        async with loopback_site() as (base, _), ClientSession() as http, \
                RenderLane(limits, "AtlasBot/1.0") as lane:  # fmt: skip
            fetch = fetcher(http, refuse=set())
            loop = asyncio.get_running_loop()
            started = loop.time()
            hog = await lane.render(f"{base}/hog", HOG.encode(), "text/html", fetch)
            took = loop.time() - started
            # stopped by the cap long before its own caps (navigation 20 s, page 30 s) would
            assert hog.reason == "render_memory_cap" and hog.html is None and took < 15, took
            assert lane.stats.peak_browser_bytes > limits.max_browser_bytes
            held = await asyncio.to_thread(group_pss)
            assert held is not None and held < limits.max_browser_bytes  # its renderer let go
            after = await lane.render(f"{base}/shell", SHELL.encode(), "text/html", fetch)
            assert after.reason == "rendered" and ARTICLE in (after.html or "")
            assert lane.stats.fallbacks == {"render_memory_cap": 1}

    asyncio.run(go())
