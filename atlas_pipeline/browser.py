"""Debian's Chromium, launched so that nothing it does reaches a network by itself.

Playwright's own browser download is never used (it is unreachable on the machines Atlas
runs on, and a second browser build to keep patched): Atlas drives the system's `chromium`
through `executable_path`. Every page request Atlas wants answered it intercepts itself; as
a second layer the browser is pointed at a proxy on a closed loopback port, loopback
included (Chromium bypasses proxies for loopback unless told `<-loopback>`), and its own
background traffic (updates, sync, metrics, safe browsing) is off.
"""

from __future__ import annotations

import os
import shutil
from typing import Any

ENV_CHROMIUM = "ATLAS_CHROMIUM"
# port 9 (discard) has no listener here: a request that escapes interception fails at once
CLOSED_PROXY = "http://127.0.0.1:9"
QUIET_ARGS = (
    "--no-first-run", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--disable-default-apps", "--disable-domain-reliability",
    "--disable-breakpad", "--disable-features=MediaRouter,OptimizationHints,Translate",
    "--metrics-recording-only", "--safebrowsing-disable-auto-update", "--no-pings",
)  # fmt: skip


def chromium_path() -> str | None:
    """The browser to drive: $ATLAS_CHROMIUM, else `chromium` (Debian) on the PATH."""
    configured = os.environ.get(ENV_CHROMIUM)
    if configured:
        return configured if os.access(configured, os.X_OK) else None
    return shutil.which("chromium") or shutil.which("chromium-browser")


def launch_options(executable: str, allow: tuple[str, ...] = ()) -> dict[str, Any]:
    """Keyword arguments for Playwright's `chromium.launch`: everything not intercepted goes
    to the closed proxy, except the `host:port` entries of `allow` (a tool that must load a
    loopback page through the browser's own network stack, such as a screenshot of the
    Dagster UI, allows that one address)."""
    # --no-sandbox: CI runs as root, where Chromium's setuid sandbox refuses to start
    bypass = ";".join(("<-loopback>", *allow))
    args = ["--no-sandbox", *QUIET_ARGS, f"--proxy-server={CLOSED_PROXY}",
            f"--proxy-bypass-list={bypass}"]  # fmt: skip
    return {"executable_path": executable, "headless": True, "args": args}
