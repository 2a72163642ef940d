"""The render lane's decisions, one per (origin, page class): read, moved on by the pure rule
(`render_policy.advance`) and written back in one transaction, so cooperating runs of a shard
add their samples to one tally and every later batch starts from the decision in force."""

from __future__ import annotations

from typing import Any

from ..render_policy import RenderDecision, RenderRule, RenderState, Sample, advance
from .core import Conn, StoreCore


class RenderClassStore(StoreCore):
    """Render decisions per origin and page class."""

    def render_class(self, origin: str, page_class: str) -> RenderDecision | None:
        row = self._select(
            "SELECT * FROM render_classes WHERE origin = :origin AND page_class = :page_class",
            {"origin": origin, "page_class": page_class},
        ).fetchone()
        return None if row is None else _decision(row)

    def render_sample(self, origin: str, page_class: str, sample: Sample | None,
                      rule: RenderRule, now: float) -> RenderDecision:  # fmt: skip
        """The class's decision once `sample` is counted (None: as it stands, a due
        re-sampling started), stored."""
        key = {"origin": origin, "page_class": page_class}
        if sample is None:  # a look, most often at a row this would not change: no write lock
            known = self.render_class(origin, page_class)
            if known is not None and advance(known, None, rule, now) == known:
                return known
        with self._tx() as c:
            c.execute(
                """INSERT INTO render_classes (origin, page_class, state, samples, raw_words,
                                              rendered_words, decided_at, updated_at)
                   VALUES (:origin, :page_class, 'sampling', 0, 0, 0, NULL, :now)
                   ON CONFLICT (origin, page_class) DO NOTHING""",
                {**key, "now": now},
            )
            row = c.execute(
                "SELECT * FROM render_classes WHERE origin = :origin AND page_class = :page_class"
                + self._for_update,
                key,
            ).fetchone()
            previous = _decision(row)
            decision = advance(previous, sample, rule, now)
            if decision != previous:
                _write(c, key, decision, now)
            return decision

    def render_class_rows(self, shard: int) -> list[dict[str, Any]]:
        """Each decision of the shard's origins, with its numbers (the lake's render_classes)."""
        rows = self._select(
            """SELECT r.origin, r.page_class, r.state, r.samples, r.raw_words, r.rendered_words,
                      r.decided_at, r.updated_at
               FROM render_classes r JOIN origins o ON o.origin = r.origin
               WHERE o.shard = :shard ORDER BY r.origin, r.page_class""",
            {"shard": shard},
        )
        return [{**dict(r), "share": _decision(r).share} for r in rows]


def _decision(row: Any) -> RenderDecision:
    raw, rendered = int(row["raw_words"]), int(row["rendered_words"])
    decided_at = None if row["decided_at"] is None else float(row["decided_at"])
    return RenderDecision(RenderState(row["state"]), int(row["samples"]), raw, rendered,
                          raw / rendered if rendered else None, decided_at)  # fmt: skip


def _write(c: Conn, key: dict[str, str], d: RenderDecision, now: float) -> None:
    c.execute(
        """UPDATE render_classes SET state = :state, samples = :samples, raw_words = :raw,
                  rendered_words = :rendered, decided_at = :decided_at, updated_at = :now
           WHERE origin = :origin AND page_class = :page_class""",
        {**key, "state": d.state.value, "samples": d.samples, "raw": d.raw_words,
         "rendered": d.rendered_words, "decided_at": d.decided_at, "now": now},
    )  # fmt: skip
