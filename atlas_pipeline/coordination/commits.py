"""Fenced commits: a fetch result applies only while its lease is current; with it go
the page's links (discovery), its fetch record, validator counts and adaptive pacing."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..politeness import (
    Answer,
    Pacing,
    PacingRule,
    adapt,
)
from ..reasons import Reason
from ..records import to_json
from ..recrawl import validators_trusted
from .base import (
    Lease,
    Outcome,
)
from .catalogue import CatalogueStore
from .core import (
    Conn,
    marks,
)
from .writes import RECORDS


class CommitStore(CatalogueStore):
    """Fenced commits and what they write."""

    def commit(self, lease: Lease, outcome: Outcome, cycle: str, now: float) -> bool:
        """Apply a fetch result if `lease` still owns the URL; else record a stale attempt."""
        return self.commit_batch([(lease, outcome)], cycle, now)[0]

    def commit_batch(
        self, results: Sequence[tuple[Lease, Outcome]], cycle: str, now: float
    ) -> list[bool]:
        """Several fenced commits in one transaction (group commit); each applies only while
        its lease still owns the URL, else it is recorded as a stale attempt."""
        if not results:
            return []
        with self._tx() as c:
            self._lock_origins(c, {x.origin for x, _ in results}
                               | {cand.origin for _, o in results for _, cand in o.links if cand})  # fmt: skip
            applied = self._apply_all(c, results, now)
            blocked = self._operator_state(c)[1] if not all(applied) else []
            stale = [{"url": lease.url, "fence": lease.fence, "cycle": cycle, "at": now,
                      "record": outcome.record.to_json()}
                     for (lease, outcome), ok in zip(results, applied, strict=True)
                     if not ok and not any(b.matches(lease.url) for b in blocked)]  # fmt: skip
            if stale:
                c.executemany(
                    """INSERT INTO stale_attempts (url, fence, cycle, at, record)
                       VALUES (:url, :fence, :cycle, :at, :record)""",
                    stale,
                )
            live = [r for r, ok in zip(results, applied, strict=True) if ok]
            if live:
                self._write_records(c, live, cycle, now)
                self._note_validators(c, live)
                if self.default_policy.adaptive_max_gap_s > 0:
                    self._adapt(c, live)
        return applied

    def _adapt(self, c: Conn, results: Sequence[tuple[Lease, Outcome]]) -> None:
        """AIMD pacing per origin (politeness.adapt): read each origin's pacing state, apply
        the rule to its answers in commit order, write the decision. A widening moves the
        origin's clock too: its next slot was set from the old gap when its last request was
        claimed, and the overload must slow the very next request, not the one after it."""
        by_origin: dict[str, list[tuple[Lease, Outcome]]] = {}
        for lease, outcome in results:
            by_origin.setdefault(lease.origin, []).append((lease, outcome))
        in_list, params = marks("origin", sorted(by_origin))
        rows = c.execute(
            f"""SELECT origin, min_gap_s, adapt_gap_s, latency_s, stress, next_eligible_at
                FROM origins
                WHERE origin IN ({in_list}) ORDER BY origin"""
            + self._for_update,
            params,
        ).fetchall()
        p = self.default_policy
        rule = PacingRule(p.adaptive_max_gap_s, p.overload_share, p.recover_steps)
        updates: list[dict[str, Any]] = []
        clocks: list[tuple[str, float, float]] = []
        for row in rows:
            latency = None if row["latency_s"] is None else float(row["latency_s"])
            state = Pacing(float(row["adapt_gap_s"]), latency, float(row["stress"]))
            for lease, outcome in by_origin[row["origin"]]:
                answer = Answer(outcome.reason, lease.attempts, outcome.record.elapsed_s)
                state = adapt(state, answer, float(row["min_gap_s"]), rule)
            updates.append({"gap": state.extra_gap_s, "latency": state.latency_s,
                            "stress": state.stress, "origin": row["origin"]})  # fmt: skip
            widened = state.extra_gap_s - float(row["adapt_gap_s"])
            if widened > 0:
                clocks.append((row["origin"], float(row["next_eligible_at"]) + widened, 0.0))
        c.executemany(
            """UPDATE origins SET adapt_gap_s = :gap, latency_s = :latency, stress = :stress
               WHERE origin = :origin""",
            updates,
        )
        if clocks:
            self._push_clocks(c, clocks)

    def _apply_all(
        self, c: Conn, results: Sequence[tuple[Lease, Outcome]], now: float
    ) -> list[bool]:
        """The conditional updates of a group; which of them applied."""
        order = sorted(range(len(results)), key=lambda i: results[i][0].url)  # one lock order
        applied = [False] * len(results)
        for i in order:
            applied[i] = self._apply(c, *results[i], now)
        return applied

    def _apply(self, c: Conn, lease: Lease, outcome: Outcome, now: float) -> bool:
        o = outcome
        cur = c.execute(
            """UPDATE urls SET state = :state, reason = :reason, due_at = :due_at, lease_id = NULL,
                 lease_expires_at = NULL, slot_held = 0, last_fetch_at = :now,
                 last_status = :status, etag = COALESCE(:etag, etag),
                 last_modified = COALESCE(:last_modified, last_modified),
                 content_hash = COALESCE(:content_hash, content_hash),
                 document_id = COALESCE(:document_id, document_id),
                 change_history = COALESCE(:change_history, change_history),
                 last_checked_at = CASE WHEN :checked = 1 THEN :now ELSE last_checked_at END,
                 checks = checks + :checked, changes = changes + :changed,
                 revisit_interval_s = COALESCE(:revisit_interval_s, revisit_interval_s),
                 revisit_reason = COALESCE(:revisit_reason, revisit_reason),
                 change_rate = COALESCE(:change_rate, change_rate)
               WHERE url = :url AND fence = :fence AND state = 'leased'""",
            {
                "state": o.state.value, "reason": o.reason, "due_at": o.due_at, "now": now,
                "status": o.status, "etag": o.etag, "last_modified": o.last_modified,
                "content_hash": o.content_hash, "document_id": o.document_id,
                "change_history": o.change_history, "checked": int(o.checked),
                "changed": int(o.changed), "revisit_interval_s": o.revisit_interval_s,
                "revisit_reason": o.revisit_reason, "change_rate": o.change_rate,
                "url": lease.url, "fence": lease.fence,
            },
        )  # fmt: skip
        return bool(cur.rowcount == 1)

    def _note_validators(self, c: Conn, results: Sequence[tuple[Lease, Outcome]]) -> None:
        """Count each origin's answers to conditional requests and judge its validators
        again (recrawl.validators_trusted)."""
        seen: dict[str, list[int]] = {}
        for lease, outcome in results:
            if outcome.validators is not None:
                n = seen.setdefault(lease.origin, [0, 0])
                n[0] += 1
                n[1] += outcome.validators == "misleading"
        if not seen:
            return
        in_list, params = marks("origin", sorted(seen))
        rows = c.execute(
            f"""SELECT origin, validator_checks, validator_misses, validators_trusted FROM origins
                WHERE origin IN ({in_list}) ORDER BY origin"""
            + self._for_update,
            params,
        ).fetchall()
        updates = []
        for row in rows:
            answered, misled = seen[row["origin"]]
            checks = int(row["validator_checks"]) + answered
            misses = int(row["validator_misses"]) + misled
            trusted = validators_trusted(
                bool(row["validators_trusted"]), checks, misses, self.default_policy.untrusted_after
            )
            updates.append({"checks": checks, "misses": misses, "trusted": int(trusted),
                            "origin": row["origin"]})  # fmt: skip
        c.executemany(
            """UPDATE origins SET validator_checks = :checks, validator_misses = :misses,
                 validators_trusted = :trusted WHERE origin = :origin""",
            updates,
        )

    def _write_records(
        self, c: Conn, results: Sequence[tuple[Lease, Outcome]], cycle: str, now: float
    ) -> None:
        # One discovery for every page of the group: three statements, not three per page.
        cands = [cand for _, o in results for _, cand in o.links if cand is not None]
        decided = self._discover(c, cands, cycle, now)
        decisions = iter(decided)
        records = []
        for lease, outcome in results:
            rows = [{**row, "reason": next(decisions) if cand is not None else row["reason"]}
                    for row, cand in outcome.links]  # fmt: skip
            # an opted-out URL leaves no trace, not even as another page's outlink
            rows = [r for r in rows if r["reason"] != Reason.SUPPRESSED.value]
            records.append({
                "fetch_id": outcome.record.fetch_id, "cycle": cycle, "shard": lease.shard,
                "url": lease.url, "fence": lease.fence, "record": outcome.record.to_json(),
                "links": to_json(rows),
                "document": outcome.document.to_json() if outcome.document else None,
                "body_key": outcome.record.body_key, "committed_at": now,
            })  # fmt: skip
            records += [{"fetch_id": sub.fetch_id, "cycle": cycle, "shard": lease.shard,
                         "url": sub.url, "fence": lease.fence, "record": sub.to_json(),
                         "links": "[]", "document": None, "body_key": None,
                         "committed_at": now} for sub in outcome.subrequests]  # fmt: skip
        # the last row of a fetch id wins, as it did with a statement per row
        self._many(c, RECORDS, list({r["fetch_id"]: r for r in records}.values()))
        self._note_novelty(c, results, decided, cycle, now)
