"""Operator policy per origin or registrable domain (rate limits, priority, revisit
bounds), versioned; an operator gap is a floor that robots refreshes keep.

Revision 0018 (legacy schema_migrations version 18).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from atlas_pipeline.coordination.tables import Real

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "origins", sa.Column("operator_gap_s", Real, nullable=False, server_default=sa.text("0"))
    )
    op.create_table(
        "policy_overrides",
        sa.Column("scope", sa.Text, primary_key=True),
        sa.Column("value", sa.Text, primary_key=True),
        sa.Column("settings", sa.Text, nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("who", sa.Text, nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("at", Real, nullable=False),
    )
