"""The claim walks a shard's origins in clock order and stops at the first with due work.

Revision 0002 (legacy schema_migrations version 2).
"""

from __future__ import annotations

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("origins_clock", "origins", ["shard", "next_eligible_at"])
