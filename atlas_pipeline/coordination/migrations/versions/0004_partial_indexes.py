"""Slot and lease lookups only ever ask for held slots and live leases: partial indexes
keep every other row (nearly all of them) out, so inserts and updates touch fewer trees.

Revision 0004 (legacy schema_migrations version 4).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_index("urls_slots", "urls")
    op.create_index(
        "urls_slots",
        "urls",
        ["origin", "lease_expires_at"],
        sqlite_where=sa.text("slot_held = 1"),
        postgresql_where=sa.text("slot_held = 1"),
    )
    op.drop_index("urls_leases", "urls")
    op.create_index(
        "urls_leases",
        "urls",
        ["shard", "cycle", "lease_expires_at"],
        sqlite_where=sa.text("state = 'leased'"),
        postgresql_where=sa.text("state = 'leased'"),
    )
