"""The novelty rule (traps.judge_novelty) keeps one row per (origin, path) whose query
variants were fetched; "new content" asks which URLs already hold a document's text. The
per-path variant counters (kind 'path' in trap_counts) are summed here from the per-key-set
ones, once.

Revision 0020 (legacy schema_migrations version 20).
"""

from __future__ import annotations

from collections import Counter

import sqlalchemy as sa
from alembic import op

from atlas_pipeline.coordination.tables import Real

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "trap_novelty",
        sa.Column("origin", sa.Text, primary_key=True),
        sa.Column("path", sa.Text, primary_key=True),
        sa.Column("fetched", sa.BigInteger, nullable=False),
        sa.Column("barren", sa.BigInteger, nullable=False),
        sa.Column("stopped", sa.Integer, nullable=False),
        sa.Column("stopped_at", Real),
    )
    op.create_index("urls_document", "urls", ["document_id"])
    bind = op.get_bind()
    paths: Counter[tuple[str, str, str]] = Counter()
    for origin, key, n in bind.execute(
        sa.text("SELECT origin, key, n FROM trap_counts WHERE kind = 'query'")
    ):
        paths[(str(origin), "path", str(key).partition("?")[0])] += int(str(n))
    op.execute("DELETE FROM trap_counts WHERE kind = 'path'")
    if paths:
        bind.execute(
            sa.text("INSERT INTO trap_counts (origin, kind, key, n) VALUES (:o, :k, :key, :n)"),
            [{"o": o, "k": k, "key": key, "n": n} for (o, k, key), n in sorted(paths.items())],
        )
