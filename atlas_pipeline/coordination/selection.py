"""Frontier selection: which due URLs of a shard a cycle queues (frontier.split_budget and
frontier_key decide), the queue as the frontier table shows it, and what a batch leaves
for later (paused origins, a backoff past the batch's patience)."""

from __future__ import annotations

from typing import Any

from ..frontier import frontier_key, split_budget
from ..reasons import Reason
from .core import (
    _PAUSED,
    _REVISITED,
    Row,
    StoreCore,
    _selection_reason,
)


class FrontierStore(StoreCore):
    """Frontier selection and the queue's end-of-batch marks."""

    def select_frontier(self, cycle: str, shard: int, now: float) -> list[dict[str, Any]]:
        """Queue this shard's due URLs for `cycle`, at most `cycle_budget` per origin; idempotent."""
        with self._tx() as c:
            self._lock_shard(c, shard)
            counts: dict[str, int] = {
                r["origin"]: r["n"]
                for r in c.execute(
                    """SELECT origin, COUNT(*) AS n FROM urls WHERE shard = :shard AND cycle = :cycle
                       GROUP BY origin""",
                    {"shard": shard, "cycle": cycle},
                )
            }
            due = c.execute(
                # Robots-blocked URLs come back once their origin's policy is due for a refresh:
                # the claim fetches robots.txt first and judges them against the new rules.
                """SELECT seq, origin, state, priority, discovered_at, depth FROM urls
                   WHERE shard = :shard AND (cycle IS NULL OR cycle <> :cycle) AND (
                       state = 'discovered'
                       OR (state IN ('eligible', 'failed_retryable', 'fetched', 'quarantined')
                           AND due_at <= :now)
                       OR (state = 'blocked' AND reason = 'robots_disallowed' AND origin IN
                           (SELECT origin FROM origins WHERE robots_expires_at <= :now)))""",
                {"shard": shard, "cycle": cycle, "now": now},
            ).fetchall()
            # aging: a URL left out of earlier cycles by the budget gains priority as it waits
            aging = self.default_policy.aging_per_hour
            due = sorted(due, key=lambda r: frontier_key(
                float(r["priority"]), float(r["discovered_at"]), int(r["depth"]), int(r["seq"]),
                now, aging))  # fmt: skip
            picked = [
                (_selection_reason(row["state"]), row["seq"])
                for row in self._split_budget(due, counts)
            ]
            c.executemany(
                """UPDATE urls SET cycle = :cycle, state = 'eligible', reason = :reason,
                   attempts = CASE WHEN state IN ('fetched', 'quarantined') THEN 0 ELSE attempts END
                   WHERE seq = :seq""",
                [{"cycle": cycle, "reason": reason, "seq": seq} for reason, seq in picked],
            )
            c.executemany(
                """UPDATE origins SET admitted_cycle = :cycle, admitted_count = :n
                   WHERE origin = :origin""",
                [{"cycle": cycle, "n": n, "origin": o} for o, n in counts.items()],
            )
        return self.frontier_rows(cycle, shard)

    def _split_budget(self, due: list[Row], counts: dict[str, int]) -> list[Row]:
        """Each origin's picks under its free budget (frontier.split_budget); `counts` is
        advanced."""
        by_origin: dict[str, list[Row]] = {}
        for row in due:
            by_origin.setdefault(row["origin"], []).append(row)
        picked: list[Row] = []
        for origin, rows in by_origin.items():
            free = self.cycle_budget - counts.get(origin, 0)
            revisit = [row["state"] in _REVISITED for row in rows]
            mine = [
                rows[i] for i in split_budget(revisit, free, self.default_policy.discovery_share)
            ]
            counts[origin] = counts.get(origin, 0) + len(mine)
            picked += mine
        return picked

    def frontier_rows(self, cycle: str, shard: int) -> list[dict[str, Any]]:
        rows = self._select(
            """SELECT url, origin, depth, priority, state, reason, due_at, attempts
               FROM urls WHERE shard = :shard AND cycle = :cycle
               ORDER BY origin, priority DESC, seq""",
            {"shard": shard, "cycle": cycle},
        )
        return [dict(r) for r in rows]

    def mark_paused(self, cycle: str, shard: int) -> int:
        """Give the open URLs of paused origins the reason they were not fetched."""
        with self._tx() as c:
            cur = c.execute(
                f"""UPDATE urls SET reason = :reason WHERE shard = :shard AND cycle = :cycle
                    AND state IN ('eligible', 'failed_retryable')
                    AND origin IN (SELECT o.origin FROM origins o WHERE EXISTS ({_PAUSED}))""",
                {"reason": Reason.OPERATOR_PAUSED.value, "shard": shard, "cycle": cycle},
            )
            return int(cur.rowcount)

    def defer_remaining(self, cycle: str, shard: int, reason: str) -> int:
        with self._tx() as c:
            cur = c.execute(
                """UPDATE urls SET reason = :reason WHERE shard = :shard AND cycle = :cycle
                   AND state IN ('eligible', 'failed_retryable')""",
                {"reason": reason, "shard": shard, "cycle": cycle},
            )
            return int(cur.rowcount)
