"""Exact and near-duplicate clustering: one document per content, clusters as labels that
keep every member, a correction kept apart, and merges an operator can undo."""

from __future__ import annotations

import random

from atlas_pipeline.dedupe import Doc, Settings, cluster, members, volatile_only
from atlas_pipeline.parsing import text_hash

rng = random.Random(3)
WORDS = ["harbour", "council", "grain", "winter", "summer", "tolls", "ferry", "bridge", "market", "river", "school", "budget", "mayor", "vote", "road", "rail", "storm", "flood", "festival", "museum", "library", "clinic"]  # fmt: skip


def story(seed: int, sentences: int = 40) -> list[str]:
    r = random.Random(seed)
    return [" ".join(r.choice(WORDS) for _ in range(r.randint(14, 24))).capitalize() + "."
            for _ in range(sentences)]  # fmt: skip


def doc(url: str, lines: list[str]) -> Doc:
    text = "\n".join(lines)
    return Doc(url, f"f-{url}", text_hash(text), text)


BASE = story(1)
TWIN_A, TWIN_B = doc("https://d.test/news/a", BASE), doc("https://d.test/print/a", BASE)
LIVE = [doc(f"https://d.test/live/a-{i}", [f"Updated 10:4{i} UTC", *BASE, f"Related: x{i} y{i}"])
        for i in range(3)]  # fmt: skip
CORRECTED = doc("https://d.test/news/a-corrected",
                [*BASE[:20], "The council voted eleven to four, not nine to six as first reported here today.",
                 *BASE[21:]])  # fmt: skip
OTHER = doc("https://d.test/news/b", story(2))


def test_identical_text_is_one_document_with_every_url_mapped() -> None:
    rows = cluster([TWIN_A, TWIN_B, OTHER])
    docs = members(rows, "document_id")
    assert {TWIN_A.url, TWIN_B.url} in docs.values() and len(docs) == 2
    assert len(rows) == 3  # each URL keeps its own row and provenance


def test_timestamp_variants_share_a_cluster_but_keep_their_documents() -> None:
    rows = cluster([TWIN_A, *LIVE, OTHER])
    clusters = members(rows, "cluster_id")
    assert {TWIN_A.url, *(d.url for d in LIVE)} in clusters.values()
    assert len(members(rows, "document_id")) == 5  # four texts of the story, one other
    assert all(r["threshold"] == 0.8 for r in rows)


def test_a_corrected_article_stays_apart_from_its_first_version() -> None:
    rows = cluster([TWIN_A, CORRECTED, *LIVE])
    by_url = {r["url"]: r["cluster_id"] for r in rows}
    assert by_url[CORRECTED.url] != by_url[TWIN_A.url]
    assert not volatile_only(TWIN_A.text, CORRECTED.text, 12)


def test_a_merge_can_be_undone() -> None:
    undone = Settings(split_urls=frozenset({LIVE[1].url}))
    rows = {r["url"]: r for r in cluster([TWIN_A, *LIVE], undone)}
    assert rows[LIVE[1].url]["cluster_id"] == LIVE[1].text_hash
    assert rows[LIVE[1].url]["method"] == "split"
    assert rows[LIVE[0].url]["cluster_id"] == rows[TWIN_A.url]["cluster_id"]


def test_a_correction_in_a_sentence_with_time_words_is_still_a_correction() -> None:
    first = [
        *BASE[:5],
        "Two days ago the council voted nine to six on the harbour toll plan.",
        *BASE[5:],
    ]
    fixed = [*BASE[:5], "Two days ago the council voted eleven to four on the harbour toll plan.", *BASE[5:]]  # fmt: skip
    assert not volatile_only("\n".join(first), "\n".join(fixed), 12)
    stamped = ["Posted 3 hours ago, updated 10:42", *BASE]
    assert volatile_only(
        "\n".join(["Posted 5 hours ago, updated 11:07", *BASE]), "\n".join(stamped), 0
    )
