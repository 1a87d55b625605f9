#!/usr/bin/env bash
# Start a throwaway PostgreSQL server on loopback for the test suite and print
# the SQLAlchemy URL to stdout. Usage: url=$(bash .ci/postgres.sh [DATA_DIR] [PORT])
# The server runs as the unprivileged 'postgres' user (initdb refuses root).
set -euo pipefail
data_dir=${1:-/tmp/goatherd-pg}
port=${2:-54329}
bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
if [ -z "$bindir" ]; then
  echo "postgres.sh: no PostgreSQL server found under /usr/lib/postgresql" >&2
  exit 1
fi
run_as_postgres() {
  if [ "$(id -u)" = "0" ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
if [ -f "$data_dir/postmaster.pid" ]; then
  run_as_postgres "$bindir/pg_ctl" -D "$data_dir" -m immediate stop >/dev/null 2>&1 || true
fi
rm -rf "$data_dir"
mkdir -p "$data_dir"
[ "$(id -u)" = "0" ] && chown postgres:postgres "$data_dir"
run_as_postgres "$bindir/initdb" -D "$data_dir" -U postgres -A trust --no-sync >/dev/null
run_as_postgres "$bindir/pg_ctl" -D "$data_dir" -w -l "$data_dir/server.log" \
  -o "-c listen_addresses=127.0.0.1 -p $port -k $data_dir -c max_connections=200 -c fsync=on" \
  start >/dev/null
run_as_postgres "$bindir/psql" -h 127.0.0.1 -p "$port" -U postgres -q \
  -c "CREATE DATABASE goatherd_test" >/dev/null
echo "postgresql+psycopg://postgres@127.0.0.1:$port/goatherd_test"
