"""A bounded store: once a partition's Delta commits are in, its fetch records leave the
store. `lake_writes` says which partitions the lake holds, at which batch fence; the body
references of the records that left stay as `body_refs` (one per body and URL, with the
newest commit time), so the orphan sweep, retention and opt-out purges still see them.
Records from before revision 0017 count as committed now, so retention starts here.

Revision 0021 (legacy schema_migrations version 21).
"""

from __future__ import annotations

import time

import sqlalchemy as sa
from alembic import op

from atlas_pipeline.coordination.tables import Real

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "lake_writes",
        sa.Column("cycle", sa.Text, primary_key=True),
        sa.Column("shard", sa.Integer, primary_key=True),
        sa.Column("fence", sa.Integer, nullable=False),
        sa.Column("fetches", sa.BigInteger, nullable=False),
        sa.Column("written_at", Real, nullable=False),
    )
    op.create_table(
        "body_refs",
        sa.Column("body_key", sa.Text, primary_key=True),
        sa.Column("url", sa.Text, primary_key=True),
        sa.Column("committed_at", Real, nullable=False),
    )
    op.get_bind().execute(
        sa.text("UPDATE fetch_records SET committed_at = :now WHERE committed_at IS NULL"),
        {"now": time.time()},
    )
