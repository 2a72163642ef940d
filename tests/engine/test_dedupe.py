"""Exact and near-duplicate clustering: one document per content, clusters as labels that
keep every member, a correction kept apart, and merges an operator can undo."""

from __future__ import annotations

import random

from atlas_pipeline.dedupe import (
    Doc,
    Entry,
    Settings,
    cluster,
    cluster_stream,
    members,
    volatile_only,
)
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


def _differ_only_in_volatile_lines(a: str, b: str, max_words: int) -> bool:
    """The definition the story key stands for: every line of the two texts' set difference
    (stamps masked) has at most `max_words` words."""
    from atlas_pipeline.dedupe import _lines

    return all(len(line.split()) <= max_words for line in _lines(a) ^ _lines(b))


def test_the_story_key_agrees_with_the_line_by_line_definition() -> None:
    r = random.Random(11)
    texts = [d.text for d in (TWIN_A, CORRECTED, OTHER, *LIVE)]
    texts += ["", "Updated 10:42", "Short box\nAnother", "\n".join([*BASE[:3], "tiny"])]
    for _ in range(300):  # a story with lines dropped, shortened, stamped or boxed
        lines = list(BASE[: r.randint(1, 8)])
        for _ in range(r.randint(0, 3)):
            i = r.randrange(len(lines))
            lines[i] = r.choice([" ".join(lines[i].split()[: r.randint(1, 14)]),
                                 f"Posted {r.randint(1, 9)} hours ago", f"Related: {r.choice(WORDS)}"])  # fmt: skip
        texts.append("\n".join(lines))
    for max_words in (0, 3, 12):
        for a in texts:
            for b in r.sample(texts, 25):
                assert volatile_only(a, b, max_words) == _differ_only_in_volatile_lines(
                    a, b, max_words
                ), (a, b)


def test_streamed_texts_label_as_documents_with_their_text_in_any_order() -> None:
    """`cluster_stream` reads the texts in whatever order the lake yields them, those of
    near-duplicate candidates twice, and labels exactly as `cluster` over the same
    documents."""
    docs = [TWIN_A, TWIN_B, CORRECTED, OTHER, *LIVE]
    want = sorted(cluster(docs), key=lambda r: str(r["url"]))
    text_of = {d.text_hash: d.text for d in docs}
    entries = [Entry(d.url, d.fetch_id, d.text_hash, d.canonical) for d in docs]
    for seed in range(5):
        asked: list[list[str]] = []

        def texts(ids, seed=seed, asked=asked):  # type: ignore[no-untyped-def]
            ids = sorted(ids)
            asked.append(list(ids))
            random.Random(seed).shuffle(ids)
            yield from ((h, text_of[h]) for h in ids)
            yield ("not-asked", "a text nobody asked for")

        got = sorted(cluster_stream(entries, texts), key=lambda r: str(r["url"]))
        assert got == want
        # one read of every text, a second of those with a near-duplicate candidate only
        assert len(asked) == 2 and asked[0] == sorted(text_of)
        assert set(asked[1]) == {d.text_hash for d in (TWIN_A, CORRECTED, *LIVE)}


def test_a_partitions_texts_are_never_held_together() -> None:
    """Texts of 50 kB streamed through the clustering: Python memory does not grow with
    their number, since each becomes a 1 kB MinHash and a 16-byte key and is dropped."""
    import tracemalloc

    size = 50_000

    def texts(asked):  # type: ignore[no-untyped-def]
        for i, h in enumerate(sorted(asked)):  # a line of the page's own, over and over
            line = " ".join(WORDS[(i + k) % len(WORDS)] + str(i) for k in range(12)) + "\n"
            yield h, line * (size // len(line))

    def peak(n: int) -> int:
        entries = [Entry(f"https://d.test/p/{i}", f"f{i}", f"{i:064x}") for i in range(n)]
        tracemalloc.start()
        try:
            rows = cluster_stream(entries, texts)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
            assert len(rows) == n and len({r["cluster_id"] for r in rows}) == n

    peak(1)  # datasketch's import (scipy) is not the measure
    few, many = peak(16), peak(64)
    # held together, 64 texts are 3.2 MB and 16 are 0.8 MB
    assert many < 1.5 * few and many < 64 * size / 4, (few, many)


def test_a_long_text_hashed_in_slices_has_the_minhash_of_one_batch() -> None:
    from datasketch import MinHash

    from atlas_pipeline.dedupe import MINHASH_SLICE, _minhash, shingles

    text = "\n".join(story(5, 400))  # about 7,000 shingles: several slices
    assert len(shingles(text, 5)) > 3 * MINHASH_SLICE
    whole = MinHash(num_perm=128, seed=1)
    whole.update_batch(list(shingles(text, 5)))
    assert (_minhash(text, Settings()).hashvalues == whole.hashvalues).all()
