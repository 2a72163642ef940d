"""From bytes to a document: trafilatura for text and metadata, lexbor for links.

Extraction costs tens of milliseconds of CPU per page, so it runs in a pool of worker
processes, never on the fetch event loop; text extraction is keyed by body digest so
identical bytes are extracted once, while link resolution runs per fetched URL (the same
bytes under another URL resolve to other links).
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import re
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

from . import defaults as d

# <meta charset> / http-equiv sniffing window, as browsers do (WHATWG prescan, first 1024 bytes).
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_\-:.]+)""", re.I)
_WS = re.compile(r"\s+")


def decode_html(body: bytes, declared: str | None) -> tuple[str, str]:
    """Bytes -> (text, charset used): BOM, then HTTP charset, then <meta>, then UTF-8."""
    if body.startswith(b"\xef\xbb\xbf"):
        return body[3:].decode("utf-8", errors="replace"), "utf-8"
    candidates = [declared] if declared else []
    m = _META_CHARSET.search(body[:1024])
    if m:
        candidates.append(m.group(1).decode("ascii", errors="ignore"))
    for cs in candidates:
        try:
            return body.decode(cs, errors="replace"), cs.lower()
        except LookupError:
            continue
    return body.decode("utf-8", errors="replace"), "utf-8"


@dataclass(frozen=True, slots=True)
class PageLink:
    href: str  # as written
    anchor: str
    nofollow: bool


def extract_links(html: str) -> tuple[str | None, str | None, str | None, list[PageLink]]:
    """(base href, canonical href, html lang, links) of a page."""
    from selectolax.lexbor import LexborHTMLParser

    tree = LexborHTMLParser(html)
    base = tree.css_first("base[href]")
    canonical = tree.css_first("link[rel~=canonical][href]")
    root = tree.css_first("html")
    links = []
    for node in tree.css("a[href]"):
        rel = (node.attributes.get("rel") or "").lower().split()
        links.append(
            PageLink(
                href=node.attributes.get("href") or "",
                anchor=_WS.sub(" ", node.text(deep=True) or "").strip()[:300],
                nofollow="nofollow" in rel,
            )
        )
    return (
        base.attributes.get("href") if base else None,
        canonical.attributes.get("href") if canonical else None,
        (root.attributes.get("lang") or None) if root else None,
        links,
    )


def extract_text(html: str, url: str) -> dict[str, Any]:
    """Main text and metadata via trafilatura (no network: it only parses)."""
    from trafilatura import bare_extraction

    doc = bare_extraction(html, url=url, with_metadata=True, include_comments=False)
    if isinstance(doc, dict):  # only with as_dict=True, which is not asked for
        doc = None
    if doc is None:
        return {"title": None, "author": None, "date": None, "description": None, "text": ""}
    return {
        "title": doc.title,
        "author": doc.author,
        "date": doc.date,
        "description": doc.description,
        "text": doc.text or "",
    }


def text_hash(text: str) -> str:
    """Digest of whitespace-normalized extracted text (exact content identity)."""
    return hashlib.sha256(_WS.sub(" ", text).strip().encode("utf-8")).hexdigest()


def parse_page(body: bytes, url: str, charset: str | None, want_text: bool) -> dict[str, Any]:
    """Worker-process entry: links always, text only when not already cached for these bytes."""
    html, used = decode_html(body, charset)
    base, canonical, lang, links = extract_links(html)
    out: dict[str, Any] = {
        "charset": used,
        "base_href": base,
        "canonical": canonical,
        "language": lang,
        "links": [(x.href, x.anchor, x.nofollow) for x in links],
    }
    if want_text:
        extracted = extract_text(html, url)
        extracted["language"] = lang
        extracted["text_hash"] = text_hash(extracted["text"])
        extracted["extraction_version"] = d.EXTRACTION_VERSION
        out["extraction"] = extracted
    return out


def _warm() -> None:
    import selectolax.lexbor  # noqa: F401
    import trafilatura  # noqa: F401


class ExtractorPool:
    """Worker processes for parse_page; spawned (not forked) because callers run threads."""

    def __init__(self, workers: int = 0) -> None:
        self.workers = workers or os.cpu_count() or 1
        self._pool = ProcessPoolExecutor(
            max_workers=self.workers,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_warm,
        )

    def submit(
        self, body: bytes, url: str, charset: str | None, want_text: bool
    ) -> Future[dict[str, Any]]:
        return self._pool.submit(parse_page, body, url, charset, want_text)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> ExtractorPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
