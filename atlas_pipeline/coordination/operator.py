"""Operator state: pauses, policies, suppressions (opt-out purges), the audit log,
retention of bodies and the tombstone outbox."""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from ..errors import CoordinationError
from .core import (
    _BATCH,
    Conn,
    marks,
)
from .origins import OriginStore
from .overrides import POLICY_KEYS, Purged, Suppression, override_for

_UPSERT_REF = """INSERT INTO body_refs (body_key, url, committed_at)
    VALUES (:body_key, :url, :committed_at)
    ON CONFLICT (body_key, url) DO UPDATE SET committed_at = excluded.committed_at
    WHERE excluded.committed_at > body_refs.committed_at"""


class OperatorStore(OriginStore):
    """Pauses, policies, suppressions, audit and retention."""

    def pause(self, scope: str, value: str, reason: str, who: str, now: float) -> None:
        """Pause an origin or a registrable domain: no claim from the next one on."""
        if scope not in ("origin", "domain") or not reason.strip():
            raise CoordinationError("a pause needs scope 'origin' or 'domain' and a reason")
        with self._tx() as c:
            c.execute(
                """INSERT INTO pauses (scope, value, reason, who, at)
                   VALUES (:scope, :value, :reason, :who, :at)
                   ON CONFLICT (scope, value) DO UPDATE SET reason = excluded.reason,
                   who = excluded.who, at = excluded.at""",
                {"scope": scope, "value": value, "reason": reason, "who": who, "at": now},
            )
            self._audit(c, "pause", scope, value, reason, who, now)

    def resume(self, scope: str, value: str, reason: str, who: str, now: float) -> bool:
        """Lift a pause; False if there was none."""
        with self._tx() as c:
            cur = c.execute(
                "DELETE FROM pauses WHERE scope = :scope AND value = :value",
                {"scope": scope, "value": value},
            )
            if cur.rowcount:
                self._audit(c, "resume", scope, value, reason, who, now)
            return bool(cur.rowcount)

    def _audit(self, c: Conn, action: str, scope: str, value: str, reason: str, who: str,
               now: float) -> None:  # fmt: skip
        c.execute(
            """INSERT INTO operator_log (action, scope, value, reason, who, at)
               VALUES (:action, :scope, :value, :reason, :who, :at)""",
            {"action": action, "scope": scope, "value": value, "reason": reason, "who": who,
             "at": now},
        )  # fmt: skip

    def suppress(
        self, target: Suppression, reason: str, verification: str, who: str, now: float
    ) -> Purged:
        """Record the suppression and, in the same transaction, remove everything the store
        holds of its URLs (queue rows, fetch records, stale attempts, outlinks naming them):
        from the commit of this call no claim can return them and no discovery admits them.
        Returns what was removed, for the lake, body and index purges that follow."""
        if target.scope not in ("origin", "domain", "prefix") or not target.value:
            raise CoordinationError(
                "a suppression needs scope origin, domain or prefix and a value"
            )
        if not reason.strip() or not verification.strip():
            raise CoordinationError("a suppression needs a reason and how the request was verified")
        with self._tx() as c:
            c.execute(
                """INSERT INTO suppressions (scope, value, reason, verification, who, at)
                   VALUES (:scope, :value, :reason, :verification, :who, :at)
                   ON CONFLICT (scope, value) DO UPDATE SET
                   reason = excluded.reason, verification = excluded.verification,
                   who = excluded.who, at = excluded.at""",
                {"scope": target.scope, "value": target.value, "reason": reason,
                 "verification": verification, "who": who, "at": now},
            )  # fmt: skip
            self._audit(c, "suppress", target.scope, target.value,
                        f"{reason} (verified: {verification})", who, now)  # fmt: skip
            purged = self._purge(c, target)
            self._audit(c, "purge_store", target.scope, target.value,
                        f"{purged.urls} urls, {purged.records} fetch records, "
                        f"{purged.stale_attempts} stale attempts, "
                        f"{purged.links_rewritten} records' outlinks", who, now)  # fmt: skip
        return purged

    def _purge(self, c: Conn, target: Suppression) -> Purged:
        out = Purged()
        urls = [r for r in c.execute("SELECT url, content_hash FROM urls")
                if target.matches(r[0])]  # fmt: skip
        out.body_keys |= {r[1] for r in urls if r[1]}
        for i in range(0, len(urls), _BATCH):
            in_list, params = marks("url", [r[0] for r in urls[i : i + _BATCH]])
            c.execute(f"DELETE FROM urls WHERE url IN ({in_list})", params)
        out.urls = len(urls)
        records = [r for r in c.execute("SELECT fetch_id, url, body_key FROM fetch_records")
                   if target.matches(r[1])]  # fmt: skip
        out.body_keys |= {r[2] for r in records if r[2]}
        for i in range(0, len(records), _BATCH):
            in_list, params = marks("id", [r[0] for r in records[i : i + _BATCH]])
            for (document,) in c.execute(
                f"SELECT document FROM fetch_records WHERE fetch_id IN ({in_list})", params
            ).fetchall():
                if document:
                    doc = json.loads(document)
                    out.documents.append((doc["url"], doc["text_hash"],
                                          str(doc["extraction_version"])))  # fmt: skip
            c.execute(f"DELETE FROM fetch_records WHERE fetch_id IN ({in_list})", params)
        out.records = len(records)
        stale = [r[0] for r in c.execute("SELECT DISTINCT url FROM stale_attempts")
                 if target.matches(r[0])]  # fmt: skip
        for url in stale:
            c.execute("DELETE FROM stale_attempts WHERE url = :url", {"url": url})
        out.stale_attempts = len(stale)
        # body references of records already moved out (the lake rows follow in optout.py)
        refs = [{"body_key": r[0], "url": r[1]}
                for r in c.execute("SELECT body_key, url FROM body_refs")
                if target.matches(r[1])]  # fmt: skip
        out.body_keys |= {ref["body_key"] for ref in refs}
        c.executemany("DELETE FROM body_refs WHERE body_key = :body_key AND url = :url", refs)
        for fetch_id, links in c.execute("SELECT fetch_id, links FROM fetch_records").fetchall():
            rows = json.loads(links)
            kept = [r for r in rows if not (r.get("url") and target.matches(r["url"]))]
            if len(kept) != len(rows):
                c.execute(
                    "UPDATE fetch_records SET links = :links WHERE fetch_id = :fetch_id",
                    {"links": json.dumps(kept, default=str), "fetch_id": fetch_id},
                )
                out.links_rewritten += 1
        if target.scope != "prefix":
            out.origins = [r[0] for r in c.execute("SELECT origin FROM origins")
                           if target.matches(r[0] + "/")]  # fmt: skip
            for origin in out.origins:
                c.execute("DELETE FROM trap_counts WHERE origin = :origin", {"origin": origin})
                c.execute("DELETE FROM trap_novelty WHERE origin = :origin", {"origin": origin})
                c.execute("DELETE FROM render_classes WHERE origin = :origin", {"origin": origin})
                c.execute("DELETE FROM origins WHERE origin = :origin", {"origin": origin})
        return out

    def audit(self, action: str, scope: str, value: str, reason: str, who: str, now: float) -> None:
        """Record an operator action that happened outside the store (lake, bodies, index)."""
        with self._tx() as c:
            self._audit(c, action, scope, value, reason, who, now)

    def purge(self, target: Suppression, who: str, now: float) -> Purged:
        """Purge a suppressed target again (idempotent): catches what in-flight work of the
        moment of suppression may have left."""
        with self._tx() as c:
            purged = self._purge(c, target)
            if purged.urls or purged.records or purged.stale_attempts or purged.links_rewritten:
                self._audit(c, "purge_store", target.scope, target.value,
                            f"{purged.urls} urls, {purged.records} fetch records (re-run)", who, now)  # fmt: skip
        return purged

    def set_policy(
        self, target: Suppression, settings: dict[str, float | None], reason: str, who: str,
        now: float,
    ) -> int:  # fmt: skip
        """Change an origin's or a domain's operator policy (None removes a setting); the
        new version applies at once to its origins and URLs and is audited, old -> new."""
        check_policy_change(target.scope, settings, reason)
        with self._tx() as c:
            row = c.execute(
                """SELECT settings, version FROM policy_overrides
                   WHERE scope = :scope AND value = :value""",
                {"scope": target.scope, "value": target.value},
            ).fetchone()
            old = json.loads(row["settings"]) if row else {}
            new = {k: v for k, v in {**old, **settings}.items() if v is not None}
            version = (int(row["version"]) if row else 0) + 1
            c.execute(
                """INSERT INTO policy_overrides (scope, value, settings, version, who, reason, at)
                   VALUES (:scope, :value, :settings, :version, :who, :reason, :at)
                   ON CONFLICT (scope, value) DO UPDATE SET
                   settings = excluded.settings, version = excluded.version,
                   who = excluded.who, reason = excluded.reason, at = excluded.at""",
                {"scope": target.scope, "value": target.value,
                 "settings": json.dumps(new, sort_keys=True), "version": version, "who": who,
                 "reason": reason, "at": now},
            )  # fmt: skip
            self._audit(c, "set_policy", target.scope, target.value,
                        f"v{version}: {json.dumps(old, sort_keys=True)} -> "
                        f"{json.dumps(new, sort_keys=True)} ({reason})", who, now)  # fmt: skip
            origins = [r[0] for r in c.execute("SELECT origin FROM origins")
                       if target.matches(r[0] + "/")]  # fmt: skip
            overrides = self._operator_state(c)[0]
            self._apply_rates(c, overrides, origins)
            for origin in origins:
                priority = override_for(overrides, origin, "priority")
                if priority is not None:
                    c.execute(
                        "UPDATE urls SET priority = :priority WHERE origin = :origin",
                        {"priority": priority, "origin": origin},
                    )
        return version

    def policy_overrides(self) -> list[dict[str, Any]]:
        rows = self._select("SELECT * FROM policy_overrides ORDER BY scope, value")
        return [{**dict(r), "settings": json.loads(r["settings"])} for r in rows]

    def expire_bodies(self, before: float) -> int:
        """Drop the body references of fetch records committed before `before` (raw-body
        retention), in the store and moved out with their records (body_refs): the bodies
        become orphans unless a newer record or a URL's current content still names them,
        and the orphan sweep removes them safely."""
        with self._tx() as c:
            cur = c.execute(
                """UPDATE fetch_records SET body_key = NULL
                   WHERE body_key IS NOT NULL AND committed_at < :before""",
                {"before": before},
            )
            moved = c.execute(
                "DELETE FROM body_refs WHERE committed_at < :before", {"before": before}
            )
            return int(cur.rowcount) + int(moved.rowcount)

    def partition_written(
        self, cycle: str, shard: int, fence: int, fetch_ids: Collection[str], fetches: int,
        now: float,
    ) -> int | None:  # fmt: skip
        """Record that partition (cycle, shard) is in the lake at batch fence `fence` (all
        its Delta commits succeeded) and, in the same transaction, move the records that
        write held (`fetch_ids`) out of the store: their body references stay as body_refs
        (for the orphan sweep, retention and opt-out purges), the records are deleted.
        Only the partition's newest batch fence does: a run that holds an older one leaves
        its records to the newest, which writes them again (None: nothing was done). Returns
        the records deleted."""
        ids = sorted(fetch_ids)
        deleted = 0
        with self._tx() as c:
            newest = c.execute(
                "SELECT fence FROM batch_leases WHERE cycle = :cycle AND shard = :shard"
                + self._for_update,
                {"cycle": cycle, "shard": shard},
            ).fetchone()
            if newest is None or int(newest[0]) != fence:
                return None
            c.execute(
                """INSERT INTO lake_writes (cycle, shard, fence, fetches, written_at)
                   VALUES (:cycle, :shard, :fence, :fetches, :written_at)
                   ON CONFLICT (cycle, shard) DO UPDATE SET
                   fence = excluded.fence, fetches = excluded.fetches,
                   written_at = excluded.written_at""",
                {
                    "cycle": cycle,
                    "shard": shard,
                    "fence": fence,
                    "fetches": fetches,
                    "written_at": now,
                },
            )
            for i in range(0, len(ids), _BATCH):
                in_list, part = marks("id", ids[i : i + _BATCH])
                # Found by primary key, the partition only checked: written as plain
                # `cycle = :cycle AND shard = :shard`, it led SQLite through the partition's
                # index to read every record of the partition, blobs included, for each 200
                # ids (50 such reads of 10k records: 0.8 s of a 10k-page benchmark's lake
                # write). `|| ''` and `+ 0` keep either backend from using an index for them.
                where = f"fetch_id IN ({in_list}) AND cycle || '' = :cycle AND shard + 0 = :shard"
                params = {"cycle": cycle, "shard": shard, **part}
                refs = c.execute(
                    f"""SELECT body_key, url, COALESCE(committed_at, :now) FROM fetch_records
                        WHERE body_key IS NOT NULL AND {where}""",
                    {"now": now, **params},
                ).fetchall()
                c.executemany(
                    _UPSERT_REF,
                    [{"body_key": r[0], "url": r[1], "committed_at": r[2]} for r in refs],
                )
                cur = c.execute(f"DELETE FROM fetch_records WHERE {where}", params)
                deleted += int(cur.rowcount)
        return deleted

    def suppressions(self) -> list[dict[str, Any]]:
        return [dict(r) for r in self._select("SELECT * FROM suppressions ORDER BY scope, value")]

    def add_tombstones(self, events: Sequence[dict[str, Any]], now: float) -> int:
        """Queue tombstone events for the indexer (idempotent by event id)."""
        with self._tx() as c:
            before = c.execute("SELECT COUNT(*) FROM tombstones").fetchone()[0]
            c.executemany(
                """INSERT INTO tombstones (event_id, event, created_at)
                   VALUES (:event_id, :event, :created_at) ON CONFLICT DO NOTHING""",
                [{"event_id": e["event_id"], "event": json.dumps(e, default=str),
                  "created_at": now} for e in events],
            )  # fmt: skip
            return int(c.execute("SELECT COUNT(*) FROM tombstones").fetchone()[0] - before)

    def pending_tombstones(self, limit: int) -> list[dict[str, Any]]:
        rows = self._select(
            """SELECT event FROM tombstones WHERE delivered_at IS NULL
               ORDER BY created_at, event_id LIMIT :limit""",
            {"limit": limit},
        )
        return [json.loads(r[0]) for r in rows]

    def tombstones_delivered(self, event_ids: Sequence[str], now: float) -> None:
        with self._tx() as c:
            c.executemany(
                "UPDATE tombstones SET delivered_at = :now WHERE event_id = :event_id",
                [{"now": now, "event_id": e} for e in event_ids],
            )

    def pauses(self) -> list[dict[str, Any]]:
        return [dict(r) for r in self._select("SELECT * FROM pauses ORDER BY scope, value")]

    def operator_log(self) -> list[dict[str, Any]]:
        return [dict(r) for r in self._select("SELECT * FROM operator_log ORDER BY seq")]


def policy_settings(
    given: Mapping[str, float | None], unset: Iterable[str]
) -> dict[str, float | None]:
    """The settings of one policy change: the values given (None: not given) and the keys to
    remove (None). The same for `atlas set-policy` and the UI's set_policy_job."""
    settings: dict[str, float | None] = {k: v for k, v in given.items() if v is not None}
    for key in unset:
        if key in settings:
            raise CoordinationError(f"{key} is both set and unset in one change")
        settings[key] = None
    if not settings:
        raise CoordinationError(
            "nothing to set: give min_gap_s, max_in_flight, priority, revisit_min_s, "
            "revisit_max_s or a key to unset"
        )
    return settings


def check_policy_change(scope: str, settings: Mapping[str, float | None], reason: str) -> None:
    """A policy change the store accepts: an origin or domain, a reason, known keys, values in
    range (a removal is None, never a negative value)."""
    if scope not in ("origin", "domain"):
        raise CoordinationError("a policy applies to an origin or a registrable domain")
    if not reason.strip():
        raise CoordinationError("a policy change needs a reason")
    for key, value in settings.items():
        if key not in POLICY_KEYS:
            raise CoordinationError(
                f"unknown policy setting {key!r}; known: {', '.join(POLICY_KEYS)}"
            )
        lo, hi = POLICY_KEYS[key]
        if value is not None and not lo <= value <= hi:
            raise CoordinationError(f"{key} = {value:g} is outside [{lo:g}, {hi:g}]")
