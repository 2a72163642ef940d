#!/usr/bin/env bash
# Make sure Debian's Chromium is installed for the render lane and the report's layout test.
# Playwright's own browser download is unreachable here, so Atlas never depends on it: it drives
# /usr/bin/chromium with executable_path. As root, install it when absent; otherwise say so in
# one line (the crawl then runs HTML-only and records render_unavailable). With CI=true a
# missing browser is an error: browser tests are never skipped in CI.
set -euo pipefail
have() { command -v chromium >/dev/null 2>&1; }
if ! have && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  (apt-get install -y -qq chromium >/dev/null 2>&1) ||
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null)
fi
if ! have; then
  msg="Chromium is not installed (the render lane is off); install it with: sudo apt-get install -y chromium"
  if [ "${CI:-}" = true ]; then echo "$msg" >&2; exit 1; fi
  echo "$msg" >&2
fi
