"""Fair scheduling: each origin's politeness bucket (origin, registrable domain or IP) and
fairness class as columns, and a decaying per-class count of recent attempts per shard.
(The store recomputes both from the config on open when the grouping changed.)

Revision 0009 (legacy schema_migrations version 9).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from atlas_pipeline.coordination.tables import Real

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("origins", sa.Column("bucket", sa.Text))
    op.execute("UPDATE origins SET bucket = origin")
    op.create_index("origins_bucket", "origins", ["bucket"])
    op.add_column("origins", sa.Column("fair_class", sa.Text))
    op.execute("UPDATE origins SET fair_class = registrable_domain")
    op.create_table(
        "class_usage",
        sa.Column("shard", sa.Integer, primary_key=True),
        sa.Column("fair_class", sa.Text, primary_key=True),
        sa.Column("score", Real, nullable=False),
        sa.Column("at", Real, nullable=False),
    )
    op.create_table(
        "store_settings",
        sa.Column("key", sa.Text, primary_key=True),
        sa.Column("value", sa.Text, nullable=False),
    )
