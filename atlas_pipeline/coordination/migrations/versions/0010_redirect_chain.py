"""Redirects are followed one claim per hop: each target remembers the chain behind it.

Revision 0010 (legacy schema_migrations version 10).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("urls", sa.Column("redirect_chain", sa.Text))
