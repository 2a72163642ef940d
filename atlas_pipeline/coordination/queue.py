"""The work queue: claims (origin first, under fairness, pacing and robots) and the slots
their requests give back; what happens to a lease after its claim is in leases.py."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..politeness import (
    Decision,
    FairnessRule,
    claim_order,
    class_scores,
    has_capacity,
    kept_scores,
    may_claim,
    waiting_classes,
)
from ..reasons import Reason
from ..robots import RobotsPolicy, RobotsStatus
from ..traps import query_key_path
from .base import (
    Claim,
    Drained,
    Lease,
    RobotsTask,
    Wait,
)
from .catalogue import variant_rooms
from .core import (
    _PAUSED,
    _POLL_S,
    _SCAN,
    Conn,
    Row,
    _clock_update,
    _has_capacity,
    _origin_slot,
    origin_gap_s,
)
from .leases import lease_of
from .origins import OriginStore
from .writes import BLOCK, CLOCK, LEASE, RELEASE


@dataclass
class _Claiming:
    """What one claim call has decided so far."""

    order: list[Row]  # the ready origins with a free slot, as the look found them, in turn
    scores: dict[str, float]  # recent attempts per fairness class, this call's included
    pending: Counter[str]  # ready origins per class not yet served: the classes waiting
    claims: list[Lease | RobotsTask] = field(default_factory=list)
    blocked: list[dict[str, Any]] = field(default_factory=list)  # robots-blocked URLs met
    clocks: list[tuple[Any, ...]] = field(default_factory=list)
    buckets: set[str] = field(default_factory=set)  # buckets served: one claim each
    looked: bool = False  # an origin was served (its URLs may all have been blocked)
    took: bool = False  # an origin was taken (not every one held by another claimer)
    held: bool = False  # an origin row is locked by this claim, with a free slot or not
    deferred: list[str] = field(default_factory=list)  # variants held back (traps.variant_room)


def _part(rest: list[Row], need: int, now: float) -> list[Row]:
    """The next origins of the claim order to take: as many as should give `need` claims
    (an origin's free slots; one for a robots task or while it has a gap)."""
    part: list[Row] = []
    expect = 0
    for o in rest:
        part.append(o)
        gap = float(o["min_gap_s"]) + float(o["adapt_gap_s"])
        one = gap > 0 or o["robots_expires_at"] <= now
        expect += 1 if one else max(1, int(o["max_in_flight"]) - int(o["in_flight"]))
        if expect >= need:
            break
    return part


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
            params: dict[str, Any] = {"now": now, "cycle": cycle, "shard": shard,
                                      **self._owner_params(now)}  # fmt: skip
            # Fast path: origins whose clocks allow a request now and that have due work,
            # earliest clock first; each EXISTS stops at its first index entry.
            ready_from = f"""FROM origins o
                   WHERE o.shard = :shard AND o.next_eligible_at <= :now AND o.backoff_until <= :now
                     AND EXISTS (SELECT 1 FROM urls u WHERE u.origin = o.origin AND u.cycle = :cycle
                                 AND u.state IN ('eligible', 'failed_retryable') AND u.due_at <= :now)
                     AND NOT EXISTS ({_PAUSED}){self._owned}"""
            ready_sql = f"""SELECT {self._look_columns}, {self._in_flight_sql} AS in_flight {ready_from}
                   ORDER BY o.next_eligible_at LIMIT :n"""
            # wider than `limit`, so classes under their quota are seen behind a big one
            params["n"] = max(64, 4 * limit)
            for attempt in (0, 1):
                k = self._claim_round(c, ready_sql, params, cycle, now, token, lease_s, limit)
                if k.took or k.held or not k.order or not self._waits or attempt:
                    break
                # Every ready origin is held by another claimer: wait for the first ones'
                # claims to end and look again, so the answer says when to come back. Only
                # a claim that holds no origin row may wait: rows it locked and found full
                # are out of origin order with the ones it would wait for, and two such
                # claims (or one and a commit) deadlocked (CI of 79e4916, 8 claimers).
                self._take_origins(c, _part(k.order, limit, now), now, params, wait=True)
            self._many(c, BLOCK, k.blocked)
            if k.claims:
                self._save_class_scores(c, shard, k.scores, now)
                leases = sorted((x for x in k.claims if isinstance(x, Lease)), key=lambda x: x.url)
                self._many(c, LEASE, [
                    {"lease_id": x.lease_id, "expires_at": x.expires_at, "fence": x.fence,
                     "robots_version": x.robots_version, "url": x.url} for x in leases])  # fmt: skip
                self._many(c, CLOCK, [
                    # in origin order, the order commits lock origins in: no deadlocks
                    {"next_eligible_at": t, "robots": robots, "lease_id": lease_id,
                     "lease_until": until, "origin": origin}
                    for t, robots, lease_id, _, until, origin
                    in sorted(k.clocks, key=lambda u: u[-1])])  # fmt: skip
                if self._shared_buckets:
                    # one clock per bucket: its other origins wait as long
                    self._push_clocks(c, [(u[-1], u[0], 0.0) for u in k.clocks])
                return k.claims
            if k.deferred:
                # a path's variants wait for the verdicts of those out: their commits
                return Wait(now + _POLL_S)
            # every due URL of a ready origin was robots-blocked: look again at once
            return Wait(now) if k.looked else self._when_next(c, cycle, shard, now)

    def _claim_round(self, c: Conn, ready_sql: str, params: dict[str, Any], cycle: str,
                     now: float, token: str, lease_s: float, limit: int) -> _Claiming:  # fmt: skip
        """A look at the ready origins, then each taken and served in claim order.

        The look takes no lock: each origin is locked only when the claim reaches it
        (_take_origins), so cooperating claimers of a shard hold the few origin rows they
        serve, not the whole window, and commits seldom wait for a claim."""
        looked = c.execute(ready_sql, params).fetchall()
        slots = [_origin_slot(o) for o in looked]  # once a row: 64 rows a claim
        free = [i for i, slot in enumerate(slots) if has_capacity(slot, now)]
        ready = [looked[i] for i in free]
        # longest-waiting first (the clock is when an origin became eligible): aging
        order = [ready[j] for j in claim_order([slots[i] for i in free])]
        pending = Counter(o["fair_class"] for o in ready)  # classes with eligible work
        k = _Claiming(order, self._class_scores(c, params["shard"], now), pending)
        start = 0
        while len(k.claims) < limit and start < len(order):
            part = _part(order[start:], limit - len(k.claims), now)
            start += len(part)
            locked = self._take_origins(c, part, now, params, wait=False)
            k.held = k.held or bool(locked)
            taken = {o: row for o, row in locked.items() if _has_capacity(row, now)}
            k.took = k.took or bool(taken)
            for origin in part:
                if len(k.claims) >= limit:
                    break
                row = taken.get(origin["origin"])
                self._serve(c, k, row, origin, cycle, now, token, lease_s, limit)
        return k

    def _serve(self, c: Conn, k: _Claiming, row: Row | None, seen: Row, cycle: str, now: float,
               token: str, lease_s: float, limit: int) -> None:  # fmt: skip
        """The claim's turn at one origin: `row` as taken (None: another claimer holds it or it
        is no longer ready), `seen` as the look found it."""
        cls = seen["fair_class"]
        if row is None or row["bucket"] in k.buckets:
            k.pending[cls] -= 1
            return
        if not self._may_claim(row, k.scores, k.pending, now).claim:
            return
        k.looked = True
        k.pending[cls] -= 1
        got = self._claim_origin(c, row, cycle, now, token, lease_s, limit - len(k.claims),
                                 k.blocked, k.deferred)  # fmt: skip
        k.claims.extend(got)
        if got:
            k.clocks.append(_clock_update(row["origin"], got[0]))
            k.buckets.add(row["bucket"])
            k.scores[cls] = k.scores.get(cls, 0.0) + len(got)

    def _take_origins(
        self, c: Conn, part: list[Row], now: float, params: dict[str, Any], wait: bool
    ) -> dict[str, Row]:
        """The origins of `part` this claim holds, by origin, as they are now, their free
        slots not yet judged (SQLite's IMMEDIATE transaction already holds them all;
        postgres.py locks them)."""
        return {o["origin"]: o for o in part}

    _waits = False  # whether _take_origins can come back empty-handed for another claimer
    # what a claim's look reads of each ready origin: here the whole row, which
    # _take_origins hands on as the taken origin (postgres.py reads it again, locked)
    _look_columns = "o.*"

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
        deferred: list[str],
    ) -> list[Lease | RobotsTask]:
        """The robots task, or up to `limit` URLs of one origin (one while it has a gap);
        the robots-blocked URLs passed on the way are added to `blocked`, the query variants
        held back for the novelty rule (traps.variant_room) to `deferred`."""
        gap = origin_gap_s(origin, self.default_policy.gap_guard_s)
        if origin["robots_expires_at"] <= now:
            return [RobotsTask(origin["origin"], uuid.uuid4().hex, now + lease_s, now, gap,
                               int(origin["owner_token"]))]  # fmt: skip
        free = _origin_slot(origin).max_in_flight - int(origin["in_flight"])
        n = 1 if gap > 0 else max(1, min(limit, free))
        # The best n rows first: most claims lease every one of them, and a look at the
        # whole scan window made a claim read 8 rows for each it leased (81,703 rows for
        # 9,949 leases on the 10k-page benchmark). Only when some were passed over
        # (robots-blocked, variants held back) does the look widen to the scan window.
        policy, looked = self._policy(origin), 0
        room: dict[str, int] = {}
        leases: list[Lease | RobotsTask] = []
        for window in (n, _SCAN + n - 1):
            rows = self._due_rows(c, origin["origin"], cycle, now, window)
            self._take_rows(c, rows[looked:], origin, policy, cycle, now, token, lease_s, gap, n,
                            room, leases, blocked, deferred)  # fmt: skip
            looked = len(rows)
            if len(leases) == n or len(rows) < window:
                break
        return leases

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
        # regions: work on an origin nobody holds, or whose lease this region let lapse (the
        # control plane unreachable), may be granted at the next renewal: wait for it. An
        # origin another region holds or serves is that region's: no reason to stay.
        region = self.default_policy.region
        unheld = any(o["due"] is not None and not self._owns(o, now)
                     and o["owner_region"] in (None, region) for o in origins)  # fmt: skip
        origins = [o for o in origins if self._owns(o, now)]
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
        if leased is None:
            return Wait(now + _POLL_S) if unheld else Drained()
        return Wait(min(leased, now + _POLL_S))

    def _policy(self, origin_row: Row) -> RobotsPolicy:
        key = (origin_row["origin"], int(origin_row["robots_version"]))
        policy = self._policies.get(key)
        if policy is None:
            policy = RobotsPolicy(
                key[0], key[1], RobotsStatus(origin_row["robots_status"]), origin_row["robots_text"]
            )
            self._policies[key] = policy
        return policy

    @staticmethod
    def _due_rows(c: Conn, origin: str, cycle: str, now: float, limit: int) -> list[Row]:
        """The origin's due URLs of `cycle`, best first, at most `limit`."""
        return list(c.execute(
            """SELECT seq, url, depth, fence, attempts, etag, last_modified, redirect_chain, kind,
                      priority, content_hash, document_id, change_history, last_checked_at,
                      revisit_interval_s, trap_query
               FROM urls
               WHERE origin = :origin AND cycle = :cycle
                 AND state IN ('eligible', 'failed_retryable')
                 AND due_at <= :now ORDER BY priority DESC, seq LIMIT :n""",
            {"origin": origin, "cycle": cycle, "now": now, "n": limit},
        ).fetchall())  # fmt: skip

    def _take_rows(
        self,
        c: Conn,
        rows: list[Row],
        origin: Row,
        policy: RobotsPolicy,
        cycle: str,
        now: float,
        token: str,
        lease_s: float,
        gap: float,
        n: int,
        room: dict[str, int],
        leases: list[Lease | RobotsTask],
        blocked: list[dict[str, Any]],
        deferred: list[str],
    ) -> None:
        """Lease `rows` in order until `leases` holds n; `room` is what each query-variant
        path may still lease in this claim (read from the store on a path's first sight)."""
        paths = {row["url"]: query_key_path(row["trap_query"])
                 for row in rows if row["trap_query"] is not None}  # fmt: skip
        unseen = set(paths.values()) - room.keys()
        if unseen:
            room.update(variant_rooms(c, origin["origin"], cycle, unseen, self.caps.novelty_window))
        for row in rows:
            if len(leases) == n:
                break
            if not policy.allows(row["url"], token):
                blocked.append({"reason": Reason.ROBOTS_DISALLOWED.value,
                                "version": policy.version, "seq": row["seq"]})  # fmt: skip
                continue
            path = paths.get(row["url"])
            if path is not None:
                if room[path] <= 0:
                    deferred.append(row["url"])
                    continue
                room[path] -= 1
            leases.append(lease_of(row, origin, policy.version, now, lease_s, gap))

    def release_slots(self, finished: Sequence[tuple[str, int]]) -> None:
        """Requests are over: give their origin slots back (only the current attempts can)."""
        if finished:
            with self._tx() as c:
                self._release(c, finished)

    def _release(self, c: Conn, finished: Sequence[tuple[str, int]]) -> None:
        # one lock order for every writer
        self._many(c, RELEASE, [{"url": url, "fence": fence} for url, fence in sorted(finished)])
