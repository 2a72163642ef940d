"""Alembic environment: migrations run on the connection migrate.py hands over, inside the
transaction it holds (so the one-migrator lock covers them), and each applied revision is
also logged in `schema_migrations` with its time, as the store's first migrations were."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from alembic import context
from alembic.runtime.migration import MigrationContext, MigrationInfo

from atlas_pipeline.coordination.migrate import log_applied
from atlas_pipeline.coordination.tables import metadata


def _log_applied(
    ctx: MigrationContext, step: MigrationInfo, heads: Collection[Any], run_args: Mapping[str, Any]
) -> None:
    if step.is_upgrade:
        assert ctx.connection is not None
        log_applied(ctx.connection, [int(str(step.up_revision_id))])


def run() -> None:
    connection = context.config.attributes["connection"]
    context.configure(
        connection=connection, target_metadata=metadata, on_version_apply=_log_applied
    )
    with context.begin_transaction():
        context.run_migrations()


# Alembic runs this file inside its migration environment (which gives `context` its config);
# anything else importing it, such as a walk over the package's modules, only defines `run`.
if hasattr(context, "config"):
    run()
