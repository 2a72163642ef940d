"""Trap keys and the stateless trap checks (traps.py), and the scope guard applying them."""

from __future__ import annotations

from pathlib import Path

import pytest

from atlas_pipeline import defaults as d
from atlas_pipeline.config import config_from_mapping
from atlas_pipeline.coordination import (
    Candidate,
    CoordinationStore,
    Lease,
    OriginPolicy,
    Outcome,
    RobotsTask,
    TrapCaps,
    UrlState,
    Wait,
    open_store,
)
from atlas_pipeline.records import Document, FetchRecord
from atlas_pipeline.scope import ScopeGuard
from atlas_pipeline.traps import (
    Novelty,
    TrapKeys,
    VariantFetch,
    counted_keys,
    judge_novelty,
    looks_like_session_token,
    page_number,
    query_key_path,
    repeats_segments,
    strip_session_ids,
    trap_cut,
    trap_keys,
    variant_room,
)
from atlas_pipeline.urls import origin_of

PAGES = frozenset({"page", "p", "offset"})


@pytest.mark.parametrize(
    ("url", "pattern", "dated", "query_key"),
    [
        ("http://a.test/calendar/2026/11", "/calendar/9/9", True, None),
        ("http://a.test/calendar/2026/11/29", "/calendar/9/9/9", True, None),
        ("http://a.test/events?month=2026-11&view=day", "/events?month=9-9&view=day", True,
         "/events?month,view"),
        ("http://a.test/d/20261129", "/d/9", True, None),
        ("http://a.test/2026/11/29/my-post", "/9/9/9/my-post", True, None),  # one URL a pattern
        ("http://a.test/news/2026/11/29/123", "/news/9/9/9/9", False, None),  # an id: not a date
        ("http://a.test/item?id=123", "/item?id=9", False, None),  # numbered: pattern cap
        ("http://a.test/shop?color=red&size=m", "/shop?color=red&size=m", False,
         "/shop?color,size"),
        ("http://a.test/search?q=atlas", "/search?q=atlas", False, "/search?q"),
        ("http://a.test/x/2026", "/x/9", False, None),  # a year alone is no date
    ],
)  # fmt: skip
def test_trap_keys(url: str, pattern: str, dated: bool, query_key: str | None) -> None:
    keys = trap_keys(url)
    assert (keys.pattern, keys.dated, keys.query_key) == (pattern, dated, query_key)


@pytest.mark.parametrize(
    ("url", "page"),
    [
        ("http://a.test/list?page=7", 7),
        ("http://a.test/list?sort=new&p=120", 120),
        ("http://a.test/blog/page/3/", 3),
        ("http://a.test/blog/page/3", 3),
        ("http://a.test/list?page=last", None),
        ("http://a.test/pages/3", None),
        ("http://a.test/list", None),
    ],
)
def test_page_numbers(url: str, page: int | None) -> None:
    assert page_number(url, PAGES) == page


@pytest.mark.parametrize(
    ("path", "repeats"),
    [
        ("/a/a/", False),
        ("/a/a/a/", True),
        ("/x/a/b/a/b/a/b/", True),
        ("/x/a/b/c/a/b/c/a/b/c/", True),
        ("/2026/11/11/", False),
        ("/docs/api/v1/api/v1/", False),
        ("/", False),
    ],
)
def test_repeating_segments(path: str, repeats: bool) -> None:
    assert repeats_segments(path, 2) is repeats


@pytest.mark.parametrize(
    ("url", "stripped"),
    [
        # issue 20: a key on the list is no proof, these short values are kept
        ("http://a.test/x?sid=abc&q=1", "http://a.test/x?sid=abc&q=1"),
        ("http://a.test/x;jsessionid=0AF3?q=1", "http://a.test/x;jsessionid=0AF3?q=1"),
        ("http://a.test/x?PHPSESSID=1", "http://a.test/x?PHPSESSID=1"),
        ("http://a.test/x?q=1", "http://a.test/x?q=1"),
        ("http://a.test/x?sidebar=1", "http://a.test/x?sidebar=1"),
    ],
)
def test_session_ids_are_stripped(url: str, stripped: str) -> None:
    assert strip_session_ids(url, frozenset({"sid", "phpsessid"})) == stripped


HEX32 = "0123456789abcdef0123456789abcdef"  # a PHPSESSID
HEX16 = "4f9a0c1be27d5836"  # the sandbox shop's ?sid=
SERVLET = "1A2B3C4D5E6F7A8B9C0D1E2F3A4B5C6D"  # a ;jsessionid=
B64 = "Zm9vYmFy%2Bx9Q%2Fk3=="  # base64 with '+' and '/' escaped: "Zm9vYmFy+x9Q/k3=="

# issue 20: strip a session id only when the key is on the (default) list AND the value looks
# like a session token; keep everything else exactly as written. (url, canonical)
SESSION_IDS = [
    # searches and short values are pages, not sessions
    ("http://a.test/?s=shoes", "http://a.test/?s=shoes"),  # WordPress search: `s` is no longer listed
    ("http://a.test/?S=shoes", "http://a.test/?S=shoes"),
    ("http://a.test/?s=" + HEX32, "http://a.test/?s=" + HEX32),  # a token under another key
    ("http://a.test/x?sid=12", "http://a.test/x?sid=12"),
    ("http://a.test/x?sid=", "http://a.test/x?sid="),
    ("http://a.test/x?sid", "http://a.test/x?sid"),
    ("http://a.test/x?phpsessid=abc&a=1", "http://a.test/x?phpsessid=abc&a=1"),
    ("http://a.test/x?sid=averyveryverylongword", "http://a.test/x?sid=averyveryverylongword"),
    ("http://a.test/x?sid=12345678901234567890", "http://a.test/x?sid=12345678901234567890"),
    ("http://a.test/x?sessionid=aaaaaaaa11111111", "http://a.test/x?sessionid=aaaaaaaa11111111"),
    ("http://a.test/x?ref=" + HEX32, "http://a.test/x?ref=" + HEX32),
    ("http://a.test/x?sidebar=" + HEX32, "http://a.test/x?sidebar=" + HEX32),
    # tokens under listed keys go, whatever their case or position
    ("http://a.test/x?PHPSESSID=" + HEX32, "http://a.test/x"),
    ("http://a.test/x?phpsessid=" + HEX32.upper() + "&a=1", "http://a.test/x?a=1"),
    ("http://a.test/x?a=1&sid=" + HEX16 + "&b=2", "http://a.test/x?a=1&b=2"),
    ("http://a.test/x?a=1&sid=" + HEX16, "http://a.test/x?a=1"),
    ("http://a.test/x?sid=" + B64, "http://a.test/x"),
    ("http://a.test/x?session_id=" + HEX32 + "&sid=12", "http://a.test/x?sid=12"),
    # the rest of the query stays as written: empty pieces, an empty query's '?'
    ("http://a.test/x?q=1&&r=2", "http://a.test/x?q=1&&r=2"),
    ("http://a.test/x?sid=" + HEX16 + "&&q", "http://a.test/x?&q"),
    ("http://a.test/?", "http://a.test/?"),
    ("http://a.test/x?sid=" + HEX16, "http://a.test/x"),  # emptied by the stripping: '?' goes
    # ;jsessionid= path parameters: stripped only with a token value
    ("http://a.test/x;jsessionid=" + SERVLET, "http://a.test/x"),
    ("http://a.test/x;jsessionid=" + SERVLET + "?q=1", "http://a.test/x?q=1"),
    ("http://a.test/x;jsessionid=" + SERVLET + ".node01", "http://a.test/x"),  # Tomcat's route
    ("http://a.test/x;JSESSIONID=" + SERVLET + "/y", "http://a.test/x/y"),
    ("http://a.test/x;jsessionid=" + SERVLET + ";v=1", "http://a.test/x;v=1"),
    ("http://a.test/x;jsessionid=" + SERVLET + "?", "http://a.test/x?"),
    ("http://a.test/x;jsessionid=0AF3", "http://a.test/x;jsessionid=0AF3"),  # short: kept
    ("http://a.test/x;jsessionid=", "http://a.test/x;jsessionid="),
    ("http://a.test/x;jsessionid=print-friendly-version", "http://a.test/x;jsessionid=print-friendly-version"),
    ("http://a.test/x;v=" + SERVLET, "http://a.test/x;v=" + SERVLET),  # not a session name
]  # fmt: skip


@pytest.mark.parametrize(("url", "canonical"), SESSION_IDS)
def test_session_ids_are_stripped_only_when_the_value_is_a_token(url: str, canonical: str) -> None:
    params = frozenset(d.SESSION_PARAMS)
    assert strip_session_ids(url, params) == canonical
    assert strip_session_ids(canonical, params) == canonical


def test_the_default_session_keys_hold_no_ordinary_word() -> None:
    assert "s" not in d.SESSION_PARAMS
    assert all(k == k.lower() for k in d.SESSION_PARAMS)


# The rule of looks_like_session_token: 16+ characters of [A-Za-z0-9_-+/=.] (escapes decoded),
# 6+ distinct, a digit and a letter among them. (value, is a token)
TOKENS = [
    (HEX32, True),
    (HEX32.upper(), True),
    (HEX16, True),
    (SERVLET + ".node01", True),
    ("Zm9vYmFy+x9Q/k3==", True),
    (B64, True),
    ("dGhpcyBpcyBhIHRlc3Q_-x1", True),  # base64url
    ("4f9a0c1be27d583", False),  # 15 characters
    ("", False),
    ("12", False),
    ("shoes", False),
    ("averyveryverylongword", False),  # long, but no digit: a word
    ("AVeryVeryLongWordIndeed", False),
    ("12345678901234567890", False),  # no letter: a number (a story id, say)
    ("aaaaaaaa11111111", False),  # 2 distinct characters
    ("ab12ab12ab12ab12", False),  # 4 distinct characters
    ("0123456789abcde f", False),  # a space
    ("0123456789abcdef%20", False),  # ... escaped
    ("0123456789abcdef!x", False),  # '!' is not in the alphabet
    ("\u00e90123456789abcdef", False),
]


@pytest.mark.parametrize(("value", "token"), TOKENS)
def test_what_looks_like_a_session_token(value: str, token: bool) -> None:
    assert looks_like_session_token(value) is token


def guard(tmp_path: Path, **scope: object) -> ScopeGuard:
    raw = {"seeds": ["http://a.example.test/"], "data_dir": str(tmp_path), "scope": scope}
    cfg = config_from_mapping(raw, base_dir=tmp_path)
    return ScopeGuard(cfg)


def test_the_guard_cuts_deep_pagination_and_repeating_paths(tmp_path: Path) -> None:
    g = guard(tmp_path, max_page_number=10)
    base = "http://a.example.test/list"
    assert g.judge("?page=10", base, 1, base).reason == "admitted"
    assert g.judge("?page=11", base, 1, base).reason == "pagination_cap"
    assert g.judge("/a/a/a/", base, 1, base).reason == "repeating_path"


def test_the_guard_drops_session_ids_and_allows_registrable_domains(tmp_path: Path) -> None:
    g = guard(tmp_path, allowed_domains=["example.test"])
    base = "http://a.example.test/"
    judged = g.judge("/x?sid=42&q=1", base, 1, base)
    # issue 20: "42" is no session token, so the parameter stays (it may name the page)
    assert judged.url == "http://a.example.test/x?sid=42&q=1" and judged.reason == "admitted"
    assert judged.candidate is not None and judged.candidate.discovered_url == "/x?sid=42&q=1"
    assert not judged.session_id_stripped
    judged = g.judge(f"/x?sid={HEX16}&q=1", base, 1, base)
    assert judged.url == "http://a.example.test/x?q=1" and judged.reason == "admitted"
    assert judged.candidate is not None and judged.candidate.discovered_url == f"/x?sid={HEX16}&q=1"
    assert judged.session_id_stripped
    assert g.judge("http://other.example.test/", base, 1, base).reason == "admitted"
    assert g.judge("http://example.org/", base, 1, base).reason == "host_not_allowed"


def test_a_canonical_hint_is_recorded_and_raises_priority_without_merging(tmp_path: Path) -> None:
    g = guard(tmp_path)
    page = "http://a.example.test/story?ref=home"
    rows = g.page_links([("/other", "", False)], page, page, 3, None, "/story")
    (canon, canon_cand), (link, link_cand) = rows
    assert canon["kind"] == "canonical" and canon["url"] == "http://a.example.test/story"
    assert canon_cand is not None and canon_cand.priority == 0.95  # a depth-4 link gets 0.6
    assert link["kind"] == "link" and link_cand is not None and link_cand.priority < 0.95
    itself = g.page_links([], page, page, 3, None, page)
    assert itself == []  # naming itself tells nothing


# ------------------------------------------------- variants per path, and the novelty rule


@pytest.mark.parametrize(
    ("url", "path_key"),
    [
        ("http://a.test/catalogue?colour=red&size=m", "/catalogue"),
        ("http://a.test/catalogue?size=m&colour=red", "/catalogue"),  # any order: one path
        ("http://a.test/catalogue?fit=slim", "/catalogue"),  # any key set: one path
        ("http://a.test/catalogue?page=2", None),  # numbered: the pattern cap's
        ("http://a.test/catalogue", None),  # no query: not a variant
    ],
)  # fmt: skip
def test_every_key_set_of_a_path_counts_under_its_path(url: str, path_key: str | None) -> None:
    keys = trap_keys(url)
    assert keys.path_key == path_key
    # the store reads a path back from the query key it keeps (claims: traps.variant_room)
    assert (keys.query_key is None) == (path_key is None)
    assert keys.query_key is None or query_key_path(keys.query_key) == path_key


BARREN = VariantFetch(new_urls=0, new_content=False)
NEW_URL = VariantFetch(new_urls=2, new_content=False)
NEW_TEXT = VariantFetch(new_urls=0, new_content=True)


@pytest.mark.parametrize(
    ("state", "event", "window", "after"),
    [
        (Novelty(), BARREN, 3, Novelty(1, 1, False)),
        (Novelty(4, 1, False), BARREN, 3, Novelty(5, 2, False)),
        (Novelty(5, 2, False), BARREN, 3, Novelty(6, 3, True)),  # the third barren in a row
        (Novelty(6, 3, True), BARREN, 3, Novelty(7, 4, True)),  # stays stopped
        (Novelty(5, 2, False), NEW_URL, 3, Novelty(6, 0, False)),  # a new URL: count again
        (Novelty(5, 2, False), NEW_TEXT, 3, Novelty(6, 0, False)),  # new text: count again
        (Novelty(9, 5, True), NEW_URL, 3, Novelty(10, 0, False)),  # worth its variants again
        (Novelty(9, 5, True), NEW_TEXT, 3, Novelty(10, 0, False)),
        (Novelty(), BARREN, 1, Novelty(1, 1, True)),  # window 1: one barren fetch stops it
        (Novelty(), BARREN, 0, Novelty(1, 1, True)),  # a window below 1 acts as 1
        (Novelty(9, 5, True), NEW_URL, 0, Novelty(10, 0, False)),  # ... new is never barren
        (Novelty(), NEW_URL, 1, Novelty(1, 0, False)),
    ],
)  # fmt: skip
def test_the_novelty_rule(state: Novelty, event: VariantFetch, window: int, after: Novelty) -> None:
    assert judge_novelty(state, event, window) == after


def test_the_novelty_rule_over_a_run_of_fetches() -> None:
    """K=4: barren, barren, new, then four barren: stopped on the fourth; new text lifts it."""
    state = Novelty()
    run = [BARREN, BARREN, NEW_URL, BARREN, BARREN, BARREN, BARREN, BARREN, NEW_TEXT, BARREN]
    stops = []
    for event in run:
        state = judge_novelty(state, event, 4)
        stops.append(state.stopped)
    assert stops == [False, False, False, False, False, False, True, True, False, False]
    assert state == Novelty(10, 1, False)


@pytest.mark.parametrize(
    ("state", "uncommitted", "window", "room"),
    [
        (Novelty(), 0, 8, 8),  # a fresh path: a window's worth
        (Novelty(), 3, 8, 5),  # less those whose verdict is not in
        (Novelty(), 8, 8, 0),  # all of them out: wait for their commits
        (Novelty(), 9, 8, 0),  # never below none
        (Novelty(6, 5, False), 0, 8, 3),  # 5 barren in a row: 3 more could stop it
        (Novelty(6, 5, False), 2, 8, 1),
        (Novelty(6, 5, False), 3, 8, 0),
        (Novelty(7, 7, False), 1, 8, 0),  # the one that could stop it is out
        (Novelty(9, 8, True), 0, 8, 1),  # stopped, nothing out: one (a kept variant's refetch)
        (Novelty(9, 8, True), 1, 8, 0),  # ... one at a time
        (Novelty(), 0, 0, 1),  # a window below 1 acts as 1
        (Novelty(), 1, 0, 0),
    ],
)  # fmt: skip
def test_a_paths_variants_claimed_never_outrun_the_novelty_rule(
    state: Novelty, uncommitted: int, window: int, room: int
) -> None:
    assert variant_room(state, uncommitted, window) == room


def test_variants_claimed_as_room_allows_stop_with_no_fetch_past_the_window() -> None:
    """Claims take what `variant_room` allows, every fetch is barren, and commits land late (a
    whole claim's worth at once): the path stops after exactly `window` fetches."""
    state, uncommitted, fetched = Novelty(), 0, 0
    while not state.stopped:
        took = variant_room(state, uncommitted, 8)
        uncommitted += took
        fetched += took
        for _ in range(uncommitted):  # the late commit of all of them
            state = judge_novelty(state, BARREN, 8)
        uncommitted = 0
    assert fetched == 8


# ------------------------------------------------- the trap caps (traps.trap_cut) as data

CAPS = TrapCaps(query_variants=3, pattern_urls=5, calendar_urls=2, path_variants=4)
ITEM = trap_keys("http://a.test/item?id=123")  # pattern /item?id=9 only
CAL = trap_keys("http://a.test/calendar/2026/11")  # pattern /calendar/9/9, dated
FACET = trap_keys("http://a.test/shop?color=red&size=m")  # pattern, query and path keys
DATED_FACET = trap_keys("http://a.test/events?month=2026-11&view=day")
P_ITEM, P_CAL, P_FACET = ("pattern", "/item?id=9"), ("pattern", "/calendar/9/9"), (
    "pattern", "/shop?color=red&size=m")  # fmt: skip
Q_FACET, PATH_SHOP, STOP_SHOP = ("query", "/shop?color,size"), ("path", "/shop"), (
    "stopped", "/shop")  # fmt: skip


@pytest.mark.parametrize(
    ("keys", "counts", "cut", "why"),
    [
        (ITEM, {}, None, "nothing counted yet"),
        (ITEM, {P_ITEM: 4}, None, "under the pattern cap"),
        (ITEM, {P_ITEM: 5}, "path_pattern_cap", "a cap of 5 takes 5 URLs"),
        (ITEM, {P_ITEM: 9}, "path_pattern_cap", "past it (counted by several writers)"),
        (CAL, {P_CAL: 1}, None, "under the calendar cap"),
        (CAL, {P_CAL: 2}, "calendar_cap", "dated digits: the lower cap"),
        (CAL, {P_CAL: 4}, "calendar_cap", "under the pattern cap, past the calendar one"),
        (FACET, {P_FACET: 1, Q_FACET: 2, PATH_SHOP: 3}, None, "every counter under its cap"),
        (FACET, {Q_FACET: 3}, "query_variant_cap", "the key set is full"),
        (FACET, {PATH_SHOP: 4}, "path_variant_cap", "the path is full, all key sets together"),
        (FACET, {("query", "/shop?color"): 3, ("path", "/elsewhere"): 9}, None,
         "other keys' counts do not count"),
        (FACET, {STOP_SHOP: 1}, "trap_no_novelty", "the novelty rule stopped the path"),
        (FACET, {STOP_SHOP: 0}, None, "not stopped"),
        (ITEM, {("stopped", "/item"): 1, ("stopped", "/item?id=9"): 1}, None,
         "a URL with no path key (no worded query) is no variant to stop"),
        (FACET, {STOP_SHOP: 1, P_FACET: 5, Q_FACET: 3, PATH_SHOP: 4}, "trap_no_novelty",
         "the stop is judged first"),
        (FACET, {P_FACET: 5, Q_FACET: 3, PATH_SHOP: 4}, "path_pattern_cap",
         "then the pattern"),
        (FACET, {Q_FACET: 3, PATH_SHOP: 4}, "query_variant_cap", "then the key set"),
        (DATED_FACET, {("pattern", "/events?month=9-9&view=day"): 2}, "calendar_cap",
         "a dated facet: the calendar cap"),
        (DATED_FACET, {("query", "/events?month,view"): 3}, "query_variant_cap",
         "... and its query caps too"),
    ],
)  # fmt: skip
def test_trap_cut(keys: TrapKeys, counts: dict[tuple[str, str], int], cut: str | None,
                  why: str) -> None:  # fmt: skip
    assert trap_cut(keys, counts, CAPS) == cut, why


@pytest.mark.parametrize(
    ("keys", "counted"),
    [
        (ITEM, [P_ITEM]),
        (CAL, [P_CAL]),
        (FACET, [P_FACET, Q_FACET, PATH_SHOP]),  # the order the caps are judged in
    ],
)
def test_the_counters_a_url_is_counted_under(
    keys: TrapKeys, counted: list[tuple[str, str]]
) -> None:
    assert counted_keys(keys) == counted


# ------------------------------------------------- the store keeps the state (both backends)

CYCLE, SHARD, T0 = "c0001", 0, 1_000_000.0
SITE = "http://cat.example.test"


def _cand(path: str) -> Candidate:
    return Candidate(SITE + path, SITE + path, origin_of(SITE + path), SHARD, 1, 0.5)


def _open(url: str, caps: TrapCaps) -> CoordinationStore:
    return open_store(url, OriginPolicy(0.0, 3), 10**6, caps)


def test_the_path_cap_counts_every_key_set_of_a_path(store_url: str) -> None:
    store = _open(store_url, TrapCaps(query_variants=100, path_variants=5))
    try:
        got = store.discover([_cand(f"/c?k{i}=v") for i in range(8)], CYCLE)
        assert got == ["admitted"] * 5 + ["path_variant_cap"] * 3
        assert store.discover([_cand("/other?k=v"), _cand("/c?page=3")], CYCLE) == [
            "admitted", "admitted"]  # fmt: skip
    finally:
        store.close()


def _done(lease: Lease, links: list[str] = (), doc: str | None = "D") -> tuple[Lease, Outcome]:  # type: ignore[assignment]
    rows = [({"url": SITE + p, "reason": "admitted"}, _cand(p)) for p in links]
    return lease, Outcome(
        UrlState.FETCHED, "fetched", T0 + 86_400, status=200,
        record=FetchRecord(fetch_id=f"f-{lease.url}"), links=rows,  # type: ignore[arg-type]
        document=Document(fetch_id=f"f-{lease.url}", url=lease.url, origin=lease.origin,
                          text_hash=doc) if doc else None, document_id=doc,
    )  # fmt: skip


def _robots_allow_all(store: CoordinationStore) -> None:
    """The site's first claim is its robots.txt: answered, allowing everything."""
    task = store.claim(CYCLE, SHARD, T0, "tok", 60.0)
    assert isinstance(task, RobotsTask)
    store.put_robots(task, "parsed", "User-agent: *\nDisallow:\n", T0, 86_400, 0.0, good=True)


def _first_claim(store: CoordinationStore, paths: tuple[str, ...]) -> list[Lease]:
    """`paths` discovered, robots answered, then one claim of up to three: its leases by URL."""
    store.discover([_cand(p) for p in paths], CYCLE)
    _robots_allow_all(store)
    got = store.claim_batch(CYCLE, SHARD, T0 + 1, "tok", 60.0, 3)
    assert isinstance(got, list) and all(isinstance(x, Lease) for x in got)
    return sorted((x for x in got if isinstance(x, Lease)), key=lambda x: x.url)


def test_barren_variants_stop_their_path_and_withdraw_the_queued_ones(store_url: str) -> None:
    store = _open(store_url, TrapCaps(novelty_window=2))
    try:
        store.discover(
            [_cand(p) for p in ("/c", "/c?a=1x", "/c?b=2x", "/c?c=3x", "/c?d=4x")], CYCLE
        )
        _robots_allow_all(store)
        leases = store.claim_batch(CYCLE, SHARD, T0 + 1, "tok", 60.0, 3)
        assert isinstance(leases, list) and all(isinstance(x, Lease) for x in leases)
        by_url = {x.url: x for x in leases if isinstance(x, Lease)}
        assert set(by_url) == {SITE + "/c", SITE + "/c?a=1x", SITE + "/c?b=2x"}
        # the bare listing holds the text first; both variants show it again and link only
        # more variants: two barren fetches in a row, with a window of two
        store.commit_batch([
            _done(by_url[SITE + "/c"], ["/c?a=1x", "/x1"]),
            _done(by_url[SITE + "/c?a=1x"], ["/c?e=5x"]),
            _done(by_url[SITE + "/c?b=2x"], ["/c?f=6x", "/c?a=1x"]),
        ], CYCLE, T0 + 2)  # fmt: skip
        rows = {r["url"]: r for r in store.url_rows(SHARD)}
        for path in ("/c?c=3x", "/c?d=4x", "/c?e=5x", "/c?f=6x"):  # queued, never fetched
            assert (rows[SITE + path]["state"], rows[SITE + path]["reason"]) == (
                "discovered", "trap_no_novelty"), path  # fmt: skip
        assert rows[SITE + "/x1"]["state"] == "eligible"
        assert store.discover([_cand("/c?g=7x"), _cand("/d?g=7x"), _cand("/c?page=2")],
                              CYCLE) == ["trap_no_novelty", "admitted", "admitted"]  # fmt: skip
    finally:
        store.close()


def test_claims_hold_a_paths_variants_back_until_their_verdicts_are_in(store_url: str) -> None:
    """traps.variant_room in the store: with a window of two, two variants go out; the third
    waits, whatever the claim's size, until their results are committed; two barren ones
    stop the path, and the queued ones are withdrawn, never fetched. The origin's other
    URLs are claimed meanwhile."""
    store = _open(store_url, TrapCaps(novelty_window=2))
    try:
        got = {x.url: x for x in _first_claim(store, ("/c?a=1x", "/c?b=2x", "/c?c=3x", "/x"))}
        assert set(got) == {SITE + "/c?a=1x", SITE + "/c?b=2x", SITE + "/x"}
        assert store.claim_batch(CYCLE, SHARD, T0 + 2, "tok", 60.0, 3) == Wait(T0 + 2.25)
        store.commit_batch([_done(got[SITE + "/c?a=1x"], doc=None),
                            _done(got[SITE + "/c?b=2x"], doc=None)], CYCLE, T0 + 3)  # fmt: skip
        rows = {r["url"]: r for r in store.url_rows(SHARD)}
        assert (rows[SITE + "/c?c=3x"]["state"], rows[SITE + "/c?c=3x"]["reason"]) == (
            "discovered", "trap_no_novelty")  # fmt: skip
    finally:
        store.close()


def test_a_variant_with_a_new_url_or_new_text_keeps_its_path_open(store_url: str) -> None:
    store = _open(store_url, TrapCaps(novelty_window=2))
    try:
        # a window of two lets two variants out before their verdicts (traps.variant_room)
        a, b = _first_claim(store, ("/c?a=1x", "/c?b=2x", "/c?c=3x", "/c?d=4x"))
        # a: new text; b: the same text (barren); then c: no text but a new page
        store.commit_batch([_done(a, doc="A"), _done(b, doc="A")], CYCLE, T0 + 2)
        more = store.claim_batch(CYCLE, SHARD, T0 + 3, "tok", 60.0, 3)
        assert isinstance(more, list)
        (c,) = more  # one barren in a row: one more may go
        assert isinstance(c, Lease) and c.url == SITE + "/c?c=3x"
        store.commit_batch([_done(c, ["/p/1"], doc=None)], CYCLE, T0 + 4)
        assert store.discover([_cand("/c?z=9x")], CYCLE) == ["admitted"]
        rows = {r["url"]: r for r in store.url_rows(SHARD)}
        assert rows[SITE + "/c?d=4x"]["state"] == "eligible"
    finally:
        store.close()
