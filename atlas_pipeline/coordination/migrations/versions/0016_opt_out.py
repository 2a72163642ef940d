"""Opt-out (seed 000 ch. 16): suppressions outlive the data they removed; tombstone events
wait here until the indexer took them (an outbox of deletions).

Revision 0016 (legacy schema_migrations version 16).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from atlas_pipeline.coordination.tables import Real

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "suppressions",
        sa.Column("scope", sa.Text, primary_key=True),
        sa.Column("value", sa.Text, primary_key=True),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("verification", sa.Text, nullable=False),
        sa.Column("who", sa.Text, nullable=False),
        sa.Column("at", Real, nullable=False),
    )
    op.create_table(
        "tombstones",
        sa.Column("event_id", sa.Text, primary_key=True),
        sa.Column("event", sa.Text, nullable=False),
        sa.Column("created_at", Real, nullable=False),
        sa.Column("delivered_at", Real),
    )
