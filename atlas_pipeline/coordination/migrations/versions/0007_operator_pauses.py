"""Operator pauses (per origin or registrable domain) and an audit log of operator actions.
Registrable domains are computed in Python (public suffix list), not in SQL.

Revision 0007 (legacy schema_migrations version 7).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from atlas_pipeline.coordination.core import _domain_of as domain_of
from atlas_pipeline.coordination.tables import Real, Seq

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("origins", sa.Column("registrable_domain", sa.Text))
    op.create_index("origins_domain", "origins", ["registrable_domain"])
    op.create_table(
        "pauses",
        sa.Column("scope", sa.Text, primary_key=True),
        sa.Column("value", sa.Text, primary_key=True),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("who", sa.Text, nullable=False),
        sa.Column("at", Real, nullable=False),
    )
    op.create_table(
        "operator_log",
        sa.Column("seq", Seq, sa.Identity(), primary_key=True),
        sa.Column("action", sa.Text, nullable=False),
        sa.Column("scope", sa.Text, nullable=False),
        sa.Column("value", sa.Text, nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("who", sa.Text, nullable=False),
        sa.Column("at", Real, nullable=False),
        sqlite_autoincrement=True,
    )
    bind = op.get_bind()
    origins = [r[0] for r in bind.execute(sa.text("SELECT origin FROM origins"))]
    if origins:
        bind.execute(
            sa.text("UPDATE origins SET registrable_domain = :d WHERE origin = :o"),
            [{"d": domain_of(o), "o": o} for o in origins],
        )
