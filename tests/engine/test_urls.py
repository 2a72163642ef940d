"""URL identity (seed 000 ch. 6): conservative RFC 3986 normalization, origins and shards."""

from __future__ import annotations

import pytest

from atlas_pipeline.urls import (
    BadUrl,
    host_of,
    normalize,
    origin_of,
    path_of,
    remove_dot_segments,
    shard_index,
    shard_key,
    shard_of,
)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        # the seed's worked example: scheme/host case, default port, fragment, utm_*
        (
            "HTTP://News-A.example.test:80/articles/chip-supply?utm_source=x#top",
            "http://news-a.example.test/articles/chip-supply",
        ),
        ("https://Example.TEST/a", "https://example.test/a"),
        ("https://example.test:443/a", "https://example.test/a"),
        ("http://example.test:80/a", "http://example.test/a"),
        ("http://example.test:443/a", "http://example.test:443/a"),  # not http's default
        ("https://example.test:8443/a", "https://example.test:8443/a"),
        ("http://example.test/a#comments", "http://example.test/a"),
        ("http://example.test/a?x=1#frag", "http://example.test/a?x=1"),
        # dot segments (RFC 3986 5.2.4)
        ("http://example.test/a/../a", "http://example.test/a"),
        ("http://example.test/a/./b/../c", "http://example.test/a/c"),
        ("http://example.test/../../a", "http://example.test/a"),
        ("http://example.test/a/b/..", "http://example.test/a/"),
        ("http://example.test/a/.", "http://example.test/a/"),
        ("http://example.test/a//../b", "http://example.test/a/b"),
        # percent-encoding: hex uppercased, unreserved decoded, reserved kept encoded
        ("http://example.test/%7euser", "http://example.test/~user"),
        ("http://example.test/a%2db%5F", "http://example.test/a-b_"),
        ("http://example.test/a%2fb", "http://example.test/a%2Fb"),
        ("http://example.test/a?q=%7e%3d", "http://example.test/a?q=~%3D"),
        ("http://example.test/a b", "http://example.test/a%20b"),
        ("http://example.test/caf\u00e9", "http://example.test/caf%C3%A9"),
        ("http://example.test/100%", "http://example.test/100%25"),
        # empty path
        ("http://example.test", "http://example.test/"),
        ("http://example.test?x=1", "http://example.test/?x=1"),
        # path case kept, query order kept, unknown parameters kept
        ("http://example.test/Docs/Setup", "http://example.test/Docs/Setup"),
        ("http://example.test/a?b=2&a=1", "http://example.test/a?b=2&a=1"),
        ("http://example.test/article?id=7", "http://example.test/article?id=7"),
        ("http://example.test/a?ref=x&session=Y", "http://example.test/a?ref=x&session=Y"),
        # tracking parameters removed, whatever their position or case
        (
            "http://example.test/a?utm_source=x&id=7&gclid=1&fbclid=2&UTM_Medium=y",
            "http://example.test/a?id=7",
        ),
        ("http://example.test/a?utm_campaign=z", "http://example.test/a"),
        ("http://example.test/a?fbclid=1&b=2", "http://example.test/a?b=2"),
        ("http://example.test/a?utmost=1", "http://example.test/a?utmost=1"),
        # IDNA -> punycode; trailing root dot dropped
        ("http://b\u00fccher.example/x", "http://xn--bcher-kva.example/x"),
        ("http://B\u00dcCHER.example/x", "http://xn--bcher-kva.example/x"),
        ("http://example.test./a", "http://example.test/a"),
        # IPv6 literal keeps its brackets; default port still dropped
        ("http://[::1]:80/", "http://[::1]/"),
        ("http://[::1]:8080/x", "http://[::1]:8080/x"),
        # IDNA turns ideographic / fullwidth full stops into '.'; a trailing one is the root dot
        ("http://example\u3002test\u3002/a", "http://example.test/a"),
        ("http://b\u00fccher\uff0eexample\uff0e/a", "http://xn--bcher-kva.example/a"),
        # a decoded escape never forms a new escape: '%%41' is a bare '%' then 'A'
        ("http://example.test/a%%41b", "http://example.test/a%25Ab"),
        ("http://example.test/a?q=%%2e", "http://example.test/a?q=%25."),
        # tracking keys are recognised after decoding
        ("http://example.test/a?utm%5Fsource=x&id=1", "http://example.test/a?id=1"),
        ("http://example.test/a?%67clid=x&id=1", "http://example.test/a?id=1"),
        # whitespace the WHATWG parser drops
        ("  http://example.test/a\n", "http://example.test/a"),
        ("http://exam\tple.test/a", "http://example.test/a"),
    ],
)
def test_normalize_table(raw: str, expected: str) -> None:
    assert normalize(raw) == expected


@pytest.mark.parametrize(
    ("href", "base", "expected"),
    [
        ("../c/d?x=1#f", "http://example.test/a/b/e.html", "http://example.test/a/c/d?x=1"),
        ("../../../../g", "http://example.test/a/b/c", "http://example.test/g"),
        ("g", "http://example.test/a/b/c", "http://example.test/a/b/g"),
        ("./g/", "http://example.test/a/b/c", "http://example.test/a/b/g/"),
        ("/g", "http://example.test/a/b/c", "http://example.test/g"),
        ("//other.test/p", "https://example.test/a", "https://other.test/p"),
        ("?q=1", "https://example.test/a/b", "https://example.test/a/b?q=1"),
        ("#frag", "https://example.test/a/b?x=1", "https://example.test/a/b?x=1"),
        ("HTTPS://Other.TEST:443/Z", "http://example.test/", "https://other.test/Z"),
    ],
)
def test_relative_links_resolve_against_base(href: str, base: str, expected: str) -> None:
    assert normalize(href, base) == expected


@pytest.mark.parametrize(
    "raw",
    [
        "HTTP://B\u00fccher.Example:80/a/./b/%7e/../c?utm_x=1&k=%2f#f",
        "http://example.test/%%41a",
        "http://example.test/?%%41a=%%4",
        "http://example.test/?utm%5Fsource=1",
        "http://example\u3002test\u3002/",
        "http://example.test/%2e%2E/x/%2E/",
        "http://example.test/a b/\u00e9?q=a b&r=\u00e9",
    ],
)
def test_normalize_is_idempotent(raw: str) -> None:
    once = normalize(raw)
    assert normalize(once) == once


@pytest.mark.parametrize(
    "raw",
    [
        "mailto:someone@example.test",
        "javascript:alert(1)",
        "ftp://example.test/file",
        "data:text/html,hi",
        "tel:+123",
        "/relative/without/base",
        "//example.test/no-scheme",
        "http:///no-host",
        "http://",
        "http://example.test:99999/",
        "http://example.test:abc/",
        "http://example.test:-1/",
        "http://[::1/",
        "http://exa mple.test/",  # not a host name
        "http://exa%41mple.test/",
        "http://a\\b.test/",
        "http://\u3002/",  # only a root dot
        "http://a..b.test/",
        "http://example.test/\ud800",  # lone surrogate: cannot be percent-encoded
    ],
)
def test_uncrawlable_urls_are_bad(raw: str) -> None:
    with pytest.raises(BadUrl):
        normalize(raw)


@pytest.mark.parametrize(
    "href", ["http://[::1", "//[x", "//[not-an-ip]/", "x", "https://[a.test]/", "\ud800"]
)
def test_malformed_links_against_a_base_are_bad_urls(href: str) -> None:
    # A page can contain any href: it must come back as BadUrl, never a bare ValueError.
    base = "http://[oops/" if href == "x" else "http://example.test/a/"
    with pytest.raises(BadUrl):
        normalize(href, base)


def test_bad_url_is_a_value_error() -> None:
    assert issubclass(BadUrl, ValueError)


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/a/b/c/./../../g", "/a/g"),
        ("/mid/content=5/../6", "/mid/6"),
        ("/..", "/"),
        ("/.", "/"),
        ("/a/b/", "/a/b/"),
        ("", "/"),
    ],
)
def test_remove_dot_segments_rfc_examples(path: str, expected: str) -> None:
    assert remove_dot_segments(path) == expected


@pytest.mark.parametrize(
    ("url", "origin"),
    [
        ("http://a.test/x", "http://a.test:80"),
        ("https://a.test/", "https://a.test:443"),
        ("http://a.test:8080/x?y", "http://a.test:8080"),
        ("HTTPS://A.Test/x", "https://a.test:443"),
        ("https://a.test:443/x", "https://a.test:443"),
        ("http://[::1]/", "http://[::1]:80"),
        ("http://[::1]:8080/", "http://[::1]:8080"),
    ],
)
def test_origin_always_has_an_explicit_port(url: str, origin: str) -> None:
    assert origin_of(url) == origin


def test_origin_of_a_normalized_url_keeps_the_dropped_default_port() -> None:
    assert origin_of(normalize("https://a.test:443/x")) == origin_of("https://a.test/y")


def test_host_and_path_of() -> None:
    assert host_of("https://A.Test:8443/x") == "a.test"
    assert path_of("https://a.test/a/b?x=1&y") == "/a/b?x=1&y"
    assert path_of("https://a.test") == "/"


# Computed once from sha1; if the hash changes every origin moves shard, so this must fail.
@pytest.mark.parametrize(
    ("origin", "shards", "expected"),
    [
        ("https://news-a.example.test:443", 4, 3),
        ("https://news-a.example.test:443", 16, 15),
        ("https://news-a.example.test:443", 1024, 623),
        ("https://news-a.example.test:443", 1_000_003, 878586),
        ("http://docs-b.example.test:80", 4, 2),
        ("http://docs-b.example.test:80", 1024, 222),
        ("http://docs-b.example.test:80", 1_000_003, 129796),
        ("https://store-c.example.test:443", 4, 3),
        ("https://store-c.example.test:443", 1024, 835),
        ("https://store-c.example.test:443", 1_000_003, 762119),
        ("http://127.0.0.1:8080", 1024, 846),
    ],
)
def test_shard_of_is_stable(origin: str, shards: int, expected: int) -> None:
    assert shard_of(origin, shards) == expected


@pytest.mark.parametrize("shards", [1, 2, 3, 7, 64])
def test_shard_of_is_in_range_and_uses_every_shard(shards: int) -> None:
    seen = {shard_of(f"https://host{i}.example.test:443", shards) for i in range(500)}
    assert seen == set(range(shards))


def test_shard_key_round_trips() -> None:
    assert shard_key(3) == "shard_003"
    assert shard_key(1023) == "shard_1023"
    assert shard_index(shard_key(7)) == 7
    assert shard_index("shard_1023") == 1023


@pytest.mark.parametrize("key", ["shard_1", "shard-001", "001", "shard_00x", "Shard_001"])
def test_shard_index_rejects_malformed_keys(key: str) -> None:
    with pytest.raises(ValueError, match="shard_000"):
        shard_index(key)
