"""The coordination store's tables, defined once for both backends (SQLAlchemy Core).

This is the schema the newest migration (migrations/versions) leaves behind; a test compares
every migrated store, fresh or upgraded, on SQLite and PostgreSQL against it. Statements are
written in SQL both backends read as it is (core.py), so these objects are the schema's
single description, not a query builder the store must go through.
"""

from __future__ import annotations

import sqlalchemy as sa

# Epoch seconds need 8 bytes: REAL is that on SQLite but 4 bytes on PostgreSQL.
Real: sa.types.TypeEngine[float] = sa.Double().with_variant(sa.REAL(), "sqlite")
# A row id: SQLite's rowid alias must be spelled INTEGER PRIMARY KEY (AUTOINCREMENT, so ids
# are never reused); PostgreSQL gets a 64-bit identity.
Seq: sa.types.TypeEngine[int] = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def zero() -> sa.TextClause:
    return sa.text("0")


metadata = sa.MetaData()

# Every applied revision with its time (env.py); stores from before Alembic kept only this.
schema_migrations = sa.Table(
    "schema_migrations",
    metadata,
    sa.Column("version", sa.Integer, primary_key=True),
    sa.Column("applied_at", sa.Text),
)

origins = sa.Table(
    "origins",
    metadata,
    sa.Column("origin", sa.Text, primary_key=True),
    sa.Column("shard", sa.Integer, nullable=False),
    sa.Column("min_gap_s", Real, nullable=False),
    sa.Column("max_in_flight", sa.Integer, nullable=False),
    sa.Column("next_eligible_at", Real, nullable=False, server_default=zero()),
    sa.Column("backoff_until", Real, nullable=False, server_default=zero()),
    sa.Column("robots_version", sa.Integer, nullable=False, server_default=zero()),
    sa.Column("robots_status", sa.Text),
    sa.Column("robots_text", sa.Text, nullable=False, server_default=sa.text("''")),
    sa.Column("robots_fetched_at", Real),
    sa.Column("robots_good_at", Real),
    sa.Column("robots_expires_at", Real, nullable=False, server_default=zero()),
    sa.Column("robots_lease_id", sa.Text),
    sa.Column("robots_lease_until", Real, nullable=False, server_default=zero()),
    sa.Column("admitted_cycle", sa.Text),
    sa.Column("admitted_count", sa.Integer, nullable=False, server_default=zero()),
    sa.Column("registrable_domain", sa.Text),
    sa.Column("adapt_gap_s", Real, nullable=False, server_default=zero()),
    sa.Column("latency_s", Real),
    sa.Column("bucket", sa.Text),
    sa.Column("fair_class", sa.Text),
    sa.Column("validator_checks", sa.BigInteger, nullable=False, server_default=zero()),
    sa.Column("validator_misses", sa.BigInteger, nullable=False, server_default=zero()),
    sa.Column("validators_trusted", sa.Integer, nullable=False, server_default=sa.text("1")),
    sa.Column("operator_gap_s", Real, nullable=False, server_default=zero()),
    sa.Column("stress", Real, nullable=False, server_default=zero()),
    # regions: the region holding the origin's ownership lease, its token and end, as this
    # region last heard from the control plane; `share` is this region's part of its budget
    sa.Column("owner_region", sa.Text),
    sa.Column("owner_token", sa.BigInteger, nullable=False, server_default=zero()),
    sa.Column("owner_until", Real, nullable=False, server_default=zero()),
    sa.Column("share", Real, nullable=False, server_default=sa.text("1")),
    sa.Index("origins_shard", "shard"),
    sa.Index("origins_clock", "shard", "next_eligible_at"),
    sa.Index("origins_domain", "registrable_domain"),
    sa.Index("origins_bucket", "bucket"),
)

urls = sa.Table(
    "urls",
    metadata,
    sa.Column("seq", Seq, sa.Identity(), primary_key=True),
    sa.Column("url", sa.Text, nullable=False, unique=True),
    sa.Column("discovered_url", sa.Text, nullable=False),
    sa.Column("origin", sa.Text, nullable=False),
    sa.Column("shard", sa.Integer, nullable=False),
    sa.Column("depth", sa.Integer, nullable=False),
    sa.Column("priority", Real, nullable=False),
    sa.Column("state", sa.Text, nullable=False),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("cycle", sa.Text),
    sa.Column("due_at", Real, nullable=False, server_default=zero()),
    sa.Column("attempts", sa.Integer, nullable=False, server_default=zero()),
    sa.Column("fence", sa.Integer, nullable=False, server_default=zero()),
    sa.Column("lease_id", sa.Text),
    sa.Column("lease_expires_at", Real),
    sa.Column("slot_held", sa.Integer, nullable=False, server_default=zero()),
    sa.Column("robots_version", sa.Integer),
    sa.Column("source", sa.Text),
    sa.Column("discovered_cycle", sa.Text),
    sa.Column("discovered_at", Real, nullable=False),
    sa.Column("last_fetch_at", Real),
    sa.Column("last_status", sa.Integer),
    sa.Column("etag", sa.Text),
    sa.Column("last_modified", sa.Text),
    sa.Column("content_hash", sa.Text),
    sa.Column("extended", sa.Integer, nullable=False, server_default=zero()),
    sa.Column("redirect_chain", sa.Text),
    sa.Column("trap_pattern", sa.Text),
    sa.Column("trap_query", sa.Text),
    sa.Column("kind", sa.Text, nullable=False, server_default="page"),
    sa.Column("url_hash", sa.BigInteger),
    sa.Column("document_id", sa.Text),
    sa.Column("change_history", sa.Text),
    sa.Column("last_checked_at", Real),
    sa.Column("revisit_interval_s", Real),
    sa.Column("revisit_reason", sa.Text),
    sa.Column("change_rate", Real),
    sa.Column("checks", sa.BigInteger, nullable=False, server_default=zero()),
    sa.Column("changes", sa.BigInteger, nullable=False, server_default=zero()),
    sa.Index("urls_queue", "origin", "cycle", "state", "due_at"),
    sa.Index("urls_shard_cycle", "shard", "cycle", "state"),
    sa.Index(
        "urls_slots",
        "origin",
        "lease_expires_at",
        sqlite_where=sa.text("slot_held = 1"),
        postgresql_where=sa.text("slot_held = 1"),
    ),
    sa.Index(
        "urls_leases",
        "shard",
        "cycle",
        "lease_expires_at",
        sqlite_where=sa.text("state = 'leased'"),
        postgresql_where=sa.text("state = 'leased'"),
    ),
    sa.Index("urls_document", "document_id"),
    sqlite_autoincrement=True,
)

fetch_records = sa.Table(
    "fetch_records",
    metadata,
    sa.Column("fetch_id", sa.Text, primary_key=True),
    sa.Column("cycle", sa.Text, nullable=False),
    sa.Column("shard", sa.Integer, nullable=False),
    sa.Column("url", sa.Text, nullable=False),
    sa.Column("fence", sa.Integer, nullable=False),
    sa.Column("record", sa.Text, nullable=False),
    sa.Column("links", sa.Text, nullable=False),
    sa.Column("document", sa.Text),
    sa.Column("body_key", sa.Text),
    sa.Column("committed_at", Real),
    sa.Index("fetch_records_partition", "cycle", "shard"),
)

stale_attempts = sa.Table(
    "stale_attempts",
    metadata,
    sa.Column("url", sa.Text, nullable=False),
    sa.Column("fence", sa.Integer, nullable=False),
    sa.Column("cycle", sa.Text, nullable=False),
    sa.Column("at", Real, nullable=False),
    sa.Column("record", sa.Text, nullable=False),
)

batch_leases = sa.Table(
    "batch_leases",
    metadata,
    sa.Column("cycle", sa.Text, primary_key=True),
    sa.Column("shard", sa.Integer, primary_key=True),
    sa.Column("fence", sa.Integer, nullable=False),
    sa.Column("holder", sa.Text, nullable=False),
    sa.Column("acquired_at", Real, nullable=False),
)

pauses = sa.Table(
    "pauses",
    metadata,
    sa.Column("scope", sa.Text, primary_key=True),
    sa.Column("value", sa.Text, primary_key=True),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("who", sa.Text, nullable=False),
    sa.Column("at", Real, nullable=False),
)

operator_log = sa.Table(
    "operator_log",
    metadata,
    sa.Column("seq", Seq, sa.Identity(), primary_key=True),
    sa.Column("action", sa.Text, nullable=False),
    sa.Column("scope", sa.Text, nullable=False),
    sa.Column("value", sa.Text, nullable=False),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("who", sa.Text, nullable=False),
    sa.Column("at", Real, nullable=False),
    sqlite_autoincrement=True,
)

class_usage = sa.Table(
    "class_usage",
    metadata,
    sa.Column("shard", sa.Integer, primary_key=True),
    sa.Column("fair_class", sa.Text, primary_key=True),
    sa.Column("score", Real, nullable=False),
    sa.Column("at", Real, nullable=False),
)

store_settings = sa.Table(
    "store_settings",
    metadata,
    sa.Column("key", sa.Text, primary_key=True),
    sa.Column("value", sa.Text, nullable=False),
)

trap_counts = sa.Table(
    "trap_counts",
    metadata,
    sa.Column("origin", sa.Text, primary_key=True),
    sa.Column("kind", sa.Text, primary_key=True),
    sa.Column("key", sa.Text, primary_key=True),
    sa.Column("n", sa.BigInteger, nullable=False),
)

suppressions = sa.Table(
    "suppressions",
    metadata,
    sa.Column("scope", sa.Text, primary_key=True),
    sa.Column("value", sa.Text, primary_key=True),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("verification", sa.Text, nullable=False),
    sa.Column("who", sa.Text, nullable=False),
    sa.Column("at", Real, nullable=False),
)

tombstones = sa.Table(
    "tombstones",
    metadata,
    sa.Column("event_id", sa.Text, primary_key=True),
    sa.Column("event", sa.Text, nullable=False),
    sa.Column("created_at", Real, nullable=False),
    sa.Column("delivered_at", Real),
)

policy_overrides = sa.Table(
    "policy_overrides",
    metadata,
    sa.Column("scope", sa.Text, primary_key=True),
    sa.Column("value", sa.Text, primary_key=True),
    sa.Column("settings", sa.Text, nullable=False),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("who", sa.Text, nullable=False),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("at", Real, nullable=False),
)

trap_novelty = sa.Table(
    "trap_novelty",
    metadata,
    sa.Column("origin", sa.Text, primary_key=True),
    sa.Column("path", sa.Text, primary_key=True),
    sa.Column("fetched", sa.BigInteger, nullable=False),
    sa.Column("barren", sa.BigInteger, nullable=False),
    sa.Column("stopped", sa.Integer, nullable=False),
    sa.Column("stopped_at", Real),
)

lake_writes = sa.Table(
    "lake_writes",
    metadata,
    sa.Column("cycle", sa.Text, primary_key=True),
    sa.Column("shard", sa.Integer, primary_key=True),
    sa.Column("fence", sa.Integer, nullable=False),
    sa.Column("fetches", sa.BigInteger, nullable=False),
    sa.Column("written_at", Real, nullable=False),
)

body_refs = sa.Table(
    "body_refs",
    metadata,
    sa.Column("body_key", sa.Text, primary_key=True),
    sa.Column("url", sa.Text, primary_key=True),
    sa.Column("committed_at", Real, nullable=False),
)

# The render lane's decision per origin and page class, with the tally it was made from.
render_classes = sa.Table(
    "render_classes",
    metadata,
    sa.Column("origin", sa.Text, primary_key=True),
    sa.Column("page_class", sa.Text, primary_key=True),
    sa.Column("state", sa.Text, nullable=False),
    sa.Column("samples", sa.Integer, nullable=False),
    sa.Column("raw_words", sa.BigInteger, nullable=False),
    sa.Column("rendered_words", sa.BigInteger, nullable=False),
    sa.Column("decided_at", Real),
    sa.Column("updated_at", Real, nullable=False),
)

# In-flight slots of requests outside any URL lease (a rendered page's subrequests): counted
# with the leases' slots against the origin's cap until released or `until` passes.
sub_slots = sa.Table(
    "sub_slots",
    metadata,
    sa.Column("slot_id", sa.Text, primary_key=True),
    sa.Column("origin", sa.Text, nullable=False),
    sa.Column("until", Real, nullable=False),
    sa.Index("sub_slots_origin", "origin", "until"),
)
