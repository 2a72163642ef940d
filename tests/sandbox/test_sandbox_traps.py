"""Trap origins (`atlas web --traps [--trap-scale N]`) in their own processes on loopback,
probed with http.client (no redirects followed, raw request targets sent as written).

Ground truth comes from traps.py's helpers, but the shapes that matter (edges of each trap,
the facet neighbours, the spellings' canonical forms, the sitemap XML) are checked against
what the server actually answers, and a few expectations are written out here so a change
there has to be a deliberate change here too.
"""

from __future__ import annotations

import gzip
import http.client
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import deque
from collections.abc import Iterator
from datetime import date, datetime
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urljoin, urlsplit, urlunsplit

import protego
import pytest

from atlas_sandbox import TRAP_HOSTS, SandboxServer, SandboxWeb, traps
from tests.conftest import ROOT, SandboxProcess, running_sandbox

CALENDAR, SHOP, FEEDS = "calendar.example.test", "shop.example.test", "feeds.example.test"
SM = "http://www.sitemaps.org/schemas/sitemap/0.9"
NS = {"sm": SM}
KB = 1024


@pytest.fixture(scope="module")
def web(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SandboxProcess]:
    log = tmp_path_factory.mktemp("traps") / "requests.jsonl"
    with running_sandbox(log, origins=0, pages=12, traps=True) as proc:
        yield proc


@pytest.fixture(scope="module")
def web10(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SandboxProcess]:
    log = tmp_path_factory.mktemp("traps10") / "requests.jsonl"
    with running_sandbox(log, origins=0, pages=12, traps=True, trap_scale=10) as proc:
        yield proc


def get(port: int, host: str, target: str) -> tuple[int, dict[str, str], bytes]:
    """One GET of `target` (sent exactly as written) with the given Host."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", target, headers={"Host": f"{host}:{port}"})
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def get_url(absolute: str) -> tuple[int, dict[str, str], bytes]:
    parts = urlsplit(absolute)
    assert parts.hostname is not None and parts.port is not None
    return get(parts.port, parts.hostname, parts.path + (f"?{parts.query}" if parts.query else ""))


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []
        self.base: str | None = None
        self.h1 = ""
        self._in_h1 = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.hrefs.append(dict(attrs).get("href") or "")
        elif tag == "base" and self.base is None:
            self.base = dict(attrs).get("href")
        self._in_h1 = tag == "h1"

    def handle_data(self, data: str) -> None:
        if self._in_h1:
            self.h1 += data

    def handle_endtag(self, tag: str) -> None:
        self._in_h1 = False


def parse(body: bytes) -> _Page:
    page = _Page()
    page.feed(body.decode("utf-8"))
    return page


def links(port: int, host: str, target: str) -> list[str]:
    status, _, body = get(port, host, target)
    assert status == 200, (host, target, status)
    return parse(body).hrefs


# ---------------------------------------------------------------- a normalization oracle

_UNRESERVED = re.compile(r"%([0-9A-Fa-f]{2})")
_TRACKING = ("utm_", "gclid", "fbclid")  # the crawler's default list, the part these links use


def _remove_dot_segments(path: str) -> str:
    out: list[str] = []
    segments = path.split("/")[1:]
    for seg in segments:
        if seg == "..":
            if out:
                out.pop()
        elif seg != ".":
            out.append(seg)
    directory = bool(segments) and segments[-1] in (".", "..") and bool(out)
    return "/" + "/".join(out) + ("/" if directory else "")


def _pct(match: re.Match[str]) -> str:
    char = chr(int(match[1], 16))
    unreserved = char.isascii() and (char.isalnum() or char in "-._~")
    return char if unreserved else "%" + match[1].upper()


def canonical(base: str, href: str) -> str:
    """RFC 3986 section 5.2 resolution then section 6.2.2 normalization, tracking dropped.
    Written here, not imported, so the sandbox is checked independently of atlas_pipeline.urls."""
    parts = urlsplit(urljoin(base, href))
    path = _remove_dot_segments(_UNRESERVED.sub(_pct, parts.path) or "/")
    query = "&".join(
        kv for kv in parts.query.split("&") if kv and not kv.lower().startswith(_TRACKING)
    )
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), path, query, ""))


# ---------------------------------------------------------------- hosts, robots, seeds


def test_trap_hosts_are_unknown_without_traps(sandbox: SandboxProcess) -> None:
    for host in (CALENDAR, SHOP, FEEDS):
        for path in ("/", "/robots.txt", "/calendar/2024/06", "/shop", "/sitemap-index.xml"):
            status, _, body = get(sandbox.port, host, path)
            assert status == 421 and b"unknown host" in body, (host, path)


def test_each_host_has_robots_and_an_index_and_its_answers_are_logged(web: SandboxProcess) -> None:
    assert TRAP_HOSTS == (CALENDAR, SHOP, FEEDS)
    assert traps.seed_urls(web.port) == [f"http://{h}:{web.port}/" for h in TRAP_HOSTS]
    web.log.clear()
    for host in TRAP_HOSTS:
        status, headers, body = get(web.port, host, "/robots.txt")
        assert status == 200 and headers["content-type"].startswith("text/plain")
        rules = protego.Protego.parse(body.decode())
        for path in ("/", "/calendar/2024/06", "/shop?color=red", "/a/a/", "/stories/x"):
            assert rules.can_fetch(f"http://{host}:{web.port}{path}", "AtlasBot"), (host, path)
        # Only feeds. disallows anything: a page its sitemap names but robots forbids.
        private = rules.can_fetch(f"http://{host}:{web.port}/private/report", "AtlasBot")
        assert private == (host != FEEDS)
        status, headers, _ = get(web.port, host, "/")
        assert status == 200 and headers["content-type"].startswith("text/html")
    assert set(links(web.port, CALENDAR, "/")) == {
        "/calendar/2024/06", "/forever/2024/06", "/list?page=1", "/stream?page=1", "/a/"}  # fmt: skip
    assert get(web.port, SHOP, "/no-such-page")[0] == 404
    seen = {(e["host"], e["path"], e["status"]) for e in web.log.entries()}
    assert {(CALENDAR, "/robots.txt", 200), (FEEDS, "/", 200),
            (SHOP, "/no-such-page", 404)} <= seen  # fmt: skip


def test_trap_scale_needs_traps_and_a_sane_value() -> None:
    cmd = [sys.executable, "-m", "assets.cli", "web", "--port", "0"]
    for extra, message in ((["--trap-scale", "2"], "only means something with --traps"),
                           (["--traps", "--trap-scale", "0"], "must be 1..100")):  # fmt: skip
        done = subprocess.run([*cmd, *extra], cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and message in done.stderr, done.stderr
    with pytest.raises(ValueError, match="trap scale"):
        SandboxServer(
            SandboxWeb(generated_origins=0, pages_per_origin=12), traps=True, trap_scale=0
        )


# ---------------------------------------------------------------- calendar, pagination, /a/


def test_calendar_walks_month_by_month_to_its_edges(web: SandboxProcess) -> None:
    months = traps.calendar_months(1)
    assert (months[0], months[-1], len(months)) == ("/calendar/2014/06", "/calendar/2034/06", 241)
    walked = {}
    for direction in ("Previous month", "Next month"):
        path = "/calendar/2024/06"
        while True:
            status, _, body = get(web.port, CALENDAR, path)
            assert status == 200, path
            page = parse(body)
            walked[path] = page
            step = [h for h in page.hrefs if h.count("/") == 3 and h != path]
            ahead = [h for h in step if (h < path) == (direction == "Previous month")]
            if not ahead:
                break
            assert len(ahead) == 1
            path = ahead[0]
    assert sorted(walked) == months  # every month, and the walk stops at both edges
    assert get(web.port, CALENDAR, "/calendar/2014/05")[0] == 404
    assert get(web.port, CALENDAR, "/calendar/2034/07")[0] == 404
    june = walked["/calendar/2024/06"].hrefs
    assert [h for h in june if h.count("/") == 4] == [f"/calendar/2024/06/{d:02d}" for d in
                                                      range(1, 31)]  # fmt: skip


def test_day_pages_chain_across_months_within_the_range(web: SandboxProcess) -> None:
    days = traps.calendar_days(1)
    assert days[0] == "/calendar/2014/06/01" and days[-1] == "/calendar/2034/06/30"
    assert "/calendar/2024/02/29" in days and "/calendar/2023/02/29" not in days
    assert links(web.port, CALENDAR, "/calendar/2024/02/29") == [
        "/calendar/2024/02", "/calendar/2024/02/28", "/calendar/2024/03/01"]  # fmt: skip
    assert links(web.port, CALENDAR, days[0]) == ["/calendar/2014/06", "/calendar/2014/06/02"]
    assert links(web.port, CALENDAR, days[-1]) == ["/calendar/2034/06", "/calendar/2034/06/29"]
    assert get(web.port, CALENDAR, "/calendar/2023/02/29")[0] == 404
    assert get(web.port, CALENDAR, "/calendar/2014/05/31")[0] == 404


def test_forever_calendar_has_no_end(web: SandboxProcess) -> None:
    assert links(web.port, CALENDAR, "/forever/9999/12") == [
        "/forever/9999/11",
        "/forever/10000/01",
    ]
    assert links(web.port, CALENDAR, "/forever/123456/07") == [
        "/forever/123456/06", "/forever/123456/08"]  # fmt: skip
    assert links(web.port, CALENDAR, "/forever/0001/01") == ["/forever/0001/02"]
    for bad in ("/forever/0000/12", "/forever/00001/01", "/forever/2024/13"):
        assert get(web.port, CALENDAR, bad)[0] == 404, bad


def test_list_pages_end_at_the_scale_and_stream_pages_never_do(web: SandboxProcess) -> None:
    last = traps.list_pages(1)
    assert last == 500
    assert links(web.port, CALENDAR, "/list?page=1") == ["/list?page=2"]
    assert links(web.port, CALENDAR, f"/list?page={last}") == [f"/list?page={last - 1}"]
    assert get(web.port, CALENDAR, f"/list?page={last + 1}")[0] == 404
    for bad in ("/list", "/list?page=0", "/list?page=01", "/list?page=x"):
        assert get(web.port, CALENDAR, bad)[0] == 404, bad
    far = 10**12
    assert links(web.port, CALENDAR, f"/stream?page={far}") == [
        f"/stream?page={far - 1}", f"/stream?page={far + 1}"]  # fmt: skip


def test_repeating_segments_grow_one_relative_link_at_a_time(web: SandboxProcess) -> None:
    url = f"http://{CALENDAR}:{web.port}/a/"
    for depth in range(1, 6):
        hrefs = links(web.port, CALENDAR, urlsplit(url).path)
        assert "a/" in hrefs
        url = urljoin(url, "a/")
        assert urlsplit(url).path == "/a" * (depth + 1) + "/"
    deepest = "/a" * traps.repeat_depth(1) + "/"
    assert traps.repeat_depth(1) == 50 and "a/" in links(web.port, CALENDAR, deepest)
    assert get(web.port, CALENDAR, deepest + "a/")[0] == 404
    assert get(web.port, CALENDAR, "/a/b/")[0] == 404


# ---------------------------------------------------------------- facets


def test_every_listing_links_every_neighbour_one_facet_away(web: SandboxProcess) -> None:
    values = traps.facet_values(1)
    assert values == {"color": ("red", "blue", "green", "black", "white", "grey"),
                      "size": ("xs", "s", "m", "l", "xl"), "sort": ("price", "name", "newest"),
                      "page": ("1", "2", "3", "4")}  # fmt: skip
    hrefs = links(web.port, SHOP, "/shop?color=blue&size=m&sort=name&page=2")
    listings = {h for h in hrefs if h.startswith("/shop?")}
    expected = {f"/shop?color={c}&size=m&sort=name&page=1" for c in values["color"] if c != "blue"}
    expected |= {f"/shop?color=blue&size={s}&sort=name&page=1" for s in values["size"] if s != "m"}
    expected |= {f"/shop?color=blue&size=m&sort={o}&page=1" for o in ("price", "newest")}
    expected |= {
        "/shop?color=blue&size=m&sort=name&page=1",
        "/shop?color=blue&size=m&sort=name&page=3",
    }
    assert listings == expected
    products = [h for h in hrefs if h.startswith("/product/")]
    assert len(products) == traps.LISTING_PRODUCTS
    for bad in ("/shop?color=purple&size=m&sort=name&page=1", "/shop?color=blue&size=m&page=1",
                "/shop?color=blue&size=m&sort=name&page=5"):  # fmt: skip
        assert get(web.port, SHOP, bad)[0] == 404, bad


def test_following_facet_links_reaches_every_combination(web: SandboxProcess) -> None:
    start = links(web.port, SHOP, "/shop")
    assert len(start) == len(traps.FACET_COLORS)
    seen, queue = set(start), deque(start)
    while queue:
        for href in links(web.port, SHOP, queue.popleft()):
            if href.startswith("/shop?") and href not in seen:
                seen.add(href)
                queue.append(href)
    assert len(seen) == traps.facet_combinations(1) == 6 * 5 * 3 * 4


# ---------------------------------------------------------------- session ids


def test_session_ids_change_on_every_view_and_name_the_same_page(web: SandboxProcess) -> None:
    first, second = links(web.port, SHOP, "/product/3"), links(web.port, SHOP, "/product/3")
    assert first != second  # a fresh session on each view
    for hrefs in (first, second):
        sid, jsession, home = hrefs
        assert re.fullmatch(r"/product/4\?sid=[0-9a-f]{16}", sid)
        assert re.fullmatch(r"/product/5;jsessionid=[0-9A-F]{32}", jsession)
        assert home == "/"
        for target, title in ((sid, "Product 4"), (jsession, "Product 5")):
            status, _, body = get(web.port, SHOP, target)
            assert status == 200 and parse(body).h1 == title
    # Every product is also linked plainly: refusing session links loses no page.
    assert links(web.port, SHOP, "/")[:24] == [f"/product/{n}" for n in range(1, 25)]


def test_session_ids_follow_a_fixed_sequence_per_server(tmp_path: Path) -> None:
    web = SandboxWeb(generated_origins=0, pages_per_origin=12)
    with SandboxServer(web, traps=True, log_path=tmp_path / "log.jsonl") as server:
        for view in (1, 2, 3):
            sid, jsession = traps.session_ids(view)
            assert links(server.port, SHOP, "/product/10")[:2] == [
                f"/product/11?sid={sid}", f"/product/12;jsessionid={jsession}"]  # fmt: skip
        assert server.log.entries()[0]["host"] == SHOP
    assert len(set(traps.session_ids(v) for v in range(1, 100))) == 99


# ---------------------------------------------------------------- spellings, tracking, base href


def test_identity_links_are_on_their_pages_and_normalize_to_real_pages(web: SandboxProcess) -> None:
    port = web.port
    found = traps.identity_links(port)
    by_page: dict[str, list[str]] = {}
    for link in found:
        by_page.setdefault(link.page, links(port, SHOP, urlsplit(link.page).path))
        assert link.href in by_page[link.page], link
        assert canonical(link.base, link.href) == link.canonical, link
        status, _, _ = get_url(link.canonical)
        assert status == 200, link
    cases = {link.case for link in found}
    assert {"upper-case scheme and host", "mixed-case host", "dot segments", "parent segments",
            "percent-encoded unreserved characters", "empty path", "tracking: utm_*",
            "tracking: gclid", "tracking: fbclid", "base href (absolute)",
            "base href (root-relative)"} <= cases  # fmt: skip
    spelled = {link.href: link.canonical for link in found}
    shop = f"http://{SHOP}:{port}"
    assert spelled[f"HTTP://SHOP.EXAMPLE.TEST:{port}/product/1"] == f"{shop}/product/1"
    assert spelled["/product/./x/../4"] == f"{shop}/product/4"
    assert spelled["../../../../product/11"] == f"{shop}/product/11"
    assert spelled[f"HTTP://SHOP.EXAMPLE.TEST:{port}"] == f"{shop}/"
    assert spelled["/product/17?utm_source=promo&color=red&utm_medium=banner"] == (
        f"{shop}/product/17?color=red")  # an unknown parameter stays, in place  # fmt: skip
    tracked = [link.href for link in found if link.case.startswith("tracking")]
    for param in traps.TRACKING_PARAMS:
        assert any(f"{param}=" in href for href in tracked), param


def test_the_server_answers_every_spelling_as_sent(web: SandboxProcess) -> None:
    for target in ("/product/./x/../4", "/guide/./../product/5", "/%70roduct/%37",
                   "/product/a/./b/../../6", "/product/7;jsessionid=X", "/product/8?utm_source=a"):  # fmt: skip
        status, _, body = get(web.port, SHOP, target)
        assert status == 200, target
        assert parse(body).h1.startswith("Product "), target


def test_base_href_links_resolve_only_against_the_base(web: SandboxProcess) -> None:
    port = web.port
    for path, base in (("/base/absolute", f"http://{SHOP}:{port}/catalog/"),
                       ("/base/rooted", "/guide/")):  # fmt: skip
        status, _, body = get(port, SHOP, path)
        page = parse(body)
        assert status == 200 and page.base == base
        page_url = f"http://{SHOP}:{port}{path}"
        for href in page.hrefs:
            with_base = canonical(urljoin(page_url, base), href)
            without = canonical(page_url, href)
            assert get_url(with_base)[0] == 200, href
            assert get_url(without)[0] == 404, href  # ignoring the base finds nothing
    assert set(traps.base_only_urls(port)) <= {
        canonical(link.base, link.href) for link in traps.identity_links(port)}  # fmt: skip


# ---------------------------------------------------------------- sitemaps and the feed


def _xml(body: bytes) -> ET.Element:
    return ET.fromstring(body)


def test_robots_announces_sitemaps_and_they_parse_with_lastmod_and_priority(
    web: SandboxProcess,
) -> None:
    port = web.port
    robots = get(port, FEEDS, "/robots.txt")[2].decode()
    announced = list(protego.Protego.parse(robots).sitemaps)
    assert announced == traps.sitemap_urls(port) == [
        f"http://{FEEDS}:{port}/sitemap-index.xml", f"http://{FEEDS}:{port}/sitemap-3.xml.gz"]  # fmt: skip
    status, headers, body = get_url(announced[0])
    assert status == 200 and headers["content-type"].startswith("application/xml")
    index = _xml(body)
    assert index.tag == f"{{{SM}}}sitemapindex"
    listed = [e.findtext("sm:loc", namespaces=NS) for e in index.findall("sm:sitemap", NS)]
    assert listed == [
        f"http://{FEEDS}:{port}/sitemap-1.xml",
        f"http://{FEEDS}:{port}/sitemap-2.xml.gz",
    ]
    for entry in index.findall("sm:sitemap", NS):
        assert date.fromisoformat((entry.findtext("sm:lastmod", namespaces=NS) or "")[:10])
    entries = []
    for sitemap in [*listed, announced[1]]:
        assert sitemap is not None
        status, headers, body = get_url(sitemap)
        assert status == 200 and "content-encoding" not in headers
        if sitemap.endswith(".gz"):
            expected_type = "application/gzip" if "-2." in sitemap else "application/x-gzip"
            assert headers["content-type"] == expected_type
            assert body[:2] == b"\x1f\x8b"
            body = gzip.decompress(body)
        root = _xml(body)
        assert root.tag == f"{{{SM}}}urlset"
        for item in root.findall("sm:url", NS):
            lastmod, priority = (
                item.findtext("sm:lastmod", namespaces=NS),
                item.findtext("sm:priority", namespaces=NS),
            )
            if lastmod is not None:
                datetime.fromisoformat(lastmod)  # W3C datetime: a date or a date-time
            entries.append((urlsplit(sitemap).path, item.findtext("sm:loc", namespaces=NS), lastmod,
                            None if priority is None else float(priority)))  # fmt: skip
    truth = [(e.sitemap, e.loc, e.lastmod, e.priority) for e in traps.sitemap_entries(port)]
    assert entries == truth
    assert any(e[2] is None for e in entries) and any(e[3] is None for e in entries)
    assert any(e[2] is not None and "T" in e[2] for e in entries)
    assert all(e[3] is None or 0.0 <= e[3] <= 1.0 for e in entries)
    for _, loc, _, _ in entries:
        assert loc is not None and get_url(loc)[0] == 200, loc
    # The same bytes every time: a crawler's conditional or dedupe logic sees no phantom change.
    assert get(port, FEEDS, "/sitemap-2.xml.gz")[2] == get(port, FEEDS, "/sitemap-2.xml.gz")[2]


def test_a_sitemap_names_a_page_robots_disallows(web: SandboxProcess) -> None:
    port = web.port
    disallowed = traps.sitemap_disallowed_urls(port)
    assert disallowed == [f"http://{FEEDS}:{port}/private/report"]
    rules = protego.Protego.parse(get(port, FEEDS, "/robots.txt")[2].decode())
    assert not rules.can_fetch(disallowed[0], "AtlasBot")
    assert get_url(disallowed[0])[0] == 200  # only robots.txt stands in the way
    assert disallowed[0] in {e.loc for e in traps.sitemap_entries(port)}
    assert disallowed[0] not in traps.sitemap_only_urls(port)


def _html_reachable(port: int, honour_base: bool = True, limit: int = 300) -> set[str]:
    """Canonical URLs a link-following BFS from the trap seeds fetches (200s), skipping the trap
    spaces (calendar, pagination, /a/, facet listings) and session-id links, bounded."""

    def is_trap(absolute: str) -> bool:
        parts = urlsplit(absolute)
        if parts.hostname == CALENDAR:
            return parts.path != "/"
        return (
            (parts.path == "/shop" and bool(parts.query)) or "sid=" in absolute or ";" in parts.path
        )

    seen: set[str] = set()
    queue = deque(traps.seed_urls(port))
    while queue and len(seen) < limit:
        current = queue.popleft()
        if current in seen:
            continue
        status, headers, body = get_url(current)
        if status != 200 or not headers["content-type"].startswith("text/html"):
            continue
        seen.add(current)
        page = parse(body)
        base = urljoin(current, page.base) if honour_base and page.base else current
        for href in page.hrefs:
            target = canonical(base, href)
            parts = urlsplit(target)
            ours = parts.hostname in TRAP_HOSTS and parts.port == port
            if ours and not is_trap(target) and target not in seen:
                queue.append(target)
    assert len(seen) < limit, "the bounded walk ran into a trap it should have skipped"
    return seen


def test_sitemap_only_pages_are_linked_from_no_page(web: SandboxProcess) -> None:
    port = web.port
    reachable = _html_reachable(port)
    only = traps.sitemap_only_urls(port)
    assert len(only) == 8 + 8 + 4  # articles 5..12, stories, notes
    assert not set(only) & reachable
    in_sitemaps = {e.loc for e in traps.sitemap_entries(port)}
    assert set(only) <= in_sitemaps
    # The walk does reach what is linked, so it would have found a linked sitemap page.
    feeds_linked = {u for u in in_sitemaps if u in reachable}
    assert {f"http://{FEEDS}:{port}/", f"http://{FEEDS}:{port}/about",
            f"http://{FEEDS}:{port}/articles/4"} <= feeds_linked  # fmt: skip
    assert set(traps.product_urls(port)) <= reachable
    assert set(traps.base_only_urls(port)) <= reachable
    # Ignoring <base href> misses exactly the pages only the base reaches.
    assert not set(traps.base_only_urls(port)) & _html_reachable(port, honour_base=False)


def test_partner_feed_file_names_pages_nothing_else_does(
    web: SandboxProcess, tmp_path: Path
) -> None:
    port = web.port
    path = tmp_path / "partner-feed.tsv"
    written = traps.write_partner_feed(path, port)
    parsed = []
    for line in path.read_text(encoding="utf-8").splitlines():
        loc, _, priority = line.partition("\t")
        parsed.append((loc, float(priority) if priority else None))
    assert parsed == [(e.url, e.priority) for e in written] == [
        (e.url, e.priority) for e in traps.partner_feed(port)]  # fmt: skip
    assert any(p is None for _, p in parsed) and any(p is not None for _, p in parsed)
    only = traps.feed_only_urls(port)
    assert len(only) == 5 and set(only) <= {loc for loc, _ in parsed}
    for loc in only:
        assert get_url(loc)[0] == 200
    assert not set(only) & {e.loc for e in traps.sitemap_entries(port)}
    assert not set(only) & _html_reachable(port)


# ---------------------------------------------------------------- the trap scale


def test_trap_scale_multiplies_every_extent(web: SandboxProcess, web10: SandboxProcess) -> None:
    p1, p10 = web.port, web10.port
    months = traps.calendar_months(10)
    assert (months[0], months[-1], len(months)) == ("/calendar/1924/06", "/calendar/2124/06", 2401)
    assert len(months) - 1 == 10 * (len(traps.calendar_months(1)) - 1)  # 10x each way
    days = traps.calendar_days(10)
    assert (days[0], days[-1]) == ("/calendar/1924/06/01", "/calendar/2124/06/30")
    assert len(days) > 9.9 * len(traps.calendar_days(1))
    for path in (months[0], months[-1], days[0], days[-1]):
        assert get(p10, CALENDAR, path)[0] == 200 and get(p1, CALENDAR, path)[0] == 404
    assert "/calendar/1924/05" not in links(p10, CALENDAR, months[0])
    assert traps.list_pages(10) == 5000
    assert links(p10, CALENDAR, "/list?page=501") == ["/list?page=500", "/list?page=502"]
    assert links(p10, CALENDAR, "/list?page=5000") == ["/list?page=4999"]
    assert get(p10, CALENDAR, "/list?page=5001")[0] == 404
    deep = "/a" * 500 + "/"
    assert get(p10, CALENDAR, deep)[0] == 200 and get(p1, CALENDAR, deep)[0] == 404
    assert get(p10, CALENDAR, deep + "a/")[0] == 404
    values = traps.facet_values(10)
    assert [len(values[k]) for k in traps.FACET_KEYS] == [60, 50, 3, 40]
    assert traps.facet_combinations(10) == 1000 * traps.facet_combinations(1)
    listing = "/shop?color=grey-10&size=xl-10&sort=newest&page=40"
    assert get(p10, SHOP, listing)[0] == 200 and get(p1, SHOP, listing)[0] == 404
    hrefs = links(p10, SHOP, listing)
    assert len([h for h in hrefs if h.startswith("/shop?")]) == 59 + 49 + 2 + 1
    assert len(links(p10, SHOP, "/shop")) == 60
    assert traps.trap_page_count(10) >= 10 * traps.trap_page_count(1)
    # What is not a trap does not grow: the same sitemap entries on either port.
    sitemaps = [gzip.decompress(get(p, FEEDS, "/sitemap-2.xml.gz")[2]) for p in (p1, p10)]
    assert sitemaps[0].replace(f":{p1}/".encode(), f":{p10}/".encode()) == sitemaps[1]


def test_trap_pages_stay_small_and_deterministic_at_scale_10(web10: SandboxProcess) -> None:
    port = web10.port
    biggest = ("/shop?color=red&size=xs&sort=price&page=2", "/calendar/2024/01",
               "/calendar/2024/01/31", "/list?page=2500", "/forever/2024/01", "/a" * 500 + "/")  # fmt: skip
    for target in biggest:
        host = SHOP if target.startswith("/shop") else CALENDAR
        first, second = get(port, host, target), get(port, host, target)
        assert first[0] == 200 and first[2] == second[2], target
        assert len(first[2]) < 16 * KB, (target, len(first[2]))


# ---------------------------------------------------------------- the combined-filter catalogue

CATALOGUE = traps.CATALOGUE


def test_the_catalogue_links_every_item_and_listings_one_filter_away(web: SandboxProcess) -> None:
    port = web.port
    index = links(port, CATALOGUE, "/")
    items = [urlsplit(u).path for u in traps.catalogue_product_urls(port)]
    assert set(items) <= set(index) and traps.CATALOGUE_LISTING in index
    assert len(items) == traps.CATALOGUE_ITEMS
    assert get(port, CATALOGUE, f"/item/{len(items) + 1}")[0] == 404
    here = [("size", "m"), ("colour", "red")]
    hrefs = links(port, CATALOGUE, traps.catalogue_listing(here))
    listed = [h for h in hrefs if h.startswith(traps.CATALOGUE_LISTING)]
    assert listed == traps.catalogue_neighbours(here)
    assert traps.catalogue_listing([("colour", "red")]) in listed  # size removed
    assert traps.catalogue_listing([("size", "m")]) in listed  # colour removed
    added = [h for h in listed if h.count("=") == 3]
    assert len(added) == 9  # three filters missing, three values each
    orders = {tuple(p.split("=")[0] for p in urlsplit(h).query.split("&")) for h in added}
    assert len(orders) > 1  # the new key goes in at varying places
    for bad in ("colour=red&colour=blue", "colour=pink", "shape=round", "colour"):
        assert get(port, CATALOGUE, f"{traps.CATALOGUE_LISTING}?{bad}")[0] == 404, bad


def test_an_item_links_one_filter_listings_and_its_whole_look(web: SandboxProcess) -> None:
    attrs = traps.catalogue_item_attributes(3)
    listed = [h for h in links(web.port, CATALOGUE, "/item/3")
              if h.startswith(traps.CATALOGUE_LISTING)]  # fmt: skip
    assert listed == [traps.catalogue_listing([("colour", attrs["colour"])]),
                      traps.catalogue_listing([("material", attrs["material"])]),
                      traps.catalogue_look(3)]  # fmt: skip
    assert get(web.port, CATALOGUE, traps.catalogue_look(3))[0] == 200
    looks = [traps.catalogue_look(n) for n in range(1, 121)]
    assert len(set(looks)) == 120 and all(u.count("=") == 5 for u in looks)


def test_every_catalogue_listing_shows_the_same_text(web: SandboxProcess) -> None:
    """Filters change a listing's URL, never its content: the trap the novelty rule cuts."""
    port = web.port
    bodies = set()
    for filters in ([], [("fit", "slim")], [("size", "m"), ("colour", "red")],
                    [("colour", "red"), ("size", "m")]):  # fmt: skip
        status, _, body = get(port, CATALOGUE, traps.catalogue_listing(filters))
        assert status == 200
        bodies.add(re.sub(r"<[^>]*>", "", body.decode()))  # the text, links or not
    assert len(bodies) == 1
    assert traps.catalogue_listing_urls() == 40696
    assert traps.is_catalogue_listing(f"http://{CATALOGUE}:{port}/catalogue?fit=slim")
    assert not traps.is_catalogue_listing(f"http://{CATALOGUE}:{port}/item/3")


def test_the_catalogue_grows_with_the_scale(web10: SandboxProcess) -> None:
    items = traps.catalogue_product_urls(web10.port, 10)
    assert len(items) == 10 * traps.CATALOGUE_ITEMS
    assert get_url(items[-1])[0] == 200


def test_the_range_pages_list_every_item_once_each_linking_the_next(web10: SandboxProcess) -> None:
    port, seen, target, pages = web10.port, [], "/", 0
    while target:
        hrefs = links(port, CATALOGUE, target)
        seen += [h for h in hrefs if h.startswith("/item/")]
        nxt = [h for h in hrefs if h.startswith("/range/")]
        target, pages = (nxt[0] if nxt else ""), pages + 1
    assert pages == 10
    assert seen == [urlsplit(u).path for u in traps.catalogue_product_urls(port, 10)]
    assert get(port, CATALOGUE, "/range/11")[0] == 404
    assert get(port, CATALOGUE, "/range/1")[0] == 404  # the first page is /
