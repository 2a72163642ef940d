"""Sandbox web: deterministic synthetic websites served on loopback for tests and demos.

Standalone by design: it imports nothing else from ``atlas_pipeline`` and production
code never imports it.
"""

from __future__ import annotations

from .server import SandboxServer, serve_forever
from .site import (
    DEFAULT_USER_AGENT_TOKEN,
    EXTERNAL_HOST,
    FIXED_HOSTS,
    REDIRECT_PATH,
    SandboxWeb,
    normalize_url,
)
from .web import LOGGED_HEADERS, RequestLog, SandboxResolver, make_app

__all__ = [
    "DEFAULT_USER_AGENT_TOKEN",
    "EXTERNAL_HOST",
    "FIXED_HOSTS",
    "LOGGED_HEADERS",
    "REDIRECT_PATH",
    "RequestLog",
    "SandboxResolver",
    "SandboxServer",
    "SandboxWeb",
    "make_app",
    "normalize_url",
    "serve_forever",
]
