"""Reads for exports, `atlas inspect` and progress: no writes here."""

from __future__ import annotations

from collections.abc import Collection, Iterator
from typing import Any

import orjson

from .core import (
    _PAUSED,
    StoreCore,
)

RECORD_PARTS = ("record", "links", "document")  # the JSON columns of a fetch record


class ReadStore(StoreCore):
    """Reads for the lake exports, inspect and progress."""

    def cycle_progress(self, cycle: str) -> tuple[int, int]:
        """(URLs of `cycle` done, URLs queued for it): the total grows as links come in."""
        row = self._select(
            """SELECT COALESCE(SUM(CASE WHEN state IN ('eligible', 'failed_retryable', 'leased')
                                   THEN 0 ELSE 1 END), 0), COUNT(*)
               FROM urls WHERE cycle = :cycle""",
            {"cycle": cycle},
        ).fetchone()
        return int(row[0]), int(row[1])

    def cycle_statuses(self, cycle: str) -> dict[str, int]:
        """The last HTTP status of each URL of `cycle` done so far, counted ("none": no
        response)."""
        rows = self._select(
            """SELECT last_status, COUNT(*) FROM urls
               WHERE cycle = :cycle AND state NOT IN ('eligible', 'failed_retryable', 'leased')
                 AND last_fetch_at IS NOT NULL
               GROUP BY last_status""",
            {"cycle": cycle},
        )
        return {("none" if r[0] is None else str(r[0])): int(r[1]) for r in rows}

    def fetch_records(
        self, cycle: str, shard: int, parts: Collection[str] = RECORD_PARTS
    ) -> Iterator[dict[str, Any]]:
        """The committed records of one partition, streamed (a partition can be large): each
        its `fetch_id` and the `parts` asked for ("record", "links", "document"), decoded. A
        pass that needs one part decodes only that one: the links are most of a record."""
        wanted = [x for x in RECORD_PARTS if x in parts]
        if len(wanted) != len(set(parts)):
            raise ValueError(f"unknown record parts {sorted(set(parts) - set(RECORD_PARTS))}")
        cols = "".join(f", {x}" for x in wanted)
        rows = self._select(
            f"""SELECT fetch_id{cols} FROM fetch_records
               WHERE cycle = :cycle AND shard = :shard ORDER BY committed_at, fetch_id""",
            {"cycle": cycle, "shard": shard},
        )
        for r in rows:
            out: dict[str, Any] = {"fetch_id": r[0]}
            for i, part in enumerate(wanted, 1):
                out[part] = orjson.loads(r[i]) if r[i] else None
            yield out

    def fetch_record_count(self, cycle: str, shard: int) -> int:
        """Fetch records of one partition still in the store (not yet moved out by a
        recorded lake write)."""
        row = self._select(
            "SELECT COUNT(*) FROM fetch_records WHERE cycle = :cycle AND shard = :shard",
            {"cycle": cycle, "shard": shard},
        ).fetchone()
        return int(row[0])

    def open_url_count(self, cycle: str, shard: int) -> int:
        """URLs queued for partition (cycle, shard) and not done yet (eligible, waiting for a
        retry or leased)."""
        # regions: an origin another region holds or serves (as last heard) is its work
        region = self.default_policy.region
        theirs = ("" if not region else
                  """ AND NOT EXISTS (SELECT 1 FROM origins o WHERE o.origin = urls.origin
                       AND o.owner_region IS NOT NULL AND o.owner_region <> :region)""")  # fmt: skip
        row = self._select(
            f"""SELECT COUNT(*) FROM urls WHERE cycle = :cycle AND shard = :shard
               AND state IN ('eligible', 'failed_retryable', 'leased'){theirs}""",
            {"cycle": cycle, "shard": shard, "region": region},
        ).fetchone()
        return int(row[0])

    def lake_write(self, cycle: str, shard: int) -> int | None:
        """The batch fence at which partition (cycle, shard) was last recorded as written to
        the lake; None if it never was."""
        row = self._select(
            "SELECT fence FROM lake_writes WHERE cycle = :cycle AND shard = :shard",
            {"cycle": cycle, "shard": shard},
        ).fetchone()
        return None if row is None else int(row[0])

    def referenced_bodies(self) -> set[str]:
        """Every body key a committed record, a record moved out to the lake (its body
        reference, until retention expires it) or a URL's current version references."""
        rows = self._select(
            """SELECT body_key FROM fetch_records WHERE body_key IS NOT NULL
               UNION SELECT body_key FROM body_refs
               UNION SELECT content_hash FROM urls WHERE content_hash IS NOT NULL"""
        )
        return {r[0] for r in rows}

    def origin_rows(self, shard: int) -> list[dict[str, Any]]:
        """Each origin of the shard: its pacing, grouping, robots and validator standing."""
        rows = self._select(
            f"""SELECT origin, registrable_domain, fair_class, bucket, min_gap_s, adapt_gap_s,
                       max_in_flight, backoff_until, robots_status, robots_version,
                       robots_fetched_at, validators_trusted, validator_checks,
                       validator_misses, EXISTS ({_PAUSED}) AS paused
               FROM origins o WHERE shard = :shard ORDER BY origin""",
            {"shard": shard},
        )
        return [{**dict(r), "paused": bool(r["paused"]),
                 "validators_trusted": bool(r["validators_trusted"])} for r in rows]  # fmt: skip

    def url_rows(self, shard: int) -> list[dict[str, Any]]:
        return list(self.iter_url_rows(shard))

    def iter_url_rows(self, shard: int, chunk: int = 1000) -> Iterator[dict[str, Any]]:
        """The shard's catalogue rows in insertion order, read `chunk` at a time: the lake
        exports stream them, so the process holds a chunk, not a catalogue (the whole of it
        as dicts was the main process's peak on a 100k-URL crawl, growing with every cycle)."""
        rows = self._select(
            """SELECT url, discovered_url, origin, depth, priority, state, reason, cycle, due_at,
                      attempts, fence, robots_version, source, discovered_cycle, discovered_at,
                      last_fetch_at, last_status, etag, last_modified, content_hash,
                      document_id, last_checked_at, checks, changes, revisit_interval_s,
                      revisit_reason, change_rate,
                      (SELECT validators_trusted FROM origins o WHERE o.origin = urls.origin)
                        AS validators_trusted
               FROM urls WHERE shard = :shard ORDER BY seq""",
            {"shard": shard},
        )
        while part := rows.fetchmany(chunk):
            yield from (dict(r) for r in part)

    def stale_attempts(self) -> list[dict[str, Any]]:
        return [dict(r) for r in self._select("SELECT * FROM stale_attempts")]

    def url_row(self, url: str) -> dict[str, Any] | None:
        """One URL's catalogue row (by the URL's unique index), with its kind, redirect chain
        and its origin's validator trust; None if it is unknown."""
        row = self._select(
            """SELECT url, discovered_url, origin, shard, kind, depth, priority, state, reason,
                      cycle, due_at, attempts, fence, robots_version, source, discovered_cycle,
                      discovered_at, redirect_chain, lease_expires_at, last_fetch_at,
                      last_status, etag, last_modified, content_hash, document_id,
                      last_checked_at, checks, changes, revisit_interval_s, revisit_reason,
                      change_rate,
                      (SELECT validators_trusted FROM origins o WHERE o.origin = urls.origin)
                        AS validators_trusted
               FROM urls WHERE url = :url""",
            {"url": url},
        ).fetchone()
        return None if row is None else dict(row)

    def stale_attempts_of(self, url: str) -> list[dict[str, Any]]:
        """The stale attempts (fenced commits refused) of one URL, oldest first."""
        rows = self._select(
            "SELECT * FROM stale_attempts WHERE url = :url ORDER BY at", {"url": url}
        )
        return [dict(r) for r in rows]
