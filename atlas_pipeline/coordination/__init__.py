"""The coordination store: the hot, transactional state every run shares."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from ..errors import CoordinationError
from .base import (
    BatchLease,
    Candidate,
    Claim,
    CoordinationStore,
    Drained,
    Lease,
    OriginPolicy,
    Outcome,
    RobotsRecord,
    RobotsTask,
    TrapCaps,
    UrlState,
    Wait,
)
from .overrides import Purged, Suppression
from .sqlite import SqliteStore

__all__ = [
    "BatchLease",
    "Candidate",
    "Claim",
    "CoordinationStore",
    "Drained",
    "Lease",
    "OriginPolicy",
    "Outcome",
    "Purged",
    "RobotsRecord",
    "RobotsTask",
    "SqliteStore",
    "Suppression",
    "TrapCaps",
    "UrlState",
    "Wait",
    "open_store",
]


def open_store(
    url: str, default_policy: OriginPolicy, cycle_budget: int, caps: TrapCaps | None = None
) -> CoordinationStore:
    """Open (and migrate) the store named by a coordination URL; errors say what to fix."""
    scheme = urlsplit(url).scheme
    if scheme == "sqlite":
        path = url.removeprefix("sqlite:///")
        if not path or path == url:
            raise CoordinationError(
                f"{url!r}: write sqlite:///relative/path.db or sqlite:////abs.db"
            )
        return SqliteStore(Path(path), default_policy, cycle_budget, caps=caps)
    if scheme in {"postgresql", "postgres"}:
        from .postgres import PostgresStore

        return PostgresStore(url, default_policy, cycle_budget, caps)
    raise CoordinationError(
        f"{url!r}: coordination_url must start with sqlite:/// or postgresql://"
    )
