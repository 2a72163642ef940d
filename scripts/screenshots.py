"""Screenshots of a finished crawl: its crawl-wide report and the Dagster UI's asset page.

    .venv/bin/python scripts/screenshots.py [--data-dir atlas_data/demo] [--out docs/screenshots]

Run after `make demo` (or any crawl; --data-dir is the folder holding its atlas.yaml). The
report is opened from disk in a browser sealed off the network; the UI is served by a
`dagster-webserver` this script starts on a free loopback port (and stops, by its process
group) against the crawl's Dagster instance, and the browser is allowed that one address.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(url: str, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"the Dagster webserver did not answer at {url} within {timeout_s:.0f} s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default="atlas_data/demo", type=Path)
    parser.add_argument("--out", default="docs/screenshots", type=Path)
    parser.add_argument("--asset", default="crawl/fetches", help="asset page to shoot")
    args = parser.parse_args()

    from playwright.sync_api import sync_playwright

    from assets.cli.reports import write_crawl_reports
    from atlas_pipeline.browser import chromium_path, launch_options
    from atlas_pipeline.config import load_config

    config = (args.data_dir / "atlas.yaml").resolve()
    if not config.exists():
        raise SystemExit(f"no crawl config at {config}: run `make demo` first, or pass --data-dir")
    browser_path = chromium_path()
    if browser_path is None:
        raise SystemExit("Chromium is not installed: bash scripts/ensure_chromium.sh")
    cfg = load_config(config)
    pages = write_crawl_reports(cfg)
    latest = Path(pages[-2]) if len(pages) > 1 else Path(pages[-1])
    args.out.mkdir(parents=True, exist_ok=True)

    port = free_port()
    env = {**os.environ, "DAGSTER_HOME": str(cfg.data_dir / "dagster_home"),
           "ATLAS_CONFIG": str(config)}  # fmt: skip
    web = subprocess.Popen(
        [str(Path(sys.executable).parent / "dagster-webserver"), "-w", "workspace.yaml",
         "-h", "127.0.0.1", "-p", str(port)],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,  # its own process group: stopped as one, nothing else
    )  # fmt: skip
    try:
        wait_for(f"http://127.0.0.1:{port}/server_info")
        with sync_playwright() as p:
            browser = p.chromium.launch(**launch_options(browser_path, (f"127.0.0.1:{port}",)))
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(latest.as_uri())
            page.screenshot(path=str(args.out / "crawl-report.png"), full_page=True)
            page.goto(f"http://127.0.0.1:{port}/assets/{args.asset}", timeout=60_000)
            page.wait_for_load_state("networkidle", timeout=60_000)
            page.get_by_text("Columns", exact=False).first.wait_for(timeout=60_000)
            page.screenshot(path=str(args.out / "dagster-asset.png"))
            browser.close()
    finally:
        os.killpg(web.pid, signal.SIGTERM)
        web.wait(30)
    for name in ("crawl-report.png", "dagster-asset.png"):
        print(args.out / name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
