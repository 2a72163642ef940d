"""The changing-content origins (`atlas web --changing`) on loopback: pages that change at known
rates across generations, ETags that change on every response, and a server that ignores
conditional headers. Served in process (SandboxServer) and by `atlas web` in its own process,
fetched with http.client and read with the engine's own extractor.

The rates and counts are written out here, so a change in changing.py has to be a deliberate
change here too.
"""

from __future__ import annotations

import http.client
from collections.abc import Iterator
from datetime import timedelta
from email.utils import format_datetime
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlsplit

import protego
import pytest

from atlas_pipeline.parsing import extract_text
from atlas_sandbox import CHANGING_HOSTS, SandboxServer, SandboxWeb, changing
from atlas_sandbox.changing import EPOCH, ETAG_CHURN, NO_CONDITIONAL, RATES
from tests.conftest import running_sandbox

Response = tuple[int, dict[str, str], bytes]
VOLATILE = [f"/volatile/{n}" for n in range(1, 7)]
WEEKLY = [f"/weekly/{n}" for n in range(1, 7)]
STATIC = [f"/static/{n}" for n in range(1, 7)]
PAGE = [f"/page/{n}" for n in range(1, 7)]


def _web() -> SandboxWeb:
    return SandboxWeb(seed=7, generated_origins=0, pages_per_origin=12)


@pytest.fixture(scope="module")
def server() -> Iterator[SandboxServer]:
    """A server left at generation 0 (tests that bump start their own)."""
    with SandboxServer(_web(), changing=True) as srv:
        yield srv


def get(
    port: int, host: str, target: str, headers: dict[str, str] | None = None, method: str = "GET"
) -> Response:
    """One request for `target` with the given Host (and extra headers)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, target, headers={"Host": f"{host}:{port}", **(headers or {})})
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def same(a: Response, b: Response) -> bool:
    """Same status, validators and body (the Date header may differ)."""
    keep = ("etag", "last-modified")
    return (a[0], [a[1].get(k) for k in keep], a[2]) == (b[0], [b[1].get(k) for k in keep], b[2])


def http_date(generation_days: int) -> str:
    return format_datetime(EPOCH + timedelta(days=generation_days), usegmt=True)


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []
        self.paragraphs: list[str] = []
        self._in_article = self._in_p = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.hrefs.append(dict(attrs).get("href") or "")
        elif tag == "article":
            self._in_article = True
        elif tag == "p" and self._in_article and not attrs:  # the byline has a class
            self._in_p = True
            self.paragraphs.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == "p":
            self._in_p = False
        elif tag == "article":
            self._in_article = False

    def handle_data(self, data: str) -> None:
        if self._in_p:
            self.paragraphs[-1] += data


def parse(body: bytes) -> _Page:
    page = _Page()
    page.feed(body.decode())
    return page


# ---------------------------------------------------------------------- ground truth


def test_ground_truth() -> None:
    assert CHANGING_HOSTS == (RATES, ETAG_CHURN, NO_CONDITIONAL)
    assert changing.pages(RATES) == VOLATILE + WEEKLY + STATIC
    assert changing.pages(ETAG_CHURN) == changing.pages(NO_CONDITIONAL) == PAGE
    rates = {p: changing.expected_change_rate(p) for p in changing.pages(RATES)}
    assert rates == {**dict.fromkeys(VOLATILE, 1.0), **dict.fromkeys(WEEKLY, 0.25),
                     **dict.fromkeys(STATIC, 0.0)}  # fmt: skip
    assert changing.expected_change_rate(f"http://{RATES}:1/volatile/2") == 1.0
    assert changing.expected_change_rate("/page/3") == changing.expected_change_rate("/") == 0.0
    with pytest.raises(KeyError):
        changing.expected_change_rate("/volatile/7")
    assert [changing.version("/weekly/1", g) for g in range(9)] == [0, 0, 0, 0, 1, 1, 1, 1, 2]
    assert [changing.version("/volatile/1", g) for g in range(4)] == [0, 1, 2, 3]
    assert changing.version("/static/1", 100) == changing.version("/page/1", 100) == 0

    model = changing.Changing(port=4321)
    url = f"http://{RATES}:4321"
    assert model.changed_between(0, 1) == {url + p for p in VOLATILE}
    assert model.changed_between(3, 4) == {url + p for p in VOLATILE + WEEKLY}
    assert model.changed_between(4, 7) == {url + p for p in VOLATILE}
    assert model.changed_between(2, 9) == {url + p for p in VOLATILE + WEEKLY}
    assert model.changed_between(5, 5) == set()
    assert model.bump_generation() == 1 and model.generation == 1


def test_served_in_process_only_when_asked() -> None:
    with SandboxServer(_web()) as plain:
        assert get(plain.port, RATES, "/")[0] == 421
    with SandboxServer(_web(), changing=True) as srv:
        assert srv.changing is not None and srv.changing.port == srv.port
        assert get(srv.port, RATES, "/volatile/1")[0] == 200
        assert get(srv.port, "news-a.example.test", "/")[0] == 200  # the rest still served


# ---------------------------------------------------------------------- the pages


@pytest.mark.parametrize("host", CHANGING_HOSTS)
def test_index_links_every_page_and_robots_allows_all(server: SandboxServer, host: str) -> None:
    status, _, body = get(server.port, host, "/")
    assert status == 200
    assert parse(body).hrefs == changing.pages(host)
    status, _, robots = get(server.port, host, "/robots.txt")
    assert status == 200
    rp = protego.Protego.parse(robots.decode())
    assert all(rp.can_fetch(server.url(host, p), "AtlasBot") for p in changing.pages(host))


def test_unknown_paths_answer_404_and_queries_are_ignored(server: SandboxServer) -> None:
    for host, path in [(RATES, "/volatile/7"), (RATES, "/volatile/01"), (RATES, "/page/1"),
                       (RATES, "/weekly/"), (ETAG_CHURN, "/static/1"),
                       (NO_CONDITIONAL, "/volatile/1"), (NO_CONDITIONAL, "/page/0")]:  # fmt: skip
        assert get(server.port, host, path)[0] == 404, (host, path)
    plain = get(server.port, RATES, "/static/2")
    assert get(server.port, RATES, "/static/2?utm_source=x")[2] == plain[2]


def test_pages_are_articles_with_long_extractable_text(server: SandboxServer) -> None:
    texts = set()
    for host in CHANGING_HOSTS:
        for path in changing.pages(host):
            status, headers, body = get(server.port, host, path)
            assert status == 200 and headers["content-type"] == "text/html; charset=utf-8"
            paragraphs = parse(body).paragraphs
            assert len(paragraphs) >= 5 and all(len(p) >= 400 for p in paragraphs), path
            text = extract_text(body.decode(), server.url(host, path))["text"]
            assert len(text) >= 2000 and "Edition 1." in text, (host, path)
            texts.add(text)
    assert len(texts) == 3 * 6 + 2 * 6  # no two pages alike


# ---------------------------------------------------------------------- rates: validators


def test_rates_answers_conditional_requests(server: SandboxServer) -> None:
    for path in ["/", *changing.pages(RATES)]:
        status, headers, body = get(server.port, RATES, path)
        etag = headers["etag"]
        assert status == 200 and etag.startswith('"') and headers["last-modified"] == http_date(0)

        for inm in (etag, f"W/{etag}", f'"nope", {etag}', "*"):
            status, h304, empty = get(server.port, RATES, path, {"If-None-Match": inm})
            assert (status, empty, h304["etag"]) == (304, b"", etag), (path, inm)
        status, _, full = get(server.port, RATES, path, {"If-None-Match": '"nope"'})
        assert (status, full) == (200, body)

        assert get(server.port, RATES, path, {"If-Modified-Since": http_date(0)})[0] == 304
        assert get(server.port, RATES, path, {"If-Modified-Since": http_date(5)})[0] == 304
        status, _, full = get(server.port, RATES, path, {"If-Modified-Since": http_date(-1)})
        assert (status, full) == (200, body)
        # If-None-Match decides when present, whatever If-Modified-Since says.
        both = {"If-None-Match": '"nope"', "If-Modified-Since": http_date(0)}
        assert get(server.port, RATES, path, both)[0] == 200

        status, head, nothing = get(server.port, RATES, path, method="HEAD")
        assert (status, head["etag"], nothing) == (200, etag, b"")


def test_pages_change_at_their_rates_across_generations() -> None:
    with SandboxServer(_web(), changing=True) as srv:
        paths = changing.pages(RATES)
        first = {p: get(srv.port, RATES, p) for p in paths}
        last = dict(first)
        index = get(srv.port, RATES, "/")
        others = {(h, p): get(srv.port, h, p)[2] for h in (ETAG_CHURN, NO_CONDITIONAL)
                  for p in PAGE}  # fmt: skip
        for generation in range(1, 10):
            assert srv.bump_generation() == generation
            assert srv.web.generation == generation and srv.changing is not None
            assert srv.changing.generation == generation
            changed = set()
            for path in paths:
                old_etag = last[path][1]["etag"]
                status, headers, body = get(srv.port, RATES, path, {"If-None-Match": old_etag})
                if status == 200:
                    changed.add(srv.url(RATES, path))
                    assert headers["etag"] != old_etag and body != last[path][2]
                    text = extract_text(body.decode(), srv.url(RATES, path))["text"]
                    assert f"Edition {changing.version(path, generation) + 1}." in text
                    last[path] = (status, headers, body)
                else:
                    assert (status, body) == (304, b""), path
                lm = http_date(changing.version(path, generation))
                assert last[path][1]["last-modified"] == lm
                assert get(srv.port, RATES, path)[1]["last-modified"] == lm
            assert changed == srv.changing.changed_between(generation - 1, generation)
            expected = set(VOLATILE) | (set(WEEKLY) if generation % 4 == 0 else set())
            assert changed == {srv.url(RATES, p) for p in expected}, generation
        assert same(get(srv.port, RATES, "/"), index)  # the index never changes
        for path in STATIC:
            assert same(get(srv.port, RATES, path), first[path]), path
        for (host, path), body in others.items():
            assert get(srv.port, host, path)[2] == body
        # Weekly pages changed at generations 4 and 8 only.
        assert changing.version(WEEKLY[0], 9) == 2


# ---------------------------------------------------------------------- misleading origins


def test_etag_churn_new_etag_every_response_and_never_304(server: SandboxServer) -> None:
    for path in ["/", *PAGE]:
        responses = [get(server.port, ETAG_CHURN, path) for _ in range(3)]
        previous = responses[-1][1]["etag"]
        for inm in (previous, f"W/{previous}", "*"):
            responses.append(get(server.port, ETAG_CHURN, path, {"If-None-Match": inm}))
        responses.append(get(server.port, ETAG_CHURN, path, {"If-Modified-Since": http_date(9)}))
        assert {status for status, _, _ in responses} == {200}
        assert len({body for _, _, body in responses}) == 1
        etags = [headers["etag"] for _, headers, _ in responses]
        assert len(set(etags)) == len(etags), etags
        assert all("last-modified" not in headers for _, headers, _ in responses)


def test_no_conditional_always_200_with_the_full_body(server: SandboxServer) -> None:
    for path in ["/", *PAGE]:
        status, headers, body = get(server.port, NO_CONDITIONAL, path)
        etag, lm = headers["etag"], headers["last-modified"]
        assert status == 200 and lm == http_date(0)
        for conditional in ({"If-None-Match": etag}, {"If-None-Match": "*"},
                            {"If-Modified-Since": lm}, {"If-Modified-Since": http_date(30)},
                            {"If-None-Match": etag, "If-Modified-Since": lm}):  # fmt: skip
            status, again, full = get(server.port, NO_CONDITIONAL, path, conditional)
            assert (status, full) == (200, body), (path, conditional)
            assert (again["etag"], again["last-modified"]) == (etag, lm)


# ---------------------------------------------------------------------- `atlas web --changing`


def test_atlas_web_changing_bumps_on_sigusr1(tmp_path: Path) -> None:
    with running_sandbox(tmp_path / "requests.jsonl", 0, 12, changing=True) as proc:
        assert proc.changing is not None and proc.changing.port == proc.port
        volatile, static = "/volatile/3", "/static/3"
        before = {p: get(proc.port, RATES, p)[1]["etag"] for p in (volatile, static)}

        assert proc.bump_generation() == 1
        assert proc.web.generation == proc.changing.generation == 1
        status, headers, _ = get(proc.port, RATES, volatile, {"If-None-Match": before[volatile]})
        assert status == 200 and headers["etag"] != before[volatile]
        assert get(proc.port, RATES, static, {"If-None-Match": before[static]})[0] == 304
        assert proc.changing.changed_between(0, 1) == {proc.url(RATES, p) for p in VOLATILE}

        # The main site moved on in step with the test-side model.
        main_changed = sorted(proc.web.changed_pages(0))
        assert main_changed
        for url in main_changed[:3]:
            parts = urlsplit(url)
            assert parts.hostname is not None
            target = parts.path + (f"?{parts.query}" if parts.query else "")
            status, _, body = get(proc.port, parts.hostname, target)
            assert status == 200 and body == proc.web.render(parts.hostname, target), url

        assert proc.bump_generation() == 2
        assert get(proc.port, RATES, volatile)[1]["etag"] != headers["etag"]
        proc.log.clear()
        assert proc.bump_generation() == 3  # the log is not touched by a bump
        assert proc.log.entries(settle_s=0.2) == []
