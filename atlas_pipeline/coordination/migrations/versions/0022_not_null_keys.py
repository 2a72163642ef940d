"""Text primary keys are NOT NULL on SQLite too.

SQLite lets a non-integer PRIMARY KEY hold NULL unless it is also declared NOT NULL, and the
stores made before Alembic did not declare it (the revisions do, as PostgreSQL implies). No
statement ever wrote a NULL key, but the schema should say so: on SQLite these four tables
are rebuilt once with the constraint (Alembic's batch mode: copy, drop, rename, re-index).

Revision 0022.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None

_KEYS = (("fetch_records", "fetch_id"), ("origins", "origin"), ("store_settings", "key"),
         ("tombstones", "event_id"))  # fmt: skip


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        return  # a PostgreSQL primary key is NOT NULL already
    inspector = sa.inspect(bind)
    for table, key in _KEYS:
        column = next(c for c in inspector.get_columns(table) if c["name"] == key)
        if column["nullable"]:
            with op.batch_alter_table(table) as batch:
                batch.alter_column(key, existing_type=sa.Text, nullable=False)
