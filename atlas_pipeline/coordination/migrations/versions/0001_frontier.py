"""The frontier: origins with their clocks and robots cache, URLs, fetch records, stale attempts.

Revision 0001 (legacy schema_migrations version 1).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from atlas_pipeline.coordination.tables import Real, Seq

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "origins",
        sa.Column("origin", sa.Text, primary_key=True),
        sa.Column("shard", sa.Integer, nullable=False),
        sa.Column("min_gap_s", Real, nullable=False),
        sa.Column("max_in_flight", sa.Integer, nullable=False),
        sa.Column("next_eligible_at", Real, nullable=False, server_default=sa.text("0")),
        sa.Column("backoff_until", Real, nullable=False, server_default=sa.text("0")),
        sa.Column("robots_version", sa.Integer, nullable=False, server_default=sa.text("0")),
        sa.Column("robots_status", sa.Text),
        sa.Column("robots_text", sa.Text, nullable=False, server_default=sa.text("''")),
        sa.Column("robots_fetched_at", Real),
        sa.Column("robots_good_at", Real),
        sa.Column("robots_expires_at", Real, nullable=False, server_default=sa.text("0")),
        sa.Column("robots_lease_id", sa.Text),
        sa.Column("robots_lease_until", Real, nullable=False, server_default=sa.text("0")),
        sa.Column("admitted_cycle", sa.Text),
        sa.Column("admitted_count", sa.Integer, nullable=False, server_default=sa.text("0")),
    )
    op.create_index("origins_shard", "origins", ["shard"])
    op.create_table(
        "urls",
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
        sa.Column("due_at", Real, nullable=False, server_default=sa.text("0")),
        sa.Column("attempts", sa.Integer, nullable=False, server_default=sa.text("0")),
        sa.Column("fence", sa.Integer, nullable=False, server_default=sa.text("0")),
        sa.Column("lease_id", sa.Text),
        sa.Column("lease_expires_at", Real),
        sa.Column("slot_held", sa.Integer, nullable=False, server_default=sa.text("0")),
        sa.Column("robots_version", sa.Integer),
        sa.Column("source", sa.Text),
        sa.Column("discovered_cycle", sa.Text),
        sa.Column("discovered_at", Real, nullable=False),
        sa.Column("last_fetch_at", Real),
        sa.Column("last_status", sa.Integer),
        sa.Column("etag", sa.Text),
        sa.Column("last_modified", sa.Text),
        sa.Column("content_hash", sa.Text),
        sqlite_autoincrement=True,
    )
    op.create_index("urls_queue", "urls", ["origin", "cycle", "state", "due_at"])
    op.create_index("urls_shard_cycle", "urls", ["shard", "cycle", "state"])
    op.create_index("urls_slots", "urls", ["origin", "slot_held", "lease_expires_at"])
    op.create_index("urls_leases", "urls", ["state", "lease_expires_at"])
    op.create_table(
        "fetch_records",
        sa.Column("fetch_id", sa.Text, primary_key=True),
        sa.Column("cycle", sa.Text, nullable=False),
        sa.Column("shard", sa.Integer, nullable=False),
        sa.Column("url", sa.Text, nullable=False),
        sa.Column("fence", sa.Integer, nullable=False),
        sa.Column("record", sa.Text, nullable=False),
        sa.Column("links", sa.Text, nullable=False),
        sa.Column("document", sa.Text),
    )
    op.create_index("fetch_records_partition", "fetch_records", ["cycle", "shard"])
    op.create_table(
        "stale_attempts",
        sa.Column("url", sa.Text, nullable=False),
        sa.Column("fence", sa.Integer, nullable=False),
        sa.Column("cycle", sa.Text, nullable=False),
        sa.Column("at", Real, nullable=False),
        sa.Column("record", sa.Text, nullable=False),
    )
