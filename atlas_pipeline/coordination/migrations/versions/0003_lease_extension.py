"""A lease may be extended once, with its current fence.

Revision 0003 (legacy schema_migrations version 3).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "urls", sa.Column("extended", sa.Integer, nullable=False, server_default=sa.text("0"))
    )
