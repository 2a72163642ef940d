"""Property tests of URL identity (issue 3, "Done when"): normalization is idempotent, never
merges URLs that differ in path case or in an unknown query value, and its hosts are the hosts
the egress gate reads; (issue 20) it never merges an empty query with none, and refuses every
URL that names a user or password. Deterministic (derandomize) and fast (a few hundred
examples each)."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from atlas_pipeline.egress import url_host
from atlas_pipeline.urls import (
    DEFAULT_TRACKING,
    BadUrl,
    UserinfoRefused,
    host_of,
    normalize,
    remove_dot_segments,
)

FAST = settings(
    max_examples=250,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

# --- realistic URL parts ------------------------------------------------------------------------

_HEX = "0123456789abcdefABCDEF"
# any byte, and more often the bytes with a role: delimiters, dots, '%', unreserved, UTF-8
_NOTABLE = ("20", "23", "25", "26", "2B", "2E", "2F", "3D", "3F", "41", "5F", "7E", "C3", "00", "FF")  # fmt: skip
escape = st.one_of(
    st.builds(lambda a, b: f"%{a}{b}", st.sampled_from(_HEX), st.sampled_from(_HEX)),
    st.builds(
        lambda h, lower: "%" + (h.lower() if lower else h), st.sampled_from(_NOTABLE), st.booleans()
    ),
)
ascii_label = st.text(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-", min_size=1, max_size=12
)
unicode_label = st.sampled_from(
    ["b\u00fccher", "stra\u00dfe", "M\u00fcnchen", "\u00c9COLE", "\u043f\u0440\u0438\u043c\u0435\u0440",
     "\u4f8b\u3048", "xn--bcher-kva", "XN--STRAE-OQA", "caf\u00e9"]
)  # fmt: skip
tld = st.sampled_from(["test", "example", "COM", "de", "org", "Example", "\u30c6\u30b9\u30c8"])
domain = st.builds(
    lambda labels, top, dot: ".".join([*labels, top]) + dot,
    st.lists(st.one_of(ascii_label, ascii_label, unicode_label), min_size=1, max_size=3),
    tld,
    st.sampled_from(["", "", "", "."]),
)
ipv4 = st.sampled_from(
    ["93.184.216.34", "8.8.8.8", "0x5d.0xb8.0xd8.0x22", "1572395042", "8.8.2056"]
)
ipv6 = st.builds(lambda a: f"[{ipaddress.IPv6Address(a)}]", st.integers(0, 2**128 - 1))
host = st.one_of(domain, domain, domain, ipv4, ipv6)
port = st.sampled_from(["", "", "", ":", ":80", ":443", ":8080", ":08443", ":0080", ":65535"])
# credential-free spellings only: one naming a user or password is refused (issue 20)
userinfo = st.sampled_from(["", "", "", "", "@", ":@"])
named_userinfo = st.sampled_from(["user@", "u:p@", "a%40b:c@", ":p@", "u:@", "%75@", "::@", "a@b@"])

# one token of a path segment: literal characters of every class, escapes and non-ASCII
path_char = st.sampled_from(
    [*"abcXYZ019-._~!$&'()*+,;=:@", " ", "\u00e9", "\u65e5", "|", "^", "%", '"', "[", "]"]
)
segment = st.one_of(
    st.lists(st.one_of(path_char, path_char, escape), max_size=6).map("".join),
    st.sampled_from([".", "..", "", "%2e", "%2E%2e", ".%2E"]),
)
path = st.lists(segment, max_size=6).map(lambda segs: "".join("/" + s for s in segs))

tracking_key = st.sampled_from(
    ["utm_source", "UTM_Medium", "utm%5Fcampaign", "gclid", "fbclid", "_ga"]
)
plain_key = st.sampled_from(["id", "q", "page", "Ref", "sort", "k%3Dv", "a+b", "lang", ""])
value_char = st.sampled_from([*"abcXYZ019-._~!$'()*+,;:@/?", " ", "\u00e9", "%"])
value = st.lists(st.one_of(value_char, escape), max_size=6).map("".join)
param = st.one_of(
    st.builds(lambda k, v: f"{k}={v}", st.one_of(plain_key, plain_key, tracking_key), value),
    plain_key,
)
query = st.one_of(
    st.just(""),
    st.lists(param, min_size=0, max_size=5).map(lambda ps: "?" + "&".join(ps)),
)
fragment = st.one_of(st.just(""), value.map(lambda v: "#" + v))
scheme = st.sampled_from(["http", "https", "HTTP", "Https"])
space = st.sampled_from(["", "", "", " ", "\n", "\t "])

absolute_url = st.builds(
    lambda sp1, sc, ui, h, p, pa, q, f, sp2: f"{sp1}{sc}://{ui}{h}{p}{pa}{q}{f}{sp2}",
    space, scheme, userinfo, host, port, path, query, fragment, space,
)  # fmt: skip
relative_ref = st.one_of(
    st.builds(lambda pa, q, f: pa.lstrip("/") + q + f, path, query, fragment),  # "a/b?q"
    st.builds(lambda pa, q, f: pa + q + f, path, query, fragment),  # "/a/b?q"
    st.builds(lambda h, pa, q: f"//{h}{pa}{q}", host, path, query),  # network-path
    st.builds(lambda n, pa: "../" * n + pa.lstrip("/"), st.integers(0, 4), path),
    st.builds(lambda q, f: q + f, query, fragment),  # "?q", "#f", ""
)


def _normalized(raw: str, base: str | None = None) -> str:
    try:
        return normalize(raw, base)
    except BadUrl:
        assume(False)  # an invalid host or IDNA label: nothing to compare
        raise


# --- idempotence --------------------------------------------------------------------------------


@FAST
@given(absolute_url)
def test_normalize_is_idempotent(raw: str) -> None:
    once = _normalized(raw)
    assert normalize(once) == once


@FAST
@given(relative_ref, absolute_url)
def test_resolving_then_normalizing_is_idempotent(ref: str, base: str) -> None:
    once = _normalized(ref, base)
    assert normalize(once) == once
    assert normalize(once, base) == once  # an absolute URL ignores the base


@FAST
@given(absolute_url)
def test_the_canonical_form_is_a_plain_ascii_uri_the_gate_reads_alike(raw: str) -> None:
    url = _normalized(raw)
    assert url.isascii() and " " not in url and "#" not in url
    assert url.startswith(("http://", "https://"))
    gate = url_host(url, judge=lambda ip: True)  # WHATWG, yarl and urllib agree on the host
    h = host_of(url)
    assert (h if isinstance(gate, str) else ipaddress.ip_address(h)) == gate


@FAST
@given(space, scheme, named_userinfo, host, port, path, query, fragment)
def test_a_url_naming_a_user_or_password_is_refused(
    sp: str, sc: str, ui: str, h: str, p: str, pa: str, q: str, f: str
) -> None:
    _normalized(f"{sp}{sc}://{h}{p}{pa}{q}{f}")  # a valid URL without the userinfo
    with pytest.raises(UserinfoRefused):
        normalize(f"{sp}{sc}://{ui}{h}{p}{pa}{q}{f}")


# --- merges what is provably the same ----------------------------------------------------------

_UNRESERVED = "abcXYZ09-._~"
plain_token = st.sampled_from(
    [*_UNRESERVED, "!", "$", "'", "(", "*", ",", ";", ":", "@", "%2F", "%3d", "%C3%A9"]
)
word = st.lists(plain_token, min_size=1, max_size=5)
name = st.text("abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=8)


def _respell_token(token: str, data: st.DataObject) -> str:
    """An equivalent spelling (section 6.2.2): unreserved characters escaped, hex case changed."""
    if token in _UNRESERVED:
        return data.draw(st.sampled_from([token, f"%{ord(token):02X}", f"%{ord(token):02x}"]))
    if token.startswith("%"):
        return "".join(data.draw(st.sampled_from([c.lower(), c.upper()])) for c in token)
    return token


@FAST
@given(
    st.sampled_from(["http", "https"]),
    st.lists(name, min_size=1, max_size=3),
    st.sampled_from(["", ":8080"]),
    st.lists(word, max_size=4),
    st.lists(st.tuples(word, word), max_size=3),
    st.data(),
)
def test_equivalent_respellings_merge(
    scheme: str,
    labels: list[str],
    port: str,
    segments: list[list[str]],
    query_params: list[tuple[list[str], list[str]]],
    data: st.DataObject,
) -> None:
    host = ".".join([*labels, "test"])
    path = "".join("/" + "".join(seg) for seg in segments)
    query = "&".join("".join(k) + "=" + "".join(v) for k, v in query_params)
    url = f"{scheme}://{host}{port}{path}" + (f"?{query}" if query else "")

    def respell(tokens: list[str]) -> str:
        return "".join(_respell_token(t, data) for t in tokens)

    r_scheme = "".join(data.draw(st.sampled_from([c, c.upper()])) for c in scheme)
    r_host = "".join(data.draw(st.sampled_from([c, c.upper()])) for c in host)
    r_host += data.draw(st.sampled_from(["", "."]))
    default = ":80" if scheme == "http" else ":443"
    r_port = port or data.draw(st.sampled_from(["", ":", default, ":0" + default[1:]]))
    r_path = ""
    for seg in segments:
        r_path += data.draw(st.sampled_from(["", "/.", "/%2e", "/zz/..", "/Zz/%2E%2e"]))
        r_path += "/" + respell(seg)
    r_query = "&".join(respell(k) + "=" + respell(v) for k, v in query_params)
    r_fragment = data.draw(st.sampled_from(["", "#", "#top"]))
    respelled = f"{r_scheme}://{r_host}{r_port}{r_path or data.draw(st.sampled_from(['', '/']))}"
    respelled += (f"?{r_query}" if query else "") + r_fragment
    assert normalize(respelled) == normalize(url)


# --- never merges what may be different pages ---------------------------------------------------

letter = st.sampled_from(list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"))
other_token = st.one_of(st.sampled_from(list("0123456789-_~!$'()*+,;=:@ ")), escape)
tokens = st.lists(st.one_of(letter, other_token), max_size=5).map("".join)
# No ".." segment: a later ".." legitimately removes the segment whose case differs.
segments = st.lists(st.one_of(tokens, st.just(".")), max_size=3).map(
    lambda segs: "".join("/" + s for s in segs)
)
origin = st.builds(
    lambda sc, ui, h, p: f"{sc}://{ui}{h}{p}", scheme, userinfo, host, port
)  # fmt: skip


@FAST
@given(origin, segments, tokens, letter, tokens, segments, query)
def test_paths_that_differ_in_letter_case_stay_distinct(
    authority: str, before: str, left: str, ch: str, right: str, after: str, q: str
) -> None:
    first = f"{authority}{before}/{left}{ch}{right}{after}{q}"
    second = f"{authority}{before}/{left}{ch.swapcase()}{right}{after}{q}"
    assert _normalized(first) != normalize(second)


# Look-alike tokens of a query value that are NOT the same value: letter case, '+' against
# '%2B' and '%20', reserved characters against their escapes ('%26' is never '&', '%3D'
# never '='). Equivalent spellings (hex case, an unreserved escape) may merge and are left out.
CONFUSABLE = (
    ("a", "A"), ("q", "Q"), ("1", "l"), ("+", "%2B"), ("+", "%20"), ("%2B", "%20"),
    ("=", "%3D"), ("&", "%26"), ("&", ";"), (";", "%3B"), ("/", "%2F"), ("?", "%3F"),
    (",", "%2C"), ("@", "%40"), (":", "%3A"), ("%23", "%25"),
)  # fmt: skip
query_token = st.sampled_from(sorted({token for pair in CONFUSABLE for token in pair}))
query_value = st.lists(query_token, max_size=6).map("".join)
unknown_key = st.sampled_from(
    ["id", "q", "page", "ref", "session", "Sort", "utm", "gclid2", "k%3D"]
)
params = st.lists(st.builds(lambda k, v: f"{k}={v}", unknown_key, query_value), max_size=3)


look_alikes = st.sampled_from(CONFUSABLE).flatmap(lambda pair: st.permutations(pair))


@FAST
@given(origin, params, unknown_key, query_value, look_alikes, query_value, params)
def test_unknown_query_values_that_differ_stay_distinct(
    base_url: str,
    before: list[str],
    key: str,
    left: str,
    pair: list[str],
    right: str,
    after: list[str],
) -> None:
    assert not DEFAULT_TRACKING.default.drops(key)
    first = base_url + "/p?" + "&".join([*before, f"{key}={left}{pair[0]}{right}", *after])
    second = base_url + "/p?" + "&".join([*before, f"{key}={left}{pair[1]}{right}", *after])
    assert _normalized(first) != normalize(second)


@FAST
@given(origin, segments, fragment)
def test_an_empty_query_is_never_merged_with_no_query(authority: str, pa: str, f: str) -> None:
    bare = _normalized(f"{authority}{pa}{f}")
    assert normalize(f"{authority}{pa}?{f}") == bare + "?"


@FAST
@given(origin, unknown_key, query_value, unknown_key, query_value)
def test_query_order_is_kept(base_url: str, k1: str, v1: str, k2: str, v2: str) -> None:
    assume(f"{k1}={v1}" != f"{k2}={v2}")
    url = base_url + "/p"
    assert _normalized(f"{url}?{k1}={v1}&{k2}={v2}") != normalize(f"{url}?{k2}={v2}&{k1}={v1}")


# --- remove_dot_segments is section 5.2.4 to the letter -----------------------------------------


def rfc_remove_dot_segments(path: str) -> str:
    """Section 5.2.4 transcribed literally (string buffers, rules A-E in order): the oracle."""
    inp, out = path, ""
    while inp:
        if inp.startswith("../"):
            inp = inp[3:]
        elif inp.startswith("./"):
            inp = inp[2:]
        elif inp.startswith("/./"):
            inp = "/" + inp[3:]
        elif inp == "/.":
            inp = "/"
        elif inp.startswith("/../") or inp == "/..":
            inp = "/" + inp[4:] if inp.startswith("/../") else "/"
            out = out[: max(out.rfind("/"), 0)]
        elif inp in (".", ".."):
            inp = ""
        else:
            start = 1 if inp.startswith("/") else 0
            end = inp.find("/", start)
            end = len(inp) if end < 0 else end
            out, inp = out + inp[:end], inp[end:]
    return out


@settings(max_examples=1000, derandomize=True, deadline=None)
@given(st.text("./a", max_size=24))
def test_remove_dot_segments_matches_the_rfc_algorithm(path: str) -> None:
    assert remove_dot_segments(path) == rfc_remove_dot_segments(path)
