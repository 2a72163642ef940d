#!/usr/bin/env bash
# Make sure a PostgreSQL answers on 127.0.0.1:5432 (trust auth, database `test`) for the tests
# that need one; they are never skipped in CI. This machine kind runs one as a service: start
# it if it stopped; where none is installed, install Debian's and open it to loopback.
set -euo pipefail
ready() { pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; }
psql_pg() { psql -h 127.0.0.1 -U postgres -d postgres -tAc "$1"; }
if ! command -v pg_isready >/dev/null || ! ready; then
  if [ ! -d /etc/postgresql ] && [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
    hba=$(ls /etc/postgresql/*/main/pg_hba.conf | head -n1)
    sed -i '1i host all all 127.0.0.1/32 trust' "$hba"
  fi
  if [ -d /etc/postgresql ]; then
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start || true
  fi
  for _ in $(seq 1 30); do ready && break; sleep 1; done
fi
if ! ready; then
  echo "PostgreSQL is not answering on 127.0.0.1:5432; start it: pg_ctlcluster <version> main start" >&2
  exit 1
fi
[ "$(psql_pg "SELECT 1 FROM pg_database WHERE datname = 'test'")" = 1 ] || psql_pg "CREATE DATABASE test" >/dev/null
