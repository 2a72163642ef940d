"""Regions: the origins' ownership leases as this region last heard them from the control plane.

The region's fetch batches read which origins have work and whose lease they hold
(`ownership_wanted`), ask the control plane, and write its answers here (`set_owners`); claims
then take only origins this region holds (origins.py `_owned`). A single-region store never
calls these.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .core import StoreCore, marks


@dataclass(frozen=True, slots=True)
class OwnerRow:
    origin: str
    region: str | None  # the holder as last heard; None: nobody
    token: int
    until: float
    share: float = 1.0  # this region's share of a split budget
    bucket: str | None = None  # the politeness bucket (the lease's key); None: the origin


class OwnerStore(StoreCore):
    """The ownership columns of the origins table."""

    def ownership_wanted(self, cycle: str, shard: int,
                         also: Sequence[str] = ()) -> list[OwnerRow]:  # fmt: skip
        """This shard's origins with work left in `cycle` (queued or in flight), and the
        origins `also` names, with their buckets and the ownership this region last heard
        of, bucket by bucket."""
        named, params = marks("also", also)
        rows = self._select(
            f"""SELECT o.origin, o.owner_region, o.owner_token, o.owner_until, o.share, o.bucket
               FROM origins o WHERE (o.shard = :shard AND EXISTS (
                 SELECT 1 FROM urls u WHERE u.origin = o.origin AND u.cycle = :cycle
                   AND u.state IN ('eligible', 'failed_retryable', 'leased')))
                 {f"OR o.origin IN ({named})" if also else ""}
               ORDER BY o.bucket, o.origin""",
            {"shard": shard, "cycle": cycle, **params},
        ).fetchall()
        return [OwnerRow(r["origin"], r["owner_region"], int(r["owner_token"]),
                         float(r["owner_until"]), float(r["share"]), r["bucket"])
                for r in rows]  # fmt: skip

    def set_owners(self, rows: Sequence[OwnerRow]) -> None:
        """Record what the control plane answered (or what the config's shares say)."""
        if not rows:
            return
        with self._tx() as c:
            c.executemany(
                """UPDATE origins SET owner_region = :region, owner_token = :token,
                     owner_until = :until, share = :share WHERE origin = :origin""",
                [{"region": r.region, "token": r.token, "until": r.until, "share": r.share,
                  "origin": r.origin} for r in sorted(rows, key=lambda r: r.origin)],
            )  # fmt: skip
