"""Leases after their claim: a live lease extended once, expired ones swept back to the
queue, and the fence tokens of fetch batches (one per partition run: a newer run's token
makes an older run's lake write of the partition stale)."""

from __future__ import annotations

import json
import uuid
from dataclasses import replace

from ..reasons import Reason
from .base import BatchLease, Lease
from .core import Row, StoreCore


def lease_of(
    row: Row, origin: Row, robots_version: int, now: float, lease_s: float, gap: float
) -> Lease:
    """The lease a claim takes on a due URL (`row`, as the claim read it) of `origin`."""
    return Lease(
        url=row["url"],
        origin=origin["origin"],
        shard=int(origin["shard"]),
        depth=int(row["depth"]),
        fence=int(row["fence"]) + 1,
        lease_id=uuid.uuid4().hex,
        expires_at=now + lease_s,
        attempts=int(row["attempts"]) + 1,
        robots_version=robots_version,
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
        owner_token=int(origin["owner_token"]),
    )


class LeaseStore(StoreCore):
    """Lease extension, the sweep, and batch fences."""

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
