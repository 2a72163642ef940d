"""robots.txt decisions (RFC 9309, seed 000 ch. 8): RobotsPolicy over protego."""

from __future__ import annotations

import pytest

from atlas_pipeline.robots import (
    RobotsPolicy,
    RobotsStatus,
    crawler_token,
    decode_robots,
    status_for_http,
)

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
        # 2.2.4: an unknown record between User-agent lines leaves one group.
        ("User-agent: AtlasBot\nFoo: x\nUser-agent: *\nCrawl-delay: 4\n", TOKEN, 4.0),
        # 2.2.1: "Bot2000" does not take the group of "Bot".
        ("User-agent: Bot\nCrawl-delay: 2\n\nUser-agent: *\nCrawl-delay: 9\n", "Bot2000", 9.0),
        ("User-agent: Bot\nCrawl-delay: 2\n\nUser-agent: *\nCrawl-delay: 9\n", "bot", 2.0),
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


# ------------------------------------------------------------------ RFC 9309 tables
# Each row: (robots.txt text, product token, path, allowed). `pytest.param(..., id=...)`
# names the RFC rule the row pins down.

BAR = "User-agent: *\nDisallow: /bar\n"

RFC_GROUPS = [
    # 2.2: consecutive User-agent lines form one group.
    pytest.param(
        "User-agent: OtherBot\nUser-agent: AtlasBot\nDisallow: /a\n",
        TOKEN,
        "/a",
        False,
        id="consecutive-user-agents-share-a-group",
    ),
    pytest.param(
        "User-agent: AtlasBot\n\nUser-agent: OtherBot\nDisallow: /a\n",
        TOKEN,
        "/a",
        False,
        id="blank-line-between-user-agents-keeps-one-group",
    ),
    # 2.2: a User-agent line after rules starts a new group.
    pytest.param(
        "User-agent: AtlasBot\nDisallow: /a\nUser-agent: OtherBot\nDisallow: /b\n",
        TOKEN,
        "/b",
        True,
        id="user-agent-after-rules-starts-new-group",
    ),
    pytest.param(
        "User-agent: AtlasBot\nDisallow: /a\nUser-agent: OtherBot\nDisallow: /b\n",
        "OtherBot",
        "/a",
        True,
        id="new-group-does-not-inherit-earlier-rules",
    ),
    # 2.2: rules before any User-agent line belong to no group.
    pytest.param(
        "Disallow: /a\nUser-agent: *\nDisallow: /b\n", TOKEN, "/a", True, id="rules-before-ua"
    ),
    pytest.param("Disallow: /\n", TOKEN, "/a", True, id="only-rules-no-group"),
    # 2.2.1: groups naming the same product token are combined.
    pytest.param(
        "User-agent: AtlasBot\nDisallow: /a\n\nUser-agent: *\nDisallow: /c\n\n"
        "User-agent: atlasbot\nDisallow: /b\n",
        TOKEN,
        "/a",
        False,
        id="merged-groups-first-part",
    ),
    pytest.param(
        "User-agent: AtlasBot\nDisallow: /a\n\nUser-agent: *\nDisallow: /c\n\n"
        "User-agent: atlasbot\nDisallow: /b\n",
        TOKEN,
        "/b",
        False,
        id="merged-groups-second-part",
    ),
    pytest.param(
        "User-agent: AtlasBot\nDisallow: /a\n\nUser-agent: *\nDisallow: /c\n\n"
        "User-agent: atlasbot\nDisallow: /b\n",
        TOKEN,
        "/c",
        True,
        id="merged-groups-not-star",
    ),
    pytest.param(
        "User-agent: *\nDisallow: /a\n\nUser-agent: *\nDisallow: /b\n",
        TOKEN,
        "/b",
        False,
        id="merged-star-groups",
    ),
    # 2.2.1: product-token matching is case-insensitive.
    pytest.param("User-agent: ATLASBOT\nDisallow: /\n", TOKEN, "/a", False, id="ua-upper"),
    pytest.param("User-agent: atlasbot\nDisallow: /\n", "ATLASBOT", "/a", False, id="ua-token-up"),
    # 2.2.1: only the product token counts: no prefixes, substrings or wildcards of it.
    pytest.param("User-agent: Atlas\nDisallow: /\n", TOKEN, "/a", True, id="ua-prefix-no-match"),
    pytest.param("User-agent: Bot\nDisallow: /\n", TOKEN, "/a", True, id="ua-suffix-no-match"),
    pytest.param("User-agent: Atlas*\nDisallow: /\n", TOKEN, "/a", True, id="ua-no-wildcards"),
    pytest.param(
        "User-agent: SuperAtlasBot\nDisallow: /\n", TOKEN, "/a", True, id="ua-superstring"
    ),
    pytest.param(
        "User-agent: AtlasBot/1.0\nDisallow: /\n", TOKEN, "/a", False, id="ua-version-ignored"
    ),
    pytest.param(
        "User-agent: AtlasBot\nDisallow: /\n", "AtlasBot/1.0", "/a", False, id="token-version"
    ),
    # 2.2.1: the matching group is used, else "*"; "*" never combines with it.
    pytest.param(
        "User-agent: *\nDisallow: /a\n\nUser-agent: AtlasBot\nDisallow: /b\n",
        TOKEN,
        "/a",
        True,
        id="specific-group-replaces-star",
    ),
    pytest.param(
        "User-agent: *\nDisallow: /a\n\nUser-agent: AtlasBot\nDisallow: /b\n",
        "OtherBot",
        "/a",
        False,
        id="other-token-falls-back-to-star",
    ),
    pytest.param(
        "User-agent: *\nDisallow: /\n\nUser-agent: AtlasBot\n",
        TOKEN,
        "/a",
        True,
        id="empty-specific-group-allows-all",
    ),
    pytest.param(
        "User-agent: OtherBot\nDisallow: /\n", TOKEN, "/a", True, id="no-matching-group-no-star"
    ),
    pytest.param("", TOKEN, "/a", True, id="empty-file"),
]

RFC_MATCHING = [
    # 2.2.2: the most specific (longest, in octets) match wins.
    pytest.param(
        "User-agent: *\nAllow: /p\nDisallow: /page\n", TOKEN, "/page", False, id="longest-disallow"
    ),
    pytest.param(
        "User-agent: *\nDisallow: /p\nAllow: /page\n", TOKEN, "/page", True, id="longest-allow"
    ),
    pytest.param(
        "User-agent: *\nDisallow: /p\nAllow: /page\n", TOKEN, "/pa", False, id="short-only"
    ),
    # Octets of the pattern, wildcards included: "/*/x" (4) beats "/a/" (3).
    pytest.param(
        "User-agent: *\nAllow: /a/\nDisallow: /*/x\n", TOKEN, "/a/x", False, id="octets-wildcard"
    ),
    # Octets, not characters: "/é" is "/%C3%A9", 7 octets, longer than "/*b" (4 octets).
    pytest.param(
        "User-agent: *\nAllow: /*b\nDisallow: /é\n", TOKEN, "/%C3%A9b", False, id="octets-utf8"
    ),
    # 2.2.2: an allow and an equivalent disallow: allow wins.
    pytest.param(
        "User-agent: *\nDisallow: /a\nAllow: /a\n", TOKEN, "/a", True, id="tie-allow-after"
    ),
    pytest.param(
        "User-agent: *\nAllow: /a\nDisallow: /a\n", TOKEN, "/a", True, id="tie-allow-before"
    ),
    pytest.param(
        "User-agent: *\nDisallow: /a*\nAllow: /a$\n", TOKEN, "/a", True, id="tie-same-length"
    ),
    # 2.2.2: an empty Disallow matches nothing; no match means allowed.
    pytest.param("User-agent: *\nDisallow:\n", TOKEN, "/a", True, id="empty-disallow"),
    pytest.param("User-agent: *\nDisallow: \n", TOKEN, "/", True, id="empty-disallow-space"),
    pytest.param("User-agent: *\nAllow:\nDisallow: /\n", TOKEN, "/a", False, id="empty-allow"),
    # 2.2.2: matching starts at the first octet of the path and is case-sensitive.
    pytest.param("User-agent: *\nDisallow: /b\n", TOKEN, "/a/b", True, id="anchored-at-start"),
    pytest.param("User-agent: *\nDisallow: b\n", TOKEN, "/b", True, id="no-leading-slash"),
    pytest.param("User-agent: *\nDisallow: /A\n", TOKEN, "/a", True, id="case-sensitive"),
    pytest.param(BAR, TOKEN, "/bar?x=1", False, id="query-is-matched"),
    # Section 5.1 of the RFC, "Simple Example" (the foobot/barbot/bazbot/quxbot file).
    *(
        pytest.param(
            "User-Agent: *\nDisallow: *.gif$\nDisallow: /example/\nAllow: /publications/\n\n"
            "User-Agent: foobot\nDisallow:/\nAllow:/example/page.html\n"
            "Allow:/example/allowed.gif\n\nUser-Agent: barbot\nUser-Agent: bazbot\n"
            "Disallow: /example/page.html\n\nUser-Agent: quxbot\n\nEOF\n",
            token,
            path,
            allowed,
            id=f"rfc-5.1-{token}{path}",
        )
        for token, path, allowed in [
            ("foobot", "/", False),
            ("foobot", "/example/page.html", True),
            ("foobot", "/example/allowed.gif", True),
            ("foobot", "/example/other.gif", False),
            ("barbot", "/example/page.html", False),
            ("bazbot", "/example/page.html", False),
            ("bazbot", "/example/other.html", True),
            ("quxbot", "/example/page.html", True),
            ("otherbot", "/a/b.gif", False),
            ("otherbot", "/example/", False),
            ("otherbot", "/publications/", True),
            ("otherbot", "/a.gifx", True),
        ]
    ),
]

RFC_SPECIAL_CHARACTERS = [
    # 2.2.3: "*" is 0 or more instances of any character.
    pytest.param("User-agent: *\nDisallow: /a*c\n", TOKEN, "/ac", False, id="star-empty"),
    pytest.param("User-agent: *\nDisallow: /a*c\n", TOKEN, "/abbbc/d", False, id="star-many"),
    pytest.param("User-agent: *\nDisallow: /a*c\n", TOKEN, "/ab", True, id="star-no-tail"),
    pytest.param("User-agent: *\nDisallow: /a**c\n", TOKEN, "/axc", False, id="star-star"),
    pytest.param("User-agent: *\nDisallow: *\n", TOKEN, "/x", False, id="star-alone"),
    # A trailing "*" changes nothing: rules are prefix matches anyway.
    pytest.param("User-agent: *\nDisallow: /fish*\n", TOKEN, "/fish", False, id="tail-star-0"),
    pytest.param("User-agent: *\nDisallow: /fish*\n", TOKEN, "/fish.php", False, id="tail-star"),
    pytest.param("User-agent: *\nDisallow: /fish*\n", TOKEN, "/Fish", True, id="tail-star-case"),
    # 2.2.3: "$" designates the end of the match pattern.
    pytest.param("User-agent: *\nDisallow: /a$\n", TOKEN, "/a", False, id="dollar-exact"),
    pytest.param("User-agent: *\nDisallow: /a$\n", TOKEN, "/ab", True, id="dollar-longer"),
    pytest.param("User-agent: *\nDisallow: /a$\n", TOKEN, "/a$", True, id="dollar-not-literal"),
    pytest.param("User-agent: *\nDisallow: /a$\n", TOKEN, "/a$b", True, id="dollar-no-twin"),
    pytest.param("User-agent: *\nDisallow: /a$\n", TOKEN, "/a?x", True, id="dollar-query"),
    pytest.param("User-agent: *\nDisallow: /*.php$\n", TOKEN, "/x/y.php", False, id="star-dollar"),
    pytest.param("User-agent: *\nDisallow: /*.php$\n", TOKEN, "/y.php5", True, id="star-dollar-2"),
    pytest.param("User-agent: *\nDisallow: /*$\n", TOKEN, "/anything", False, id="star-then-end"),
    # A "$" that does not end the pattern is an ordinary character.
    pytest.param("User-agent: *\nDisallow: /a$b\n", TOKEN, "/a$b", False, id="mid-dollar"),
    pytest.param("User-agent: *\nDisallow: /a$b\n", TOKEN, "/a", True, id="mid-dollar-not-end"),
    pytest.param("User-agent: *\nDisallow: /a$b\n", TOKEN, "/a%24bc", False, id="mid-dollar-enc"),
    # "Allow: .../index.html" allows that file only (protego also allowed the directory).
    pytest.param(
        "User-agent: *\nDisallow: /\nAllow: /index.html\n", TOKEN, "/", False, id="no-index-magic"
    ),
    pytest.param(
        "User-agent: *\nDisallow: /\nAllow: /d/index.html\n", TOKEN, "/d/", False, id="index-dir"
    ),
    # 2.2.3: a rule matches a literal "*" or "$" by percent-encoding it.
    pytest.param(
        "User-agent: *\nDisallow: /path/file-with-a-%2A.html\n",
        TOKEN,
        "/path/file-with-a-*.html",
        False,
        id="encoded-star-literal",
    ),
    pytest.param(
        "User-agent: *\nDisallow: /path/file-with-a-%2A.html\n",
        TOKEN,
        "/path/file-with-a-b.html",
        True,
        id="encoded-star-not-wildcard",
    ),
    pytest.param(
        "User-agent: *\nDisallow: /path/foo-%24\n", TOKEN, "/path/foo-$", False, id="enc-dollar"
    ),
    pytest.param(
        "User-agent: *\nDisallow: /path/foo-%24\n", TOKEN, "/path/foo-", True, id="enc-dollar-2"
    ),
]

RFC_PERCENT_ENCODING = [
    # 2.2.2: an escape of an unreserved character is decoded before comparison.
    pytest.param("User-agent: *\nDisallow: /%7Euser\n", TOKEN, "/~user", False, id="rule-7E"),
    pytest.param("User-agent: *\nDisallow: /~user\n", TOKEN, "/%7euser", False, id="path-7e"),
    pytest.param(
        "User-agent: *\nDisallow: /foo/bar/baz\n", TOKEN, "/foo/bar/%62%61%7A", False, id="path-b"
    ),
    pytest.param(
        "User-agent: *\nDisallow: /foo/bar/%62%61%7A\n", TOKEN, "/foo/bar/baz", False, id="rule-b"
    ),
    # 2.2.2: non-ASCII octets are percent-encoded (UTF-8) before comparison; hex case is moot.
    pytest.param("User-agent: *\nDisallow: /foo/ツ\n", TOKEN, "/foo/%E3%83%84", False, id="utf8"),
    pytest.param("User-agent: *\nDisallow: /foo/%E3%83%84\n", TOKEN, "/foo/ツ", False, id="utf8-2"),
    pytest.param(
        "User-agent: *\nDisallow: /foo/%e3%83%84\n", TOKEN, "/foo/%E3%83%84", False, id="hex-case"
    ),
    # 2.2.2: an escape of a reserved character stays encoded: "%2F" is not "/".
    pytest.param("User-agent: *\nDisallow: /a%2Fb\n", TOKEN, "/a/b", True, id="rule-2F-not-/"),
    pytest.param("User-agent: *\nDisallow: /a/b\n", TOKEN, "/a%2Fb", True, id="path-2F-not-/"),
    pytest.param("User-agent: *\nDisallow: /a%2Fb\n", TOKEN, "/a%2fb", False, id="2F-is-2f"),
    pytest.param("User-agent: *\nDisallow: /a%3Fb\n", TOKEN, "/a?b", True, id="3F-not-?"),
    pytest.param("User-agent: *\nDisallow: /a?b\n", TOKEN, "/a%3Fb", True, id="?-not-3F"),
    pytest.param("User-agent: *\nDisallow: /a%3Db\n", TOKEN, "/a=b", True, id="3D-not-="),
    pytest.param("User-agent: *\nDisallow: /a=b\n", TOKEN, "/a=b", False, id="=-is-="),
    # A "%" that does not start an escape is the octet "%" itself.
    pytest.param("User-agent: *\nDisallow: /100%\n", TOKEN, "/100%25", False, id="bare-percent"),
    pytest.param("User-agent: *\nDisallow: /a b\n", TOKEN, "/a%20b", False, id="space"),
]

RFC_LINES = [
    # 2.2: EOL = CR / LF / CRLF.
    pytest.param("User-agent: *\nDisallow: /a\nDisallow: /b\n", TOKEN, "/b", False, id="lf"),
    pytest.param(
        "User-agent: *\r\nDisallow: /a\r\nDisallow: /b\r\n", TOKEN, "/b", False, id="crlf"
    ),
    pytest.param("User-agent: *\rDisallow: /a\rDisallow: /b\r", TOKEN, "/b", False, id="cr"),
    pytest.param("User-agent: *\r\nDisallow: /a\rDisallow: /b\n", TOKEN, "/b", False, id="mixed"),
    pytest.param("User-agent: *\nDisallow: /b", TOKEN, "/b", False, id="no-final-eol"),
    # Nothing else ends a line: NEL / U+2028 inside a value are characters of it.
    pytest.param("User-agent: *\nDisallow: /a\x85b\n", TOKEN, "/a", True, id="nel-not-eol"),
    pytest.param(
        "User-agent: *\nDisallow: /a\u2028Disallow: /b\n", TOKEN, "/b", True, id="u2028-not-eol"
    ),
    pytest.param("User-agent: *\nDisallow: /a\x0cb\n", TOKEN, "/a", True, id="ff-not-eol"),
    # 2.2.3: "#" starts a comment anywhere on a line.
    pytest.param("User-agent: * # all\nDisallow: /a # x\n", TOKEN, "/a", False, id="comment-eol"),
    pytest.param("User-agent: *\nDisallow: /a#b\n", TOKEN, "/a", False, id="comment-in-path"),
    pytest.param("User-agent: *\nDisallow: /a#b\n", TOKEN, "/x", True, id="comment-cut"),
    pytest.param("# Disallow: /a\nUser-agent: *\nAllow: /\n", TOKEN, "/a", True, id="comment-line"),
    pytest.param("User-agent: *\n#Disallow: /a\n", TOKEN, "/a", True, id="commented-rule"),
    pytest.param("User-agent: AtlasBot#x\nDisallow: /\n", TOKEN, "/a", False, id="comment-ua"),
    # 2.2: whitespace around fields and values is ignored.
    pytest.param("  User-agent :  *  \n\tDisallow\t:\t/a\t\n", TOKEN, "/a", False, id="ws"),
    pytest.param("User-agent:*\nDisallow:/a\n", TOKEN, "/a", False, id="no-ws"),
    pytest.param("USER-AGENT: *\nDISALLOW: /a\n", TOKEN, "/a", False, id="field-case"),
    pytest.param("User-agent: *\nDisallow: /a \n", TOKEN, "/ab", False, id="trailing-ws"),
    # 2.2.4: unknown records are ignored; so are lines that are not "field: value".
    pytest.param("User-agent: *\nNoindex: /a\n", TOKEN, "/a", True, id="unknown-record"),
    pytest.param("User-agent: *\nDissallow: /a\n", TOKEN, "/a", True, id="misspelt-record"),
    pytest.param("User agent: *\nDisallow: /a\n", TOKEN, "/a", True, id="misspelt-ua"),
    pytest.param("User-agent: *\nDisallow /a\n", TOKEN, "/a", True, id="no-colon"),
    pytest.param("User-agent *\nDisallow: /a\n", TOKEN, "/a", True, id="ua-no-colon"),
    pytest.param("User-agent: *\ngarbage\nDisallow: /a\n", TOKEN, "/a", False, id="garbage-line"),
    pytest.param(
        "User-agent: *\nSitemap: https://x.test/s.xml\nDisallow: /a\n",
        TOKEN,
        "/a",
        False,
        id="sitemap-in-group",
    ),
    # A byte-order mark before the first line does not hide it.
    pytest.param("\ufeffUser-agent: *\nDisallow: /a\n", TOKEN, "/a", False, id="bom"),
    pytest.param("\ufeffUser-agent: AtlasBot\nDisallow: /a\n", TOKEN, "/a", False, id="bom-ua"),
    # A very long line does not break the lines after it.
    pytest.param(
        "User-agent: *\n#" + "x" * 100_000 + "\nDisallow: /a\n", TOKEN, "/a", False, id="long-cmt"
    ),
    pytest.param(
        "User-agent: *\nDisallow: /" + "x" * 100_000 + "\nDisallow: /a\n",
        TOKEN,
        "/a",
        False,
        id="long-rule-then-rule",
    ),
    pytest.param(
        "User-agent: *\nDisallow: /" + "x" * 100_000 + "\n",
        TOKEN,
        "/" + "x" * 100_000,
        False,
        id="long-rule-matches",
    ),
    pytest.param(
        "User-agent: OtherBot\nDisallow: /" + "x" * 100_000 + "\nUser-agent: AtlasBot\n"
        "Disallow: /a\n",
        TOKEN,
        "/a",
        False,
        id="long-line-then-group",
    ),
]

RFC_ROBOTS_TXT = [
    # 2.2.2: /robots.txt is implicitly allowed, whatever the rules say.
    pytest.param("User-agent: *\nDisallow: /\n", TOKEN, "/robots.txt", True, id="robots-star"),
    pytest.param("User-agent: AtlasBot\nDisallow: /robots.txt\n", TOKEN, "/robots.txt", True),
    pytest.param("User-agent: *\nDisallow: /\n", TOKEN, "/robots.txt?x=1", True, id="robots-qs"),
    pytest.param("User-agent: *\nDisallow: /\n", TOKEN, "/robots.txt/x", False, id="robots-sub"),
    pytest.param("User-agent: *\nDisallow: /\n", TOKEN, "/a/robots.txt", False, id="robots-deep"),
]


FOO_THEN_STAR = "User-agent: FooBot\n{between}User-agent: *\nDisallow: /a\n"
FOO_RULES_THEN_BAR = "User-agent: FooBot\nDisallow: /a\n{between}User-agent: BarBot\nDisallow: /b\n"

RFC_GROUPING_RECORDS = [
    # 2.2.4: other records "MUST NOT interfere" with grouping: between two User-agent lines
    # they leave one group (issue 20: an unknown line left FooBot an empty group, allow-all).
    *(
        pytest.param(FOO_THEN_STAR.format(between=between), token, "/a", False, id=name)
        for token in ("FooBot", "OtherBot")
        for name, between in [
            (f"unknown-between-user-agents-{token}", "Invalid-Unknown-Line: x\n"),
            (f"sitemap-between-user-agents-{token}", "Sitemap: https://x.test/s.xml\n"),
            (f"host-between-user-agents-{token}", "Host: x.test\n"),
            (f"misspelt-between-user-agents-{token}", "Dissallow: /z\n"),
            (f"comment-between-user-agents-{token}", "# FooBot too\n"),
            (f"blank-between-user-agents-{token}", "\n\n"),
            (f"mixed-between-user-agents-{token}", "\nFoo: x\n# c\nSitemap: /s.xml\n\n"),
            (f"no-colon-between-user-agents-{token}", "garbage\n"),
        ]
    ),
    pytest.param(
        FOO_THEN_STAR.format(between="Invalid-Unknown-Line: x\n"),
        "FooBot",
        "/b",
        True,
        id="unknown-between-user-agents-only-the-group-rules",
    ),
    # ... while after a rule, a User-agent line starts a new group whatever came between.
    *(
        pytest.param(FOO_RULES_THEN_BAR.format(between=between), token, path, allowed, id=name)
        for label, between in [
            ("unknown", "Invalid-Unknown-Line: x\n"),
            ("sitemap", "Sitemap: https://x.test/s.xml\n"),
            ("blank", "\n"),
            ("none", ""),
        ]
        for token, path, allowed, name in [
            ("FooBot", "/a", False, f"{label}-after-rules-foo-keeps-its-rule"),
            ("FooBot", "/b", True, f"{label}-after-rules-foo-not-bar-rule"),
            ("BarBot", "/a", True, f"{label}-after-rules-bar-not-foo-rule"),
            ("BarBot", "/b", False, f"{label}-after-rules-bar-keeps-its-rule"),
        ]
    ),
    # Other records between rules do not end the group either.
    pytest.param(
        "User-agent: FooBot\nDisallow: /a\nFoo: x\nSitemap: /s.xml\nDisallow: /b\n",
        "FooBot",
        "/b",
        False,
        id="unknown-between-rules-same-group",
    ),
    # An empty "Disallow:" is still a rule line (2.2 ABNF empty-pattern): a group ends after it.
    pytest.param(
        "User-agent: FooBot\nDisallow:\nUser-agent: *\nDisallow: /\n",
        "FooBot",
        "/a",
        True,
        id="empty-disallow-is-a-rule-line",
    ),
    # Crawl-delay is read per group here, so it is a group member (seed behaviour, see the
    # crawl-delay table): a User-agent line after it starts a new group.
    pytest.param(
        "User-agent: FooBot\nCrawl-delay: 1\nUser-agent: *\nDisallow: /\n",
        "FooBot",
        "/a",
        True,
        id="crawl-delay-is-a-group-member",
    ),
    # A User-agent line naming no product token still joins the run or ends the group.
    pytest.param(
        "User-agent: FooBot\nUser-agent: Bot2000\nDisallow: /a\n",
        "FooBot",
        "/a",
        False,
        id="tokenless-user-agent-in-run",
    ),
    pytest.param(
        "User-agent: FooBot\nDisallow: /a\nUser-agent: 2000\nDisallow: /b\n",
        "FooBot",
        "/b",
        True,
        id="tokenless-user-agent-ends-group",
    ),
]

BOT = "User-agent: Bot\nDisallow: /\n"
BOT_OR_STAR = "User-agent: Bot\nAllow: /\n\nUser-agent: *\nDisallow: /\n"

RFC_PRODUCT_TOKENS = [
    # 2.2.1: the product token is [a-zA-Z_-]+ and is matched whole: "Bot2000" is not "Bot".
    pytest.param(BOT, "Bot", "/a", False, id="bot-binds-bot"),
    pytest.param(BOT, "Bot2000", "/a", True, id="bot2000-not-bot"),
    pytest.param(BOT, "Bot2000/1.0", "/a", True, id="bot2000-version-not-bot"),
    pytest.param(BOT_OR_STAR, "Bot2000", "/a", False, id="bot2000-falls-back-to-star"),
    pytest.param(BOT_OR_STAR, "Bot", "/a", True, id="bot-own-group-over-star"),
    pytest.param(BOT, "Bot2", "/a", True, id="bot2-not-bot"),
    pytest.param(BOT, "2Bot", "/a", True, id="2bot-not-bot"),
    pytest.param(BOT, "B\u00f6t", "/a", True, id="non-ascii-not-b"),
    pytest.param(BOT, "Bot Two", "/a", True, id="token-with-space-not-bot"),
    # ... and on the line side: "User-agent: Bot2000" names no crawler, not "Bot".
    pytest.param("User-agent: Bot2000\nDisallow: /\n", "Bot", "/a", True, id="line-bot2000"),
    pytest.param(
        "User-agent: Bot2000\nAllow: /\n\nUser-agent: *\nDisallow: /\n",
        "Bot",
        "/a",
        False,
        id="line-bot2000-not-over-star",
    ),
    pytest.param("User-agent: B\u00f6tli\nDisallow: /\n", "B", "/a", True, id="line-non-ascii"),
    pytest.param(
        "User-agent: B\u00f6tli\nDisallow: /a\n\nUser-agent: *\nDisallow: /\n",
        "B\u00f6tli",
        "/b",
        False,
        id="non-ascii-token-only-star",
    ),
    pytest.param(
        "User-agent: Bot2000\nAllow: /\n\nUser-agent: *\nDisallow: /\n",
        "Bot2000",
        "/a",
        False,
        id="bot2000-token-only-star",
    ),
    # 2.2.1: case-insensitive, on either side.
    pytest.param("User-agent: bot\nDisallow: /\n", "Bot", "/a", False, id="line-lower"),
    pytest.param("User-agent: BOT\nDisallow: /\n", "bot", "/a", False, id="line-upper"),
    pytest.param("User-agent: bOt\nDisallow: /\n", "BoT/1.0", "/a", False, id="mixed-case"),
    # "-" and "_" are part of the token: "Bot-Two" is another crawler than "Bot".
    pytest.param("User-agent: Bot-Two\nDisallow: /\n", "Bot", "/a", True, id="bot-two-not-bot"),
    pytest.param(BOT, "Bot-Two", "/a", True, id="bot-not-bot-two"),
    pytest.param("User-agent: Bot-Two\nDisallow: /\n", "bot-two", "/a", False, id="bot-two-binds"),
    pytest.param("User-agent: Bot_Two\nDisallow: /\n", "Bot", "/a", True, id="bot_two-not-bot"),
    pytest.param(
        "User-agent: Atlas_Bot-x\nDisallow: /\n",
        "Atlas_Bot-x/2.1",
        "/a",
        False,
        id="underscore-dash-token",
    ),
    # What follows the token on the line (a version, a comment, a wildcard) is not part of
    # it, as in Google's robotstxt: the line still names AtlasBot.
    pytest.param("User-agent: AtlasBot 1.0\nDisallow: /\n", TOKEN, "/a", False, id="ua-ws-ver"),
    pytest.param(
        "User-agent: AtlasBot (+https://x.test)\nDisallow: /\n",
        TOKEN,
        "/a",
        False,
        id="ua-comment-after",
    ),
    pytest.param("User-agent: AtlasBot*\nDisallow: /\n", TOKEN, "/a", False, id="ua-star-after"),
    pytest.param(
        "User-agent: AtlasBot/1.0\nDisallow: /\n", "AtlasBot/2.0", "/a", False, id="both-version"
    ),
]


@pytest.mark.parametrize(
    ("text", "token", "path", "allowed"),
    RFC_GROUPS
    + RFC_MATCHING
    + RFC_SPECIAL_CHARACTERS
    + RFC_PERCENT_ENCODING
    + RFC_LINES
    + RFC_ROBOTS_TXT
    + RFC_GROUPING_RECORDS
    + RFC_PRODUCT_TOKENS,
)
def test_rfc9309(text: str, token: str, path: str, allowed: bool) -> None:
    assert allows(text, path, token) is allowed


@pytest.mark.parametrize(
    ("body", "max_bytes", "path", "allowed"),
    [
        # Only the first max_bytes are parsed.
        (b"User-agent: *\nDisallow: /a\nDisallow: /b\n", 27, "/a", False),
        (b"User-agent: *\nDisallow: /a\nDisallow: /b\n", 27, "/b", True),
        (b"User-agent: *\nDisallow: /a\nDisallow: /b\n", 1024, "/b", False),
        # A line cut by the limit is dropped rather than read as a shorter rule.
        (b"User-agent: *\nDisallow: /\nAllow: /public-docs\n", 34, "/pub", False),
        (b"User-agent: *\nDisallow: /\nAllow: /public-docs\n", 34, "/public-docs", False),
        (b"User-agent: *\nDisallow: /\nAllow: /public-docs\n", 46, "/public-docs", True),
        (b"User-agent: *\r\nDisallow: /a\r\n", 28, "/a", False),  # cut inside CRLF
        # A byte-order mark is stripped; CR-only files decode line by line.
        (b"\xef\xbb\xbfUser-agent: AtlasBot\rDisallow: /a\r", 1024, "/a", False),
        # A 100 KB line cut by the limit is dropped whole; the lines before it stand.
        (b"User-agent: *\nDisallow: /a" + b"a" * 100_000 + b"\n", 1024, "/a", True),
    ],
)
def test_decode_then_match(body: bytes, max_bytes: int, path: str, allowed: bool) -> None:
    assert allows(decode_robots(body, max_bytes), path) is allowed


def test_decode_never_exceeds_max_bytes() -> None:
    body = ("User-agent: *\n" + "Disallow: /é\n" * 1000).encode()
    for limit in (0, 1, 15, 16, 17, 500, len(body) - 1, len(body)):
        assert len(decode_robots(body, limit).encode()) <= limit


@pytest.mark.parametrize(
    ("user_agent", "token"),
    [
        ("AtlasBot/1.0 (+https://atlas.example.test/bot)", "AtlasBot"),
        ("AtlasBot", "AtlasBot"),
        ("  AtlasBot /1.0", "AtlasBot"),
        ("Atlas_Bot-x/2.1", "Atlas_Bot-x"),
        ("Bot2000/1.0", None),  # RFC 9309 2.2.1: [a-zA-Z_-]+, whole
        ("Bot2000", None),
        ("B\u00f6tli/1.0", None),
        ("Atlas Bot/1.0", None),
        ("/1.0", None),
        ("", None),
        ("*", None),
    ],
)
def test_crawler_token(user_agent: str, token: str | None) -> None:
    assert crawler_token(user_agent) == token
