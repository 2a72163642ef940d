"""URL lookups go through the unique index on the URL itself; the index on its 64-bit
digest is dropped.

A digest is random, so the 80 or so URLs a commit group inserts landed on as many leaves of
that index, each a page written to the WAL at commit: on SQLite that index alone cost a
third of a claim+commit pair (benchmarks/store_throughput.py, one writer, groups of 8:
1,106 -> 1,450 pairs/s without it). The unique index on the string was maintained and
consulted on every insert anyway, and an exact lookup on it needs no collision check. The
digest column stays, written as before.

Revision 0026.
"""

from __future__ import annotations

from alembic import op

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_index("urls_hash", table_name="urls")
