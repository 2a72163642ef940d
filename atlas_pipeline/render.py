"""The render lane: headless Chromium for the pages whose text a script draws, with no side door.

The browser never touches a network. The page's document is answered from the bytes Atlas
already fetched; every other request the page makes (scripts, XHR and fetch, styles,
frames) is intercepted (`page.route("**/*")`) and handed to the caller's `SubFetch`, which
answers it the way Atlas answers any request: scope, the robots rules of the request's own
origin, that origin's bucket, the egress gate with pinned addresses, byte and time caps. What
it refuses is aborted with its reason recorded; resource types that never carry text
(images, media, fonts) are aborted before they spend any origin's budget. Anything not
intercepted (a WebSocket, a service worker's fetch) meets the closed proxy of
`browser.launch_options`; WebSockets and service workers are refused besides.

The lane has its own concurrency and a budget of render seconds; a page that does not fit
(the lane busy, the budget spent, the browser missing or failing) comes back as a fallback
with its reason, and the caller extracts the raw HTML as before. A watch keeps the browser's
processes under `max_browser_bytes` of memory together (`browser_memory`): past it, every
page rendering is closed and falls back as `render_memory_cap`, which gives the memory of
their renderers back, and the lane goes on with the next page.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from .browser import chromium_path, launch_options
from .browser_memory import group_pss

log = logging.getLogger(__name__)

# what a page may load without a request leaving for it: nothing carries article text, and a
# stylesheet would hold back every script after it while it waits for its origin's slot
TEXTLESS_TYPES = frozenset({"image", "media", "font", "stylesheet"})
_TRANSFER_HEADERS = frozenset({"content-encoding", "content-length", "transfer-encoding"})


@dataclass(frozen=True, slots=True)
class SubRequest:
    """A request the rendered page made, as the browser asked for it."""

    url: str
    method: str
    resource_type: str
    headers: dict[str, str]
    page_url: str


@dataclass(frozen=True, slots=True)
class SubAnswer:
    """Atlas's answer to a subrequest: a response (status set) or a refusal (status None)."""

    reason: str  # "fetched", or why it was refused (a reason code)
    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""


SubFetch = Callable[[SubRequest], Awaitable[SubAnswer]]


@dataclass(frozen=True, slots=True)
class SubOutcome:
    url: str
    resource_type: str
    reason: str
    status: int | None


@dataclass(slots=True)
class Rendered:
    """What rendering a page gave: its DOM after scripts ran (None on a fallback)."""

    url: str
    html: str | None
    reason: str  # "rendered", or the fallback's reason
    elapsed_s: float = 0.0
    complete: bool = True  # False: the page still loaded when its time was up (DOM as it stood)
    subrequests: list[SubOutcome] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class LaneLimits:
    concurrency: int = 2
    queue: int = 4  # pages that may wait for a free slot; more fall back at once
    budget_s: float = 300.0  # render seconds per batch; 0 renders nothing
    navigation_timeout_s: float = 15.0
    page_timeout_s: float = 20.0  # the whole render, subrequests included
    settle_s: float = 8.0  # longest wait after load for a quiet network before the DOM is read
    max_dom_bytes: int = 5 * 1024 * 1024
    abort_types: frozenset[str] = TEXTLESS_TYPES
    max_browser_bytes: int = 1024 * 1024 * 1024  # PSS of the browser's processes; 0: no cap
    memory_check_s: float = 0.25


@dataclass
class LaneStats:
    rendered: int = 0
    fallbacks: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    subrequests: dict[str, int] = field(default_factory=dict)  # by reason
    peak_browser_bytes: int = 0  # the most the browser's processes held at one check


class RenderLane:
    """One browser per batch, its pages rendered `limits.concurrency` at a time. Use as an
    async context manager on the batch's event loop; `available` says whether a browser
    started (else every render is a `render_unavailable` fallback)."""

    def __init__(self, limits: LaneLimits, user_agent: str, executable: str | None = None):
        self.limits, self.user_agent = limits, user_agent
        self.executable = executable if executable is not None else chromium_path()
        self.stats = LaneStats()
        self.unavailable_reason: str | None = None
        self._slots = asyncio.Semaphore(limits.concurrency)
        self._waiting = 0
        self._playwright: Any = None
        self._browser: Any = None
        self._contexts: set[Any] = set()  # of the pages rendering now
        self._over_cap: set[Any] = set()  # of those, the ones closed by the memory watch
        self._watch: asyncio.Task[None] | None = None

    @property
    def available(self) -> bool:
        return self._browser is not None

    async def __aenter__(self) -> RenderLane:
        if self.executable is None:
            self.unavailable_reason = "Chromium is not installed (apt-get install -y chromium)"
            return self
        from playwright.async_api import Error, async_playwright

        try:
            self._playwright = await async_playwright().start()
            self._browser = await self._playwright.chromium.launch(
                **launch_options(self.executable)
            )
        except Error as exc:  # a broken install: the crawl goes on without the lane
            self.unavailable_reason = f"Chromium did not start: {str(exc).splitlines()[0]}"
            await self._stop_playwright()
            return self
        if self.limits.max_browser_bytes > 0:
            self._watch = asyncio.create_task(self._watch_memory())
        return self

    async def _watch_memory(self) -> None:
        """Close the pages rendering when the browser's processes hold more than the cap.
        Only pages that were open at the reading over the cap are closed, and none again
        until a reading under it (a renderer gives its memory back over a moment)."""
        cooling = False
        while True:
            await asyncio.sleep(self.limits.memory_check_s)
            if not self._contexts:
                continue  # idle: nothing to close, no /proc scan
            try:
                held = await asyncio.to_thread(group_pss)  # /proc reads: off the loop
            except Exception as exc:  # a reading failed; the next one may not
                log.warning("render lane: browser memory unreadable: %s", exc)
                continue
            if held is None:
                return  # not Linux: nothing to measure by
            self.stats.peak_browser_bytes = max(self.stats.peak_browser_bytes, held)
            if held <= self.limits.max_browser_bytes:
                cooling = False
            elif not cooling:
                cooling = True
                victims = list(self._contexts)
                self._over_cap.update(victims)
                await asyncio.gather(*(c.close() for c in victims), return_exceptions=True)

    async def __aexit__(self, *exc: object) -> None:
        if self._watch is not None:
            self._watch.cancel()
            await asyncio.gather(self._watch, return_exceptions=True)
            self._watch = None
        if self._browser is not None:
            await self._browser.close()
            self._browser = None
        await self._stop_playwright()

    async def _stop_playwright(self) -> None:
        if self._playwright is not None:
            await self._playwright.stop()
            self._playwright = None

    def _fallback(self, url: str, reason: str) -> Rendered:
        self.stats.fallbacks[reason] = self.stats.fallbacks.get(reason, 0) + 1
        return Rendered(url, None, reason)

    async def render(self, url: str, body: bytes, content_type: str, fetch: SubFetch) -> Rendered:
        """The page at `url` (its document: `body`) rendered, or a fallback saying why not."""
        if not self.available:
            return self._fallback(url, "render_unavailable")
        if self.stats.seconds >= self.limits.budget_s:
            return self._fallback(url, "render_budget_spent")
        if self._slots.locked() and self._waiting >= self.limits.queue:
            return self._fallback(url, "render_lane_busy")
        self._waiting += 1
        try:
            await self._slots.acquire()
        finally:
            self._waiting -= 1
        started = time.monotonic()
        try:
            if self.stats.seconds >= self.limits.budget_s:  # spent while this page waited
                return self._fallback(url, "render_budget_spent")
            return await asyncio.wait_for(
                self._render(url, body, content_type, fetch, started),
                self.limits.page_timeout_s,
            )
        except TimeoutError:
            return self._fallback(url, "render_timeout")
        finally:
            self.stats.seconds += time.monotonic() - started
            self._slots.release()

    async def _render(self, url: str, body: bytes, content_type: str, fetch: SubFetch,
                      started: float) -> Rendered:  # fmt: skip
        from playwright.async_api import Error
        from playwright.async_api import TimeoutError as PlaywrightTimeout

        outcomes: list[SubOutcome] = []
        pending: set[asyncio.Task[Any]] = set()  # route handlers still answering
        context = await self._browser.new_context(
            user_agent=self.user_agent, service_workers="block", java_script_enabled=True,
            accept_downloads=False,
        )  # fmt: skip
        self._contexts.add(context)

        def failed() -> Rendered:
            reason = "render_memory_cap" if context in self._over_cap else "render_failed"
            return self._fallback(url, reason)

        try:
            page = await context.new_page()
            await page.route_web_socket("**/*", lambda ws: ws.close())
            await page.route(
                "**/*", self._handler(url, body, content_type, fetch, outcomes, pending)
            )
            complete = True
            try:
                await page.goto(url, wait_until="load",
                                timeout=self.limits.navigation_timeout_s * 1000)  # fmt: skip
                await page.wait_for_load_state("networkidle",
                                               timeout=self.limits.settle_s * 1000)  # fmt: skip
            except PlaywrightTimeout:
                # still loading (a request that never ends): read the DOM as it stands; the
                # document itself came from memory, so its scripts had their turn
                complete = False
            except Error:
                return failed()
            if context in self._over_cap:  # closed while it waited out its load
                return failed()
            try:
                html = await page.content()
            except Error:
                return failed()
            if len(html.encode()) > self.limits.max_dom_bytes:
                return self._fallback(url, "render_dom_too_large")
            self.stats.rendered += 1
            for o in outcomes:
                self.stats.subrequests[o.reason] = self.stats.subrequests.get(o.reason, 0) + 1
            return Rendered(url, html, "rendered", time.monotonic() - started, complete, outcomes)
        except Error as exc:
            if "Target page, context or browser has been closed" in str(exc):
                return failed()
            raise
        finally:
            # a subrequest still waiting (a body that never ends, a slot not yet free) is
            # stopped with its page, before the page closes: closing waits for its handlers
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending)
            self._contexts.discard(context)
            self._over_cap.discard(context)
            await context.close()

    def _handler(self, url: str, body: bytes, content_type: str, fetch: SubFetch,
                 outcomes: list[SubOutcome],
                 pending: set[asyncio.Task[Any]]) -> Callable[[Any, Any], Awaitable[None]]:  # fmt: skip
        served_document = False

        async def handle(route: Any, request: Any) -> None:
            task = asyncio.current_task()
            assert task is not None
            pending.add(task)
            try:
                await answer(route, request)
            except asyncio.CancelledError:
                outcomes.append(SubOutcome(request.url, request.resource_type,
                                           "render_page_closed", None))  # fmt: skip
            finally:
                pending.discard(task)

        async def answer(route: Any, request: Any) -> None:
            nonlocal served_document
            kind = request.resource_type
            if not served_document and request.url == url and kind == "document":
                served_document = True  # the bytes Atlas fetched: no second request
                await route.fulfill(status=200, body=body, content_type=content_type)
                return
            if kind in self.limits.abort_types:
                outcomes.append(SubOutcome(request.url, kind, "render_resource_type", None))
                await route.abort("blockedbyclient")
                return
            try:
                answer = await fetch(SubRequest(request.url, request.method, kind,
                                                dict(request.headers), url))  # fmt: skip
            except Exception as exc:  # an unanswered route would hang the page until its cap
                answer = SubAnswer(f"render_subrequest_error: {type(exc).__name__}")
            outcomes.append(SubOutcome(request.url, kind, answer.reason, answer.status))
            if answer.status is None:
                await route.abort("blockedbyclient")
            else:
                # the body is decoded and whole: its transfer headers would lie to the page
                headers = {k: v for k, v in answer.headers.items()
                           if k.lower() not in _TRANSFER_HEADERS}  # fmt: skip
                await route.fulfill(status=answer.status, headers=headers, body=answer.body)

        return handle
