"""The render lane's part of a cycle's crawl report, from the lake alone: the cycle's documents
by how they were rendered (render_reason), the requests the browser caused by outcome (the
`subresource` fetches), and each page class's decision with the numbers it was made on."""

from __future__ import annotations

import polars as pl

_REASON = pl.DataFrame(schema={"render_reason": pl.String, "documents": pl.UInt32})
_SUBS = pl.DataFrame(schema={"origin": pl.String, "reason": pl.String, "requests": pl.UInt32})
CLASS_COLUMNS = ("origin", "page_class", "state", "samples", "raw_words", "rendered_words",
                 "share", "decided_at")  # fmt: skip


def render_tables(
    documents: pl.DataFrame, fetches: pl.DataFrame, classes: pl.DataFrame
) -> list[tuple[str, pl.DataFrame]]:
    """(heading, table) of the lane's figures; none when the cycle neither rendered a page
    nor has a page class decided or being measured (a web without scripts)."""
    reasons = _REASON
    if documents.height and "render_reason" in documents.columns:
        reasons = (
            documents.select(pl.col("render_reason").fill_null("(none)"))
            .group_by("render_reason").agg(documents=pl.len())
            .sort(["documents", "render_reason"], descending=[True, False])
        )  # fmt: skip
    subs = _SUBS
    if fetches.height:
        subs = (
            fetches.filter(pl.col("kind") == "subresource")
            .group_by("origin", "reason").agg(requests=pl.len())
            .sort(["origin", "requests", "reason"], descending=[False, True, False])
        )  # fmt: skip
    decided = classes.select(CLASS_COLUMNS).sort("origin", "page_class") if classes.height else None
    rendered = reasons.filter(pl.col("render_reason") != "render_not_needed").height > 0
    if not rendered and subs.is_empty() and decided is None:
        return []
    out = [("Documents by render reason", reasons),
           ("Requests the browser caused, by origin and outcome", subs)]  # fmt: skip
    if decided is not None:
        out.append(
            ("Page classes: render decisions", decided.with_columns(pl.col("share").round(3)))
        )
    return out
