"""The work queue: claims (origin first, under fairness, pacing and
robots), leases, the sweep of expired ones and the fetch-batch fences."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ..politeness import (
    Decision,
    FairnessRule,
    claim_order,
    class_scores,
    kept_scores,
    may_claim,
    waiting_classes,
)
from ..reasons import Reason
from ..robots import RobotsPolicy, RobotsStatus
from .base import (
    BatchLease,
    Claim,
    Drained,
    Lease,
    RobotsTask,
    Wait,
)
from .core import (
    _PAUSED,
    _POLL_S,
    _SCAN,
    Conn,
    Row,
    _clock_update,
    _has_capacity,
    _origin_slot,
)
from .origins import OriginStore
from .writes import BLOCK, CLOCK, LEASE, RELEASE


class QueueStore(OriginStore):
    """Frontier selection, claims, leases and the batch fence."""

    def claim(self, cycle: str, shard: int, now: float, token: str, lease_s: float) -> Claim:
        got = self.claim_batch(cycle, shard, now, token, lease_s, 1)
        return got[0] if isinstance(got, list) else got

    def claim_batch(
        self,
        cycle: str,
        shard: int,
        now: float,
        token: str,
        lease_s: float,
        limit: int,
        release: Sequence[tuple[str, int]] = (),
    ) -> list[Lease | RobotsTask] | Wait | Drained:
        """Up to `limit` claims in one transaction, after giving back the slots of `release`
        ((url, fence) of finished requests): one round trip set for many URLs."""
        with self._tx() as c:
            self._release(c, release)
            self._lock_claims(c, shard)
            params: dict[str, Any] = {"now": now, "cycle": cycle, "shard": shard}
            # Fast path: origins whose clocks allow a request now and that have due work,
            # earliest clock first; each EXISTS stops at its first index entry.
            ready_from = f"""FROM origins o
                   WHERE o.shard = :shard AND o.next_eligible_at <= :now AND o.backoff_until <= :now
                     AND EXISTS (SELECT 1 FROM urls u WHERE u.origin = o.origin AND u.cycle = :cycle
                                 AND u.state IN ('eligible', 'failed_retryable') AND u.due_at <= :now)
                     AND NOT EXISTS ({_PAUSED})"""
            ready_sql = f"""SELECT o.*, {self._in_flight_sql} AS in_flight {ready_from}
                   ORDER BY o.next_eligible_at LIMIT :n"""
            # wider than `limit`, so classes under their quota are seen behind a big one
            params["n"] = max(64, 4 * limit)
            ready_now = c.execute(ready_sql + self._skip_locked, params).fetchall()
            if not ready_now and self._wait_locked:
                # Every ready origin is held by another claimer: wait for those claims to end
                # (taking the rows in origin order, the order commits lock them in) and judge
                # the origins again, so the answer says when to come back, not "at once".
                c.execute(
                    f"SELECT 1 {ready_from} ORDER BY o.origin LIMIT :n" + self._wait_locked, params
                )
                ready_now = c.execute(ready_sql + self._skip_locked, params).fetchall()
            ready_now = self._recount_in_flight(c, ready_now, now)
            claims: list[Lease | RobotsTask] = []
            # robots-blocked URLs found on the way, written with the leases: one statement each
            blocked: list[dict[str, Any]] = []
            clocks: list[tuple[Any, ...]] = []
            buckets: set[str] = set()  # buckets served by this call: one claim each
            # longest-waiting first (the clock is when an origin became eligible): aging
            ready = [o for o in ready_now if _has_capacity(o, now)]
            scores = self._class_scores(c, shard, now)
            pending = Counter(o["fair_class"] for o in ready)  # classes with eligible work
            looked = False
            for origin in [ready[i] for i in claim_order([_origin_slot(o) for o in ready])]:
                if len(claims) >= limit:
                    break
                cls = origin["fair_class"]
                if origin["bucket"] in buckets:
                    pending[cls] -= 1
                    continue
                if not self._may_claim(origin, scores, pending, now).claim:
                    continue
                looked = True
                pending[cls] -= 1
                got = self._claim_origin(c, origin, cycle, now, token, lease_s, limit - len(claims),
                                         blocked)  # fmt: skip
                claims.extend(got)
                if got:
                    clocks.append(_clock_update(origin["origin"], got[0]))
                    buckets.add(origin["bucket"])
                    scores[cls] = scores.get(cls, 0.0) + len(got)
            self._many(c, BLOCK, blocked)
            if claims:
                self._save_class_scores(c, shard, scores, now)
                leases = sorted((x for x in claims if isinstance(x, Lease)), key=lambda x: x.url)
                self._many(c, LEASE, [
                    {"lease_id": x.lease_id, "expires_at": x.expires_at, "fence": x.fence,
                     "robots_version": x.robots_version, "url": x.url} for x in leases])  # fmt: skip
                self._many(c, CLOCK, [
                    # in origin order, the order commits lock origins in: no deadlocks
                    {"next_eligible_at": t, "robots": robots, "lease_id": lease_id,
                     "lease_until": until, "origin": origin}
                    for t, robots, lease_id, _, until, origin
                    in sorted(clocks, key=lambda u: u[-1])])  # fmt: skip
                if self._shared_buckets:
                    # one clock per bucket: its other origins wait as long
                    self._push_clocks(c, [(u[-1], u[0], 0.0) for u in clocks])
                return claims
            # every due URL of a ready origin was robots-blocked: look again at once
            return Wait(now) if looked else self._when_next(c, cycle, shard, now)

    def _may_claim(
        self, origin: Row, scores: dict[str, float], pending: Counter[str], now: float
    ) -> Decision:
        """The claim scheduler's rule (politeness.may_claim) for `origin`; the classes
        waiting are those with ready origins not yet served (`pending`)."""
        p = self.default_policy
        rule = FairnessRule(p.class_quota, p.starvation_bound_s)
        return may_claim(_origin_slot(origin), scores, waiting_classes(pending), now, rule)

    def _class_scores(self, c: Conn, shard: int, now: float) -> dict[str, float]:
        """Recent attempts per fairness class in this shard, decayed to `now`."""
        if self.default_policy.class_quota >= 1.0:
            return {}
        rows = c.execute(
            "SELECT fair_class, score, at FROM class_usage WHERE shard = :shard", {"shard": shard}
        ).fetchall()
        usage = [(r[0], float(r[1]), float(r[2])) for r in rows]
        return class_scores(usage, now, self.default_policy.class_window_s)

    def _save_class_scores(self, c: Conn, shard: int, scores: dict[str, float], now: float) -> None:
        if self.default_policy.class_quota >= 1.0:
            return
        c.executemany(
            """INSERT INTO class_usage (shard, fair_class, score, at)
               VALUES (:shard, :fair_class, :score, :at)
               ON CONFLICT (shard, fair_class) DO UPDATE SET score = excluded.score, at = excluded.at""",
            [{"shard": shard, "fair_class": k, "score": v, "at": now}
             for k, v in sorted(kept_scores(scores).items())],
        )  # fmt: skip

    def _claim_origin(
        self,
        c: Conn,
        origin: Row,
        cycle: str,
        now: float,
        token: str,
        lease_s: float,
        limit: int,
        blocked: list[dict[str, Any]],
    ) -> list[Lease | RobotsTask]:
        """The robots task, or up to `limit` URLs of one origin (one while it has a gap);
        the robots-blocked URLs passed on the way are added to `blocked`."""
        gap = float(origin["min_gap_s"]) + float(origin["adapt_gap_s"])
        if gap > 0:
            gap += self.default_policy.gap_guard_s
        if origin["robots_expires_at"] <= now:
            return [RobotsTask(origin["origin"], uuid.uuid4().hex, now + lease_s, now, gap)]
        free = int(origin["max_in_flight"]) - int(origin["in_flight"])
        n = 1 if gap > 0 else max(1, min(limit, free))
        return list(self._lease_best_urls(c, origin, self._policy(origin), cycle, now, token,
                                          lease_s, gap, n, blocked))  # fmt: skip

    def _when_next(self, c: Conn, cycle: str, shard: int, now: float) -> Wait | Drained:
        """Nothing is claimable now: when might something be (the slow, full look)?"""
        origins = c.execute(
            f"""SELECT o.*,
                 {self._in_flight_sql} AS in_flight,
                 (SELECT MIN(u.due_at) FROM urls u WHERE u.origin = o.origin AND u.cycle = :cycle
                    AND u.state IN ('eligible', 'failed_retryable')) AS due
               FROM origins o WHERE o.shard = :shard AND NOT EXISTS ({_PAUSED})""",
            {"now": now, "cycle": cycle, "shard": shard},
        ).fetchall()
        ready = [max(o["next_eligible_at"], o["backoff_until"], o["due"]) for o in origins
                 if o["due"] is not None and _has_capacity(o, now)]  # fmt: skip
        busy = any(o["due"] is not None and not _has_capacity(o, now) for o in origins)
        if ready:
            # A slot held elsewhere may free up any moment: look again soon, then.
            soonest = max(min(ready), now)
            return Wait(min(soonest, now + _POLL_S) if busy else soonest)
        if busy:
            return Wait(now + _POLL_S)
        leased = c.execute(
            """SELECT MIN(lease_expires_at) FROM urls
               WHERE shard = :shard AND cycle = :cycle AND state = 'leased'""",
            {"shard": shard, "cycle": cycle},
        ).fetchone()[0]
        return Drained() if leased is None else Wait(min(leased, now + _POLL_S))

    def _policy(self, origin_row: Row) -> RobotsPolicy:
        key = (origin_row["origin"], int(origin_row["robots_version"]))
        policy = self._policies.get(key)
        if policy is None:
            policy = RobotsPolicy(
                key[0], key[1], RobotsStatus(origin_row["robots_status"]), origin_row["robots_text"]
            )
            self._policies[key] = policy
        return policy

    def _lease_best_urls(
        self,
        c: Conn,
        origin: Row,
        policy: RobotsPolicy,
        cycle: str,
        now: float,
        token: str,
        lease_s: float,
        gap: float,
        n: int,
        blocked: list[dict[str, Any]],
    ) -> list[Lease]:
        rows = c.execute(
            """SELECT seq, url, depth, fence, attempts, etag, last_modified, redirect_chain, kind,
                      priority, content_hash, document_id, change_history, last_checked_at,
                      revisit_interval_s
               FROM urls
               WHERE origin = :origin AND cycle = :cycle
                 AND state IN ('eligible', 'failed_retryable')
                 AND due_at <= :now ORDER BY priority DESC, seq LIMIT :n""",
            {"origin": origin["origin"], "cycle": cycle, "now": now, "n": _SCAN + n - 1},
        ).fetchall()
        leases: list[Lease] = []
        for row in rows:
            if len(leases) == n:
                break
            if not policy.allows(row["url"], token):
                blocked.append({"reason": Reason.ROBOTS_DISALLOWED.value,
                                "version": policy.version, "seq": row["seq"]})  # fmt: skip
                continue
            leases.append(
                Lease(
                    url=row["url"],
                    origin=origin["origin"],
                    shard=int(origin["shard"]),
                    depth=int(row["depth"]),
                    fence=int(row["fence"]) + 1,
                    lease_id=uuid.uuid4().hex,
                    expires_at=now + lease_s,
                    attempts=int(row["attempts"]) + 1,
                    robots_version=policy.version,
                    etag=row["etag"],
                    last_modified=row["last_modified"],
                    claimed_at=now,
                    gap_s=gap,
                    redirect_chain=tuple(json.loads(row["redirect_chain"] or "[]")),
                    kind=row["kind"],
                    priority=float(row["priority"]),
                    content_hash=row["content_hash"],
                    document_id=row["document_id"],
                    change_history=row["change_history"],
                    last_checked_at=row["last_checked_at"],
                    revisit_interval_s=row["revisit_interval_s"],
                    conditional=bool(origin["validators_trusted"]),
                )
            )
        return leases

    def release_slots(self, finished: Sequence[tuple[str, int]]) -> None:
        """Requests are over: give their origin slots back (only the current attempts can)."""
        if finished:
            with self._tx() as c:
                self._release(c, finished)

    def _release(self, c: Conn, finished: Sequence[tuple[str, int]]) -> None:
        # one lock order for every writer
        self._many(c, RELEASE, [{"url": url, "fence": fence} for url, fence in sorted(finished)])

    def extend_lease(self, lease: Lease, now: float, lease_s: float) -> Lease | None:
        """Extend a live lease once, with its current fence; None if it is stale, expired or
        already extended (the worker must then give up, not commit late)."""
        with self._tx() as c:
            cur = c.execute(
                """UPDATE urls SET lease_expires_at = :expires_at, extended = 1
                   WHERE url = :url AND fence = :fence AND state = 'leased' AND extended = 0
                     AND lease_expires_at > :now""",
                {"expires_at": now + lease_s, "url": lease.url, "fence": lease.fence, "now": now},
            )
            return replace(lease, expires_at=now + lease_s) if cur.rowcount == 1 else None

    def sweep(self, now: float) -> int:
        """Return expired leases to eligible, attempts kept."""
        with self._tx() as c:
            cur = c.execute(
                """UPDATE urls SET state = 'eligible', reason = :reason, lease_id = NULL,
                   lease_expires_at = NULL, slot_held = 0
                   WHERE state = 'leased' AND lease_expires_at <= :now""",
                {"reason": Reason.LEASE_EXPIRED.value, "now": now},
            )
            c.execute("DELETE FROM sub_slots WHERE until <= :now", {"now": now})
            return int(cur.rowcount)

    def acquire_batch(self, cycle: str, shard: int, holder: str, now: float) -> BatchLease:
        """Take the next fence token of partition (cycle, shard) for `holder` (a run id)."""
        with self._tx() as c:
            self._lock_shard(c, shard)
            row = c.execute(
                "SELECT fence FROM batch_leases WHERE cycle = :cycle AND shard = :shard"
                + self._for_update,
                {"cycle": cycle, "shard": shard},
            ).fetchone()
            fence = (int(row["fence"]) if row else 0) + 1
            c.execute(
                """INSERT INTO batch_leases (cycle, shard, fence, holder, acquired_at)
                   VALUES (:cycle, :shard, :fence, :holder, :acquired_at)
                   ON CONFLICT (cycle, shard) DO UPDATE SET fence = excluded.fence,
                   holder = excluded.holder, acquired_at = excluded.acquired_at""",
                {"cycle": cycle, "shard": shard, "fence": fence, "holder": holder,
                 "acquired_at": now},
            )  # fmt: skip
        return BatchLease(cycle, shard, fence, holder)

    def batch_lease(self, cycle: str, shard: int) -> BatchLease | None:
        """The newest batch lease of a partition."""
        row = self._select(
            "SELECT fence, holder FROM batch_leases WHERE cycle = :cycle AND shard = :shard",
            {"cycle": cycle, "shard": shard},
        ).fetchone()
        return BatchLease(cycle, shard, int(row["fence"]), row["holder"]) if row else None
