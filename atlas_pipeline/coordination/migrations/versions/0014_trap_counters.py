"""Trap caps read a counter per key instead of counting URLs: a pattern shared by every
article of a big site made each discover scan that site's whole index range. The counters
of the URLs already known are counted here, once.

Revision 0014 (legacy schema_migrations version 14).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "trap_counts",
        sa.Column("origin", sa.Text, primary_key=True),
        sa.Column("kind", sa.Text, primary_key=True),
        sa.Column("key", sa.Text, primary_key=True),
        sa.Column("n", sa.BigInteger, nullable=False),
    )
    op.drop_index("urls_trap_pattern", "urls")
    op.drop_index("urls_trap_query", "urls")
    for kind, column in (("pattern", "trap_pattern"), ("query", "trap_query")):
        op.execute(
            f"""INSERT INTO trap_counts (origin, kind, key, n)
                SELECT origin, '{kind}', {column}, COUNT(*) FROM urls
                WHERE {column} IS NOT NULL GROUP BY origin, {column}"""
        )
