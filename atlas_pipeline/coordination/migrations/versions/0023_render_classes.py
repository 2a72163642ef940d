"""The render lane's decisions per origin and page class, kept across batches and runs.

Revision 0023.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from atlas_pipeline.coordination.tables import Real

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "render_classes",
        sa.Column("origin", sa.Text, primary_key=True),
        sa.Column("page_class", sa.Text, primary_key=True),
        sa.Column("state", sa.Text, nullable=False),
        sa.Column("samples", sa.Integer, nullable=False),
        sa.Column("raw_words", sa.BigInteger, nullable=False),
        sa.Column("rendered_words", sa.BigInteger, nullable=False),
        sa.Column("decided_at", Real),
        sa.Column("updated_at", Real, nullable=False),
    )
