#!/usr/bin/env bash
# Make sure a PostgreSQL answers on 127.0.0.1:5432 for the tests that need one (never skipped).
# This machine kind runs one as a service; start it if it stopped, install it where missing.
set -euo pipefail
ready() { pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; }
if command -v pg_isready >/dev/null && ready; then exit 0; fi
if [ ! -d /etc/postgresql ] && [ "$(id -u)" = 0 ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
fi
if [ -d /etc/postgresql ]; then
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start || true
fi
for _ in $(seq 1 30); do ready && exit 0; sleep 1; done
echo "PostgreSQL is not answering on 127.0.0.1:5432; start it (pg_ctlcluster ... main start)" >&2
exit 1
