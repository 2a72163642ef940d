"""A page parsed in a worker that stores its own body and text in a local body store.

A fetch batch's process used to do this itself: gzip and write the body, look up and write
the extraction cache, each a hop to a body thread, with the text (tens of kB a page) pickled
back from the worker only to be written to disk again. With a folder store the worker holds
both in hand, so it writes them, after the parse and before the answer the commit waits for,
in one file (`BodyStore.put_parsed`: a second file a page was the largest thing a worker did
beyond the parse), and sends back the extraction without its text. A parse that kills its
worker leaves the body to the batch, which stores it before it commits the failure.
An object store (`ObjectBodyStore`) keeps the batch-side path: workers do not open one.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .bodies import Bodies, BodyStore
from .parsing import parse_page
from .render_policy import words


class KeepFailed(Exception):
    """The worker could not write to the body store (a disk's problem, not the document's)."""


@dataclass(frozen=True, slots=True)
class Keep:
    """Where and how a worker keeps what it parsed. `key` is `bodies.digest(body)`; with
    `words`, a page with a script element answers its text's word count (the render lane's
    measure of the raw HTML) under extraction["words"]. The text itself is never sent back:
    pickling tens of kB a page to the batch's process, only to count them there, cost the
    batch more than counting costs the worker."""

    root: str
    key: str
    version: str
    words: bool = False

    def __reduce__(self) -> tuple[type[Keep], tuple[str, str, str, bool]]:
        # sent with every job: a dataclass's own pickling walks fields() in Python
        return (Keep, (self.root, self.key, self.version, self.words))


def keep_root(bodies: Bodies) -> str | None:
    """The folder a worker keeps bodies in, or None: the batch stores them (object store)."""
    return str(bodies.root) if isinstance(bodies, BodyStore) else None


def text_chars(extraction: dict[str, Any]) -> int:
    """Characters of an extraction's text, whether or not the text came with it."""
    if "text_chars" in extraction:
        return int(extraction["text_chars"])
    return len(extraction["text"])


@functools.lru_cache(maxsize=4)
def _store(root: str) -> BodyStore:
    """One store a folder for a worker's life: it remembers the folders it has made."""
    return BodyStore(Path(root))


def parse_kept(
    body: bytes,
    url: str,
    charset: str | None,
    want_text: bool,
    meta_names: tuple[str, ...],
    keep: Keep,
) -> dict[str, Any]:
    """`parsing.parse_page`, storing the body and the text together after it. The text comes
    from the store's extraction cache when these bytes were extracted before (`reused` says
    so)."""
    store = _store(keep.root)
    try:
        # touched before the cache is read and the parse runs, as a put would: the sweeper
        # then spares a stored body (and the text it carries) for as long as this takes
        stored = store.touch(keep.key)
        cached = store.get_extraction(keep.key, keep.version) if want_text else None
    except OSError as exc:
        raise KeepFailed(f"body store {keep.root}: {exc}") from None
    out = parse_page(body, url, charset, want_text and cached is None, meta_names)
    out["reused"] = cached is not None
    fresh = out["extraction"] if want_text and cached is None else None
    try:
        store.put_parsed(keep.key, body, keep.version, fresh, stored)
    except OSError as exc:
        raise KeepFailed(f"body store {keep.root}: {exc}") from None
    if not want_text:
        return out
    extraction = fresh if cached is None else cached
    assert extraction is not None
    extraction = {**extraction, "text_chars": text_chars(extraction)}
    text = extraction.pop("text")
    if keep.words and out["has_script"]:
        extraction["words"] = words(text)
    out["extraction"] = extraction
    return out
