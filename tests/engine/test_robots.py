"""robots.txt decisions (RFC 9309, seed 000 ch. 8): RobotsPolicy over protego."""

from __future__ import annotations

import pytest

from atlas_pipeline.robots import RobotsPolicy, RobotsStatus, decode_robots, status_for_http

TOKEN = "AtlasBot"
ORIGIN = "https://store-c.example.test:443"

STORE_C = """\
User-agent: *
Disallow: /account/
Allow: /account/help
Disallow: /cart/
"""


def parsed(text: str) -> RobotsPolicy:
    return RobotsPolicy(ORIGIN, 1, RobotsStatus.PARSED, text)


def allows(text: str, path: str, token: str = TOKEN) -> bool:
    return parsed(text).allows(f"https://store-c.example.test{path}", token)


@pytest.mark.parametrize(
    ("path", "allowed"),
    [
        ("/account/orders", False),  # longest match: Disallow /account/
        ("/account/help/faq", True),  # the longer Allow /account/help wins
        ("/account/help", True),
        ("/account/", False),
        ("/account", True),  # /account/ does not match /account
        ("/products/lamp", True),  # no rule matches
        ("/cart/", False),
        ("/cart/checkout?step=2", False),
        ("/", True),
    ],
)
def test_store_c_rules(path: str, allowed: bool) -> None:
    assert allows(STORE_C, path) is allowed


@pytest.mark.parametrize(
    "text",
    [
        "User-agent: *\nDisallow: /page\nAllow: /page\n",
        "User-agent: *\nAllow: /page\nDisallow: /page\n",
    ],
)
def test_allow_wins_tie(text: str) -> None:
    assert allows(text, "/page")
    assert allows(text, "/page/sub")


def test_longer_disallow_beats_shorter_allow() -> None:
    text = "User-agent: *\nAllow: /docs\nDisallow: /docs/private\n"
    assert allows(text, "/docs/public")
    assert not allows(text, "/docs/private/x")


@pytest.mark.parametrize(
    ("path", "allowed"),
    [
        ("/doc.pdf", False),
        ("/a/b/report.pdf", False),
        ("/doc.pdf?download=1", True),  # $ anchors the end: the query makes it longer
        ("/doc.pdfx", True),
        ("/doc.html", True),
        ("/private123/x", False),
        ("/private/x", False),
        ("/private/y", True),
        ("/list?sort=price", False),
        ("/list", True),
    ],
)
def test_wildcard_and_end_anchor_patterns(path: str, allowed: bool) -> None:
    text = "User-agent: *\nDisallow: /*.pdf$\nDisallow: /private*/x\nDisallow: /*?sort=\n"
    assert allows(text, path) is allowed


GROUPS = """\
User-agent: *
Disallow: /

User-agent: AtlasBot
Disallow: /secret
"""


@pytest.mark.parametrize(
    ("token", "path", "allowed"),
    [
        ("AtlasBot", "/", True),  # its own group replaces *, which would block everything
        ("AtlasBot", "/page", True),
        ("AtlasBot", "/secret", False),
        ("OtherBot", "/", False),  # falls back to *
        ("OtherBot", "/page", False),
    ],
)
def test_most_specific_group_replaces_star(token: str, path: str, allowed: bool) -> None:
    assert allows(GROUPS, path, token) is allowed


def test_user_agent_match_ignores_case() -> None:
    assert not allows("User-agent: atlasbot\nDisallow: /secret\n", "/secret")


def test_paths_are_case_sensitive() -> None:
    text = "User-agent: *\nDisallow: /Private\n"
    assert not allows(text, "/Private/x")
    assert allows(text, "/private/x")


def test_percent_encoding_is_normalized_before_matching() -> None:
    text = "User-agent: *\nDisallow: /caf%C3%A9\n"
    assert not allows(text, "/caf%C3%A9/menu")
    assert not allows(text, "/caf%c3%a9/menu")


@pytest.mark.parametrize(
    "status", [RobotsStatus.PARSED, RobotsStatus.UNREACHABLE, RobotsStatus.THROTTLED]
)
def test_robots_txt_itself_is_always_allowed(status: RobotsStatus) -> None:
    policy = RobotsPolicy(ORIGIN, 1, status, "User-agent: *\nDisallow: /\n")
    assert policy.allows("https://store-c.example.test/robots.txt", TOKEN)
    assert not policy.allows("https://store-c.example.test/robots.txt.bak", TOKEN)


@pytest.mark.parametrize(
    ("status", "allowed"),
    [
        (RobotsStatus.UNAVAILABLE, True),  # 4xx: nothing published, allow all
        (RobotsStatus.UNREACHABLE, False),  # 5xx / network: fetch nothing
        (RobotsStatus.THROTTLED, False),  # 429: establish nothing
    ],
)
def test_unparsed_statuses_ignore_the_text(status: RobotsStatus, allowed: bool) -> None:
    # the text would say the opposite; the status decides
    text = "User-agent: *\nAllow: /\n" if not allowed else "User-agent: *\nDisallow: /\n"
    policy = RobotsPolicy(ORIGIN, 1, status, text)
    assert policy.allows("https://store-c.example.test/products/lamp", TOKEN) is allowed


def test_bom_prefixed_file_is_honoured_after_decode() -> None:
    body = b"\xef\xbb\xbfUser-agent: *\nDisallow: /\n"
    text = decode_robots(body, 500 * 1024)
    assert not text.startswith("\ufeff")
    assert not allows(text, "/anything")


def test_max_bytes_truncates_rules() -> None:
    head = "User-agent: *\nDisallow: /early\n"
    body = (head + "#" * 100 + "\nDisallow: /late\n").encode()
    text = decode_robots(body, len(head) + 10)
    assert not allows(text, "/early")
    assert allows(text, "/late")
    # the whole file when it fits
    assert not allows(decode_robots(body, len(body)), "/late")


def test_decode_replaces_invalid_utf8() -> None:
    text = decode_robots(b"User-agent: *\nDisallow: /\xff\xfe\n", 1024)
    assert "\ufffd" in text
    assert text.startswith("User-agent: *")


@pytest.mark.parametrize(
    ("http_status", "expected"),
    [
        (200, RobotsStatus.PARSED),
        (204, RobotsStatus.PARSED),
        (299, RobotsStatus.PARSED),
        (400, RobotsStatus.UNAVAILABLE),
        (401, RobotsStatus.UNAVAILABLE),
        (403, RobotsStatus.UNAVAILABLE),
        (404, RobotsStatus.UNAVAILABLE),
        (410, RobotsStatus.UNAVAILABLE),
        (429, RobotsStatus.THROTTLED),
        (500, RobotsStatus.UNREACHABLE),
        (503, RobotsStatus.UNREACHABLE),
        (599, RobotsStatus.UNREACHABLE),
    ],
)
def test_status_for_http(http_status: int, expected: RobotsStatus) -> None:
    assert status_for_http(http_status) is expected


@pytest.mark.parametrize(
    ("text", "token", "delay"),
    [
        ("User-agent: *\nCrawl-delay: 5\n", TOKEN, 5.0),
        ("User-agent: *\nCrawl-delay: 0.5\n", TOKEN, 0.5),
        ("User-agent: *\nDisallow: /x\n", TOKEN, None),
        ("User-agent: *\nCrawl-delay: 9\n\nUser-agent: AtlasBot\nCrawl-delay: 2\n", TOKEN, 2.0),
        ("User-agent: *\nCrawl-delay: 9\n\nUser-agent: AtlasBot\nCrawl-delay: 2\n", "X", 9.0),
    ],
)
def test_crawl_delay(text: str, token: str, delay: float | None) -> None:
    assert parsed(text).crawl_delay(token) == delay


def test_crawl_delay_only_from_a_parsed_file() -> None:
    text = "User-agent: *\nCrawl-delay: 5\n"
    assert RobotsPolicy(ORIGIN, 1, RobotsStatus.UNAVAILABLE, text).crawl_delay(TOKEN) is None


def test_sitemaps_listed_only_when_parsed() -> None:
    text = "User-agent: *\nDisallow:\nSitemap: https://store-c.example.test/sitemap.xml\n"
    assert parsed(text).sitemaps() == ["https://store-c.example.test/sitemap.xml"]
    assert RobotsPolicy(ORIGIN, 1, RobotsStatus.UNAVAILABLE, text).sitemaps() == []
