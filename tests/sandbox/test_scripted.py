"""The render lane's sandbox (`atlas web --scripted`, atlas_sandbox/scripted.py): shells whose
text only a browser sees, probed over loopback with http.client, trafilatura, protego and
headless Chromium (no mocks)."""

from __future__ import annotations

import http.client
import json
import re
import socket
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import protego
import pytest
import trafilatura

from atlas_sandbox import CanaryServer, SandboxServer, SandboxWeb
from atlas_sandbox import scripted as site
from tests.conftest import chromium_browser, running_sandbox

# make test runs `timing` tests after the others, one at a time: a browser's renders, on two
# cores shared with 3 other test processes, once ended a page before its slow script left
pytestmark = pytest.mark.timing

SCRIPTED, CDN, PLAIN = (
    "scripted.example.test",
    "cdn-scripts.example.test",
    "plain-render.example.test",
)
SHELLS = ["/inline/1", "/inline/2", "/xhr/1", "/xhr/2", "/slow/1", "/never-loads/1", "/canary/1"]
UA = "AtlasBot/1.0 (+https://atlas.example/bot)"


@pytest.fixture(scope="module")
def canary() -> Iterator[CanaryServer]:
    with CanaryServer() as srv:
        yield srv


@pytest.fixture(scope="module")
def server(canary: CanaryServer) -> Iterator[SandboxServer]:
    web = SandboxWeb(seed=7, generated_origins=0)
    with SandboxServer(web, scripted=True, canary_port=canary.port) as srv:
        yield srv


def get(port: int, host: str, path: str, timeout: float = 10) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path, headers={"Host": f"{host}:{port}", "User-Agent": UA})
        resp = conn.getresponse()
        body = resp.read()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, body
    finally:
        conn.close()


def words(text: str, shortest: int) -> set[str]:
    return {w for w in re.findall(r"[a-z]+", text.lower()) if len(w) >= shortest}


def flat(text: str) -> str:
    return " ".join(text.split())


def test_kinds_and_truth_cover_every_page(server: SandboxServer) -> None:
    kinds = site.kinds(server.port)
    assert list(site.PAGES) == SHELLS
    assert {urlsplit(u).path: k for u, k in kinds.items() if SCRIPTED in u} == {
        "/inline/1": "inline", "/inline/2": "inline", "/xhr/1": "xhr", "/xhr/2": "xhr",
        "/slow/1": "slow", "/never-loads/1": "never-loads", "/canary/1": "canary"}  # fmt: skip
    assert sorted(u for u, k in kinds.items() if k == "plain") == [
        f"http://{PLAIN}:{server.port}/articles/{n}" for n in (1, 2, 3)
    ]
    truth = site.truth(server.port)
    assert truth.keys() == kinds.keys()
    assert len(set(truth.values())) == len(truth)  # every page its own article
    # a heading and four paragraphs a shell, five an almanac article (over skip_above_words)
    assert all(len(t) > 1000 and len(t.splitlines()) == (6 if kinds[u] == "plain" else 5)
               for u, t in truth.items())  # fmt: skip


def test_no_shell_holds_its_text_in_the_raw_html(server: SandboxServer) -> None:
    truth = site.truth(server.port)
    for path in SHELLS:
        status, headers, raw = get(server.port, SCRIPTED, path)
        assert status == 200 and headers["content-type"].startswith("text/html"), path
        assert 700 < len(raw) < 4000, (path, len(raw))
        want = truth[site.url(SCRIPTED, path, server.port)]
        extracted = trafilatura.extract(raw) or ""
        assert not words(extracted, 4) & words(want, 4), (path, extracted)
        html = raw.decode().lower()
        # not even in a script string: the words are in no spelling a text search could find
        assert not {w for w in words(want, 6) if w in html}, path
        assert all(line.lower() not in html for line in want.splitlines()), path


def test_xhr_endpoints_answer_the_text(server: SandboxServer) -> None:
    truth = site.truth(server.port)
    for n in (1, 2):
        status, headers, body = get(server.port, SCRIPTED, f"/api/article/{n}.json")
        assert status == 200 and headers["content-type"] == "application/json"
        data = json.loads(body)
        lines = [data["title"], *data["paragraphs"]]
        assert "\n".join(lines) == truth[site.url(SCRIPTED, f"/xhr/{n}", server.port)]
        _, _, shell = get(server.port, SCRIPTED, f"/xhr/{n}")
        assert f"/api/article/{n}.json".encode() in shell
    assert get(server.port, SCRIPTED, "/api/article/3.json")[0] == 404


def test_cdn_robots_disallows_the_script_every_shell_loads(server: SandboxServer) -> None:
    script = site.url(CDN, "/forbidden/widget.js", server.port)
    cdn_robots = protego.Protego.parse(get(server.port, CDN, "/robots.txt")[2].decode())
    for agent in ("AtlasBot", "*", "SomeOtherBot"):
        assert not cdn_robots.can_fetch(script, agent)
    status, headers, body = get(server.port, CDN, "/forbidden/widget.js")
    assert status == 200 and headers["content-type"].startswith("text/javascript")
    assert b"FORBIDDEN-SCRIPT-RAN" in body  # what a test sees if it ever ran
    for host in (SCRIPTED, PLAIN):
        robots = protego.Protego.parse(get(server.port, host, "/robots.txt")[2].decode())
        assert all(robots.can_fetch(u, "AtlasBot") for u in site.kinds(server.port)), host
    for path in SHELLS:
        assert f'<script async src="{script}">'.encode() in get(server.port, SCRIPTED, path)[2]


def test_slow_endpoint_answers_after_its_delay(server: SandboxServer) -> None:
    assert site.SLOW_DELAY_S >= 5
    started = time.monotonic()
    status, _, body = get(server.port, SCRIPTED, "/api/slow/1.json", timeout=30)
    elapsed = time.monotonic() - started
    assert status == 200 and elapsed >= site.SLOW_DELAY_S, elapsed
    data = json.loads(body)
    want = site.truth(server.port)[site.url(SCRIPTED, "/slow/1", server.port)]
    assert "\n".join([data["title"], *data["paragraphs"]]) == want


def test_never_loading_script_drips_without_end(server: SandboxServer) -> None:
    _, _, shell = get(server.port, SCRIPTED, "/never-loads/1")
    assert b'<script async src="/drip/forever.js">' in shell
    with socket.create_connection(("127.0.0.1", server.port), timeout=2) as sock:
        sock.sendall(f"GET /drip/forever.js HTTP/1.1\r\nHost: {SCRIPTED}\r\n\r\n".encode())
        received, deadline = b"", time.monotonic() + 3
        while time.monotonic() < deadline:
            chunk = sock.recv(4096)  # a recv timeout would also mean: not finished
            assert chunk, "the never-ending script ended"
            received += chunk
    assert received.startswith(b"HTTP/1.1 200") and b"text/javascript" in received
    assert b"0\r\n\r\n" not in received  # no last chunk: still loading after 3 s


def test_canary_shell_reaches_for_the_canary_and_metadata(
    server: SandboxServer, canary: CanaryServer
) -> None:
    _, _, shell = get(server.port, SCRIPTED, "/canary/1")
    target = f"http://127.0.0.1:{canary.port}/from-scripted"
    assert target.encode() in shell
    assert b"http://169.254.169.254/latest/meta-data/" in shell
    wanted = site.resources("/canary/1", server.port, canary.port)
    assert ("xhr", target) in wanted
    assert ("fetch", "http://169.254.169.254/latest/meta-data/") in wanted


def test_plain_origin_holds_its_text_in_the_raw_html(server: SandboxServer) -> None:
    for page_url, text in site.truth(server.port).items():
        if site.kinds(server.port)[page_url] != "plain":
            continue
        status, _, raw = get(server.port, PLAIN, urlsplit(page_url).path)
        extracted = trafilatura.extract(raw) or ""
        assert status == 200 and all(line in extracted for line in text.splitlines()[1:])
    _, _, index = get(server.port, PLAIN, "/")
    assert all(f'href="{p}"'.encode() in index for p in ("/articles/1", "/articles/2"))


def test_index_and_shells_link_every_shell(server: SandboxServer) -> None:
    _, _, index = get(server.port, SCRIPTED, "/")
    hrefs = re.findall(r'href="([^"]+)"', index.decode())
    assert hrefs == [*SHELLS, f"http://{PLAIN}:{server.port}/"]
    ring = [
        re.findall(r'<a href="(/[^"]*)"', get(server.port, SCRIPTED, p)[2].decode()) for p in SHELLS
    ]
    assert [links[1] for links in ring] == [*SHELLS[1:], SHELLS[0]]
    for path in SHELLS:  # every subresource a shell names is served
        for _, res in site.resources(path, server.port):
            if (
                urlsplit(res).hostname in (SCRIPTED, CDN)
                and "/drip/" not in res
                and "/slow" not in res
            ):
                parts = urlsplit(res)
                assert get(server.port, parts.hostname or "", parts.path)[0] == 200, res
    assert get(server.port, SCRIPTED, "/nope")[0] == 404
    assert get(server.port, CDN, "/")[0] == 404


def test_scripted_hosts_are_unknown_without_the_flag() -> None:
    with SandboxServer(SandboxWeb(seed=7, generated_origins=0)) as plain:
        for host in (SCRIPTED, CDN, PLAIN):
            assert get(plain.port, host, "/robots.txt")[0] == 421, host


def test_atlas_web_scripted_logs_every_request(tmp_path: Path) -> None:
    """`atlas web --scripted` in its own process: documents, XHR, scripts, images and fonts are
    all in the request log, with user agent, origin, status and times."""
    with running_sandbox(tmp_path / "requests.jsonl", 0, 12, scripted=True, canary_port=1) as web:
        wanted = [(SCRIPTED, "/inline/1"), (SCRIPTED, "/api/article/1.json"),
                  (SCRIPTED, "/img/inline-1.png"), (SCRIPTED, "/fonts/gazette.woff2"),
                  (SCRIPTED, "/static/gazette.css"), (CDN, "/robots.txt"),
                  (CDN, "/forbidden/widget.js"), (PLAIN, "/articles/1")]  # fmt: skip
        web.log.clear()
        for host, path in wanted:
            assert get(web.port, host, path)[0] == 200, (host, path)
        _, _, shell = get(web.port, SCRIPTED, "/canary/1")
        assert b"http://127.0.0.1:1/from-scripted" in shell  # --canary-port reached the page
        entries = web.log.entries(settle_s=2)
    seen = [(e["host"], e["path"]) for e in entries]
    assert seen == [*wanted, (SCRIPTED, "/canary/1")]
    for e in entries:
        assert e["headers"]["user-agent"] == UA and e["status"] == 200
        assert e["origin"] == f"http://{e['host']}:{web.port}" and e["end"] >= e["start"] > 0


# ---------------------------------------------------------------- in headless Chromium


def _answer_from_sandbox(port: int, request: Any) -> tuple[int, dict[str, str], bytes]:
    """What the render lane does: the request sent to the sandbox over loopback, its host kept
    in the Host header."""
    parts = urlsplit(request.url)
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}{parts.path}{'?' + parts.query if parts.query else ''}",
        headers={"Host": parts.netloc, "User-Agent": UA},
    )
    with urllib.request.urlopen(req, timeout=15) as resp:
        return resp.status, {"content-type": resp.headers["Content-Type"]}, resp.read()


def test_chromium_draws_the_ground_truth_when_every_request_is_intercepted(
    server: SandboxServer, canary: CanaryServer
) -> None:
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    port, truth = server.port, site.truth(server.port)
    cdn_robots = protego.Protego.parse(get(port, CDN, "/robots.txt")[2].decode())
    served: list[tuple[str, str]] = []
    aborted: list[tuple[str, str]] = []
    pending: list[str] = []

    def handle(route: Any) -> None:
        request, parts = route.request, urlsplit(route.request.url)
        if parts.path == "/drip/forever.js":
            # left pending, as the lane's fetch of a drip would be until its deadline
            pending.append(request.url)
            return
        sandbox = parts.hostname in site.SCRIPTED_HOSTS and parts.port == port
        blocked = request.resource_type in ("image", "font", "media") or not sandbox
        if blocked or not cdn_robots.can_fetch(request.url, "AtlasBot"):
            aborted.append((request.resource_type, request.url))
            route.abort()
            return
        status, headers, body = _answer_from_sandbox(port, request)
        served.append((request.resource_type, request.url))
        route.fulfill(status=status, headers=headers, body=body)

    canary.log.clear()
    with chromium_browser() as browser:
        page = browser.new_page()
        page.route("**/*", handle)
        for path in ("/inline/1", "/xhr/1", "/xhr/2", "/canary/1"):
            url = site.url(SCRIPTED, path, port)
            page.goto(url, wait_until="domcontentloaded", timeout=15_000)
            page.wait_for_selector("#story[data-drawn]", timeout=10_000)
            page.wait_for_load_state("load", timeout=10_000)
            assert flat(page.inner_text("#story")) == flat(truth[url]), path
            assert site.FORBIDDEN_MARK not in page.inner_text("body"), path
        url = site.url(SCRIPTED, "/never-loads/1", port)
        page.goto(url, wait_until="domcontentloaded", timeout=15_000)
        page.wait_for_selector("#story[data-drawn]", timeout=10_000)
        assert flat(page.inner_text("#story")) == flat(truth[url])  # drawn before `load`
        with pytest.raises(PlaywrightTimeout):
            page.wait_for_load_state("load", timeout=3_000)
        assert pending == [site.url(SCRIPTED, "/drip/forever.js", port)]
        page.close()
    script = site.url(CDN, site.FORBIDDEN_SCRIPT_PATH, port)
    assert ("script", script) in aborted and ("script", script) not in served
    assert {t for t, _ in aborted} >= {"image", "font", "script"}
    # the SSRF requests reach the interception (where the lane must refuse them) ...
    assert ("xhr", f"http://127.0.0.1:{canary.port}/from-scripted") in aborted
    assert ("fetch", "http://169.254.169.254/latest/meta-data/") in aborted
    assert {t for t, _ in served} >= {"document", "stylesheet", "fetch", "xhr"}
    # whatever Chromium asked for, a shell's ground truth named it
    named = {u for p in SHELLS for _, u in site.resources(p, port, canary.port)}
    assert {u for _, u in served + aborted} <= named | {site.url(SCRIPTED, p, port) for p in SHELLS}
    assert canary.hits() == []  # ... and refused there, the canary never hears of them
