"""The coordination store: the hot, transactional state every run shares."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from ..errors import CoordinationError
from .base import (
    Candidate,
    Claim,
    CoordinationStore,
    Drained,
    Lease,
    OriginPolicy,
    Outcome,
    RobotsRecord,
    RobotsTask,
    UrlState,
    Wait,
)
from .sqlite import SqliteStore

__all__ = [
    "Candidate",
    "Claim",
    "CoordinationStore",
    "Drained",
    "Lease",
    "OriginPolicy",
    "Outcome",
    "RobotsRecord",
    "RobotsTask",
    "SqliteStore",
    "UrlState",
    "Wait",
    "open_store",
]


def open_store(url: str, default_policy: OriginPolicy, cycle_budget: int) -> CoordinationStore:
    """Open (and migrate) the store named by a coordination URL; errors say what to fix."""
    scheme = urlsplit(url).scheme
    if scheme == "sqlite":
        path = url.removeprefix("sqlite:///")
        if not path or path == url:
            raise CoordinationError(
                f"{url!r}: write sqlite:///relative/path.db or sqlite:////abs.db"
            )
        return SqliteStore(Path(path), default_policy, cycle_budget)
    if scheme in {"postgresql", "postgres"}:
        _check_postgres(url)
        raise CoordinationError(
            f"{_redact(url)}: PostgreSQL answers, but this release coordinates through SQLite "
            "only; set coordination_url to sqlite:///... (the PostgreSQL backend is planned)"
        )
    raise CoordinationError(
        f"{url!r}: coordination_url must start with sqlite:/// or postgresql://"
    )


def _redact(url: str) -> str:
    parts = urlsplit(url)
    if parts.password:
        return url.replace(f":{parts.password}@", ":***@")
    return url


def _check_postgres(url: str) -> None:
    """Fail in one line when the server cannot be reached (wrong host, port, database)."""
    import psycopg

    try:
        psycopg.connect(url, connect_timeout=5).close()
    except psycopg.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CoordinationError(
            f"cannot reach the coordination store {_redact(url)} ({first}); "
            "start PostgreSQL or fix coordination_url"
        ) from None
