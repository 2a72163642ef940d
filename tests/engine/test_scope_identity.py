"""Issue 20, parts 1 and 4, at the scope guard: links with credentials are refused with their
own reason code (and stored redacted), seeds with credentials are refused with a readable
message, and a link row records when a session id was stripped from its URL."""

from __future__ import annotations

from pathlib import Path

import pytest

from atlas_pipeline.config import config_from_mapping
from atlas_pipeline.errors import ConfigError
from atlas_pipeline.reasons import EXPLANATIONS, Reason, explain
from atlas_pipeline.scope import ScopeGuard
from atlas_pipeline.sitemaps import parse_sitemap

SITE = "http://a.example.test"
PAGE = f"{SITE}/page"
TOKEN = "0123456789abcdef0123456789abcdef"


def guard(tmp_path: Path, **raw: object) -> ScopeGuard:
    data = {"seeds": [f"{SITE}/"], "data_dir": str(tmp_path), **raw}
    return ScopeGuard(config_from_mapping(data, base_dir=tmp_path))


# (href, base): every one names a user or a password once resolved
REFUSED = [
    ("http://user:pass@a.example.test/", PAGE),
    ("http://user@a.example.test/", PAGE),
    ("http://user:@a.example.test/x", PAGE),
    ("http://%75ser:%70ass@a.example.test/", PAGE),
    ("//user:pass@a.example.test/x", PAGE),
    ("HTTP://U:P@A.EXAMPLE.TEST:80/?q#f", PAGE),
    ("http://a.example.test@evil.example/", PAGE),  # a user name that looks like the host
    ("x", "http://user:pass@a.example.test/dir/"),  # a <base href> with credentials
]


@pytest.mark.parametrize(("href", "base"), REFUSED)
def test_a_link_with_userinfo_is_refused_with_its_own_reason(
    tmp_path: Path, href: str, base: str
) -> None:
    judged = guard(tmp_path).judge(href, base, 1, PAGE)
    assert judged.reason == Reason.USERINFO == "userinfo_refused"
    assert judged.url is None and judged.candidate is None  # never queued, never sent


@pytest.mark.parametrize(
    ("href", "url"),
    [
        ("http://@a.example.test/x", f"{SITE}/x"),  # an empty userinfo names no one
        ("http://:@a.example.test/x", f"{SITE}/x"),
        ("/mail?to=user:pass@a.example.test", f"{SITE}/mail?to=user:pass@a.example.test"),
    ],
)
def test_an_at_sign_without_credentials_is_admitted(tmp_path: Path, href: str, url: str) -> None:
    judged = guard(tmp_path).judge(href, PAGE, 1, PAGE)
    assert (judged.reason, judged.url) == ("admitted", url)


def test_a_refused_link_row_stores_its_href_redacted(tmp_path: Path) -> None:
    links = [("http://user:secret@a.example.test/x", "login", False), ("/y", "y", False)]
    rows = guard(tmp_path).page_links(links, PAGE, PAGE, 0, None)
    (refused, refused_cand), (plain, plain_cand) = rows
    assert refused["reason"] == "userinfo_refused" and refused_cand is None
    assert refused["href"] == "http://***@a.example.test/x" and refused["url"] is None
    assert "secret" not in repr(refused)
    assert plain["href"] == "/y" and plain_cand is not None  # other rows keep the href as found


@pytest.mark.parametrize(
    ("href", "stored", "reason"),
    [
        ("ftp://u:secret@a.example.test/f", "ftp://***@a.example.test/f", "scheme_not_allowed"),
        ("http://u:secret@[bad/", "http://***@[bad/", "userinfo_refused"),
        ("mailto:someone@a.example.test", "mailto:someone@a.example.test", "scheme_not_allowed"),
        ("/x?to=u:p@host", "/x?to=u:p@host", "admitted"),
    ],
)
def test_no_link_row_stores_credentials(
    tmp_path: Path, href: str, stored: str, reason: str
) -> None:
    ((row, _),) = guard(tmp_path).page_links([(href, "", False)], PAGE, PAGE, 0, None)
    assert (row["href"], row["reason"]) == (stored, reason)


def test_a_refused_sitemap_entry_stores_its_loc_redacted(tmp_path: Path) -> None:
    xml = (
        '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        "<url><loc>http://u:secret@a.example.test/a</loc></url>"
        f"<url><loc>{SITE}/b?sid={TOKEN}</loc></url></urlset>"
    )
    sitemap = parse_sitemap(xml.encode(), 1 << 20)
    rows = guard(tmp_path).sitemap_entries(sitemap, f"{SITE}/sitemap.xml", 0, 0.0)
    (refused, _), (stripped, cand) = rows
    assert (refused["reason"], refused["href"]) == (
        "userinfo_refused",
        "http://***@a.example.test/a",
    )
    assert refused["session_id_stripped"] is False
    assert stripped["url"] == f"{SITE}/b" and stripped["session_id_stripped"] is True
    assert cand is not None


def test_link_rows_record_a_stripped_session_id(tmp_path: Path) -> None:
    links = [
        (f"/a?sid={TOKEN}", "", False),  # stripped: recorded on the row
        ("/b?sid=12", "", False),  # a short value: kept, nothing stripped
        ("/?s=shoes", "", False),  # a search, not a session
        (f"/c;jsessionid={TOKEN.upper()}", "", False),
        ("/d", "", False),
    ]
    rows = guard(tmp_path).page_links(links, PAGE, PAGE, 0, None)
    got = [(row["url"], row["session_id_stripped"], row["reason"]) for row, _ in rows]
    assert got == [
        (f"{SITE}/a", True, "admitted"),
        (f"{SITE}/b?sid=12", False, "admitted"),
        (f"{SITE}/?s=shoes", False, "admitted"),
        (f"{SITE}/c", True, "admitted"),
        (f"{SITE}/d", False, "admitted"),
    ]
    # the candidate keeps the href as found; the row's url is what is queued
    assert rows[0][1] is not None and rows[0][1].discovered_url == f"/a?sid={TOKEN}"


def test_an_empty_query_is_its_own_link(tmp_path: Path) -> None:
    links = [("/x", "", False), ("/x?", "", False), ("/x#top", "", False), ("/x?#top", "", False)]
    rows = guard(tmp_path).page_links(links, PAGE, PAGE, 0, None)
    assert [row["url"] for row, _ in rows] == [f"{SITE}/x", f"{SITE}/x?"]  # two pages, not one


@pytest.mark.parametrize(
    "seed",
    [
        "http://user:pass@a.example.test/",
        "http://user@a.example.test/",
        "https://user:@a.example.test/x",
        "http://%75:%70@a.example.test/",
    ],
)
def test_a_seed_with_userinfo_is_refused_readably(tmp_path: Path, seed: str) -> None:
    with pytest.raises(ConfigError) as info:
        config_from_mapping({"seeds": [seed], "data_dir": str(tmp_path)}, base_dir=tmp_path)
    message = str(info.value)
    assert "seeds" in message and "user or password" in message
    assert "***@a.example.test" in message
    assert "pass@" not in message and "%70" not in message  # the credentials are not repeated


def test_a_seeds_file_line_with_userinfo_is_refused(tmp_path: Path) -> None:
    (tmp_path / "seeds.txt").write_text("http://a.example.test/\nhttp://u:pw@b.test/\n", "utf-8")
    with pytest.raises(ConfigError, match="user or password") as info:
        config_from_mapping(
            {"seeds_file": "seeds.txt", "data_dir": str(tmp_path)}, base_dir=tmp_path
        )
    assert "pw@" not in str(info.value)


def test_a_seed_with_an_empty_userinfo_is_accepted(tmp_path: Path) -> None:
    raw = {"seeds": ["http://@a.example.test/"], "data_dir": str(tmp_path)}
    cfg = config_from_mapping(raw, base_dir=tmp_path)
    assert cfg.seed_hosts == ["a.example.test"]


def test_the_new_reason_is_explained() -> None:
    text = explain(Reason.USERINFO.value)
    assert text is not None and "user" in text and "password" in text
    assert Reason.USERINFO.value in EXPLANATIONS
