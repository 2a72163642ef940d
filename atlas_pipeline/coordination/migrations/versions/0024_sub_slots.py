"""In-flight slots of a rendered page's subrequests, so they count against the origin's cap
in every run, as URL leases do.

Revision 0024.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from atlas_pipeline.coordination.tables import Real

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "sub_slots",
        sa.Column("slot_id", sa.Text, primary_key=True),
        sa.Column("origin", sa.Text, nullable=False),
        sa.Column("until", Real, nullable=False),
    )
    op.create_index("sub_slots_origin", "sub_slots", ["origin", "until"])
