"""Backend-specific coordination tests run only on their backend (deselected, not skipped)."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    keep, drop = [], []
    for item in items:
        backend = getattr(getattr(item, "callspec", None), "params", {}).get("backend")
        only = "sqlite" if item.get_closest_marker("sqlite_only") else None
        only = "postgres" if item.get_closest_marker("postgres_only") else only
        (drop if only and backend and backend != only else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
