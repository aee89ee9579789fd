#!/bin/sh
# bench/ha.sh BUILD OUT: the store on PostgreSQL beside SQLite, and failover (section 8 of
# bench/RESULTS.md, appended to OUT).
#   1. durable submissions per second through the API: a release server on SQLite and
#      one on a throwaway PostgreSQL 15 (tests/cli/pg.sh: fsync on, a unix socket),
#      eight clients submitting one job per request for 10 s, five rounds each,
#      alternating between the two in one run (the other server stopped meanwhile),
#      and the median round of each;
#   2. the store alone (bench_store) on both, durable single-job writes from 8 threads;
#   3. failover: tests/cli/test_sys_ha.sh, the leader SIGKILLed 20 times under concurrent
#      submissions, and the time each takeover took.
# Skipped, with a note in OUT, when PostgreSQL 15 is not installed.
set -eu
BUILD=$1
OUT=$2
BIN=$BUILD/gpuorch
T=$(mktemp -d)
chmod 0755 "$T"
PIDS=""
fail() {
    echo "bench/ha.sh: $*" >&2
    exit 1
}
. tests/cli/pg.sh
trap 'for p in $PIDS; do kill $p 2>/dev/null || true; done; pg_stop; rm -rf "$T"' EXIT
port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
up() {
    i=0
    until curl -fsS "$1/readyz" >/dev/null 2>&1; do
        i=$((i + 1))
        [ $i -lt 100 ] || fail "the server did not start"
        sleep 0.1
    done
}

if [ ! -x "$PG_BIN/initdb" ]; then
    {
        echo "## 8. PostgreSQL and failover"
        echo
        echo "Skipped: PostgreSQL 15 is not installed (\`apt-get install postgresql-15\`)."
        echo
    } >>"$OUT"
    exit 0
fi
pg_start

# serve NAME DB: a server on that store; its URL in URL_NAME, its admin token in TOKEN_NAME.
serve() {
    p=$(port)
    mkdir -p "$T/$1"
    "$BIN" server --config examples/cluster-demo.yaml --db "$2" --data-dir "$T/$1" \
        --listen "127.0.0.1:$p" >/dev/null 2>"$T/server-$1.log" &
    PIDS="$PIDS $!"
    up "http://127.0.0.1:$p"
    eval "URL_$1=http://127.0.0.1:$p TOKEN_$1=\$(cat \"$T/$1/admin.token\")"
}
serve sqlite "sqlite:$T/sqlite/gpuorch.db"
PID_sqlite=$!
serve pg "$PG_URL"
PID_pg=$!
: >"$T/submit.txt"
for round in 1 2 3 4 5; do
    for db in sqlite pg; do
        eval "url=\$URL_$db token=\$TOKEN_$db"
        # the other server is stopped meanwhile: its cycles over its own queue would
        # take CPU from this one
        if [ $db = sqlite ]; then other=$PID_pg; else other=$PID_sqlite; fi
        kill -STOP "$other"
        printf '%-10s round %d: ' "$db" "$round" >>"$T/submit.txt"
        "$BUILD/bench_api" submit "$url" "$token" 8 10 search >>"$T/submit.txt"
        kill -CONT "$other"
    done
done
for p in $PIDS; do kill "$p"; done
PIDS=""
STORE_SQLITE=$("$BUILD/bench_store" 8 5000 "$T" 2>&1 | tail -1)
STORE_PG=$("$BUILD/bench_store" 8 5000 "$PG_URL" 2>&1 | tail -1)
pg_stop

HA=$(HA_FAILOVERS=20 tests/cli/test_sys_ha.sh "$BIN" 2>&1 | grep -E '^(takeover|acknowledged|ok:|[0-9]+ jobs ran|FAIL)') ||
    HA="the failover test failed: run tests/cli/test_sys_ha.sh $BIN"

{
    echo "## 8. PostgreSQL and failover"
    echo
    echo "Durable submissions through the API (target on PostgreSQL: at least 2,000 per second):"
    echo "a release \`gpuorch server\` on SQLite (WAL, \`synchronous=FULL\`) and one on PostgreSQL"
    echo "15 on the same machine (fsync on, \`synchronous_commit=on\`, a unix socket), each 201"
    echo "sent once its job is committed; eight clients, one job per request, 10 s a round;"
    echo "five rounds each, alternating between the two, on one growing queue each (no agents), the server"
    echo "not measured stopped (SIGSTOP) meanwhile:"
    echo
    echo '```'
    cat "$T/submit.txt"
    echo '```'
    echo
    for db in sqlite pg; do
        grep "^$db " "$T/submit.txt" | sed 's/.*: \([0-9]*\) jobs\/s$/\1/' | sort -n | sed -n 3p |
            xargs printf "Median round, %s: %s jobs/s. " "$db"
    done
    echo
    echo
    echo "Command: \`$BUILD/bench_api submit URL TOKEN 8 10 search\` against"
    echo "\`$BIN server --config examples/cluster-demo.yaml --db sqlite:DIR/gpuorch.db\` and"
    echo "\`--db 'postgres:///gpuorch?host=DIR'\` (bench/ha.sh)."
    echo "The store alone, \`$BUILD/bench_store 8 5000 DIR\`: $STORE_SQLITE;"
    echo "\`$BUILD/bench_store 8 5000 'postgres:///gpuorch?host=DIR'\`: $STORE_PG."
    echo
    echo "Failover (target: a standby leads within 10 s every time): two servers on one"
    echo "PostgreSQL store, two agents given both, three submitting clients and the CLI; the"
    echo "leader SIGKILLed 20 times, each time started again as the standby; from the kill to"
    echo "the other server's \`/readyz\` answering 200:"
    echo
    echo '```'
    echo "$HA"
    echo '```'
    echo
    echo "Command: \`HA_FAILOVERS=20 tests/cli/test_sys_ha.sh $BIN\` (also run by \`make test\`)."
    echo
} >>"$OUT"
