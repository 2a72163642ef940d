"""Sitemaps are queued, leased and paced like pages; `kind` tells the fetcher to read them.

Revision 0012 (legacy schema_migrations version 12).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("urls", sa.Column("kind", sa.Text, nullable=False, server_default="page"))
