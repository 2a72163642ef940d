"""Sandbox web: deterministic synthetic websites served on loopback for tests and demos.

Test tooling, not the product: a package of its own beside ``atlas_pipeline``. Standalone by
design, so it stays an independent oracle: it imports nothing from the engine, and neither
the engine nor the Dagster definitions import it (tests/sandbox/test_boundary.py); only the
``atlas web``/``canary``/``indexer``/``demo`` commands and the tests do.
"""

from __future__ import annotations

from .changing import CHANGING_HOSTS, Changing
from .directives import DIRECTIVES_HOSTS, DirectivePages
from .dupes import DUPES_HOSTS, Dupes
from .hostile import DEFAULT_CANARY_PORT, HOSTILE_HOSTS, Hostile
from .indexer import (
    DEFAULT_INDEXER_PORT,
    EventStore,
    IndexerServer,
    make_indexer_app,
    serve_indexer_forever,
)
from .scripted import SCRIPTED_HOSTS, Scripted
from .server import CanaryServer, SandboxServer, serve_canary_forever, serve_forever
from .site import (
    DEFAULT_USER_AGENT_TOKEN,
    EXTERNAL_HOST,
    FIXED_HOSTS,
    REDIRECT_PATH,
    SandboxWeb,
    normalize_url,
)
from .traps import DEFAULT_TRAP_SCALE, MAX_TRAP_SCALE, TRAP_HOSTS, Traps
from .web import LOGGED_HEADERS, RequestLog, SandboxResolver, make_app

__all__ = [
    "CHANGING_HOSTS",
    "DEFAULT_CANARY_PORT",
    "DEFAULT_INDEXER_PORT",
    "DEFAULT_TRAP_SCALE",
    "DEFAULT_USER_AGENT_TOKEN",
    "DIRECTIVES_HOSTS",
    "DUPES_HOSTS",
    "EXTERNAL_HOST",
    "FIXED_HOSTS",
    "HOSTILE_HOSTS",
    "LOGGED_HEADERS",
    "MAX_TRAP_SCALE",
    "REDIRECT_PATH",
    "SCRIPTED_HOSTS",
    "TRAP_HOSTS",
    "CanaryServer",
    "Changing",
    "DirectivePages",
    "Dupes",
    "EventStore",
    "Hostile",
    "IndexerServer",
    "RequestLog",
    "SandboxResolver",
    "SandboxServer",
    "SandboxWeb",
    "Scripted",
    "Traps",
    "make_app",
    "make_indexer_app",
    "normalize_url",
    "serve_canary_forever",
    "serve_forever",
    "serve_indexer_forever",
]
