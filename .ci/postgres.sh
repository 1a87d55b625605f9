#!/usr/bin/env bash
# Start a throwaway PostgreSQL server on loopback for the test suite and print
# the SQLAlchemy URL to stdout. Usage: url=$(bash .ci/postgres.sh [DATA_DIR] [PORT])
# The server runs as the unprivileged 'postgres' user (initdb refuses root).
#
# Robustness: a server left running in DATA_DIR by an earlier run is stopped
# first (also when only a stale postmaster.pid is left); a port held by any
# other process is reported with its holder instead of a vague start failure;
# when initdb, the start or CREATE DATABASE fails, the server log goes to stderr.
# Everything but the URL goes to stderr, so `$(...)` captures only the URL.
set -euo pipefail
data_dir=${1:-/tmp/goatherd-pg}
port=${2:-54329}
db=goatherd_test

die() {
  echo "postgres.sh: $*" >&2
  exit 1
}
bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
[ -n "$bindir" ] || die "no PostgreSQL server found under /usr/lib/postgresql"
case "$port" in
  '' | *[!0-9]*) die "port must be a number, got '$port'" ;;
esac
case "$data_dir" in
  /*) ;;
  *) data_dir="$PWD/$data_dir" ;;
esac
[ "$data_dir" != "/" ] || die "refusing to use / as the data directory"

run_as_postgres() {
  if [ "$(id -u)" = "0" ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

show_log() {
  if [ -f "$data_dir/server.log" ]; then
    echo "postgres.sh: --- $data_dir/server.log (last 40 lines) ---" >&2
    tail -n 40 "$data_dir/server.log" >&2
    echo "postgres.sh: --- end of log ---" >&2
  fi
}

port_in_use() {
  # bash's /dev/tcp needs no extra tool; a refused connection means free.
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

port_holder() {
  if command -v ss >/dev/null; then
    ss -ltnpH "sport = :$1" 2>/dev/null | sed 's/^/  /'
  elif command -v fuser >/dev/null; then
    fuser -v -n tcp "$1" 2>&1 | sed 's/^/  /'
  else
    echo "  (install iproute2 for 'ss' to see which process holds it)"
  fi
}

stop_previous() {
  [ -f "$data_dir/postmaster.pid" ] || return 0
  local pid
  pid=$(head -n 1 "$data_dir/postmaster.pid" 2>/dev/null || true)
  echo "postgres.sh: stopping the server left in $data_dir (pid ${pid:-?})" >&2
  run_as_postgres "$bindir/pg_ctl" -D "$data_dir" -m immediate -w -t 30 stop \
    >/dev/null 2>&1 || true
  # A stale pid file whose process is gone: pg_ctl says "no server running".
  # A live postmaster that pg_ctl could not stop (wrong owner): kill it by pid.
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null &&
    grep -q postgres "/proc/$pid/comm" 2>/dev/null; then
    kill -QUIT "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  fi
}

wait_port_free() {
  for _ in $(seq 1 50); do port_in_use "$1" || return 0; sleep 0.1; done
  return 1
}

stop_previous
if ! wait_port_free "$port"; then
  echo "postgres.sh: port $port on 127.0.0.1 is already in use by another process:" >&2
  port_holder "$port" >&2
  die "choose another port (second argument) or stop that process"
fi

rm -rf "$data_dir"
mkdir -p "$data_dir"
if [ "$(id -u)" = "0" ]; then
  chown postgres:postgres "$data_dir"
  chmod 0700 "$data_dir"
  run_as_postgres test -w "$data_dir" ||
    die "user postgres cannot write $data_dir (a parent directory is not searchable?)"
fi

if ! run_as_postgres "$bindir/initdb" -D "$data_dir" -U postgres -A trust --no-sync \
  >"$data_dir.initdb.log" 2>&1; then
  cat "$data_dir.initdb.log" >&2
  die "initdb failed for $data_dir"
fi
rm -f "$data_dir.initdb.log"

if ! run_as_postgres "$bindir/pg_ctl" -D "$data_dir" -w -t 60 -l "$data_dir/server.log" \
  -o "-c listen_addresses=127.0.0.1 -p $port -k $data_dir -c max_connections=200 -c fsync=on" \
  start >/dev/null 2>&1; then
  show_log
  die "the server in $data_dir did not start on port $port"
fi

if ! run_as_postgres "$bindir/psql" -h 127.0.0.1 -p "$port" -U postgres -q \
  -v ON_ERROR_STOP=1 -c "CREATE DATABASE $db" >/dev/null 2>"$data_dir/psql.err"; then
  cat "$data_dir/psql.err" >&2
  show_log
  die "could not create database $db on port $port"
fi
echo "postgresql+psycopg://postgres@127.0.0.1:$port/$db"
