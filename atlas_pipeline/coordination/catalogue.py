"""The URL catalogue: insert-if-absent by URL (an optional Bloom prefilter), trap
counters and the novelty rule's state, discovery under scope, robots and operator state."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from rbloom import Bloom

from ..reasons import Reason
from ..traps import (
    STOPPED,
    Novelty,
    TrapKeys,
    VariantFetch,
    counted_keys,
    judge_novelty,
    query_key_path,
    trap_cut,
    trap_keys,
    variant_room,
)
from .base import (
    Candidate,
    Lease,
    Outcome,
    UrlState,
)
from .core import (
    _BATCH,
    _NOT_NEW,
    Conn,
    marks,
    url_digest,
)
from .origins import OriginStore
from .overrides import override_for
from .writes import ADMITTED, TRAP_COUNTS

# the columns of a URL row as discovery inserts it (the order of its row tuples)
_URL_COLUMNS = ("url", "discovered_url", "origin", "shard", "depth", "priority", "state",
                "reason", "cycle", "robots_version", "source", "discovered_cycle",
                "discovered_at", "redirect_chain", "trap_pattern", "trap_query", "kind",
                "url_hash")  # fmt: skip


def variant_rooms(c: Conn, origin: str, cycle: str, paths: set[str], window: int) -> dict[str, int]:
    """How many more variants of each of `paths` (path keys of `origin`) a claim may lease
    (traps.variant_room): the novelty rule's state of each, and its variants leased in `cycle`
    whose results are not yet committed."""
    leased = Counter(
        query_key_path(r[0])
        for r in c.execute(
            """SELECT trap_query FROM urls WHERE origin = :origin AND cycle = :cycle
                 AND state = 'leased' AND trap_query IS NOT NULL""",
            {"origin": origin, "cycle": cycle},
        )
    )
    held, params = marks("p", sorted(paths))
    states = {
        r[0]: Novelty(int(r[1]), int(r[2]), bool(r[3]))
        for r in c.execute(
            "SELECT path, fetched, barren, stopped FROM trap_novelty "
            f"WHERE origin = :origin AND path IN ({held})",
            {"origin": origin, **params},
        )
    }
    return {p: variant_room(states.get(p, Novelty()), leased[p], window) for p in paths}


class CatalogueStore(OriginStore):
    """Discovery into the catalogue, with trap caps."""

    def discover(self, candidates: list[Candidate], cycle: str | None) -> list[str]:
        """Insert-if-absent each candidate; return its decision reason, in order."""
        if not candidates:
            return []
        with self._tx() as c:
            return self._discover(c, candidates, cycle, now=None)

    def _admitted_counts(self, c: Conn, origins: set[str], cycle: str) -> dict[str, int]:
        counts: dict[str, int] = {}
        for o in sorted(origins):  # one lock order for every writer
            row = c.execute(
                "SELECT admitted_cycle, admitted_count FROM origins WHERE origin = :origin"
                + self._for_update,
                {"origin": o},
            ).fetchone()
            counts[o] = int(row["admitted_count"]) if row and row["admitted_cycle"] == cycle else 0
        return counts

    def _discover(
        self,
        c: Conn,
        cands: list[Candidate],
        cycle: str | None,
        now: float | None,
    ) -> list[str]:
        """Opted-out URLs first: refused before anything of them is stored, origin included."""
        if not cands:
            return []
        overrides, blocked = self._operator_state(c)
        if any("priority" in o["settings"] for o in overrides):
            # an operator's priority for an origin or domain holds for new URLs too
            cands = [replace(x, priority=p) if (p := override_for(overrides, x.origin, "priority"))
                     is not None else x for x in cands]  # fmt: skip
        out = [Reason.SUPPRESSED.value if any(b.matches(x.url) for b in blocked) else ""
               for x in cands]  # fmt: skip
        allowed = iter(self._discover_allowed(c, [x for x, d in zip(cands, out, strict=True)
                                                  if not d], cycle, now, overrides))  # fmt: skip
        return [d or next(allowed) for d in out]

    def _discover_allowed(
        self,
        c: Conn,
        cands: list[Candidate],
        cycle: str | None,
        now: float | None,
        overrides: list[dict[str, Any]],
    ) -> list[str]:
        if not cands:
            return []
        now = time.time() if now is None else now
        self._ensure_origins(c, cands, overrides)
        counts = self._admitted_counts(c, {x.origin for x in cands}, cycle) if cycle else {}
        # Three statements for the whole batch (known? insert-if-absent, counters), not one
        # round trip per link: a page offers ~17 links and PostgreSQL is a network hop away.
        known = self._known_urls(c, self._maybe_known(c, [x.url for x in cands]))
        decisions = [Reason.ALREADY_KNOWN.value] * len(cands)
        planned: dict[str, tuple[int, str, str | None, str]] = {}
        rows = []
        fresh = [x for x in cands if x.url not in known]
        keys = {x.url: trap_keys(x.url) for x in fresh}
        counted = {u: counted_keys(k) for u, k in keys.items()}  # once a URL: read thrice
        traps = self._trap_counts(c, fresh, keys, counted)
        for i, x in enumerate(cands):
            if x.url in known or x.url in planned:
                continue
            cut = self._trap_cut(x, keys[x.url], counted[x.url], traps)
            if cut is not None:
                decisions[i] = cut
                continue
            state, reason, queued_cycle = x.state.value, x.reason, None
            if x.state is UrlState.ELIGIBLE:
                if cycle is None:
                    state = UrlState.DISCOVERED.value  # the next frontier selection queues it
                elif counts[x.origin] < self.cycle_budget:
                    queued_cycle = cycle
                    counts[x.origin] += 1
                else:
                    state, reason = UrlState.DISCOVERED.value, Reason.ORIGIN_BUDGET.value
            planned[x.url] = (i, reason, queued_cycle, x.origin)
            rows.append((
                x.url, x.discovered_url, x.origin, x.shard, x.depth, x.priority,
                state, reason, queued_cycle, x.robots_version, x.source, cycle, now,
                json.dumps(x.via) if x.via else None, keys[x.url].pattern, keys[x.url].query_key,
                x.kind, url_digest(x.url),
            ))  # fmt: skip
        inserted = self._insert_urls(c, rows)
        self._count_traps(c, [(planned[u][3], counted[u]) for u in inserted])
        if self._bloom is not None:
            self._bloom.update(inserted)
        for url, (i, reason, queued_cycle, origin) in planned.items():
            if url in inserted:
                decisions[i] = reason
            elif queued_cycle is not None:
                counts[origin] -= 1  # another writer inserted it first
        if cycle is not None:
            self._many(c, ADMITTED, [{"cycle": cycle, "n": n, "origin": o}
                                     for o, n in sorted(counts.items())])  # fmt: skip
        return decisions

    def _trap_counts(
        self,
        c: Conn,
        fresh: list[Candidate],
        keys: dict[str, TrapKeys],
        counted: dict[str, list[tuple[str, str]]],
    ) -> Counter[tuple[str, str, str]]:
        """URLs already in the catalogue per (origin, kind, key) for the keys of `fresh`, and
        1 under (origin, 'stopped', path) for each of their paths the novelty rule stopped (in
        the same statement: no extra round trip per discovery)."""
        counts: Counter[tuple[str, str, str]] = Counter()
        wanted = sorted({(x.origin, kind, k) for x in fresh for kind, k in counted[x.url]})
        paths = sorted({(x.origin, p) for x in fresh if (p := keys[x.url].path_key) is not None})
        for i in range(0, max(len(wanted), len(paths)), _BATCH):
            part, stops = wanted[i : i + _BATCH], paths[i : i + _BATCH]
            selects: list[str] = []
            params: dict[str, Any] = {}
            if part:
                ors = " OR ".join(f"(origin = :o{j} AND kind = :k{j} AND key = :key{j})"
                                  for j in range(len(part)))  # fmt: skip
                selects.append(f"SELECT origin, kind, key, n FROM trap_counts WHERE {ors}")
                for j, (origin, kind, key) in enumerate(part):
                    params |= {f"o{j}": origin, f"k{j}": kind, f"key{j}": key}
            if stops:
                ors = " OR ".join(f"(origin = :so{j} AND path = :sp{j})" for j in range(len(stops)))
                selects.append("SELECT origin, 'stopped', path, stopped FROM trap_novelty "
                               f"WHERE stopped = 1 AND ({ors})")  # fmt: skip
                for j, (origin, path) in enumerate(stops):
                    params |= {f"so{j}": origin, f"sp{j}": path}
            for row in c.execute(" UNION ALL ".join(selects), params):
                counts[(row[0], row[1], row[2])] = int(row[3])
        return counts

    def _count_traps(self, c: Conn, inserted: list[tuple[str, list[tuple[str, str]]]]) -> None:
        """Add the URLs this statement inserted (origin, their counted keys) to their trap
        counters, in one key order for every writer (no lock-order deadlocks on PostgreSQL)."""
        added: Counter[tuple[str, str, str]] = Counter()
        for origin, counted in inserted:
            for kind, key in counted:
                added[(origin, kind, key)] += 1
        self._many(c, TRAP_COUNTS, [{"origin": origin, "kind": kind, "key": key, "n": n}
                                     for (origin, kind, key), n in sorted(added.items())])  # fmt: skip

    def _trap_cut(
        self,
        x: Candidate,
        keys: TrapKeys,
        counted: list[tuple[str, str]],
        counts: Counter[tuple[str, str, str]],
    ) -> str | None:
        """The cap reason (traps.trap_cut) when admitting `x` would pass a trap cap or its
        path's variants are stopped for no novelty; else count it in. `counted` is
        traps.counted_keys(keys)."""
        mine = {(kind, key): counts[(x.origin, kind, key)] for kind, key in counted}
        if keys.path_key is not None:
            mine[(STOPPED, keys.path_key)] = counts[(x.origin, STOPPED, keys.path_key)]
        cut = trap_cut(keys, mine, self.caps)
        if cut is None:
            for kind, key in counted:
                counts[(x.origin, kind, key)] += 1
        return cut

    def _maybe_known(self, c: Conn, urls: list[str]) -> list[str]:
        """The URLs worth an exact lookup. With the Bloom prefilter, only its "maybe"s: a
        "no" can be wrong only for URLs another process added since we loaded it, and those
        the insert-if-absent still refuses, so a filter answer never drops or duplicates."""
        if not self.caps.bloom_capacity:
            return urls
        if self._bloom is None:
            self._bloom = Bloom(self.caps.bloom_capacity, 0.01)
            self._bloom.update(r[0] for r in c.execute("SELECT url FROM urls"))
        return [u for u in urls if u in self._bloom]

    def _known_urls(self, c: Conn, urls: list[str]) -> set[str]:
        """Exact: looked up on the unique index of the URL string itself, the index every
        insert-if-absent consults anyway (migration 0026 says why not by digest)."""
        wanted = sorted(set(urls))
        found: set[str] = set()
        for i in range(0, len(wanted), _BATCH):
            names, params = marks("u", wanted[i : i + _BATCH])
            found.update(r[0] for r in c.execute(
                f"SELECT url FROM urls WHERE url IN ({names})", params))  # fmt: skip
        return found

    def _insert_urls(self, c: Conn, rows: list[tuple[Any, ...]]) -> set[str]:
        """Insert-if-absent; the URLs this statement actually inserted.

        SQLite only (PostgresStore inserts through arrays), and the one statement written
        with positional parameters: sqlite3 binds a named parameter by building its name and
        looking it up, which for 18 columns x 200 rows cost four times the insert itself."""
        inserted: set[str] = set()
        row_marks = "(" + ", ".join("?" * len(_URL_COLUMNS)) + ")"
        for i in range(0, len(rows), _BATCH):
            part = rows[i : i + _BATCH]
            cur = c.execute(
                f"INSERT INTO urls ({', '.join(_URL_COLUMNS)}) "
                f"VALUES {', '.join([row_marks] * len(part))} ON CONFLICT DO NOTHING RETURNING url",
                [v for row in part for v in row],
            )
            inserted.update(r[0] for r in cur.fetchall())
        return inserted

    def _note_novelty(
        self,
        c: Conn,
        results: Sequence[tuple[Lease, Outcome]],
        decided: list[str],
        cycle: str,
        now: float,
    ) -> None:
        """The novelty rule (traps.judge_novelty) for the query variants this group fetched:
        what each brought (new non-variant URLs among its links' decisions, a document text
        no other URL holds), one read of the paths' states, the rule in commit order, one
        write; a stopped path's queued, never-fetched variants leave this cycle."""
        reasons = iter(decided)
        events: list[tuple[str, str, int, str | None, str]] = []
        for lease, outcome in results:
            found = [(cand.url, next(reasons)) for _, cand in outcome.links if cand is not None]
            path = trap_keys(lease.url).path_key
            if path is None or lease.kind != "page":
                continue
            new = sum(r not in _NOT_NEW and trap_keys(u).path_key is None for u, r in found)
            doc = outcome.document_id if outcome.document is not None else None
            events.append((lease.origin, path, new, doc, lease.url))
        if not events:
            return
        docs = sorted({e[3] for e in events if e[3] is not None})
        holders: dict[str, set[str]] = {}
        for i in range(0, len(docs), _BATCH):
            held, params = marks("d", docs[i : i + _BATCH])
            for url, doc in c.execute(
                f"SELECT url, document_id FROM urls WHERE document_id IN ({held})", params
            ):
                holders.setdefault(doc, set()).add(url)
        firsts: dict[str, str] = {}
        for e in events:
            if e[3] is not None:
                firsts.setdefault(e[3], e[4])
        group = {e[4] for e in events}
        keys = sorted({(e[0], e[1]) for e in events})
        states: dict[tuple[str, str], tuple[Novelty, float | None]] = {}
        for i in range(0, len(keys), _BATCH):
            part = keys[i : i + _BATCH]
            ors = " OR ".join(f"(origin = :o{j} AND path = :p{j})" for j in range(len(part)))
            pairs = {k: v for j, (origin, path) in enumerate(part)
                     for k, v in ((f"o{j}", origin), (f"p{j}", path))}  # fmt: skip
            for row in c.execute(
                "SELECT origin, path, fetched, barren, stopped, stopped_at FROM trap_novelty "
                f"WHERE {ors} ORDER BY origin, path" + self._for_update,
                pairs,
            ):
                states[(row[0], row[1])] = (Novelty(int(row[2]), int(row[3]), bool(row[4])), row[5])
        for origin, path, new, doc, url in events:
            state, since = states.get((origin, path), (Novelty(), None))
            fresh = doc is not None and firsts[doc] == url and not (holders.get(doc, set()) - group)
            after = judge_novelty(state, VariantFetch(new, fresh), self.caps.novelty_window)
            states[(origin, path)] = (after, (since or now) if after.stopped else None)
        c.executemany(
            """INSERT INTO trap_novelty (origin, path, fetched, barren, stopped, stopped_at)
               VALUES (:origin, :path, :fetched, :barren, :stopped, :stopped_at)
               ON CONFLICT (origin, path) DO UPDATE SET
                 fetched = excluded.fetched, barren = excluded.barren,
                 stopped = excluded.stopped, stopped_at = excluded.stopped_at""",
            [{"origin": o, "path": p, "fetched": s.fetched, "barren": s.barren,
              "stopped": int(s.stopped), "stopped_at": at}
             for (o, p), (s, at) in sorted(states.items())],
        )  # fmt: skip
        for (origin, path), (state, _) in sorted(states.items()):
            if state.stopped:
                self._withdraw_variants(c, origin, path, cycle)

    def _withdraw_variants(self, c: Conn, origin: str, path: str, cycle: str) -> None:
        """A stopped path's variants queued in `cycle` and never fetched go back to
        'discovered' (reason trap_no_novelty), their budget to the origin's other URLs."""
        cur = c.execute(
            """UPDATE urls SET state = 'discovered', reason = :reason, cycle = NULL
               WHERE origin = :origin AND cycle = :cycle AND state = 'eligible'
                 AND last_fetch_at IS NULL
                 AND substr(trap_query, 1, CAST(:length AS INTEGER)) = :prefix""",
            {"reason": Reason.TRAP_NO_NOVELTY.value, "origin": origin, "cycle": cycle,
             "length": len(path) + 1, "prefix": path + "?"},
        )  # fmt: skip
        if cur.rowcount > 0:
            c.execute(
                """UPDATE origins SET admitted_count = CASE WHEN admitted_count > :withdrawn
                     THEN admitted_count - :withdrawn ELSE 0 END
                   WHERE origin = :origin AND admitted_cycle = :cycle""",
                {"withdrawn": cur.rowcount, "origin": origin, "cycle": cycle},
            )
