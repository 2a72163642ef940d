"""Hostile origins (`atlas web --hostile`) and the canary (`atlas canary`), each in its own
process on loopback, probed with plain aiohttp, http.client and raw sockets (no mocks).

Expected statuses, Locations and spellings are written out here rather than read from
hostile.py, so a change there has to be a deliberate change here too.
"""

from __future__ import annotations

import asyncio
import http.client
import socket
import time
import tracemalloc
import zlib
from collections.abc import Callable, Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

import aiohttp
import protego
import pytest

from atlas_sandbox import (
    HOSTILE_HOSTS,
    CanaryServer,
    SandboxResolver,
    SandboxServer,
    SandboxWeb,
    hostile,
)
from tests.conftest import SandboxProcess, running_canary, running_sandbox

BOMBS, REDIRECTS, LINKS = "bombs.example.test", "redirects.example.test", "links.example.test"
DOCS = "docs-b.example.test"
MiB, GiB = 1 << 20, 1 << 30
Hits = Callable[[], list[dict[str, Any]]]


@pytest.fixture(scope="module")
def canary(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, Hits]]:
    with running_canary(tmp_path_factory.mktemp("canary") / "hits.jsonl") as found:
        yield found


@pytest.fixture(scope="module")
def web(
    tmp_path_factory: pytest.TempPathFactory, canary: tuple[int, Hits]
) -> Iterator[SandboxProcess]:
    log = tmp_path_factory.mktemp("hostile") / "requests.jsonl"
    with running_sandbox(log, origins=0, pages=12, hostile=True, canary_port=canary[0]) as proc:
        yield proc


def get(
    port: int, host: str, path: str, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    """One GET to 127.0.0.1:port with the given Host (http.client: no redirects followed)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path, headers={"Host": f"{host}:{port}", **(headers or {})})
        resp = conn.getresponse()
        body = resp.read()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, body
    finally:
        conn.close()


def session(web: SandboxProcess, **kwargs: Any) -> aiohttp.ClientSession:
    """aiohttp with the sandbox's and the hostile hosts' names resolving to loopback."""
    resolver = SandboxResolver(web.web, extra_hosts=HOSTILE_HOSTS)
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(resolver=resolver), **kwargs)


def raw_head(port: int, host: str, path: str, limit: int = 4 * MiB) -> bytes:
    """The response head (status line and headers) read off a raw socket, no parser limits."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(
            f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n".encode()
        )
        data = b""
        while b"\r\n\r\n" not in data and len(data) < limit:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    return data.split(b"\r\n\r\n", 1)[0]


class _Hrefs(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.hrefs.append(dict(attrs).get("href") or "")


def hrefs(html: bytes) -> list[str]:
    parser = _Hrefs()
    parser.feed(html.decode("utf-8"))
    return parser.hrefs


def wait_for_log(web: SandboxProcess, path: str, timeout_s: float = 6.0) -> dict[str, Any]:
    """The request-log entry for `path` (a streamed answer is logged when it ends)."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        found = [e for e in web.log.entries(settle_s=0.1) if e["path"] == path]
        if found:
            return found[-1]
        time.sleep(0.1)
    raise AssertionError(f"no log entry for {path}")


# ---------------------------------------------------------------- hosts, robots, indexes


def test_hostile_hosts_are_unknown_without_hostile(sandbox: SandboxProcess) -> None:
    for host in (BOMBS, REDIRECTS, LINKS):
        for path in ("/", "/robots.txt", "/gzip-bomb", "/to-metadata"):
            status, _, body = get(sandbox.port, host, path)
            assert status == 421 and b"unknown host" in body, (host, path)


def test_each_host_has_permissive_robots_and_an_index_of_its_cases(web: SandboxProcess) -> None:
    assert HOSTILE_HOSTS == (BOMBS, REDIRECTS, LINKS)
    assert hostile.seed_urls(web.port) == [f"http://{h}:{web.port}/" for h in HOSTILE_HOSTS]
    moved = get(web.port, LINKS, "/robots.txt")  # moved to another origin, as www -> apex
    assert (moved[0], moved[1]["location"]) == (301, hostile.url(BOMBS, "/robots.txt", web.port))
    for host in HOSTILE_HOSTS:
        status, headers, body = get(web.port, BOMBS if host == LINKS else host, "/robots.txt")
        assert status == 200 and headers["content-type"].startswith("text/plain")
        rules = protego.Protego.parse(body.decode())
        for path in ("/", "/gzip-bomb", "/chain/1", "/anything?at=all"):
            assert rules.can_fetch(f"http://{host}:{web.port}{path}", "AtlasBot")
        status, headers, _ = get(web.port, host, "/")
        assert status == 200 and headers["content-type"].startswith("text/html")
    bombs = set(hrefs(get(web.port, BOMBS, "/")[2]))
    assert {"/gzip-bomb", "/huge", "/drip", "/binary", "/wrong-charset", "/big-headers"} <= bombs
    redirects = set(hrefs(get(web.port, REDIRECTS, "/")[2]))
    assert {"/to-metadata", "/to-private", "/to-canary", "/loop-a", "/chain/1",
            "/to-disallowed"} <= redirects  # fmt: skip
    assert not {"/loop-b", "/chain/2", "/chain/7"} & redirects  # reached only by hopping
    assert get(web.port, BOMBS, "/no-such-case")[0] == 404


# ---------------------------------------------------------------- bombs


def test_gzip_bomb_is_small_on_the_wire_and_inflates_past_a_gigabyte(web: SandboxProcess) -> None:
    async def fetch() -> tuple[dict[str, str], int, int, bytes, bool]:
        wire = inflated = 0
        start = b""
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)  # gzip framing
        async with (
            session(web, auto_decompress=False) as s,
            s.get(hostile.url(BOMBS, "/gzip-bomb", web.port)) as resp,
        ):
            async for chunk in resp.content.iter_chunked(64 * 1024):
                wire += len(chunk)
                data = chunk
                while data and inflated <= 2 * GiB:  # bounded: never more than 1 MiB held
                    out = inflater.decompress(data, MiB)
                    start = start or out[:64]
                    inflated += len(out)
                    data = inflater.unconsumed_tail
            return dict(resp.headers), wire, inflated, start, inflater.eof

    headers, wire, inflated, start, complete = asyncio.run(fetch())
    assert headers["Content-Type"].startswith("text/html")
    assert headers["Content-Encoding"] == "gzip"
    assert int(headers["Content-Length"]) == wire
    # Deflate's ceiling is ~1032:1, so 1 GiB cannot take much less than 1 MiB.
    assert wire < 1.1 * MiB
    assert inflated >= GiB and complete  # a valid gzip member: the CRC and size checked out
    assert start.startswith(b"<!DOCTYPE html>")
    entry = wait_for_log(web, "/gzip-bomb")
    assert (entry["host"], entry["status"], entry["bytes"]) == (BOMBS, 200, wire)


def test_huge_page_is_20_mib_streamed_without_content_length(web: SandboxProcess) -> None:
    async def fetch() -> tuple[dict[str, str], int, bytes, bytes]:
        total, first, last = 0, b"", b""
        async with session(web) as s, s.get(hostile.url(BOMBS, "/huge", web.port)) as resp:
            async for chunk in resp.content.iter_chunked(256 * 1024):
                total += len(chunk)
                first = first or chunk[:32]
                last = (last + chunk)[-32:]
            return dict(resp.headers), total, first, last

    headers, total, first, last = asyncio.run(fetch())
    assert total == 20 * MiB
    assert headers["Content-Type"].startswith("text/html")
    assert "Content-Length" not in headers and headers["Transfer-Encoding"] == "chunked"
    assert first.startswith(b"<!DOCTYPE html>") and last.endswith(b"</html>\n")


def test_drip_sends_a_byte_a_second_and_never_blocks_other_requests(web: SandboxProcess) -> None:
    async def probe() -> tuple[list[float], float, int]:
        async with session(web) as s:
            resp = await s.get(hostile.url(BOMBS, "/drip", web.port))
            assert resp.status == 200 and resp.content_type == "text/html"
            started, times = time.monotonic(), []
            for _ in range(3):
                byte = await asyncio.wait_for(resp.content.read(1), timeout=3)
                assert len(byte) == 1
                times.append(time.monotonic() - started)
            # With the drip still open, another request is answered at once.
            other = time.monotonic()
            async with s.get(hostile.url(BOMBS, "/", web.port)) as index:
                await index.read()
                other_status = index.status
            other_s = time.monotonic() - other
            resp.close()  # drop the connection: the server's next write fails
            return times, other_s, other_status

    times, other_s, other_status = asyncio.run(probe())
    assert times[0] < 0.5  # the first byte comes at once, then one per second
    assert 1.5 < times[2] < 3.5, times
    assert other_status == 200 and other_s < 0.5
    # The server noticed the client left, stopped dripping and logged what it sent.
    entry = wait_for_log(web, "/drip")
    assert entry["status"] == 200 and 3 <= entry["bytes"] <= 6, entry


@pytest.mark.parametrize(
    ("path", "signature"),
    [
        ("/binary", b"\x89PNG\r\n\x1a\n"),
        ("/binary-zip", b"PK\x03\x04"),
        ("/binary-elf", b"\x7fELF"),
    ],
)
def test_binary_body_is_labelled_text_html(
    web: SandboxProcess, path: str, signature: bytes
) -> None:
    status, headers, body = get(web.port, BOMBS, path)
    assert status == 200 and headers["content-type"].startswith("text/html")
    assert body.startswith(signature) and len(body) > 32 * 1024
    with pytest.raises(UnicodeDecodeError):
        body.decode("utf-8")


def test_wrong_charset_declares_latin1_but_sends_utf8(web: SandboxProcess) -> None:
    status, headers, body = get(web.port, BOMBS, "/wrong-charset")
    assert status == 200 and headers["content-type"] == "text/html; charset=iso-8859-1"
    assert b'<meta charset="utf-8">' in body
    text = body.decode("utf-8")  # strict: it really is UTF-8
    assert "Crème brûlée" in text and "日本語" in text
    assert "Crème brûlée" not in body.decode("iso-8859-1")  # what trusting the header gives


def test_big_headers_are_over_64_kb(web: SandboxProcess) -> None:
    head = raw_head(web.port, BOMBS, "/big-headers")
    lines = head.split(b"\r\n")
    assert lines[0].startswith(b"HTTP/1.1 200")
    assert len(head) >= 64 * 1024
    fillers = [line for line in lines if line.lower().startswith(b"x-atlas-filler-")]
    assert len(fillers) >= 64
    assert max(len(line) for line in lines) < 8190  # each line passes common per-line limits
    long_head = raw_head(web.port, BOMBS, "/long-header")
    assert max(len(line) for line in long_head.split(b"\r\n")) >= 64 * 1024


# ---------------------------------------------------------------- redirects


def test_redirects_give_the_right_status_and_location(
    web: SandboxProcess, canary: tuple[int, Hits]
) -> None:
    port, canary_port = web.port, canary[0]
    expected = {
        "/to-metadata": (302, "http://169.254.169.254/latest/meta-data/"),
        "/to-metadata-v6": (302, "http://[fd00:ec2::254]/latest/meta-data/"),
        "/to-metadata-gcp": (302, "http://metadata.google.internal/computeMetadata/v1/"),
        "/to-private": (302, "http://10.0.0.1/admin"),
        "/to-private-192": (302, "http://192.168.0.1/"),
        "/to-private-172": (302, "http://172.16.0.1/"),
        "/to-shared": (302, "http://100.64.0.1/"),
        "/to-file": (302, "file:///etc/passwd"),
        "/to-canary": (302, f"http://127.0.0.1:{canary_port}/from-redirect"),
        "/loop-a": (302, "/loop-b"),
        "/loop-b": (302, "/loop-a"),
        "/to-disallowed": (301, f"http://{DOCS}:{port}/search?q=install"),
    }
    for path, (status, location) in expected.items():
        got_status, headers, _ = get(port, REDIRECTS, path)
        assert (got_status, headers.get("location")) == (status, location), path


def test_chain_has_seven_hops_to_a_200_page(web: SandboxProcess) -> None:
    url, statuses = f"http://{REDIRECTS}:{web.port}/chain/1", []
    for _ in range(20):
        parts = urlsplit(url)
        assert parts.hostname == REDIRECTS and parts.port == web.port, url
        status, headers, _ = get(web.port, REDIRECTS, parts.path)
        if status != 200:
            statuses.append(status)
            url = urljoin(url, headers["location"])
            continue
        break
    assert urlsplit(url).path == "/chain/8"
    assert len(statuses) == 7 and set(statuses) <= {301, 302, 303, 307, 308}
    assert len(set(statuses)) == 5  # every redirect status a crawler must handle


def test_loop_comes_back_to_where_it_started(web: SandboxProcess) -> None:
    url, seen = f"http://{REDIRECTS}:{web.port}/loop-a", []
    while url not in seen:
        seen.append(url)
        status, headers, _ = get(web.port, REDIRECTS, urlsplit(url).path)
        assert status == 302
        url = urljoin(url, headers["location"])
    assert [urlsplit(u).path for u in seen] == ["/loop-a", "/loop-b"]
    assert urlsplit(url).path == "/loop-a"


def test_cross_origin_redirect_lands_on_a_path_the_target_robots_disallows(
    web: SandboxProcess,
) -> None:
    _, headers, _ = get(web.port, REDIRECTS, "/to-disallowed")
    target = urlsplit(headers["location"])
    assert (target.hostname, target.port) == (DOCS, web.port)
    path = f"{target.path}?{target.query}"
    robots = protego.Protego.parse(get(web.port, DOCS, "/robots.txt")[2].decode())
    for agent in ("AtlasBot", "SomeOtherBot"):
        assert not robots.can_fetch(headers["location"], agent)
        assert web.web.disallowed(DOCS, path, agent)
    assert get(web.port, DOCS, path)[0] == 200  # only robots.txt stands in the way


# ---------------------------------------------------------------- links


def test_links_page_spells_loopback_many_ways_at_the_canary_port(
    web: SandboxProcess, canary: tuple[int, Hits]
) -> None:
    p = canary[0]
    status, headers, body = get(web.port, LINKS, "/")
    assert status == 200 and headers["content-type"].startswith("text/html")
    found = set(hrefs(body))
    spellings = [
        f"http://127.0.0.1:{p}/", f"http://localhost:{p}/", f"http://2130706433:{p}/",
        f"http://0x7f000001:{p}/", f"http://0177.0.0.1:{p}/", f"http://127.1:{p}/",
        f"http://[::1]:{p}/", f"http://[::ffff:127.0.0.1]:{p}/", f"http://[::ffff:7f00:1]:{p}/",
        f"http://user@127.0.0.1:{p}/", f"http://127.0.0.1.:{p}/", f"http://0.0.0.0:{p}/",
        f"http://[0:0:0:0:0:0:0:1]:{p}/", f"http://127.000.000.001:{p}/",
        f"http://%31%32%37.0.0.1:{p}/", f"http://canary.localhost:{p}/",
        f"http://[64:ff9b::7f00:1]:{p}/", f"http://[2002:7f00:1::]:{p}/",
        f"http://１２７.０.０.１:{p}/", f"ht\ttp://127.0.0.1:{p}/",
        "http://169.254.169.254/latest/meta-data/", "http://[fd00:ec2::254]/latest/meta-data/",
        "http://metadata.google.internal/computeMetadata/v1/", "http://10.0.0.1/admin",
    ]  # fmt: skip
    assert [s for s in spellings if s not in found] == []
    aimed = [h for h in hrefs(body) if f":{p}" in h or f":0{p}" in h]
    assert len(aimed) >= 40 and aimed == hostile.loopback_urls(p)


# ---------------------------------------------------------------- the canary


def test_canary_records_direct_hits(canary: tuple[int, Hits]) -> None:
    port, hits = canary
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    conn.request("GET", "/direct?x=1", headers={"Host": "canary-test.example"})
    resp = conn.getresponse()
    assert resp.status == 200 and b"recorded" in resp.read()
    conn.close()
    with socket.create_connection(("::1", port), timeout=5) as sock:  # IPv6 loopback too
        sock.sendall(b"HEAD /over-ipv6 HTTP/1.1\r\nHost: [::1]\r\n\r\n")
        assert sock.recv(100).startswith(b"HTTP/1.1 200")
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(b"\x16\x03\x01\x00\xa5 not http at all")  # a TLS hello, say
        sock.shutdown(socket.SHUT_WR)
        sock.recv(100)
    by_line = {h["request_line"]: h for h in hits()}
    direct = by_line["GET /direct?x=1 HTTP/1.1"]
    assert (direct["method"], direct["path"], direct["host"], direct["peer"]) == (
        "GET", "/direct?x=1", "canary-test.example", "127.0.0.1")  # fmt: skip
    assert direct["time"] > time.time() - 60
    assert by_line["HEAD /over-ipv6 HTTP/1.1"]["peer"] == "::1"
    tls = [h for h in hits() if h["request_line"].startswith("\x16\x03\x01")]
    assert len(tls) == 1 and tls[0]["method"] is None


def test_a_client_that_follows_to_canary_is_caught(
    web: SandboxProcess, canary: tuple[int, Hits]
) -> None:
    port, hits = canary
    _, headers, _ = get(web.port, REDIRECTS, "/to-canary")
    target = urlsplit(headers["location"])
    assert (target.hostname, target.port) == ("127.0.0.1", port)
    assert target.port not in (web.port,) and target.hostname not in HOSTILE_HOSTS
    get(port, "127.0.0.1", target.path)  # what a naive fetcher does
    assert any(h["path"] == "/from-redirect" for h in hits())


def test_canary_and_hostile_server_in_process(tmp_path: Path) -> None:
    with CanaryServer(log_path=tmp_path / "hits.jsonl") as canary:
        web = SandboxWeb(generated_origins=0, pages_per_origin=12)
        with SandboxServer(web, hostile=True, canary_port=canary.port) as server:
            _, headers, _ = get(server.port, REDIRECTS, "/to-canary")
            assert headers["location"] == canary.url("/from-redirect")
            assert get(server.port, BOMBS, "/robots.txt")[0] == 200
        get(canary.port, "127.0.0.1", "/in-process")
        assert [h["path"] for h in canary.hits()] == ["/in-process"]
    assert "/in-process" in (tmp_path / "hits.jsonl").read_text()


def test_serving_the_bomb_and_the_huge_page_allocates_little(tmp_path: Path) -> None:
    """Python allocations (server and client in this process) peak far below the 20 MiB page
    and the 1 GiB the bomb inflates to: both are streamed, never built whole."""
    web = SandboxWeb(generated_origins=0, pages_per_origin=12)
    with SandboxServer(web, hostile=True, canary_port=1) as server:

        async def drain(path: str) -> int:
            connector = aiohttp.TCPConnector(
                resolver=SandboxResolver(web, extra_hosts=HOSTILE_HOSTS)
            )
            async with (
                aiohttp.ClientSession(connector=connector, auto_decompress=False) as s,
                s.get(hostile.url(BOMBS, path, server.port)) as resp,
            ):
                return sum([len(c) async for c in resp.content.iter_chunked(64 * 1024)])

        tracemalloc.start()
        try:
            sizes = [asyncio.run(drain(path)) for path in ("/gzip-bomb", "/huge", "/huge")]
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert sizes[1:] == [20 * MiB, 20 * MiB] and sizes[0] < 1.1 * MiB
    assert peak < 8 * MiB, peak


def test_hostile_answers_are_in_the_request_log(web: SandboxProcess) -> None:
    web.log.clear()
    get(web.port, BOMBS, "/binary")
    get(web.port, REDIRECTS, "/to-metadata")
    get(web.port, LINKS, "/robots.txt")
    entries = {e["path"]: e for e in web.log.entries()}
    assert (entries["/binary"]["host"], entries["/binary"]["status"]) == (BOMBS, 200)
    assert entries["/binary"]["bytes"] == 8 + 64 * 1024
    assert (entries["/to-metadata"]["host"], entries["/to-metadata"]["status"]) == (REDIRECTS, 302)
    assert (entries["/robots.txt"]["host"], entries["/robots.txt"]["status"]) == (LINKS, 301)
