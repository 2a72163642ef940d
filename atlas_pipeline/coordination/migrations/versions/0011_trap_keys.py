"""Trap caps count distinct URLs per key (traps.py), so the keys are columns, computed in
Python for the URLs already known.

Revision 0011 (legacy schema_migrations version 11).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from atlas_pipeline.traps import trap_keys

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("urls", sa.Column("trap_pattern", sa.Text))
    op.add_column("urls", sa.Column("trap_query", sa.Text))
    op.create_index("urls_trap_pattern", "urls", ["origin", "trap_pattern"])
    op.create_index("urls_trap_query", "urls", ["origin", "trap_query"])
    bind = op.get_bind()
    rows = bind.execute(sa.text("SELECT seq, url FROM urls")).fetchall()
    keys = [
        {"p": k.pattern, "q": k.query_key, "seq": seq}
        for seq, url in rows
        for k in [trap_keys(str(url))]
    ]
    if keys:
        bind.execute(
            sa.text("UPDATE urls SET trap_pattern = :p, trap_query = :q WHERE seq = :seq"), keys
        )
