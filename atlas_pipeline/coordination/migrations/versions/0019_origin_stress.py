"""Adaptive pacing tells a page's hiccup from an origin's overload by the moving share of
5xx answers (politeness.adapt).

Revision 0019 (legacy schema_migrations version 19).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from atlas_pipeline.coordination.tables import Real

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("origins", sa.Column("stress", Real, nullable=False, server_default=sa.text("0")))
