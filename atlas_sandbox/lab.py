"""Politeness lab: generated origins that misbehave the way real sites do (`atlas web --lab`).

site-001  robots.txt answers 503 (unreachable: nothing else may be fetched)
site-002  robots.txt answers 404 (unavailable: everything allowed)
site-003  robots.txt redirects (301) to /meta/robots.txt, which holds the rules
site-004  every 4th page request answers 429 with Retry-After: 2
site-005  every page takes 0.4 s; every 5th sends its headers, then a byte a second for as long
          as the client stays (a response that outlives any timeout)
site-006  robots.txt asks for Crawl-delay: 1
site-007  every page answers 503 to its first request (every 3rd of those with Retry-After: 1),
          then 200: page-level hiccups, not overload
site-008  overloaded: its first 12 page requests answer 503, every one after that succeeds
(site-007 and site-008 exist only with --origins 7 / 8 or more.)
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter

from .hostile import Stream, drip_chunks

ROBOTS_503 = "site-001.example.test"
ROBOTS_404 = "site-002.example.test"
ROBOTS_MOVED = "site-003.example.test"
THROTTLED = "site-004.example.test"
SLOW = "site-005.example.test"
CRAWL_DELAY = "site-006.example.test"
FLAKY = "site-007.example.test"
OVERLOADED = "site-008.example.test"
LAB_HOSTS = (ROBOTS_503, ROBOTS_404, ROBOTS_MOVED, THROTTLED, SLOW, CRAWL_DELAY, FLAKY, OVERLOADED)

RETRY_AFTER_S = 2
THROTTLE_EVERY = 4
SLOW_S = 0.4
DRIP_EVERY = 5  # every 5th page request of site-005 drips
CRAWL_DELAY_S = 1
MOVED_ROBOTS = "/meta/robots.txt"
FLAKY_RETRY_AFTER_EVERY = 3  # every 3rd first failure of site-007 says Retry-After
FLAKY_RETRY_AFTER_S = 1
OVERLOAD_REQUESTS = 12  # site-008's page requests that fail before it recovers

Answer = tuple[int, dict[str, str], bytes]
_TEXT = "text/plain; charset=utf-8"


class Lab:
    """Per-host misbehaviour in front of the normal sandbox responses."""

    def __init__(self) -> None:
        self._pages: Counter[str] = Counter()
        self._seen: set[str] = set()  # site-007 paths asked for once already
        self._lock = threading.Lock()

    async def delay(self, host: str, path: str) -> None:
        if host == SLOW and path != "/robots.txt":
            await asyncio.sleep(SLOW_S)

    def answer(self, host: str, path: str, robots_txt: str) -> Answer | Stream | None:
        """This lab's own answer for (host, path), or None for the normal one."""
        if path == "/robots.txt":
            if host == ROBOTS_503:
                return 503, {"Content-Type": _TEXT}, b"service unavailable\n"
            if host == ROBOTS_404:
                return 404, {"Content-Type": _TEXT}, b"no robots.txt here\n"
            if host == ROBOTS_MOVED:
                return 301, {"Location": MOVED_ROBOTS, "Content-Type": _TEXT}, b"moved\n"
            if host == CRAWL_DELAY:
                text = robots_txt.replace(
                    "User-agent: *\n", f"User-agent: *\nCrawl-delay: {CRAWL_DELAY_S}\n"
                )
                return 200, {"Content-Type": _TEXT}, text.encode()
            return None
        if host == ROBOTS_MOVED and path == MOVED_ROBOTS:
            return 200, {"Content-Type": _TEXT}, robots_txt.encode()
        if host == FLAKY and path != "/sitemap.xml":
            with self._lock:
                first = path not in self._seen
                self._seen.add(path)
                self._pages[host] += first
                n = self._pages[host]
            if first:
                headers = {"Content-Type": _TEXT}
                if n % FLAKY_RETRY_AFTER_EVERY == 0:
                    headers["Retry-After"] = str(FLAKY_RETRY_AFTER_S)
                return 503, headers, b"try again\n"
        if host == OVERLOADED and path != "/sitemap.xml":
            with self._lock:
                self._pages[host] += 1
                n = self._pages[host]
            if n <= OVERLOAD_REQUESTS:
                return 503, {"Content-Type": _TEXT}, b"overloaded\n"
        if host == SLOW and path != "/sitemap.xml":
            with self._lock:
                self._pages[host] += 1
                n = self._pages[host]
            if n % DRIP_EVERY == 0:
                return Stream(200, {"Content-Type": "text/html; charset=utf-8"}, drip_chunks())
        if host == THROTTLED and path != "/sitemap.xml":
            with self._lock:
                self._pages[host] += 1
                n = self._pages[host]
            if n % THROTTLE_EVERY == 0:
                headers = {"Retry-After": str(RETRY_AFTER_S), "Content-Type": _TEXT}
                return 429, headers, b"slow down\n"
        return None
