"""The duplicate-content origin (`atlas web --dupes`) in its own process on loopback, fetched with
http.client and read with the engine's own extractor (atlas_pipeline.parsing.extract_text).

Ground truth comes from dupes.py's helpers, but what makes it true is checked on the bytes
the server sends: twins extract to identical text, variants to different but close texts, the
corrections to texts further apart than any variant. The counts and the corrected facts are
written out here, so a change in dupes.py has to be a deliberate change here too.
"""

from __future__ import annotations

import difflib
import http.client
from collections.abc import Iterator
from html.parser import HTMLParser
from itertools import combinations
from urllib.parse import urlsplit

import protego
import pytest

from atlas_pipeline.parsing import extract_text
from atlas_sandbox import DUPES_HOSTS, SandboxServer, SandboxWeb, dupes
from tests.conftest import SandboxProcess, running_sandbox

DUPES = "dupes.example.test"


@pytest.fixture(scope="module")
def web(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SandboxProcess]:
    log = tmp_path_factory.mktemp("dupes") / "requests.jsonl"
    with running_sandbox(log, origins=0, pages=12, dupes=True) as proc:
        yield proc


def get(port: int, host: str, target: str) -> tuple[int, dict[str, str], bytes]:
    """One GET of `target` with the given Host."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", target, headers={"Host": f"{host}:{port}"})
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def fetch(url: str) -> str:
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    status, headers, body = get(parts.port, parts.hostname, parts.path)
    assert status == 200, url
    assert headers["content-type"] == "text/html; charset=utf-8"
    return body.decode("utf-8")


_texts: dict[str, str] = {}


def text(url: str) -> str:
    """The main text the engine extracts from the page the server sends (memoized)."""
    if url not in _texts:
        _texts[url] = extract_text(fetch(url), url)["text"]
    return _texts[url]


def shingles(words: str, k: int = 5) -> set[tuple[str, ...]]:
    w = words.lower().split()
    return {tuple(w[i : i + k]) for i in range(len(w) - k + 1)}


def jaccard(a: str, b: str) -> float:
    sa, sb = shingles(a), shingles(b)
    return len(sa & sb) / len(sa | sb)


def changed_lines(a: str, b: str) -> list[str]:
    """Lines only one of the two texts has."""
    diff = difflib.unified_diff(a.splitlines(), b.splitlines(), lineterm="", n=0)
    return [line[1:] for line in diff if line[:1] in "+-" and line[:3] not in ("+++", "---")]


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []
        self.canonical: list[str] = []
        self.classes: set[str] = set()
        self.tags: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self.tags.add(tag)
        self.classes.update((a.get("class") or "").split())
        if tag == "a":
            self.hrefs.append(a.get("href") or "")
        elif tag == "link" and (a.get("rel") or "").lower() == "canonical":
            self.canonical.append(a.get("href") or "")


def parse(html: str) -> _Links:
    p = _Links()
    p.feed(html)
    return p


# ---------------------------------------------------------------------- the origin


def test_ground_truth_shapes() -> None:
    """Eight articles and two corrections (ten twins), three live groups, two corrected pairs."""
    port = 1234
    assert DUPES_HOSTS == (DUPES,)
    assert dupes.seed_urls(port) == [f"http://{DUPES}:{port}/"]
    assert len(dupes.ARTICLES) == 8
    assert len(dupes.print_twins(port)) == 10
    assert [len(g) for g in dupes.near_duplicate_groups(port)] == [4, 3, 3]
    assert dupes.corrected_pairs(port) == [
        (f"http://{DUPES}:{port}/news/council-budget-vote",
         f"http://{DUPES}:{port}/news/council-budget-vote-corrected"),
        (f"http://{DUPES}:{port}/news/museum-shipwreck-exhibit",
         f"http://{DUPES}:{port}/news/museum-shipwreck-exhibit-corrected"),
    ]  # fmt: skip
    assert len(dupes.page_urls(port)) == 30
    twins = {u for pair in dupes.print_twins(port) for u in pair}
    grouped = {u for g in dupes.near_duplicate_groups(port) for u in g}
    assert twins | grouped == set(dupes.page_urls(port)) and not twins & grouped


def test_every_page_answers_and_is_logged(web: SandboxProcess) -> None:
    web.log.clear()
    for url in dupes.seed_urls(web.port) + dupes.page_urls(web.port):
        fetch(url)
    status, _, _ = get(web.port, DUPES, "/news/no-such-story")
    assert status == 404
    logged = [(e["host"], e["path"], e["status"]) for e in web.log.entries()]
    expected = [(DUPES, urlsplit(u).path, 200) for u in dupes.seed_urls(web.port)]
    expected += [(DUPES, urlsplit(u).path, 200) for u in dupes.page_urls(web.port)]
    assert logged == [*expected, (DUPES, "/news/no-such-story", 404)]


def test_index_links_every_page_and_robots_allows_all(web: SandboxProcess) -> None:
    index = parse(fetch(dupes.seed_urls(web.port)[0]))
    pages = [urlsplit(u).path for u in dupes.page_urls(web.port)]
    assert index.hrefs == pages
    status, _, robots = get(web.port, DUPES, "/robots.txt")
    assert status == 200
    rp = protego.Protego.parse(robots.decode())
    assert all(rp.can_fetch(u, "AtlasBot") for u in dupes.page_urls(web.port))


def test_query_strings_are_ignored(web: SandboxProcess) -> None:
    status, _, body = get(web.port, DUPES, "/news/library-reopens?ref=home&utm_source=x")
    assert status == 200
    assert body.decode() == fetch(f"http://{DUPES}:{web.port}/news/library-reopens")


def test_every_page_has_its_expected_text(web: SandboxProcess) -> None:
    """What the engine extracts is what dupes.expected_text says, line for line."""
    for url in dupes.page_urls(web.port):
        assert text(url) == dupes.expected_text(url), url
        assert len(text(url)) >= 1000, url


# ---------------------------------------------------------------------- the cases


def test_print_twins_have_identical_text_in_other_markup(web: SandboxProcess) -> None:
    for article, printed in dupes.print_twins(web.port):
        assert text(article) == text(printed), (article, printed)
        a, p = parse(fetch(article)), parse(fetch(printed))
        assert "nav" in a.tags and "nav" not in p.tags
        assert "aside" in a.tags and "aside" not in p.tags
        assert not (a.classes & p.classes), "the twins share no CSS class"
        assert urlsplit(printed).path in a.hrefs  # the article links its print version


def test_near_duplicates_differ_only_by_time_or_related_box(web: SandboxProcess) -> None:
    for group in dupes.near_duplicate_groups(web.port):
        texts = [text(u) for u in group]
        assert len(set(texts)) == len(group), "every variant keeps a text of its own"
        for a, b in combinations(texts, 2):
            diff = changed_lines(a, b)
            assert diff and all(line.startswith(("Updated ", "Related: ")) for line in diff)
            assert jaccard(a, b) >= 0.9
        # -b differs from -a by the time alone, -c by the box alone.
        assert [x[:8] for x in changed_lines(texts[0], texts[1])] == ["Updated ", "Updated "]
        assert [x[:9] for x in changed_lines(texts[0], texts[2])] == ["Related: "]


def test_corrections_change_a_few_percent(web: SandboxProcess) -> None:
    (budget, budget_fixed), (museum, museum_fixed) = dupes.corrected_pairs(web.port)
    assert "passed by 23 votes to 18" in text(budget)
    assert "passed by 21 votes to 20" in text(budget_fixed)
    assert "passed by 23 votes to 18" not in text(budget_fixed).split("Correction:")[0]
    assert text(budget_fixed).endswith(
        "Correction: this article first gave the result as 23 votes to 18."
    )
    assert "Maren Holt" in text(museum) and "Maren Holt" not in text(museum_fixed)
    assert "Jonas Eide" in text(museum_fixed)
    for original, corrected in dupes.corrected_pairs(web.port):
        a, b = text(original), text(corrected)
        assert a != b
        ratio = difflib.SequenceMatcher(None, a, b).ratio()
        assert 0.95 <= ratio < 0.99, (original, ratio)  # a few percent of the characters
        assert a.splitlines()[0] == b.splitlines()[0]  # same headline: the same story


def test_a_threshold_separates_variants_from_corrections(web: SandboxProcess) -> None:
    """Word 5-shingle Jaccard: every variant pair >= 0.93, every correction <= 0.87, unrelated
    stories ~0; so a near-duplicate threshold can group the one and keep the other apart."""
    variants = [
        jaccard(text(a), text(b))
        for group in dupes.near_duplicate_groups(web.port)
        for a, b in combinations(group, 2)
    ]
    corrections = [jaccard(text(a), text(b)) for a, b in dupes.corrected_pairs(web.port)]
    assert min(variants) >= 0.93
    assert max(corrections) <= 0.87
    stories = [a for a, _ in dupes.print_twins(web.port) if not a.endswith("-corrected")]
    stories += [g[0] for g in dupes.near_duplicate_groups(web.port)]
    assert max(jaccard(text(a), text(b)) for a, b in combinations(stories, 2)) < 0.05


def test_canonical_claims_on_the_pages(web: SandboxProcess) -> None:
    written = {}
    for url in dupes.page_urls(web.port):
        found = parse(fetch(url)).canonical
        assert len(found) <= 1
        if found:
            written[url] = found[0]
    claims = dupes.canonical_claims(web.port)
    assert written == {c.page: c.target for c in claims}
    base = f"http://{DUPES}:{web.port}"
    assert {c.page.removeprefix(base): c.confirmed for c in claims} == {
        "/print/harbour-electric-ferries": True,
        "/print/council-budget-vote": True,
        "/print/library-reopens": True,
        "/print/rail-summer-works": True,
        "/news/council-budget-vote-corrected": False,
    }
    for claim in claims:
        assert (text(claim.page) == text(claim.target)) == claim.confirmed


# ---------------------------------------------------------------------- in process


def test_served_in_process_only_when_asked() -> None:
    web = SandboxWeb(seed=7, generated_origins=0, pages_per_origin=12)
    with SandboxServer(web) as plain:
        assert get(plain.port, DUPES, "/")[0] == 421
    with SandboxServer(web, dupes=True) as server:
        status, _, body = get(server.port, DUPES, "/print/library-reopens")
        assert (
            status == 200 and f"http://{DUPES}:{server.port}/news/library-reopens" in body.decode()
        )
        assert get(server.port, "news-a.example.test", "/")[0] == 200  # the rest still served
