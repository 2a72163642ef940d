"""URL identity (seed 000 ch. 6): conservative RFC 3986 normalization, origins and shards."""

from __future__ import annotations

import ipaddress
from urllib.parse import urljoin

import pytest

from atlas_pipeline.egress import url_host
from atlas_pipeline.urls import (
    NO_TRACKING,
    BadUrl,
    Parts,
    TrackingParams,
    TrackingPolicy,
    UncrawlableScheme,
    UserinfoRefused,
    canonical_host,
    has_userinfo,
    host_of,
    normalize,
    origin_of,
    path_of,
    recompose,
    redact_userinfo,
    remove_dot_segments,
    resolve,
    shard_index,
    shard_key,
    shard_of,
    split,
)

# --- RFC 3986 section 5.4: reference resolution examples ---------------------------------------

RFC_BASE = "http://a/b/c/d;p?q"

# Section 5.4.1, every normal example.
RFC_NORMAL = [
    ("g:h", "g:h"),
    ("g", "http://a/b/c/g"),
    ("./g", "http://a/b/c/g"),
    ("g/", "http://a/b/c/g/"),
    ("/g", "http://a/g"),
    ("//g", "http://g"),
    ("?y", "http://a/b/c/d;p?y"),
    ("g?y", "http://a/b/c/g?y"),
    ("#s", "http://a/b/c/d;p?q#s"),
    ("g#s", "http://a/b/c/g#s"),
    ("g?y#s", "http://a/b/c/g?y#s"),
    (";x", "http://a/b/c/;x"),
    ("g;x", "http://a/b/c/g;x"),
    ("g;x?y#s", "http://a/b/c/g;x?y#s"),
    ("", "http://a/b/c/d;p?q"),
    (".", "http://a/b/c/"),
    ("./", "http://a/b/c/"),
    ("..", "http://a/b/"),
    ("../", "http://a/b/"),
    ("../g", "http://a/b/g"),
    ("../..", "http://a/"),
    ("../../", "http://a/"),
    ("../../g", "http://a/g"),
]

# Section 5.4.2, every abnormal example; "http:g" takes the strict parser's result.
RFC_ABNORMAL = [
    ("../../../g", "http://a/g"),
    ("../../../../g", "http://a/g"),
    ("/./g", "http://a/g"),
    ("/../g", "http://a/g"),
    ("g.", "http://a/b/c/g."),
    (".g", "http://a/b/c/.g"),
    ("g..", "http://a/b/c/g.."),
    ("..g", "http://a/b/c/..g"),
    ("./../g", "http://a/b/g"),
    ("./g/.", "http://a/b/c/g/"),
    ("g/./h", "http://a/b/c/g/h"),
    ("g/../h", "http://a/b/c/h"),
    ("g;x=1/./y", "http://a/b/c/g;x=1/y"),
    ("g;x=1/../y", "http://a/b/c/y"),
    ("g?y/./x", "http://a/b/c/g?y/./x"),
    ("g?y/../x", "http://a/b/c/g?y/../x"),
    ("g#s/./x", "http://a/b/c/g#s/./x"),
    ("g#s/../x", "http://a/b/c/g#s/../x"),
    ("http:g", "http:g"),
]
RFC_EXAMPLES = RFC_NORMAL + RFC_ABNORMAL


def test_the_rfc_tables_are_complete() -> None:
    # 23 normal and 19 abnormal examples in RFC 3986 sections 5.4.1 and 5.4.2
    assert (len(RFC_NORMAL), len(RFC_ABNORMAL)) == (23, 19)
    assert len(dict(RFC_EXAMPLES)) == 42


@pytest.mark.parametrize(("reference", "target"), RFC_EXAMPLES)
def test_resolve_matches_rfc_3986_examples(reference: str, target: str) -> None:
    assert resolve(reference, RFC_BASE) == target


@pytest.mark.parametrize(("reference", "target"), RFC_EXAMPLES)
def test_normalize_resolves_rfc_3986_examples(reference: str, target: str) -> None:
    # the same targets, canonical: the fragment goes; "g:h" and "http:g" name no http(s) host
    if reference == "g:h":
        with pytest.raises(UncrawlableScheme):
            normalize(reference, RFC_BASE)
    elif reference == "http:g":
        with pytest.raises(BadUrl, match="no host"):
            normalize(reference, RFC_BASE)
    else:
        canonical = target.partition("#")[0]
        canonical += "/" if canonical == "http://g" else ""  # an empty path is "/"
        assert normalize(reference, RFC_BASE) == canonical


def test_urljoin_differs_from_the_strict_parser_only_on_http_g() -> None:
    # Why urls.py implements section 5.2.2 itself instead of calling urllib's urljoin.
    differs = [ref for ref, target in RFC_EXAMPLES if urljoin(RFC_BASE, ref) != target]
    assert differs == ["http:g"]
    assert urljoin(RFC_BASE, "http:g") == "http://a/b/c/g"  # the "backward compatible" reading


@pytest.mark.parametrize(
    ("reference", "base", "target"),
    [
        ("g", "http://a", "http://a/g"),  # 5.2.3: authority and empty base path -> "/g"
        ("?y", "http://a", "http://a?y"),
        ("g", "http://a/b/c/d;p?q#f", "http://a/b/c/g"),  # the base's fragment is ignored
        ("#s", "http://a/b?q#f", "http://a/b?q#s"),
        ("HTTPS:g", "http://a/b/c/d;p?q", "HTTPS:g"),
        ("1a:b", "http://a/b/c/d", "http://a/b/c/1a:b"),  # not a scheme: a relative path
        ("../g", "http://a/b/../c/d", "http://a/g"),  # the merged path loses the base's dots
        ("", "http://a/b/../c/d", "http://a/b/../c/d"),
    ],
)
def test_resolve_edge_cases(reference: str, base: str, target: str) -> None:
    assert resolve(reference, base) == target


def test_resolve_needs_an_absolute_base() -> None:
    with pytest.raises(BadUrl, match="absolute"):
        resolve("g", "/b/c")
    with pytest.raises(BadUrl, match="absolute"):
        normalize("g", "//a/b/c")


@pytest.mark.parametrize(
    ("reference", "parts"),
    [
        ("http://a/b?q#f", Parts("http", "a", "/b", "q", "f")),
        ("//a", Parts(None, "a", "", None, None)),
        ("?", Parts(None, None, "", "", None)),
        ("#", Parts(None, None, "", None, "")),
        ("a:b:c", Parts("a", None, "b:c", None, None)),
        ("", Parts(None, None, "", None, None)),
        ("a b:c", Parts(None, None, "a b:c", None, None)),
    ],
)
def test_split_and_recompose_round_trip(reference: str, parts: Parts) -> None:
    assert split(reference) == parts
    assert recompose(parts) == reference


# --- RFC 3986 section 6.2.2 (and 6.2.3): equivalent spellings -----------------------------------

EQUIVALENT = {
    "6.2.2.1 case of scheme, host and percent-encoding hex": [
        "HTTP://www.EXAMPLE.com/",
        "http://www.example.com/",
        "hTtP://WWW.example.COM/",
    ],
    "6.2.2.1 hex digits of an escape": [
        "http://example.com/a%3Ab?x=%2f",
        "http://example.com/a%3ab?x=%2F",
        "http://example.com/a%3ab?x=%2f",
    ],
    "6.2.2.2 unreserved characters decoded": [
        "http://example.com/~smith/home.html",
        "http://example.com/%7Esmith/home.html",
        "http://example.com/%7esmith/%68ome%2Ehtml",
    ],
    "6.2.2.3 dot segments": [
        "http://example.com/a/b/c",
        "http://example.com/a/./b/c",
        "http://example.com/a/x/../b/c",
        "http://example.com/../a/b/./c",
        "http://example.com/a/b/%2E/c",
        "http://example.com/a/%2e%2E/a/b/c",
    ],
    "6.2.2 the RFC's combined example": [
        "http://a/b/c/%7Bfoo%7D",
        "hTTP://a/./b/../b/%63/%7bfoo%7d",
    ],
    "6.2.3 default port and empty path": [
        "http://example.com",
        "http://example.com/",
        "http://example.com:/",
        "http://example.com:80/",
        "http://example.com:0080",
    ],
    "6.2.3 https default port": [
        "https://example.com/",
        "https://example.com:443",
        "HTTPS://Example.Com:443/",
    ],
    "fragment": [
        "http://example.com/a?q=1",
        "http://example.com/a?q=1#top",
        "http://example.com/a?q=1#",
    ],
    "IDNA 2008 / UTS 46 host": [
        "http://xn--strae-oqa.de/",
        "http://stra\u00dfe.de/",
        "http://STRA\u00dfE.de/",
        "http://stra%C3%9Fe.de/",
    ],
}


@pytest.mark.parametrize("rule", sorted(EQUIVALENT))
def test_equivalent_spellings_share_one_canonical_form(rule: str) -> None:
    forms = {normalize(u) for u in EQUIVALENT[rule]}
    assert len(forms) == 1, forms
    (form,) = forms
    assert normalize(form) == form


DISTINCT = {
    "path case": [
        "http://e.test/Docs/Setup",
        "http://e.test/docs/setup",
        "http://e.test/DOCS/setup",
    ],
    "query value": ["http://e.test/article?id=7", "http://e.test/article?id=8"],
    "query order": ["http://e.test/a?x=1&y=2", "http://e.test/a?y=2&x=1"],
    "unknown parameter": ["http://e.test/a?ref=x", "http://e.test/a"],
    "reserved escapes": [
        "http://e.test/a/b",
        "http://e.test/a%2Fb",
        "http://e.test/a?k=1&b=2",
        "http://e.test/a?k=1%26b=2",
        "http://e.test/a?k=1%26b%3D2",
        "http://e.test/a?k%3D1",
        "http://e.test/a?k=1",
    ],
    "plus and space": [
        "http://e.test/a?q=a+b",
        "http://e.test/a?q=a%20b",
        "http://e.test/a?q=a%2Bb",
    ],
    "trailing slash": ["http://e.test/a", "http://e.test/a/"],
    "empty parameter": ["http://e.test/a?x=1&&y=2", "http://e.test/a?x=1&y=2"],
    "scheme": ["http://e.test/", "https://e.test/"],
    "port": ["http://e.test/", "http://e.test:443/", "http://e.test:8080/"],
    "empty query (section 6.2.3)": ["http://e.test/", "http://e.test/?", "http://e.test/?&"],
    "empty query of a path": ["http://e.test/a", "http://e.test/a?", "http://e.test/a?="],
    "path case in unicode": ["http://e.test/\u00c9", "http://e.test/\u00e9"],
}


@pytest.mark.parametrize("what", sorted(DISTINCT))
def test_spellings_that_may_be_different_pages_stay_distinct(what: str) -> None:
    urls = DISTINCT[what]
    assert len({normalize(u) for u in urls}) == len(urls)


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
        # IDNA 2008 / UTS 46 -> punycode ('\u00df' is not 'ss', as the IDNA 2003 codec has it)
        ("http://stra\u00dfe.de/", "http://xn--strae-oqa.de/"),
        ("http://b\u00fccher.example/x", "http://xn--bcher-kva.example/x"),
        ("http://B\u00dcCHER.example/x", "http://xn--bcher-kva.example/x"),
        ("http://example.test./a", "http://example.test/a"),
        # IPv6 literal keeps its brackets; default port still dropped
        ("http://[::1]:80/", "http://[::1]/"),
        ("http://[::1]:8080/x", "http://[::1]:8080/x"),
        # hosts read as the egress gate reads them: escapes decoded, IPv4 in any spelling
        ("http://exa%4Dple.test/", "http://example.test/"),
        ("http://0x7f.1:8080/", "http://127.0.0.1:8080/"),
        ("http://2130706433/", "http://127.0.0.1/"),
        ("http://0177.0.0.1./", "http://127.0.0.1/"),
        ("http://\uff11\uff12\uff17.0.0.1/", "http://127.0.0.1/"),
        ("http://[0:0:0:0:0:0:0:1]/", "http://[::1]/"),
        ("http://[::FFFF:127.0.0.1]/", "http://[::ffff:7f00:1]/"),
        ("http://[2001:DB8:0:0:1:0:0:1]/", "http://[2001:db8::1:0:0:1]/"),
        # userinfo: an empty one goes (a named one is refused: USERINFO_REFUSED)
        ("http://@e.test/", "http://e.test/"),
        # ports: leading zeros, an empty port
        ("http://e.test:08080/", "http://e.test:8080/"),
        ("http://e.test:/", "http://e.test/"),
        # query: reserved escapes and '+' kept, empty pieces kept, a bare '?' kept (6.2.3)
        ("http://e.test/a?q=%26%3d+x&&r", "http://e.test/a?q=%26%3D+x&&r"),
        ("http://e.test/a?", "http://e.test/a?"),
        ("http://e.test/a?&utm_source=x", "http://e.test/a"),
        ("http://e.test/a?msclkid=1&_ga=2&mc_eid=3&k", "http://e.test/a?k"),
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
        "http://a\\b.test/",
        "http://\u3002/",  # only a root dot
        "http://a..b.test/",
        "http://example.test/\ud800",  # lone surrogate: cannot be percent-encoded
        "http://127.0.0.1:80\\@www.example.com/",  # WHATWG: host 127.0.0.1; RFC: www.example.com
        "http://e.test:65536/",
        "http://[fe80::1%25eth0]/",  # a zone id
        "http://[::1]x/",
        "http://e.test.123/",  # ends in a number but is no IPv4 address
        "http://1.2.3.4.5/",
        "http://a*b.test/",  # WHATWG allows it, no resolver answers it
        "http://e.test%2F.evil/",
        "http:g",  # strict RFC 3986: scheme "http", no authority
        "http:/e.test/a",
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
    assert issubclass(UncrawlableScheme, BadUrl)


def test_a_port_of_thousands_of_digits_is_a_bad_url() -> None:
    # int() refuses strings over 4300 digits with a bare ValueError; the length check comes first
    with pytest.raises(BadUrl, match="bad port"):
        normalize("http://e.test:1" + "0" * 5000 + "/")


@pytest.mark.parametrize(
    ("raw", "scheme_problem"),
    [
        ("mailto:x@e.test", True),
        ("ftp://e.test/", True),
        ("/no/base", True),
        ("http://e.test:abc/", False),
        ("http:g", False),
        ("http://a..b.test/", False),
        ("http://scheme.test:abc/", False),  # the word in the URL does not make it a scheme problem
    ],
)
def test_only_scheme_problems_raise_uncrawlable_scheme(raw: str, scheme_problem: bool) -> None:
    with pytest.raises(BadUrl) as info:
        normalize(raw)
    assert isinstance(info.value, UncrawlableScheme) is scheme_problem


# --- issue 20: empty components keep their delimiter, userinfo is refused -----------------------

# RFC 3986 section 6.2.3: the delimiter of an empty component stays unless the scheme says it
# may go; http says so of the empty path (-> "/") and the default port, never of the query.
# A fragment goes whether empty or not. (raw, base or None, canonical)
EMPTY_COMPONENTS = [
    ("http://example.com/?", None, "http://example.com/?"),
    ("http://example.com?", None, "http://example.com/?"),
    ("http://example.com/path?", None, "http://example.com/path?"),
    ("http://example.com/?a", None, "http://example.com/?a"),
    ("http://example.com/?#frag", None, "http://example.com/?"),
    ("http://example.com/?#", None, "http://example.com/?"),
    ("http://example.com/#", None, "http://example.com/"),
    ("http://example.com#", None, "http://example.com/"),
    ("http://example.com/#?", None, "http://example.com/"),  # a '?' in the fragment is no query
    ("HTTP://Example.COM:80?", None, "http://example.com/?"),
    ("http://example.com/%7e?", None, "http://example.com/~?"),
    ("http://example.com/?&", None, "http://example.com/?&"),  # empty pieces were always kept
    # a query emptied by dropping tracking parameters is no query: the '?' goes with them
    ("http://example.com/?utm_source=x", None, "http://example.com/"),
    ("http://example.com/a?utm_source=x&gclid=1", None, "http://example.com/a"),
    # relative references: "?" is an empty query of the base's path (section 5.2.2)
    ("?", "http://example.com/a/b?q=1", "http://example.com/a/b?"),
    ("c?", "http://example.com/a/b", "http://example.com/a/c?"),
    ("#", "http://example.com/a/b?", "http://example.com/a/b?"),
    ("", "http://example.com/a/b?", "http://example.com/a/b?"),
]


@pytest.mark.parametrize(("raw", "base", "canonical"), EMPTY_COMPONENTS)
def test_an_empty_query_keeps_its_delimiter(raw: str, base: str | None, canonical: str) -> None:
    assert normalize(raw, base) == canonical
    assert normalize(canonical) == canonical


# Every URL here names a user or a password: refused, never kept (stored, sent) nor silently
# stripped (merged with the URL without it). (raw, base or None)
USERINFO_REFUSED = [
    ("http://user:pass@example.com/", None),
    ("http://user@example.com/", None),
    ("http://user:@example.com/", None),  # a user, no password
    ("http://:pass@example.com/", None),  # a password, no user
    ("http://%75ser:%70ass@example.com/", None),  # percent-encoded
    ("http://%3A@example.com/", None),  # an encoded ':' is a user name of its own
    ("http://::@example.com/", None),  # password ':'
    ("http://%40@example.com/", None),
    ("http://a@b@example.com/", None),  # the last '@' ends the userinfo: "a@b"
    ("HTTPS://User:P%61ss@Example.COM:443/a?q=1#f", None),
    ("http://u:p@[::1]:8080/", None),
    ("http://u:p@127.0.0.1/", None),
    ("http://user:secret@localhost:8080/", None),  # was a gate-agreement spelling
    ("http://www.example.com@127.0.0.1:8080/", None),  # looks like a host, is a user name
    ("  http://user:pass@example.com/\n", None),  # blanks the WHATWG parser drops
    ("http://us\ter:pass@example.com/", None),  # ... tab included
    ("//user:pass@example.com/x", "http://example.com/"),  # a network-path reference
    ("x", "http://user:pass@example.com/a/"),  # inherited from a base
    ("?q=1", "http://user@example.com/a"),
]


@pytest.mark.parametrize(("raw", "base"), USERINFO_REFUSED)
def test_userinfo_is_refused_with_its_own_error(raw: str, base: str | None) -> None:
    with pytest.raises(UserinfoRefused) as info:
        normalize(raw, base)
    assert isinstance(info.value, BadUrl) and not isinstance(info.value, UncrawlableScheme)
    for secret in (":pass@", "secret", "P%61ss", "%70ass"):  # the message repeats no password
        assert secret not in str(info.value)


# An empty userinfo names no one: WHATWG serializes it away and sends no credentials, so the
# URL is the one without it (provably the same request).
@pytest.mark.parametrize(
    ("raw", "canonical"),
    [
        ("http://@example.com/", "http://example.com/"),
        ("http://:@example.com/a?", "http://example.com/a?"),
        ("http://@example.com:8080/a", "http://example.com:8080/a"),
        ("http://example.com/a@b", "http://example.com/a@b"),  # an '@' in the path is no userinfo
        ("http://example.com/?to=u:p@x", "http://example.com/?to=u:p@x"),  # nor in the query
        ("http://example.com/#u:p@x", "http://example.com/"),  # nor in the fragment
    ],
)
def test_an_empty_userinfo_and_an_at_sign_elsewhere_are_no_credentials(
    raw: str, canonical: str
) -> None:
    assert normalize(raw) == canonical
    assert not has_userinfo(raw)


@pytest.mark.parametrize(
    ("raw", "named", "redacted"),
    [
        ("http://user:pass@example.com/a?b#c", True, "http://***@example.com/a?b#c"),
        ("http://user@example.com/", True, "http://***@example.com/"),
        ("http://a@b@example.com/", True, "http://***@example.com/"),
        ("http://%75:%70@example.com:8080/", True, "http://***@example.com:8080/"),
        ("//u:p@example.com/x", True, "//***@example.com/x"),
        ("ftp://u:p@example.com/", True, "ftp://***@example.com/"),  # any scheme
        (" http://u:p@example.com/", True, "http://***@example.com/"),
        ("http://@example.com/", False, "http://@example.com/"),
        ("http://:@example.com/", False, "http://:@example.com/"),
        ("http://example.com/a@b?c=u:p@d", False, "http://example.com/a@b?c=u:p@d"),
        ("mailto:user@example.com", False, "mailto:user@example.com"),  # no authority
        ("/a/b", False, "/a/b"),
    ],
)
def test_has_and_redact_userinfo(raw: str, named: bool, redacted: str) -> None:
    assert has_userinfo(raw) is named
    assert redact_userinfo(raw) == redacted
    assert not has_userinfo(redacted) or redacted.count("***@") == 1


# --- tracking parameters per origin -------------------------------------------------------------

SHOP = TrackingPolicy(
    per_origin={
        "HTTPS://Shop.Example:443": TrackingParams().amended(add=["ref", "AffId"], keep=["utm_id"]),
        "http://bare.example": NO_TRACKING,
    }
)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        # the origin's own list: more names, and an exemption that beats the utm_ prefix
        (
            "https://shop.example/p?ref=a&affid=1&utm_id=9&utm_source=x&id=3",
            "https://shop.example/p?utm_id=9&id=3",
        ),
        # another port is another origin: the default list
        ("https://shop.example:8443/p?ref=a&utm_id=9", "https://shop.example:8443/p?ref=a"),
        ("http://shop.example/p?ref=a&utm_id=9", "http://shop.example/p?ref=a"),
        # an origin that keeps everything
        (
            "http://bare.example/p?utm_source=x&gclid=1",
            "http://bare.example/p?utm_source=x&gclid=1",
        ),
        # any other origin: the default list
        ("http://other.example/p?ref=a&utm_source=x", "http://other.example/p?ref=a"),
    ],
)
def test_tracking_lists_are_per_origin(raw: str, expected: str) -> None:
    assert normalize(raw, tracking=SHOP) == expected


def test_policy_keys_are_canonical_origins() -> None:
    assert set(SHOP.per_origin) == {"https://shop.example:443", "http://bare.example:80"}
    assert SHOP.for_origin("https://nowhere.example:443") == SHOP.default


def test_a_tracking_list_can_be_passed_directly() -> None:
    only_ref = TrackingParams(frozenset({"REF"}), ())
    assert normalize("http://e.test/?ref=1&utm_source=x", tracking=only_ref) == (
        "http://e.test/?utm_source=x"
    )
    assert normalize("http://e.test/?Ref=1&b", tracking=NO_TRACKING) == "http://e.test/?Ref=1&b"


def test_tracking_keys_match_whole_decoded_keys() -> None:
    params = TrackingParams()
    assert params.drops("UTM_Source") and params.drops("gclid") and params.drops("utm_")
    assert not params.drops("utmsource") and not params.drops("gclid2")
    assert not params.drops("gclid%3D")  # a reserved escape is not decoded


# --- hosts: the crawl and the egress gate agree -------------------------------------------------


@pytest.mark.parametrize(
    ("text", "host"),
    [
        ("Example.TEST.", "example.test"),
        ("stra\u00dfe.de", "xn--strae-oqa.de"),
        ("XN--STRAE-OQA.de", "xn--strae-oqa.de"),
        ("\u4f8b\u3048.\u30c6\u30b9\u30c8", "xn--r8jz45g.xn--zckzah"),
        ("0x7f000001", "127.0.0.1"),
        ("[::]", "[::]"),
        ("[1:0:0:2:0:0:0:3]", "[1:0:0:2::3]"),  # the longest zero run is compressed
        ("[1:0:0:2:0:0:3:4]", "[1::2:0:0:3:4]"),  # the first of two equal runs
        ("[1:2:3:4:5:6:0:8]", "[1:2:3:4:5:6:0:8]"),  # a single zero word stays
        ("[::ffff:1.2.3.4]", "[::ffff:102:304]"),  # the same on every Python
    ],
)
def test_canonical_host(text: str, host: str) -> None:
    assert canonical_host(text) == host


SPELLINGS = [
    "http://127.0.0.1:8080/",
    "http://LOCALHOST.:8080/",
    "http://2130706433:8080/",
    "http://0x7f.0x0.0x0.0x1/",
    "http://0177.0000.0000.0001/",
    "http://127.1/",
    "http://[0:0:0:0:0:ffff:127.0.0.1]/",
    "http://[64:ff9b::7f00:1]/",
    "http://127.0.0.1:8080#@www.example.com/",
    "http://%31%32%37.0.0.1/",
    "http://\uff11\uff12\uff17.\uff10.\uff10.\uff11/",
    "http://127\u30020\u30020\u30021/",
    "HTTP://B\u00fccher.Example/",
    "http://stra\u00dfe.de/",
]


@pytest.mark.parametrize("raw", SPELLINGS)
def test_the_canonical_host_is_the_host_the_gate_reads(raw: str) -> None:
    def anything(ip: object) -> bool:
        return True

    url = normalize(raw)
    gate = url_host(raw, judge=anything)  # the gate on the spelling as found
    assert url_host(url, judge=anything) == gate  # ... and on the canonical form
    host = host_of(url)
    assert (host if isinstance(gate, str) else ipaddress.ip_address(host)) == gate


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/a/b/c/./../../g", "/a/g"),  # section 5.2.4's two worked examples
        ("mid/content=5/../6", "mid/6"),
        ("/..", "/"),
        ("/.", "/"),
        ("/a/b/", "/a/b/"),
        ("", ""),
        (".", ""),
        ("..", ""),
        ("../a", "a"),
        ("./a/./b", "a/b"),
        ("a/..", "/"),  # step C leaves the '/' of "/.."
        ("a/../../b", "/b"),
        ("/a//../b", "/a/b"),
        ("/a/.../b", "/a/.../b"),
        ("/a/..b/c./.c", "/a/..b/c./.c"),
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
    assert path_of("https://a.test/a?") == "/a?"  # an empty query, as normalize keeps it
    assert path_of("https://a.test/a?#f") == "/a?"
    assert path_of("https://a.test/a#f?") == "/a"


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
