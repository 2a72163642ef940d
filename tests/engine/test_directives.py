"""Page-level robots directives (directives.py), table by table: inputs and the decision as
data, no network. Then the two places they take effect: the parser hands over the meta tags,
the outbox withholds noindex documents and withdraws delivered ones."""

from __future__ import annotations

import pytest

from atlas_pipeline import outbox
from atlas_pipeline.directives import (
    Directives,
    header_directives,
    header_values,
    meta_directives,
    meta_names,
    page_directives,
)
from atlas_pipeline.parsing import parse_page

TOKEN = "AtlasBot"
# nothing, noindex, nofollow, both
N, X, F, B = Directives(), Directives(True, False), Directives(False, True), Directives(True, True)

# (X-Robots-Tag header values, decision for AtlasBot)
HEADERS: list[tuple[list[str], Directives]] = [
    ([], N),
    (["noindex"], X),
    (["nofollow"], F),
    (["NoIndex, NoFollow"], B),
    (["none"], B),
    (["all"], N),
    (["index, follow"], N),
    (["noarchive, nosnippet, notranslate"], N),  # unknown to us: ignored
    (["atlasbot: noindex"], X),
    (["AtlasBot:nofollow"], F),
    (["ATLASBOT : none"], B),
    (["otherbot: noindex"], N),  # another bot's prefix never applies to us
    (["otherbot: noindex, nofollow"], N),  # ... nor the rest of its header value
    (["otherbot: noindex", "nofollow"], F),  # a new header starts for everyone again
    (["otherbot: noindex, atlasbot: nofollow"], F),  # a second prefix switches the addressee
    (["atlasbot: noindex", "otherbot: nofollow"], X),
    (["noindex", "nofollow"], B),  # several headers add up
    (["all", "noindex"], X),  # all does not undo a restriction
    (["unavailable_after: 25 Jun 2010 15:00:00 PST"], N),  # valued: ignored, not a bot name
    (["unavailable_after: Wednesday, 03-Nov-2021 15:00:00 GMT, noindex"], X),
    (["max-snippet: 20, nofollow"], F),
    (["googlebot: max-snippet: 20, noindex"], N),
    ([""], N),
    ([" , ,noindex,"], X),
]

# (meta tags as (name, content), decision for AtlasBot)
METAS: list[tuple[list[tuple[str, str]], Directives]] = [
    ([], N),
    ([("robots", "noindex")], X),
    ([("ROBOTS", "nofollow")], F),
    ([("Robots", "noindex,nofollow")], B),
    ([("robots", "noindex nofollow")], B),  # spaces for commas, as some sites write
    ([("robots", "none")], B),
    ([("robots", "all")], N),
    ([("robots", "index, follow")], N),
    ([("AtlasBot", "noindex")], X),
    ([("atlasbot", "none")], B),
    ([("googlebot", "noindex")], N),  # another crawler's tag
    ([("description", "noindex")], N),  # not a robots tag at all
    ([("robots", "nofollow"), ("atlasbot", "noindex")], B),
    ([("robots", "noimageindex, max-image-preview:large")], N),
    ([("robots", "")], N),
]

# (headers, metas, decision): both sources add up
BOTH: list[tuple[list[str], list[tuple[str, str]], Directives]] = [
    (["noindex"], [("robots", "nofollow")], B),
    (["otherbot: nofollow"], [("robots", "noindex")], X),
    (["all"], [("robots", "all")], N),
    (["atlasbot: nofollow"], [("otherbot", "noindex")], F),
]


@pytest.mark.parametrize(("values", "expected"), HEADERS)
def test_x_robots_tag(values: list[str], expected: Directives) -> None:
    assert header_directives(values, TOKEN) == expected
    assert header_directives(values, "atlasbot") == expected  # the token in any case


@pytest.mark.parametrize(("tags", "expected"), METAS)
def test_meta_tags(tags: list[tuple[str, str]], expected: Directives) -> None:
    assert meta_directives(tags, TOKEN) == expected


@pytest.mark.parametrize(("values", "tags", "expected"), BOTH)
def test_headers_and_meta_tags_add_up(
    values: list[str], tags: list[tuple[str, str]], expected: Directives
) -> None:
    assert page_directives(values, tags, TOKEN) == expected


def test_another_token_reads_its_own_directives() -> None:
    assert header_directives(["otherbot: noindex"], "OtherBot") == X
    assert meta_directives([("otherbot", "nofollow")], "OtherBot") == F
    assert meta_directives([("atlasbot", "nofollow")], "OtherBot") == N


def test_header_values_kept_apart_by_the_fetcher() -> None:
    assert header_values(None) == [] and header_values("") == []
    assert header_values("otherbot: noindex\nnofollow") == ["otherbot: noindex", "nofollow"]
    assert header_directives(header_values("otherbot: noindex\nnofollow"), TOKEN) == F


PAGE = (
    b'<html><head><META NAME="Robots" CONTENT="noindex"><meta name="atlasbot" content="nofollow">'
    b'<meta name="description" content="x"><meta name="googlebot" content="none"></head>'
    b'<body><a href="/a">a</a></body></html>'
)


def test_the_parser_hands_over_the_robots_meta_tags_from_the_same_parse() -> None:
    out = parse_page(PAGE, "http://a.example.test/", None, False, meta_names(TOKEN))
    assert out["meta"] == [("robots", "noindex"), ("atlasbot", "nofollow")]
    assert out["links"] == [("/a", "a", False)]
    assert meta_directives(out["meta"], TOKEN) == B
    assert parse_page(PAGE, "http://a.example.test/", None, False)["meta"] == []


def test_the_parser_bounds_what_a_page_can_hand_over() -> None:
    many = b"".join(b'<meta name="robots" content="' + b"x" * 2000 + b'">' for _ in range(100))
    out = parse_page(b"<html><head>" + many + b"</head></html>", "http://a.test/", None, False,
                     ("robots",))  # fmt: skip
    assert len(out["meta"]) == 32 and all(len(c) == 500 for _, c in out["meta"])


DOC = {"url": "https://a.test/p", "text_hash": "h1", "fetch_id": "f1", "extraction_version": "3",
       "title": "T", "language": "en", "fetched_at": 1.0}  # fmt: skip


def test_the_outbox_withholds_noindex_and_withdraws_what_it_delivered() -> None:
    (upsert,) = outbox.upsert_events([DOC])
    assert upsert["action"] == outbox.UPSERT and upsert["reason"] is None
    assert list(outbox.upsert_events([{**DOC, "index_reason": "noindex"}])) == []
    (delete,) = outbox.upsert_events(
        [{**DOC, "text_hash": "h2", "index_reason": "noindex", "withdrawn_document_id": "h1"}]
    )
    assert delete["action"] == outbox.DELETE and delete["reason"] == "noindex"
    assert delete["document_id"] == "h1" and delete["title"] is None
    assert delete["event_id"] == outbox.event_id("https://a.test/p", "h1", "3", outbox.DELETE)


def test_a_withheld_document_id_is_never_taken_for_a_delivered_one() -> None:
    assert outbox.delivered_id(None) is None
    assert outbox.delivered_id("h1") == "h1"
    assert outbox.delivered_id(outbox.withheld_id("h1")) is None
    assert outbox.withheld_id("h1") != "h1"
