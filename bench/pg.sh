#!/bin/sh
# bench/pg.sh BUILD_DIR [THREADS] [WRITES_PER_THREAD]: durable single-job writes per
# second through the store (bench_store), SQLite and PostgreSQL side by side in one run.
# PostgreSQL is a throwaway 15 started here as the fixture of the tests does
# (tests/unit/pg_fixture.h): initdb into a fresh directory under /var/tmp (on the disk,
# not a tmpfs) as an unprivileged user (`postgres` when run as root), listening only on
# a unix socket in that directory, fsync on; stopped and removed at the end.
set -eu
BUILD=${1:-build}
THREADS=${2:-8}
PER=${3:-5000}
BIN=${GPUORCH_PG_BIN:-/usr/lib/postgresql/15/bin}
[ -x "$BIN/initdb" ] || BIN=$(pg_config --bindir)
[ -x "$BIN/initdb" ] || { echo "pg.sh: PostgreSQL 15 is not installed" >&2; exit 1; }
DIR=$(mktemp -d /var/tmp/gpuorch-pgbench-XXXXXX)
as_pg() { "$@"; }
if [ "$(id -u)" = 0 ]; then
    chown postgres: "$DIR"
    as_pg() { runuser -u postgres -- "$@"; }
fi
stop() {
    as_pg "$BIN/pg_ctl" -D "$DIR/data" -m fast -w stop >/dev/null 2>&1 || true
    rm -rf "$DIR"
}
trap stop EXIT INT TERM
as_pg "$BIN/initdb" -D "$DIR/data" -U postgres -A trust -E UTF8 --locale=C >"$DIR/initdb.log"
cat >>"$DIR/data/postgresql.conf" <<CONF
listen_addresses = ''
unix_socket_directories = '$DIR'
fsync = on
synchronous_commit = on
CONF
as_pg "$BIN/pg_ctl" -D "$DIR/data" -l "$DIR/server.log" -w start >/dev/null
"$BIN/psql" -h "$DIR" -U postgres -d postgres -qc "CREATE DATABASE bench" >/dev/null
mkdir "$DIR/sqlite"
echo "sqlite:     $("$BUILD/bench_store" "$THREADS" "$PER" "$DIR/sqlite" 2>&1 | tail -1)"
echo "postgresql: $("$BUILD/bench_store" "$THREADS" "$PER" "postgresql:///bench?host=$DIR&user=postgres" 2>&1 | tail -1)"
