"""Tests for the sandbox web: a real aiohttp server on 127.0.0.1, real HTTP requests."""

from __future__ import annotations

import asyncio
import http.client
import json
import re
import signal
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from email.utils import format_datetime
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import aiohttp
import protego
import pytest

from atlas_sandbox import (
    EXTERNAL_HOST,
    FIXED_HOSTS,
    LOGGED_HEADERS,
    REDIRECT_PATH,
    SandboxResolver,
    SandboxServer,
    SandboxWeb,
    normalize_url,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
NEWS, DOCS, STORE = FIXED_HOSTS
KB = 1024


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SandboxServer]:
    log_path = tmp_path_factory.mktemp("sandbox") / "requests.jsonl"
    with SandboxServer(SandboxWeb(seed=7), log_path=log_path) as srv:
        yield srv


def fetch(
    server: SandboxServer,
    host: str,
    path: str,
    headers: dict[str, str] | None = None,
    method: str = "GET",
    host_header: str | None = None,
) -> tuple[int, dict[str, str], bytes]:
    """One request to the sandbox with the given Host; returns status, headers, body."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    try:
        sent = {"Host": host_header or f"{host}:{server.port}", **(headers or {})}
        conn.request(method, path, headers=sent)
        resp = conn.getresponse()
        body = resp.read()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, body
    finally:
        conn.close()


class _Anchors(HTMLParser):
    """Collects every <a> as (href, rel), with entities decoded like a browser does."""

    def __init__(self) -> None:
        super().__init__()
        self.anchors: list[tuple[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            found = dict(attrs)
            self.anchors.append((found.get("href") or "", found.get("rel")))


def anchors(html: bytes) -> list[tuple[str, str | None]]:
    parser = _Anchors()
    parser.feed(html.decode())
    return parser.anchors


def article_words(html: bytes) -> list[str]:
    article = html.decode().split("<article>", 1)[1].split("</article>", 1)[0]
    text = re.sub(r"<[^>]+>", " ", " ".join(re.findall(r"<p>(.*?)</p>", article)))
    return text.lower().split()


# ---------------------------------------------------------------- content model


def test_same_seed_same_bytes_and_different_seed_differs() -> None:
    a, b, other = SandboxWeb(seed=7), SandboxWeb(seed=7), SandboxWeb(seed=8)
    assert a.hosts == b.hosts
    for host in (NEWS, DOCS, STORE, "site-001.example.test"):
        assert a.pages(host) == b.pages(host)
        for path in a.pages(host)[:4]:
            assert a.render(host, path) == b.render(host, path)
            assert a.etag(host, path) == b.etag(host, path)
            assert a.last_modified(host, path) == b.last_modified(host, path)
        assert a.pages(host) != other.pages(host)
        assert a.render(host, "/") != other.render(host, "/")


def test_origins_and_scale_configuration() -> None:
    web = SandboxWeb(generated_origins=3, pages_per_origin=15, port=9999)
    assert web.hosts == [*FIXED_HOSTS, *(f"site-00{i}.example.test" for i in (1, 2, 3))]
    assert web.seed_urls()[0] == "http://news-a.example.test:9999/"
    assert all(len(web.pages(h)) == 15 for h in web.hosts)
    assert web.pages(NEWS)[0] == "/"
    big = SandboxWeb(generated_origins=50, pages_per_origin=200)
    assert len(big.hosts) == 53
    assert len(big.page_urls()) == 53 * 200  # structure only; nothing is rendered


def test_pages_are_realistic_articles_within_size_bounds() -> None:
    web = SandboxWeb(seed=7)
    paths = {
        NEWS: "/articles/",
        DOCS: "/guide/",
        STORE: "/products/",
        "site-002.example.test": "/posts/",
    }
    for host, prefix in paths.items():
        assert any(p.startswith(prefix) and p != prefix for p in web.pages(host))
    assert any(p.startswith("/reference/") for p in web.pages(DOCS))
    for host in web.hosts:
        for path in web.pages(host):
            body = web.render(host, path)
            assert 20 * KB <= len(body) <= 100 * KB, (host, path, len(body))
    page = web.render(NEWS, next(p for p in web.pages(NEWS) if p.startswith("/articles/")))
    for marker in (
        b'<html lang="en">',
        b"<title>",
        b'<meta name="author"',
        b'<meta property="article:published_time"',
        b'<meta name="description"',
        b'<nav class="main-nav"',
        b"<article>",
        b"<h1>",
        b"<footer",
    ):
        assert marker in page


def test_two_pages_are_not_near_duplicates() -> None:
    web = SandboxWeb(seed=7)
    articles = [p for p in web.pages(NEWS) if p.startswith("/articles/")][:3]
    shingles = []
    for path in articles:
        words = article_words(web.render(NEWS, path))
        assert len(words) > 2000
        shingles.append({tuple(words[i : i + 5]) for i in range(len(words) - 4)})
    for i in range(len(shingles)):
        for j in range(i + 1, len(shingles)):
            jaccard = len(shingles[i] & shingles[j]) / len(shingles[i] | shingles[j])
            assert jaccard < 0.05


def test_links_exercise_normalization_and_all_resolve() -> None:
    web = SandboxWeb(seed=7)
    raw_hrefs: list[str] = []
    resolved: list[str] = []
    for host in web.hosts:
        for path in web.pages(host):
            raw_hrefs += [href for href, _ in anchors(web.render(host, path))]
            resolved += web.links(web.url(host, path))
    assert any(h.startswith("../") for h in raw_hrefs)
    assert any(not h.startswith(("/", "http", "../", "#")) for h in raw_hrefs)  # "x"
    assert any(h.startswith("http://") and h.split("/")[2].isupper() for h in raw_hrefs)
    assert any("#" in h for h in raw_hrefs)
    assert any("utm_source=" in h for h in raw_hrefs)
    assert any(urlsplit(u).hostname == EXTERNAL_HOST for u in resolved)
    for url in resolved:
        parts = urlsplit(url)
        if parts.hostname == EXTERNAL_HOST:
            continue
        assert web.is_sandbox_host(parts.hostname or "")
        assert parts.port == web.port
        host = parts.hostname or ""
        key = web.resolve(host, parts.path + (f"?{parts.query}" if parts.query else ""))
        assert key is not None or web.redirect_target(host, parts.path), url
    # Cross-origin links only ever go to another fixed publisher's home page.
    for host in web.hosts:
        for path in web.pages(host):
            for url in web.links(web.url(host, path)):
                target = (urlsplit(url).hostname or "").lower()
                if target != host and target != EXTERNAL_HOST:
                    assert urlsplit(url).path == "/" and target in FIXED_HOSTS
    home = web.render(NEWS, "/")
    assert sum(1 for _, rel in anchors(home) if rel == "nofollow") == 1


def test_robots_rules_and_oracle_agree_with_protego() -> None:
    web = SandboxWeb(seed=7)
    store = web.robots_txt(STORE)
    for line in ("Disallow: /account/", "Allow: /account/help", "Disallow: /cart/"):
        assert line in store
    assert "User-agent: AtlasBot" in web.robots_txt(NEWS)
    assert "Disallow: /search" in web.robots_txt(DOCS)
    assert "Disallow: /tmp/" in web.robots_txt("site-001.example.test")
    assert all(f"Sitemap: {web.origin_url(h)}/sitemap.xml" in web.robots_txt(h) for h in web.hosts)
    assert web.disallowed(STORE, "/account/login")
    assert not web.disallowed(STORE, "/account/help")
    assert web.disallowed(STORE, "/cart/view")
    assert web.disallowed(NEWS, "/drafts/x") and not web.disallowed(NEWS, "/private/x")
    assert web.disallowed(NEWS, "/private/x", "OtherBot")
    assert not web.disallowed(NEWS, "/drafts/x", "OtherBot")
    for host in web.hosts:
        parser = protego.Protego.parse(web.robots_txt(host))
        for path in web.pages(host):
            for agent in ("AtlasBot", "OtherBot"):
                expected = not parser.can_fetch(web.url(host, path), agent)
                assert web.disallowed(host, path, agent) == expected, (host, path, agent)
    # Every origin has pages robots forbids AtlasBot, and some page links to each of them.
    for host in web.hosts:
        forbidden = {web.url(host, p) for p in web.pages(host) if web.disallowed(host, p)}
        assert forbidden
        linked = {normalize_url(u) for p in web.pages(host) for u in web.links(web.url(host, p))}
        assert {normalize_url(u) for u in forbidden} <= linked


def test_reachable_covers_every_allowed_page() -> None:
    web = SandboxWeb(seed=7)
    allowed = {
        normalize_url(web.url(h, p))
        for h in web.hosts
        for p in web.pages(h)
        if not web.disallowed(h, p)
    }
    everything = web.reachable(max_depth=1000)
    assert everything == allowed
    seeds = {normalize_url(u) for u in web.seed_urls()}
    assert web.reachable(0) == seeds
    one_hop = web.reachable(1)
    assert seeds < one_hop < everything
    assert not any(urlsplit(u).path.startswith("/drafts/") for u in everything)
    assert any(urlsplit(u).path.startswith("/private/") for u in everything)
    other = web.reachable(1000, user_agent_token="OtherBot")
    assert any(urlsplit(u).path.startswith("/drafts/") for u in other)
    assert not any(urlsplit(u).path.startswith("/private/") for u in other)


def test_bump_generation_changes_a_subset_of_pages() -> None:
    web = SandboxWeb(seed=7)
    urls = [(h, p) for h in web.hosts for p in web.pages(h)]
    before = {k: (web.etag(*k), web.render(*k), web.last_modified(*k)) for k in urls}
    assert web.bump_generation() == 1 and web.generation == 1
    changed = {k for k in urls if web.etag(*k) != before[k][0]}
    assert 0 < len(changed) < len(urls) / 2
    assert web.changed_pages(0) == {web.url(*k) for k in changed}
    for k in urls:
        if k in changed:
            assert web.render(*k) != before[k][1]
            assert web.last_modified(*k) > before[k][2]
        else:
            assert web.render(*k) == before[k][1]
            assert web.last_modified(*k) == before[k][2]
    # Same generation in another instance: same bytes (determinism survives bumps).
    twin = SandboxWeb(seed=7)
    twin.bump_generation()
    host, path = next(iter(changed))
    assert twin.render(host, path) == web.render(host, path)


# ---------------------------------------------------------------- real server


def test_server_binds_loopback_and_sets_the_web_port(server: SandboxServer) -> None:
    assert server.port > 0 and server.web.port == server.port
    assert server.base_url == f"http://127.0.0.1:{server.port}"
    assert server.url(NEWS, "/x") == f"http://{NEWS}:{server.port}/x"
    with pytest.raises(ValueError):
        SandboxServer(SandboxWeb(), host="0.0.0.0")
    status, _, body = fetch(server, NEWS, "/")
    assert status == 200
    # Absolute links on the page carry the real port.
    assert f"http://{DOCS}:{server.port}/".encode() in body


def test_host_routing(server: SandboxServer) -> None:
    web = server.web
    bodies = {}
    for host in web.hosts:
        status, headers, body = fetch(server, host, "/")
        assert status == 200
        assert headers["content-type"] == "text/html; charset=utf-8"
        assert body == web.render(host, "/")
        bodies[host] = body
    assert len(set(bodies.values())) == len(web.hosts)
    # Host matching ignores case, the port and a trailing dot.
    assert fetch(server, NEWS, "/", host_header="NEWS-A.Example.Test.")[2] == bodies[NEWS]
    for bad in ("unknown.example.test", "127.0.0.1", EXTERNAL_HOST):
        status, _, body = fetch(server, bad, "/")
        assert status == 421
        assert b"news-a.example.test" in body
    assert fetch(server, NEWS, "/no/such/page")[0] == 404
    # Unknown parameters (tracking ones included) are ignored like on real servers.
    article = web.pages(NEWS)[5]
    status, _, body = fetch(server, NEWS, f"{article}?utm_source=x&ref=1")
    assert status == 200 and body == web.render(NEWS, article)


def test_robots_sitemap_and_disallowed_pages_are_served(server: SandboxServer) -> None:
    web = server.web
    status, headers, body = fetch(server, STORE, "/robots.txt")
    assert status == 200 and headers["content-type"].startswith("text/plain")
    assert body.decode() == web.robots_txt(STORE)
    status, headers, body = fetch(server, NEWS, "/sitemap.xml")
    assert status == 200 and headers["content-type"].startswith("application/xml")
    ns = {"sm": "http://www.sitemaps.org/schemas/sitemap/0.9"}
    root = ET.fromstring(body)
    locs = [e.text for e in root.findall("sm:url/sm:loc", ns)]
    assert len(locs) == len(root.findall("sm:url/sm:lastmod", ns)) > 10
    for loc in locs:
        assert loc is not None
        parts = urlsplit(loc)
        assert parts.hostname == NEWS and parts.port == server.port
        assert not web.disallowed(NEWS, parts.path) and not web.disallowed(NEWS, parts.path, "*")
    # Robots-disallowed pages exist: a crawler ignoring robots would visibly fetch them.
    for path in ("/account/login", "/cart/checkout", "/account/help"):
        assert fetch(server, STORE, path)[0] == 200
    assert fetch(server, DOCS, "/search?q=install")[0] == 200


def test_conditional_requests(server: SandboxServer) -> None:
    web = server.web
    path = web.pages(DOCS)[4]
    status, headers, body = fetch(server, DOCS, path)
    assert status == 200 and len(body) == int(headers["content-length"])
    etag, last_modified = headers["etag"], headers["last-modified"]
    assert etag == web.etag(DOCS, path) and re.fullmatch(r'"[0-9a-f]{32}"', etag)
    assert last_modified == format_datetime(web.last_modified(DOCS, path), usegmt=True)
    assert "max-age" in headers["cache-control"]

    status, headers, body = fetch(server, DOCS, path, {"If-None-Match": etag})
    assert (status, body) == (304, b"") and headers["etag"] == etag
    assert fetch(server, DOCS, path, {"If-None-Match": f'"x", W/{etag}'})[0] == 304
    assert fetch(server, DOCS, path, {"If-None-Match": '"stale"'})[0] == 200
    # If-None-Match wins over If-Modified-Since when both are sent.
    both = {"If-None-Match": '"stale"', "If-Modified-Since": last_modified}
    assert fetch(server, DOCS, path, both)[0] == 200

    status, _, body = fetch(server, DOCS, path, {"If-Modified-Since": last_modified})
    assert (status, body) == (304, b"")
    earlier = "Mon, 01 Jan 2018 00:00:00 GMT"
    assert fetch(server, DOCS, path, {"If-Modified-Since": earlier})[0] == 200
    assert fetch(server, DOCS, path, {"If-Modified-Since": "garbage"})[0] == 200
    robots_etag = fetch(server, DOCS, "/robots.txt")[1]["etag"]
    assert fetch(server, DOCS, "/robots.txt", {"If-None-Match": robots_etag})[0] == 304

    status, headers, body = fetch(server, DOCS, path, method="HEAD")
    assert (status, body) == (200, b"") and headers["etag"] == etag


def test_redirect_on_docs(server: SandboxServer) -> None:
    web = server.web
    status, headers, _ = fetch(server, DOCS, REDIRECT_PATH)
    target = web.redirect_target(DOCS, REDIRECT_PATH)
    assert status == 301 and target is not None and headers["location"] == target
    assert fetch(server, DOCS, target)[0] == 200
    linking = [
        p for p in web.pages(DOCS) if web.url(DOCS, REDIRECT_PATH) in web.links(web.url(DOCS, p))
    ]
    assert len(linking) == 1
    assert web.url(DOCS, target) in web.links(web.url(DOCS, linking[0]))


def test_served_links_match_the_ground_truth(server: SandboxServer) -> None:
    web = server.web
    for host in (NEWS, DOCS, STORE, "site-003.example.test"):
        for path in web.pages(host)[:6]:
            page_url = web.url(host, path)
            _, _, body = fetch(server, host, path)
            served = [urljoin(page_url, href) for href, _ in anchors(body)]
            assert served == web.links(page_url)


def test_request_log(server: SandboxServer) -> None:
    agent = "AtlasBot/0.1 (log test)"
    server.log.clear()
    fetch(server, NEWS, "/", {"User-Agent": agent, "Accept-Encoding": "gzip"})
    fetch(server, STORE, "/robots.txt", {"User-Agent": agent})
    fetch(server, "nowhere.example.test", "/", {"User-Agent": agent})
    entries = [e for e in server.log.entries() if e["headers"]["user-agent"] == agent]
    assert [e["status"] for e in entries] == [200, 200, 421]
    first = entries[0]
    assert first["origin"] == f"http://{NEWS}:{server.port}"
    assert first["host"] == NEWS and first["path"] == "/" and first["method"] == "GET"
    assert first["bytes"] == len(server.web.render(NEWS, "/"))
    assert first["headers"]["accept-encoding"] == "gzip"
    assert set(first["headers"]) == set(LOGGED_HEADERS)
    assert first["peer"] == "127.0.0.1"
    for entry in entries:
        assert set(entry) == {
            "origin", "host", "path", "method", "start", "end",
            "status", "bytes", "headers", "peer",
        }  # fmt: skip
        assert entry["start"] <= entry["end"]
    assert entries[0]["end"] <= entries[1]["start"]

    assert server.log.path is not None
    lines = server.log.path.read_text().splitlines()
    from_file = [json.loads(line) for line in lines]
    assert [e for e in from_file if e["headers"]["user-agent"] == agent] == entries


def test_resolver_lets_aiohttp_fetch_real_sandbox_urls(server: SandboxServer) -> None:
    web = server.web

    async def crawl() -> tuple[int, bytes]:
        connector = aiohttp.TCPConnector(resolver=SandboxResolver(web))
        async with aiohttp.ClientSession(connector=connector) as session:
            async with session.get(web.seed_urls()[1]) as resp:
                body = await resp.read()
            with pytest.raises(aiohttp.ClientConnectorError):
                await session.get(f"http://{EXTERNAL_HOST}/x")
            return resp.status, body

    status, body = asyncio.run(crawl())
    assert status == 200 and body == web.render(DOCS, "/")


def test_serve_forever_runs_in_the_foreground_until_sigterm(tmp_path: Path) -> None:
    log_path = tmp_path / "web.jsonl"
    code = (
        "from pathlib import Path\n"
        "from atlas_sandbox import SandboxWeb, serve_forever\n"
        f"serve_forever(SandboxWeb(generated_origins=1), port=0, log_path=Path({str(log_path)!r}))\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert str(log_path) in line
        match = re.search(r"http://127\.0\.0\.1:(\d+)", line)
        assert match is not None, line
        port = int(match.group(1))
        assert f"news-a.example.test:{port}" in line
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        conn.request("GET", "/robots.txt", headers={"Host": f"{STORE}:{port}"})
        assert conn.getresponse().status == 200
        conn.close()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert json.loads(log_path.read_text().splitlines()[0])["path"] == "/robots.txt"
