"""The scope guard remembers what depends only on a link's text and its base: a remembered
judgement is the judgement a fresh guard makes, and a site's navigation is normalized once
per origin, not once per page."""

from __future__ import annotations

from pathlib import Path

import pytest

import atlas_pipeline.scope as scope
from atlas_pipeline.config import config_from_mapping
from atlas_pipeline.egress import EgressGate
from atlas_pipeline.scope import ScopeGuard

A, B = "http://a.example.test", "http://b.example.test"


def guard(tmp_path: Path) -> ScopeGuard:
    data = {"seeds": [f"{A}/", f"{B}/"], "data_dir": str(tmp_path),
            "scope": {"max_depth": 3, "session_params": ["sid"]}}  # fmt: skip
    return ScopeGuard(config_from_mapping(data, base_dir=tmp_path))


# (href, base): the same href on other bases must resolve on its own base
CASES = [
    ("/x", f"{A}/one/page"),
    ("/x", f"{B}/one/page"),  # root-relative: the base's origin decides
    ("/x", "https://a.example.test/p"),  # another scheme, another origin
    ("x", f"{A}/one/page"),
    ("x", f"{A}/two/page"),  # relative: the base's path decides
    ("../x", f"{A}/one/two/page"),
    ("?q=1", f"{A}/one/page"),
    ("?q=1", f"{A}/two/page"),
    ("//b.example.test/y", f"{A}/p"),
    ("//b.example.test/y", "https://a.example.test/p"),  # scheme-relative: the base's scheme
    ("http://B.EXAMPLE.TEST:80/z?sid=0123456789abcdef0123456789abcdef", f"{A}/p"),
    ("HTTP://a.example.test/%7Euser/", f"{B}/p"),
    ("mailto:x@a.example.test", f"{A}/p"),
    ("http://user:pw@a.example.test/", f"{A}/p"),
    ("http://elsewhere.test/", f"{A}/p"),
    ("http://127.0.0.1/", f"{A}/p"),
    ("/a/a/a/a/a/a/a/a/a/a/a/a/x", f"{A}/p"),
    ("http://a.example.test:99999/", f"{A}/p"),
    # relative paths: the base's folder decides, never its last segment or its query
    ("x", f"{A}/one/other?q=2"),
    ("x?y=1#f", f"{A}/one/page"),
    ("./x", f"{A}/one/"),
    ("..", f"{A}/one/two/page"),
    ("x", A),  # no path on the base: merged from '/'
    ("x", f"{A}?q=/one/"),  # a '/' in the base's query is no folder
    # cleaned before it is read: these are not relative paths
    (" ?q=1", f"{A}/one/page"),
    (" ?q=1", f"{A}/two/page"),
    ("\t/x", f"{A}/one/page"),
    ("\\x", f"{A}/one/page"),
    ("", f"{A}/one/page?q=1"),
    ("", f"{A}/one/page?q=2"),
    ("#top", f"{A}/one/page"),
    # the site's facts and the URL's own rules together, in the order they are judged
    ("http://10.1.2.3/a/a/a/a/a/a/a/a/a/a/a/a/x", f"{A}/p"),
    ("http://10.1.2.3/x", f"{A}/p"),
    ("https://a.example.test/page/99999", f"{A}/p"),
    ("http://elsewhere.test/a/a/a/a/a/a/a/a/a/a/a/a/x", f"{A}/p"),
]


@pytest.mark.parametrize("depth", [1, 4])
def test_a_remembered_judgement_is_a_fresh_guards(tmp_path: Path, depth: int) -> None:
    warm = guard(tmp_path)
    for href, base in CASES * 2:  # the second round answers from memory
        warm.judge(href, base, depth, base)
    for href, base in CASES:
        assert warm.judge(href, base, depth, base) == guard(tmp_path).judge(
            href, base, depth, base
        ), (href, base)


def test_navigation_is_normalized_once_per_origin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[str, str | None]] = []
    real = scope.normalize

    def counted(url: str, base: str | None = None, *args: object) -> str:
        calls.append((url, base))
        return real(url, base, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(scope, "normalize", counted)
    g = guard(tmp_path)
    nav = ["/", "/about", f"{A}/contact", "/about"]
    for page in range(50):
        for href in nav:
            g.judge(href, f"{A}/p{page}", 1, f"{A}/p{page}")
    assert len(calls) == 3  # "/", "/about" and the absolute link, each once
    g.judge("/about", f"{B}/p", 1, f"{B}/p")
    assert g.judge("/about", f"{B}/p", 1, f"{B}/p").url == f"{B}/about"
    assert len(calls) == 4  # another origin's "/about" is its own


def test_a_folders_links_are_normalized_once_and_a_sites_host_parsed_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Relative links on the pages of one folder resolve alike (normalized once), and the
    egress gate reads the host of a site once, however many of its URLs are judged."""
    calls: list[tuple[str, str | None]] = []
    real = scope.normalize

    def counted(url: str, base: str | None = None, *args: object) -> str:
        calls.append((url, base))
        return real(url, base, *args)  # type: ignore[arg-type]

    hosts: list[str] = []
    real_check = EgressGate.check_url

    def checked(gate: EgressGate, url: str) -> None:
        hosts.append(url)
        real_check(gate, url)

    monkeypatch.setattr(scope, "normalize", counted)
    monkeypatch.setattr(EgressGate, "check_url", checked)
    g = guard(tmp_path)
    for page in range(50):
        base = f"{A}/docs/p{page}?tab={page}"
        assert g.judge("next", base, 1, base).url == f"{A}/docs/next"
        assert g.judge(f"item{page}", base, 1, base).url == f"{A}/docs/item{page}"
    assert len(calls) == 1 + 50  # "next" once for the folder, each item once
    assert g.judge("next", f"{A}/blog/p", 1, f"{A}/blog/p").url == f"{A}/blog/next"
    assert hosts == [f"{A}/"]  # 101 URLs of one site, its host read once
    g.judge("/x", f"{B}/p", 1, f"{B}/p")
    assert hosts == [f"{A}/", f"{B}/"]


def test_a_urls_own_rules_are_checked_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The URL rules and the stateless trap checks depend on the canonical URL alone: a
    navigation link judged on 50 pages is checked once (and a new URL still is)."""
    checked: list[str] = []
    real = scope.page_number

    def counted(url: str, *args: object) -> int | None:
        checked.append(url)
        return real(url, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(scope, "page_number", counted)
    g = guard(tmp_path)
    for page in range(50):
        for href in ("/", "/about", f"/p{page}"):
            g.judge(href, f"{A}/p{page}", 1, f"{A}/p{page}")
    assert sorted(checked) == sorted([f"{A}/", f"{A}/about"] + [f"{A}/p{i}" for i in range(50)])


def test_robots_answers_are_remembered_per_policy_and_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page's navigation is matched against its origin's robots rules once per policy, not
    on every page; a changed policy (another version or text) is asked again."""
    from atlas_pipeline.robots import RobotsPolicy, RobotsStatus

    asked: list[tuple[int, str]] = []
    real = RobotsPolicy.allows

    def counted(policy: RobotsPolicy, url: str, token: str) -> bool:
        asked.append((policy.version, url))
        return real(policy, url, token)

    monkeypatch.setattr(RobotsPolicy, "allows", counted)
    g = guard(tmp_path)
    origin = f"{A}:80"
    closed = RobotsPolicy(origin, 1, RobotsStatus.PARSED, "User-agent: *\nDisallow: /private\n")
    for page in range(50):
        for href in ("/private", "/open"):
            j = g.judge(href, f"{A}/p{page}", 1, f"{A}/p{page}", robots=closed)
            assert j.reason == ("robots_disallowed" if href == "/private" else "admitted")
    assert asked == [(1, f"{A}/private"), (1, f"{A}/open")]
    opened = RobotsPolicy(origin, 2, RobotsStatus.PARSED, "User-agent: *\nAllow: /\n")
    assert g.judge("/private", f"{A}/p", 1, f"{A}/p", robots=opened).reason == "admitted"
    assert asked[-1] == (2, f"{A}/private")
    fresh = guard(tmp_path).judge("/private", f"{A}/p", 1, f"{A}/p", robots=closed)
    assert g.judge("/private", f"{A}/p", 1, f"{A}/p", robots=closed) == fresh
