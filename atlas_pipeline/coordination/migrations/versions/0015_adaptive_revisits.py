"""Adaptive revisits (recrawl.py): each URL keeps its content checks and the document its
last content gave; each origin counts how often its validators misled.

Revision 0015 (legacy schema_migrations version 15).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from atlas_pipeline.coordination.tables import Real

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    for name, kind in (
        ("document_id", sa.Text),
        ("change_history", sa.Text),
        ("last_checked_at", Real),
        ("revisit_interval_s", Real),
        ("revisit_reason", sa.Text),
        ("change_rate", Real),
    ):
        op.add_column("urls", sa.Column(name, kind))
    for table, name in (
        ("urls", "checks"),
        ("urls", "changes"),
        ("origins", "validator_checks"),
        ("origins", "validator_misses"),
    ):
        op.add_column(
            table, sa.Column(name, sa.BigInteger, nullable=False, server_default=sa.text("0"))
        )
    op.add_column(
        "origins",
        sa.Column("validators_trusted", sa.Integer, nullable=False, server_default=sa.text("1")),
    )
