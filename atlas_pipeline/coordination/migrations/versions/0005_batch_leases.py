"""Batch leases: each run (or retry) of a fetch partition takes the next fence token; only
the newest may write the partition's Delta rows (the lake checks it at commit).

Revision 0005 (legacy schema_migrations version 5).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from atlas_pipeline.coordination.tables import Real

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "batch_leases",
        sa.Column("cycle", sa.Text, primary_key=True),
        sa.Column("shard", sa.Integer, primary_key=True),
        sa.Column("fence", sa.Integer, nullable=False),
        sa.Column("holder", sa.Text, nullable=False),
        sa.Column("acquired_at", Real, nullable=False),
    )
