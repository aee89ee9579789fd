# pg.sh: a throwaway PostgreSQL 15 for the tests and benchmarks that need a real one,
# sourced after lib.sh (it uses $T): initdb into $T/pg as an unprivileged user (the
# `postgres` user of Debian's package when run as root), fsync on, listening only on a
# unix socket in that directory; $PG_URL is the store URL of its database `gpuorch`.
# pg_stop stops it (the caller's exit trap should call it). Exits 77 (skipped) with a
# message when PostgreSQL 15 is not installed.

PG_BIN=/usr/lib/postgresql/15/bin

# as_pg CMD...: run CMD as the database's owner.
as_pg() {
    if [ "$(id -u)" = 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

pg_start() {
    if [ ! -x "$PG_BIN/initdb" ] || { [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; }; then
        echo "SKIP: PostgreSQL 15 is not installed (apt-get install postgresql-15; make test-deps installs it)" >&2
        exit 77
    fi
    PG_DIR=$T/pg
    mkdir -p "$PG_DIR"
    [ "$(id -u)" != 0 ] || chown postgres "$PG_DIR"
    as_pg "$PG_BIN/initdb" -D "$PG_DIR/data" -A trust -U postgres -E UTF8 >"$PG_DIR/initdb.log" 2>&1 ||
        { cat "$PG_DIR/initdb.log" >&2; fail "initdb failed"; }
    as_pg "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/server.log" -w -s \
        -o "-k $PG_DIR -c listen_addresses= -c max_connections=200" start >/dev/null ||
        { tail -20 "$PG_DIR/server.log" >&2; fail "PostgreSQL did not start"; }
    PG_STARTED=1
    as_pg "$PG_BIN/createdb" -h "$PG_DIR" -U postgres gpuorch || fail "createdb failed"
    PG_URL="postgres:///gpuorch?host=$PG_DIR&user=postgres"
}

pg_stop() {
    if [ -n "${PG_STARTED:-}" ]; then
        as_pg "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m immediate -s stop >/dev/null 2>&1 || true
        PG_STARTED=
    fi
}
