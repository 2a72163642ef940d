"""Exact dedupe looks URLs up by a 64-bit digest (a small integer index) and compares the
full strings it finds; the unique index on the string still decides every insert.

Revision 0013 (legacy schema_migrations version 13).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from atlas_pipeline.coordination.core import url_digest

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("urls", sa.Column("url_hash", sa.BigInteger))
    op.create_index("urls_hash", "urls", ["url_hash"])
    bind = op.get_bind()
    rows = bind.execute(sa.text("SELECT seq, url FROM urls")).fetchall()
    if rows:
        bind.execute(
            sa.text("UPDATE urls SET url_hash = :h WHERE seq = :seq"),
            [{"h": url_digest(str(url)), "seq": seq} for seq, url in rows],
        )
