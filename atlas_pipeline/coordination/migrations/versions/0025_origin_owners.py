"""Regions: each origin's ownership lease as the region last heard it from the control plane
(holder, token, end) and the region's share of a split budget. A single-region store keeps
the defaults and never reads them.

Revision 0025.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from atlas_pipeline.coordination.tables import Real

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None


def upgrade() -> None:
    zero = sa.text("0")
    op.add_column("origins", sa.Column("owner_region", sa.Text))
    op.add_column("origins", sa.Column("owner_token", sa.BigInteger, nullable=False,
                                       server_default=zero))  # fmt: skip
    op.add_column("origins", sa.Column("owner_until", Real, nullable=False, server_default=zero))
    op.add_column("origins", sa.Column("share", Real, nullable=False,
                                       server_default=sa.text("1")))  # fmt: skip
