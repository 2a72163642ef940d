"""AIMD pacing: the gap an origin's errors and slow answers added on top of its base gap.

Revision 0008 (legacy schema_migrations version 8).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from atlas_pipeline.coordination.tables import Real

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "origins", sa.Column("adapt_gap_s", Real, nullable=False, server_default=sa.text("0"))
    )
    op.add_column("origins", sa.Column("latency_s", Real))
