"""Retention per data class: a fetch record knows when it was committed, so its body
reference can expire after `retention.body_days`. (Records from before count as committed
when revision 0021 runs.)

Revision 0017 (legacy schema_migrations version 17).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from atlas_pipeline.coordination.tables import Real

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("fetch_records", sa.Column("committed_at", Real))
