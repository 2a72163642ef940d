"""The browser's second layer: with nothing intercepted, Chromium as Atlas launches it reaches
no address at all, loopback included, except one it is told to allow."""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from tests.conftest import chromium_browser

# make test runs `timing` tests after the others, one at a time: a browser's renders, on two
# cores shared with 3 other test processes, once ended a page before its slow script left
pytestmark = pytest.mark.timing


@contextmanager
def counting_server() -> Iterator[tuple[int, list[str]]]:
    hits: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits.append(self.path)
            body = b"<html><body><p id=t>served</p></body></html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], hits
    finally:
        server.shutdown()
        server.server_close()


def test_nothing_leaves_the_sealed_browser_but_what_it_is_allowed() -> None:
    from playwright.sync_api import Error

    with counting_server() as (port, hits):
        with chromium_browser() as browser:
            page = browser.new_page()
            for url in (f"http://127.0.0.1:{port}/sealed", f"http://localhost:{port}/sealed"):
                started = time.monotonic()
                try:
                    page.goto(url, timeout=10_000)
                except Error as exc:
                    assert "net::ERR_PROXY_CONNECTION_FAILED" in str(exc), str(exc)
                else:
                    raise AssertionError(f"{url} loaded through a sealed browser")
                assert time.monotonic() - started < 5  # refused at once, not timed out
        assert hits == []  # the server never saw the browser
        with chromium_browser(allow=(f"127.0.0.1:{port}",)) as browser:
            page = browser.new_page()
            page.goto(f"http://127.0.0.1:{port}/allowed", timeout=10_000)
            assert page.locator("#t").inner_text() == "served"
        assert hits[0] == "/allowed" and set(hits) <= {"/allowed", "/favicon.ico"}
