"""Content dedupe (seed 000 ch. 12; 003 decision 11): three answers to "have I seen this?".

- Same URL: the catalogue's insert-if-absent (coordination).
- Same content: the digest of normalized extracted text (`text_hash`) is the document id;
  every URL with that text maps to it, each row keeping its own provenance.
- Similar content: MinHash over word shingles, LSH for candidates, then a check that the
  texts differ only in volatile lines (timestamps, short boxes such as related links). A
  correction changes a sentence of the story and stays apart, however similar the rest.

Clusters are labels: every member keeps its document, the threshold is recorded on every
row, and `split_urls` undoes a merge (those URLs are labelled alone).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from datasketch import LeanMinHash

METHOD = "minhash-lsh+volatile-lines"
SPLIT = "split"  # an operator took the URL out of its cluster
METHODS = (METHOD, SPLIT)
_WORD = re.compile(r"\w+", re.UNICODE)
MINHASH_SLICE = 1024  # shingles hashed at a time
# Stamps a page re-renders on every view: clock times, ISO dates, "5 minutes ago".
_STAMP = re.compile(
    r"\b\d{1,2}:\d{2}(?::\d{2})?\b|\b\d{4}-\d{2}-\d{2}(?:t[\d:.]+z?)?\b"
    r"|\b\d+\s+(?:seconds?|minutes?|hours?|days?)\s+ago\b",
    re.I,
)


@dataclass(frozen=True, slots=True)
class Doc:
    url: str
    fetch_id: str
    text_hash: str
    text: str
    canonical: str | None = None  # the URL its rel=canonical names (normalized), if any


@dataclass(frozen=True, slots=True)
class Entry:
    """A document as dedupe sees it before its text is read."""

    url: str
    fetch_id: str
    text_hash: str
    canonical: str | None = None


# Given document ids, yields (id, text) for those it holds, in any order, a few at a time.
TextStream = Callable[[Collection[str]], Iterable[tuple[str, str | None]]]


@dataclass(frozen=True, slots=True)
class Settings:
    threshold: float = 0.8  # estimated Jaccard of shingles for an LSH candidate
    num_perm: int = 128
    shingle: int = 5  # words per shingle
    volatile_words: int = 12  # a differing line this short counts as a box, not the story
    split_urls: frozenset[str] = frozenset()  # merges undone by an operator


def shingles(text: str, k: int) -> set[bytes]:
    words = _WORD.findall(text.lower())
    if len(words) <= k:
        return {" ".join(words).encode()} if words else set()
    return {" ".join(words[i : i + k]).encode() for i in range(len(words) - k + 1)}


def _lines(text: str) -> set[str]:
    """Lines with their stamps masked, as words: "Updated 10:42" equals "Updated 11:07"."""
    return {
        " ".join(_WORD.findall(_STAMP.sub(" STAMP ", line).lower()))
        for line in text.splitlines()
        if line.strip()
    }


def story_key(text: str, max_words: int) -> bytes:
    """The digest of the text's lines longer than `max_words` (stamps masked): two texts
    differ only in volatile lines exactly when their keys are equal. A line's length is its
    own, so a long line in one text's set difference is a long line the other lacks; the
    key lets a partition be judged a text at a time, holding 16 bytes for each."""
    story = sorted({line for line in _lines(text) if len(line.split()) > max_words})
    return hashlib.blake2b("\n".join(story).encode(), digest_size=16).digest()


def volatile_only(a: str, b: str, max_words: int) -> bool:
    """True when the texts differ only in stamps (times, dates, "ago") and in short lines such
    as a related-links box; a changed sentence of the story is never volatile, whatever
    words it holds."""
    return story_key(a, max_words) == story_key(b, max_words)


def _minhash(text: str, s: Settings) -> LeanMinHash:
    # datasketch pulls in scipy (0.4 s): imported when a batch dedupes, not by every process
    # that loads the definitions (each Dagster run does)
    from datasketch import LeanMinHash, MinHash

    m = MinHash(num_perm=s.num_perm, seed=1)
    found = list(shingles(text, s.shingle)) or [b""]
    # in slices: a batch's permuted hashes are a (shingles x num_perm) matrix, 4 MB for a
    # 56 kB text, and the allocator kept what such matrices had taken; the minimum is the same
    for i in range(0, len(found), MINHASH_SLICE):
        m.update_batch(found[i : i + MINHASH_SLICE])
    return LeanMinHash(m)  # without the permutations a MinHash carries: 1 KB less a text


def cluster(docs: Sequence[Doc], s: Settings = Settings()) -> list[dict[str, object]]:
    """`cluster_stream` over documents that carry their text."""
    text_of: dict[str, str] = {}
    for d in sorted(docs, key=lambda d: (d.text_hash, d.url)):
        text_of.setdefault(d.text_hash, d.text)
    entries = [Entry(d.url, d.fetch_id, d.text_hash, d.canonical) for d in docs]
    return cluster_stream(entries, lambda ids: ((h, text_of[h]) for h in ids), s)


def cluster_stream(
    entries: Sequence[Entry], texts: TextStream, s: Settings = Settings()
) -> list[dict[str, object]]:
    """One row per document: its document id (exact content), its near-duplicate cluster
    label and how it got it. `texts` streams the texts of the ids asked for, in any order:
    each is turned into its MinHash and dropped, and those with a near-duplicate candidate
    are read again for their story keys, so memory follows the number of documents, not
    their text. The labels do not depend on that order: LSH candidates are symmetric and a
    cluster's label is its least document id."""
    reps: dict[str, Entry] = {}
    for e in sorted(entries, key=lambda e: (e.text_hash, e.url)):
        reps.setdefault(e.text_hash, e)  # one representative per exact content
    parent = {h: h for h in reps}

    def root(h: str) -> str:
        while parent[h] != h:
            parent[h] = parent[parent[h]]
            h = parent[h]
        return h

    from datasketch import MinHashLSH

    lsh = MinHashLSH(threshold=s.threshold, num_perm=s.num_perm)
    wanted = {h for h, e in reps.items() if e.url not in s.split_urls}
    hashes: dict[str, LeanMinHash] = {}
    involved: set[str] = set()  # texts with a near-duplicate candidate
    for h, text in texts(sorted(wanted)):
        if h not in wanted or h in hashes or not text or not text.strip():
            continue
        hashes[h] = _minhash(text, s)
        if found := lsh.query(hashes[h]):
            involved.update(found, (h,))
        lsh.insert(h, hashes[h])
    # A second read, of the candidates' texts only, for their story keys (2.5 ms a 56 kB
    # text): most pages of a web have no near-duplicate and are read once. The pairs are
    # asked of the index again rather than kept: a site of near-identical pages has a number
    # of them that grows with the square of its pages.
    keys = {h: story_key(text or "", s.volatile_words)
            for h, text in (texts(sorted(involved)) if involved else ()) if h in involved}  # fmt: skip
    for h, key in keys.items():
        for other in lsh.query(hashes[h]):
            if other != h and keys.get(other) == key:
                a, b = root(h), root(other)
                parent[max(a, b)] = min(a, b)
    cluster_of = {e.url: root(e.text_hash) for e in entries if e.url not in s.split_urls}
    rows = []
    for d in entries:
        alone = d.url in s.split_urls
        label = d.text_hash if alone else root(d.text_hash)
        rep = hashes.get(label)
        similarity = (
            1.0
            if label == d.text_hash or rep is None
            else round(hashes[d.text_hash].jaccard(rep), 4)
        )
        rows.append({
            "url": d.url, "fetch_id": d.fetch_id, "document_id": d.text_hash,
            "cluster_id": label, "similarity": similarity, "threshold": s.threshold,
            "method": SPLIT if alone else METHOD,
            # a canonical claim is accepted only when the named page's content is the same
            "canonical_url": d.canonical,
            "canonical_confirmed": None if not d.canonical or d.canonical not in cluster_of
            else cluster_of[d.canonical] == label,
        })  # fmt: skip
    return rows


def members(rows: Iterable[dict[str, object]], key: str) -> dict[object, set[object]]:
    """Group cluster rows' URLs by `key` (document_id or cluster_id)."""
    out: dict[object, set[object]] = {}
    for r in rows:
        out.setdefault(r[key], set()).add(r["url"])
    return out
