"""The body a committed record references, as a column: the orphan-body sweeper keeps it.

Revision 0006 (legacy schema_migrations version 6).
"""

from __future__ import annotations

import json

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("fetch_records", sa.Column("body_key", sa.Text))
    bind = op.get_bind()
    rows = bind.execute(sa.text("SELECT fetch_id, record FROM fetch_records")).fetchall()
    keys = [
        {"k": json.loads(str(record)).get("body_key"), "id": fetch_id} for fetch_id, record in rows
    ]
    if keys:
        bind.execute(sa.text("UPDATE fetch_records SET body_key = :k WHERE fetch_id = :id"), keys)
