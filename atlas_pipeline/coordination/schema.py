"""Versioned schema migrations of the coordination store (applied in order, recorded once)."""

from __future__ import annotations

# Each entry: (version, statements). Never edit a released entry; append a new one.
MIGRATIONS: list[tuple[int, list[str]]] = [
    (
        1,
        [
            """CREATE TABLE origins (
                origin TEXT PRIMARY KEY,
                shard INTEGER NOT NULL,
                min_gap_s REAL NOT NULL,
                max_in_flight INTEGER NOT NULL,
                next_eligible_at REAL NOT NULL DEFAULT 0,
                backoff_until REAL NOT NULL DEFAULT 0,
                robots_version INTEGER NOT NULL DEFAULT 0,
                robots_status TEXT,
                robots_text TEXT NOT NULL DEFAULT '',
                robots_fetched_at REAL,
                robots_good_at REAL,
                robots_expires_at REAL NOT NULL DEFAULT 0,
                robots_lease_id TEXT,
                robots_lease_until REAL NOT NULL DEFAULT 0,
                admitted_cycle TEXT,
                admitted_count INTEGER NOT NULL DEFAULT 0
            )""",
            "CREATE INDEX origins_shard ON origins (shard)",
            """CREATE TABLE urls (
                seq INTEGER PRIMARY KEY AUTOINCREMENT,
                url TEXT NOT NULL UNIQUE,
                discovered_url TEXT NOT NULL,
                origin TEXT NOT NULL,
                shard INTEGER NOT NULL,
                depth INTEGER NOT NULL,
                priority REAL NOT NULL,
                state TEXT NOT NULL,
                reason TEXT NOT NULL,
                cycle TEXT,
                due_at REAL NOT NULL DEFAULT 0,
                attempts INTEGER NOT NULL DEFAULT 0,
                fence INTEGER NOT NULL DEFAULT 0,
                lease_id TEXT,
                lease_expires_at REAL,
                slot_held INTEGER NOT NULL DEFAULT 0,
                robots_version INTEGER,
                source TEXT,
                discovered_cycle TEXT,
                discovered_at REAL NOT NULL,
                last_fetch_at REAL,
                last_status INTEGER,
                etag TEXT,
                last_modified TEXT,
                content_hash TEXT
            )""",
            "CREATE INDEX urls_queue ON urls (origin, cycle, state, due_at)",
            "CREATE INDEX urls_shard_cycle ON urls (shard, cycle, state)",
            "CREATE INDEX urls_slots ON urls (origin, slot_held, lease_expires_at)",
            "CREATE INDEX urls_leases ON urls (state, lease_expires_at)",
            """CREATE TABLE fetch_records (
                fetch_id TEXT PRIMARY KEY,
                cycle TEXT NOT NULL,
                shard INTEGER NOT NULL,
                url TEXT NOT NULL,
                fence INTEGER NOT NULL,
                record TEXT NOT NULL,
                links TEXT NOT NULL,
                document TEXT
            )""",
            "CREATE INDEX fetch_records_partition ON fetch_records (cycle, shard)",
            """CREATE TABLE stale_attempts (
                url TEXT NOT NULL,
                fence INTEGER NOT NULL,
                cycle TEXT NOT NULL,
                at REAL NOT NULL,
                record TEXT NOT NULL
            )""",
        ],
    ),
]

MIGRATIONS.append(
    # The claim walks a shard's origins in clock order and stops at the first with due work.
    (2, ["CREATE INDEX origins_clock ON origins (shard, next_eligible_at)"])
)

MIGRATIONS.append(
    # A lease may be extended once, with its current fence.
    (3, ["ALTER TABLE urls ADD COLUMN extended INTEGER NOT NULL DEFAULT 0"])
)

MIGRATIONS.append(
    # Slot and lease lookups only ever ask for held slots and live leases: partial indexes
    # keep every other row (nearly all of them) out, so inserts and updates touch fewer trees.
    (
        4,
        [
            "DROP INDEX urls_slots",
            "CREATE INDEX urls_slots ON urls (origin, lease_expires_at) WHERE slot_held = 1",
            "DROP INDEX urls_leases",
            "CREATE INDEX urls_leases ON urls (shard, cycle, lease_expires_at) WHERE state = 'leased'",
        ],
    )
)

MIGRATIONS.append(
    # Batch leases: each run (or retry) of a fetch partition takes the next fence token; only
    # the newest may write the partition's Delta rows (the lake checks it at commit).
    (
        5,
        [
            """CREATE TABLE batch_leases (
                cycle TEXT NOT NULL,
                shard INTEGER NOT NULL,
                fence INTEGER NOT NULL,
                holder TEXT NOT NULL,
                acquired_at REAL NOT NULL,
                PRIMARY KEY (cycle, shard)
            )""",
        ],
    )
)

MIGRATIONS.append(
    # The body a committed record references, as a column: the orphan-body sweeper keeps it.
    (
        6,
        [
            "ALTER TABLE fetch_records ADD COLUMN body_key TEXT",
            "UPDATE fetch_records SET body_key = json_extract(record, '$.body_key')",
        ],
    )
)

MIGRATIONS.append(
    # Operator pauses (per origin or registrable domain) and an audit log of operator actions.
    (
        7,
        [
            "ALTER TABLE origins ADD COLUMN registrable_domain TEXT",
            "CREATE INDEX origins_domain ON origins (registrable_domain)",
            """CREATE TABLE pauses (
                scope TEXT NOT NULL,
                value TEXT NOT NULL,
                reason TEXT NOT NULL,
                who TEXT NOT NULL,
                at REAL NOT NULL,
                PRIMARY KEY (scope, value)
            )""",
            """CREATE TABLE operator_log (
                seq INTEGER PRIMARY KEY AUTOINCREMENT,
                action TEXT NOT NULL,
                scope TEXT NOT NULL,
                value TEXT NOT NULL,
                reason TEXT NOT NULL,
                who TEXT NOT NULL,
                at REAL NOT NULL
            )""",
        ],
    )
)

MIGRATIONS.append(
    # AIMD pacing: the gap an origin's errors and slow answers added on top of its base gap.
    (
        8,
        [
            "ALTER TABLE origins ADD COLUMN adapt_gap_s REAL NOT NULL DEFAULT 0",
            "ALTER TABLE origins ADD COLUMN latency_s REAL",
        ],
    )
)

MIGRATIONS.append(
    # Fair scheduling: each origin's politeness bucket (origin, registrable domain or IP) and
    # fairness class as columns, and a decaying per-class count of recent attempts per shard.
    (
        9,
        [
            "ALTER TABLE origins ADD COLUMN bucket TEXT",
            "UPDATE origins SET bucket = origin",
            "CREATE INDEX origins_bucket ON origins (bucket)",
            "ALTER TABLE origins ADD COLUMN fair_class TEXT",
            "UPDATE origins SET fair_class = registrable_domain",
            """CREATE TABLE class_usage (
                shard INTEGER NOT NULL,
                fair_class TEXT NOT NULL,
                score REAL NOT NULL,
                at REAL NOT NULL,
                PRIMARY KEY (shard, fair_class)
            )""",
            "CREATE TABLE store_settings (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        ],
    )
)

MIGRATIONS.append(
    # Redirects are followed one claim per hop: each target remembers the chain behind it.
    (10, ["ALTER TABLE urls ADD COLUMN redirect_chain TEXT"])
)

MIGRATIONS.append(
    # Trap caps count distinct URLs per key (traps.py), so the keys are indexed columns.
    (
        11,
        [
            "ALTER TABLE urls ADD COLUMN trap_pattern TEXT",
            "ALTER TABLE urls ADD COLUMN trap_query TEXT",
            "CREATE INDEX urls_trap_pattern ON urls (origin, trap_pattern)",
            "CREATE INDEX urls_trap_query ON urls (origin, trap_query)",
        ],
    )
)

MIGRATIONS.append(
    # Sitemaps are queued, leased and paced like pages; `kind` tells the fetcher to read them.
    (12, ["ALTER TABLE urls ADD COLUMN kind TEXT NOT NULL DEFAULT 'page'"])
)

MIGRATIONS.append(
    # Exact dedupe looks URLs up by a 64-bit digest (a small integer index) and compares the
    # full strings it finds; the unique index on the string still decides every insert.
    (
        13,
        [
            "ALTER TABLE urls ADD COLUMN url_hash BIGINT",  # 64 bits on both backends
            "CREATE INDEX urls_hash ON urls (url_hash)",
        ],
    )
)

MIGRATIONS.append(
    # Trap caps read a counter per key instead of counting URLs: a pattern shared by every
    # article of a big site made each discover scan that site's whole index range. The
    # counters are filled from the catalogue by the store after the migration.
    (
        14,
        [
            """CREATE TABLE trap_counts (
                origin TEXT NOT NULL,
                kind TEXT NOT NULL,
                key TEXT NOT NULL,
                n BIGINT NOT NULL,
                PRIMARY KEY (origin, kind, key)
            )""",
            "DROP INDEX urls_trap_pattern",
            "DROP INDEX urls_trap_query",
        ],
    )
)

MIGRATIONS.append(
    # Adaptive revisits (recrawl.py): each URL keeps its content checks and the document its
    # last content gave; each origin counts how often its validators misled.
    (
        15,
        [
            "ALTER TABLE urls ADD COLUMN document_id TEXT",
            "ALTER TABLE urls ADD COLUMN change_history TEXT",
            "ALTER TABLE urls ADD COLUMN last_checked_at REAL",
            "ALTER TABLE urls ADD COLUMN revisit_interval_s REAL",
            "ALTER TABLE urls ADD COLUMN revisit_reason TEXT",
            "ALTER TABLE urls ADD COLUMN change_rate REAL",
            "ALTER TABLE urls ADD COLUMN checks BIGINT NOT NULL DEFAULT 0",
            "ALTER TABLE urls ADD COLUMN changes BIGINT NOT NULL DEFAULT 0",
            "ALTER TABLE origins ADD COLUMN validator_checks BIGINT NOT NULL DEFAULT 0",
            "ALTER TABLE origins ADD COLUMN validator_misses BIGINT NOT NULL DEFAULT 0",
            "ALTER TABLE origins ADD COLUMN validators_trusted INTEGER NOT NULL DEFAULT 1",
        ],
    )
)

MIGRATIONS.append(
    # Opt-out (seed 000 ch. 16): suppressions outlive the data they removed; tombstone events
    # wait here until the indexer took them (an outbox of deletions).
    (
        16,
        [
            """CREATE TABLE suppressions (
                scope TEXT NOT NULL,
                value TEXT NOT NULL,
                reason TEXT NOT NULL,
                verification TEXT NOT NULL,
                who TEXT NOT NULL,
                at REAL NOT NULL,
                PRIMARY KEY (scope, value)
            )""",
            """CREATE TABLE tombstones (
                event_id TEXT PRIMARY KEY,
                event TEXT NOT NULL,
                created_at REAL NOT NULL,
                delivered_at REAL
            )""",
        ],
    )
)

MIGRATIONS.append(
    # Retention per data class: a fetch record knows when it was committed, so its body
    # reference can expire after `retention.body_days`.
    (17, ["ALTER TABLE fetch_records ADD COLUMN committed_at REAL"])
)

MIGRATIONS.append(
    # Operator policy per origin or registrable domain (rate limits, priority, revisit
    # bounds), versioned; an operator gap is a floor that robots refreshes keep.
    (
        18,
        [
            "ALTER TABLE origins ADD COLUMN operator_gap_s REAL NOT NULL DEFAULT 0",
            """CREATE TABLE policy_overrides (
                scope TEXT NOT NULL,
                value TEXT NOT NULL,
                settings TEXT NOT NULL,
                version INTEGER NOT NULL,
                who TEXT NOT NULL,
                reason TEXT NOT NULL,
                at REAL NOT NULL,
                PRIMARY KEY (scope, value)
            )""",
        ],
    )
)

MIGRATIONS.append(
    # Adaptive pacing tells a page's hiccup from an origin's overload by the moving share of
    # 5xx answers (politeness.adapt).
    (19, ["ALTER TABLE origins ADD COLUMN stress REAL NOT NULL DEFAULT 0"])
)

MIGRATIONS.append(
    # The novelty rule (traps.judge_novelty) keeps one row per (origin, path) whose query
    # variants were fetched; "new content" asks which URLs already hold a document's text.
    # The per-path variant counters (kind 'path' in trap_counts) are filled by the store.
    (
        20,
        [
            """CREATE TABLE trap_novelty (
                origin TEXT NOT NULL,
                path TEXT NOT NULL,
                fetched BIGINT NOT NULL,
                barren BIGINT NOT NULL,
                stopped INTEGER NOT NULL,
                stopped_at REAL,
                PRIMARY KEY (origin, path)
            )""",
            "CREATE INDEX urls_document ON urls (document_id)",
        ],
    )
)

MIGRATIONS.append(
    # A bounded store: once a partition's Delta commits are in, its fetch records leave the
    # store. `lake_writes` says which partitions the lake holds, at which batch fence; the body
    # references of the records that left stay as `body_refs` (one per body and URL, with the
    # newest commit time), so the orphan sweep, retention and opt-out purges still see them.
    # (The one-time fill of fetch_records.committed_at from migration 17 runs with this one.)
    (
        21,
        [
            """CREATE TABLE lake_writes (
                cycle TEXT NOT NULL,
                shard INTEGER NOT NULL,
                fence INTEGER NOT NULL,
                fetches BIGINT NOT NULL,
                written_at REAL NOT NULL,
                PRIMARY KEY (cycle, shard)
            )""",
            """CREATE TABLE body_refs (
                body_key TEXT NOT NULL,
                url TEXT NOT NULL,
                committed_at REAL NOT NULL,
                PRIMARY KEY (body_key, url)
            )""",
        ],
    )
)

LATEST = max(version for version, _ in MIGRATIONS)
