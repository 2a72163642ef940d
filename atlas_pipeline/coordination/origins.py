"""Origin buckets: politeness clocks and slots, shared buckets (domain, IP), operator
rates, and the robots.txt cache with its versions."""

from __future__ import annotations

import json
import socket
import uuid
from collections.abc import Sequence
from typing import Any

from ..errors import StaleAttempt
from ..politeness import (
    bucket_of,
    class_of,
)
from ..reasons import Reason
from ..records import FetchRecord
from ..robots import RobotsStatus
from .base import (
    Candidate,
    RobotsRecord,
    RobotsTask,
)
from .core import (
    _INSERT_RECORD,
    _PAUSED,
    _POLL_S,
    Conn,
    StoreCore,
    _domain_of,
    _has_capacity,
    greatest,
    origin_gap_s,
)
from .overrides import override_for
from .writes import NEW_ORIGINS


class OriginStore(StoreCore):
    """Origin buckets, clocks and the robots cache."""

    def _regroup(self, c: Conn) -> None:
        """Buckets and fairness classes follow the config: recompute them when it changed."""
        p = self.default_policy
        grouping = json.dumps(
            [p.bucket, sorted(p.classes), sorted(p.resolve) if p.bucket == "ip" else []]
        )
        row = c.execute("SELECT value FROM store_settings WHERE key = 'grouping'").fetchone()
        stale = "bucket IS NULL" if row and row[0] == grouping else "1 = 1"
        rows = c.execute(f"SELECT origin, registrable_domain FROM origins WHERE {stale}").fetchall()
        c.executemany(
            "UPDATE origins SET bucket = :bucket, fair_class = :fair_class WHERE origin = :origin",
            [dict(zip(("bucket", "fair_class"), self._groups(r[0], r[1]), strict=True),
                  origin=r[0]) for r in rows],
        )  # fmt: skip
        c.execute("DELETE FROM store_settings WHERE key = 'grouping'")
        c.execute(
            "INSERT INTO store_settings (key, value) VALUES ('grouping', :grouping)",
            {"grouping": grouping},
        )

    def _groups(self, origin: str, domain: str) -> tuple[str, str]:
        """(politeness bucket, fairness class) of an origin under the current config."""
        p = self.default_policy
        bucket = bucket_of(origin, p.bucket, domain, self._ip_of)
        return bucket, class_of(origin, domain, self._classes)

    def _ip_of(self, host: str) -> str:
        """The address an "ip" bucket is keyed on: the resolve map, else DNS, else the host."""
        ip = self._resolve.get(host)
        if ip is None:
            try:
                infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
                ip = sorted(str(i[4][0]) for i in infos)[0]
            except (OSError, IndexError):
                ip = host  # unresolvable now: its own bucket, and the fetch will fail anyway
            self._resolve[host] = ip
        return ip

    def _ensure_origins(
        self, c: Conn, cands: list[Candidate], overrides: list[dict[str, Any]] | None = None
    ) -> None:
        p = self.default_policy
        columns = ("origin", "shard", "min_gap_s", "max_in_flight", "registrable_domain", "bucket",
                   "fair_class")  # fmt: skip
        there = self._locked_origins(c)
        self._many(
            c,
            NEW_ORIGINS,
            [dict(zip(columns, row, strict=True)) for row in sorted(
                # one insertion order for every writer: no lock-order deadlocks
                (o, shard, p.min_gap_s, p.max_in_flight, d, *self._groups(o, d))
                for o, shard, d in {(x.origin, x.shard, _domain_of(x.origin)) for x in cands
                                    if x.origin not in there}
            )],
        )  # fmt: skip
        overrides = self._operator_state(c)[0] if overrides is None else overrides
        if overrides:
            self._apply_rates(c, overrides, sorted({x.origin for x in cands}))

    def _apply_rates(self, c: Conn, overrides: list[dict[str, Any]], origins: list[str]) -> None:
        """Operator rate limits on these origins: a gap floor (kept by robots refreshes) and
        an in-flight cap."""
        for origin in origins:
            gap = override_for(overrides, origin, "min_gap_s")
            cap = override_for(overrides, origin, "max_in_flight")
            if gap is not None:
                c.execute(
                    f"""UPDATE origins SET operator_gap_s = :gap,
                          min_gap_s = {greatest("min_gap_s", ":gap")}
                        WHERE origin = :origin""",
                    {"gap": gap, "origin": origin},
                )
            if cap is not None:
                c.execute("UPDATE origins SET max_in_flight = :cap WHERE origin = :origin",
                          {"cap": int(cap), "origin": origin})  # fmt: skip

    def robots(self, origin: str) -> RobotsRecord | None:
        row = self._select(
            "SELECT * FROM origins WHERE origin = :origin", {"origin": origin}
        ).fetchone()
        if row is None or row["robots_status"] is None:
            return None
        return RobotsRecord(
            origin, int(row["robots_version"]), row["robots_status"], row["robots_text"],
            float(row["robots_fetched_at"] or 0), float(row["robots_expires_at"]),
        )  # fmt: skip

    def robots_good_at(self, origin: str) -> float | None:
        row = self._select(
            "SELECT robots_good_at FROM origins WHERE origin = :origin", {"origin": origin}
        ).fetchone()
        return None if row is None or row[0] is None else float(row[0])

    def put_robots(
        self,
        task: RobotsTask,
        status: str,
        text: str,
        now: float,
        ttl_s: float,
        backoff_until: float,
        min_gap_s: float | None = None,
        good: bool = False,
        cycle: str | None = None,
        shard: int | None = None,
        record: FetchRecord | None = None,
        not_before: float = 0.0,
    ) -> RobotsRecord:
        """Store the robots outcome of `task` (and its fetch record); the version grows only
        when the effective rules change. The origin's next request waits for `not_before` in
        the same transaction (a Crawl-delay counts from the robots.txt request itself)."""
        with self._tx() as c:
            if record is not None and cycle is not None and shard is not None:
                c.execute(
                    _INSERT_RECORD,
                    {"fetch_id": record.fetch_id, "cycle": cycle, "shard": shard,
                     "url": record.url, "fence": 0, "record": record.to_json(),
                     "links": "[]", "document": None, "body_key": None, "committed_at": now},
                )  # fmt: skip
            row = c.execute(
                "SELECT * FROM origins WHERE origin = :origin AND robots_lease_id = :lease_id"
                + self._for_update,
                {"origin": task.origin, "lease_id": task.lease_id},
            ).fetchone()
            if row is None:
                raise StaleAttempt(f"{task.origin}/robots.txt", 0)  # another worker took it over
            changed = row["robots_status"] != status or row["robots_text"] != text
            version = int(row["robots_version"]) + int(changed)
            c.execute(
                f"""UPDATE origins SET robots_version = :version, robots_status = :status,
                      robots_text = :text, robots_fetched_at = :now,
                      robots_expires_at = :expires_at, robots_lease_id = NULL,
                      robots_lease_until = 0,
                      backoff_until = {greatest("backoff_until", ":backoff_until")},
                      next_eligible_at = {greatest("next_eligible_at", ":next_eligible_at")},
                      min_gap_s = CASE WHEN COALESCE(:min_gap_s, min_gap_s) > operator_gap_s
                        THEN COALESCE(:min_gap_s, min_gap_s) ELSE operator_gap_s END,
                      robots_good_at = CASE WHEN :good THEN :now ELSE robots_good_at END
                    WHERE origin = :origin""",
                {
                    "version": version, "status": status, "text": text, "now": now,
                    "expires_at": now + ttl_s, "backoff_until": backoff_until,
                    "next_eligible_at": max(backoff_until, not_before),
                    "min_gap_s": min_gap_s, "good": good, "origin": task.origin,
                },
            )  # fmt: skip
            if changed and status in (RobotsStatus.PARSED.value, RobotsStatus.UNAVAILABLE.value):
                # New rules may allow what the old ones blocked: those URLs go back to the
                # queue, and the claim judges them against the policy now in force.
                c.execute(
                    """UPDATE urls SET state = 'eligible', reason = :recheck
                       WHERE origin = :origin AND state = 'blocked' AND reason = :disallowed""",
                    {"recheck": Reason.ROBOTS_RECHECK.value, "origin": task.origin,
                     "disallowed": Reason.ROBOTS_DISALLOWED.value},
                )  # fmt: skip
        return RobotsRecord(task.origin, version, status, text, now, now + ttl_s)

    def push_origin_clocks(self, pushes: Sequence[tuple[str, float, float]]) -> None:
        """(origin, next_eligible_at, backoff_until) for many origins: clocks only move forward,
        for the origin's whole bucket."""
        if pushes:
            with self._tx() as c:
                self._push_clocks(c, pushes)

    def reserve_hop(self, origin: str, shard: int, now: float) -> float:
        return self.reserve_slot(origin, shard, now)[0]

    def reserve_slot(self, origin: str, shard: int, now: float) -> tuple[float, float]:
        at, gap, _ = self.hold_slot(origin, shard, now, 0.0)
        return at, gap

    def hold_slot(self, origin: str, shard: int, now: float,
                  hold_s: float) -> tuple[float, float, str | None]:  # fmt: skip
        """`reserve_slot`, and with `hold_s` > 0 an in-flight slot held until
        `release_sub_slots` or for `hold_s` at most: (when, gap, slot id if taken now)."""
        with self._tx() as c:
            o, gap = self._origin_locked(c, origin, shard, now)
            wait = _wait_for(o, now) if self._owns(o, now) else float("inf")
            if wait is not None:
                return wait, gap, None
            self._push_clocks(c, [(origin, now + gap, 0.0)])
            if hold_s <= 0:
                return now, gap, None
            slot_id = uuid.uuid4().hex
            c.execute(
                "INSERT INTO sub_slots (slot_id, origin, until) VALUES (:slot_id, :origin, :until)",
                {"slot_id": slot_id, "origin": origin, "until": now + hold_s},
            )
            return now, gap, slot_id

    def release_sub_slots(self, slot_ids: Sequence[str]) -> None:
        if slot_ids:
            with self._tx() as c:
                c.executemany("DELETE FROM sub_slots WHERE slot_id = :slot_id",
                              [{"slot_id": s} for s in slot_ids])  # fmt: skip

    def claim_robots(self, origin: str, shard: int, now: float,
                     lease_s: float) -> RobotsTask | float:  # fmt: skip
        """Authority to fetch the robots.txt of an origin no URL of the crawl has brought in
        yet (a rendered page's script or XHR there), taken like a claim's: its bucket's slot
        and clock, and the origin's robots lease. Else when to ask again (inf: paused; now:
        the policy is known already)."""
        with self._tx() as c:
            o, gap = self._origin_locked(c, origin, shard, now)
            if o["robots_expires_at"] > now:
                return now
            if o["robots_lease_until"] > now and not o["paused"]:
                return float(o["robots_lease_until"])  # another worker is fetching it
            wait = _wait_for(o, now) if self._owns(o, now) else float("inf")
            if wait is not None:
                return wait
            task = RobotsTask(origin, uuid.uuid4().hex, now + lease_s, now, gap)
            c.execute(
                """UPDATE origins SET robots_lease_id = :lease_id, robots_lease_until = :until
                   WHERE origin = :origin""",
                {"lease_id": task.lease_id, "until": task.expires_at, "origin": origin},
            )
            self._push_clocks(c, [(origin, now + gap, 0.0)])
            return task

    def _origin_locked(self, c: Conn, origin: str, shard: int, now: float) -> tuple[Any, float]:
        """A request outside any claim: the origin's row (admitted if new), locked, with its
        in-flight count and pause, and the gap it applies. The lock comes first and the count
        in a statement of its own: on PostgreSQL a read that waited for the lock sees the
        row as it is now but the rest (leases, slots) as they were before the wait. Where a
        bucket spans origins, a claim of the shard holds the shard lock, and so does this."""
        self._ensure_origins(c, [Candidate(origin, origin, origin, shard, 0, 0.0)])
        if self._shared_buckets:
            self._lock_shard(c, shard)
        c.execute("SELECT 1 FROM origins WHERE origin = :origin" + self._for_update,
                  {"origin": origin})  # fmt: skip
        o = c.execute(
            f"""SELECT o.*, {self._in_flight_sql} AS in_flight,
                 EXISTS ({_PAUSED}) AS paused FROM origins o WHERE o.origin = :origin""",
            {"origin": origin, "now": now},
        ).fetchone()
        return o, origin_gap_s(o, self.default_policy.gap_guard_s)

    def _push_clocks(self, c: Conn, pushes: Sequence[tuple[str, float, float]]) -> None:
        where = "origin = :origin"
        if self._shared_buckets:
            where = "bucket = (SELECT bucket FROM origins WHERE origin = :origin)"
        c.executemany(
            # the clock carries the backoff too: "ready soonest" is one indexed column
            f"""UPDATE origins
                SET next_eligible_at = {greatest("next_eligible_at", ":next_eligible_at")},
                    backoff_until = {greatest("backoff_until", ":backoff_until")}
                WHERE {where}""",
            [{"next_eligible_at": max(t, b), "backoff_until": b, "origin": o}
             for o, t, b in sorted(pushes)],
        )  # fmt: skip

    @property
    def _shared_buckets(self) -> bool:
        """Whether a bucket may hold several origins (registrable domain or IP address)."""
        return self.default_policy.bucket != "origin"

    @property
    def _owned(self) -> str:
        """The claim's condition that this region holds the origin's ownership lease (regions;
        none for a single region)."""
        if not self.default_policy.region:
            return ""
        return " AND o.owner_region = :region AND o.owner_until > :owned_after"

    def _owner_params(self, now: float) -> dict[str, Any]:
        policy = self.default_policy
        return {"region": policy.region, "owned_after": now + policy.owner_margin_s}

    def _owns(self, o: Any, now: float) -> bool:
        policy = self.default_policy
        return not policy.region or (
            o["owner_region"] == policy.region
            and float(o["owner_until"]) > now + policy.owner_margin_s
        )

    @property
    def _in_flight_sql(self) -> str:
        """Requests in flight in origin `o`'s bucket (the origin, or all origins of its domain
        or address, whose robots.txt fetches count too), subrequests' held slots included."""
        if not self._shared_buckets:
            return """((SELECT COUNT(*) FROM urls s WHERE s.origin = o.origin
                        AND s.slot_held = 1 AND s.lease_expires_at > :now)
                       + (SELECT COUNT(*) FROM sub_slots x WHERE x.origin = o.origin
                          AND x.until > :now))"""
        return """((SELECT COUNT(*) FROM urls s WHERE s.slot_held = 1
                     AND s.lease_expires_at > :now AND s.origin IN (SELECT d.origin FROM origins d
                         WHERE d.bucket = o.bucket))
                   + (SELECT COUNT(*) FROM origins r WHERE r.bucket = o.bucket
                         AND r.origin <> o.origin
                         AND r.robots_lease_until > :now)
                   + (SELECT COUNT(*) FROM sub_slots x WHERE x.until > :now
                         AND x.origin IN (SELECT d.origin FROM origins d
                         WHERE d.bucket = o.bucket)))"""


def _wait_for(o: Any, now: float) -> float | None:
    """None when a request to the origin may start now, else when to ask again: inf while
    it is paused, its clock or backoff, or a moment while its slots are all taken."""
    if o["paused"]:
        return float("inf")
    ready = max(float(o["next_eligible_at"]), float(o["backoff_until"]))
    if ready > now:
        return ready
    return None if _has_capacity(o, now) else now + _POLL_S
