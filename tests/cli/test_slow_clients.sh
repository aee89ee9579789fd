#!/bin/sh
# test_slow_clients.sh: slowloris on loopback. 300 connections trickling a byte a second
# (headers that never end, bodies that never end) from five addresses are each cut at
# their deadline, about 10 s in, while a normal client on another address is answered
# within 2 s throughout; one address holds at most 64 connections (--conns-per-ip);
# a bad --conns-per-ip is refused. The driver is tests/cli/slow_clients.py.
# Usage: test_slow_clients.sh PATH/TO/gpuorch (run from the repository root).
set -eu

GPUORCH=${1:?usage: $0 PATH/TO/gpuorch}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sys.sh"
command -v curl >/dev/null || fail "curl is needed"

run 2 "$GPUORCH" server --config examples/cluster-demo.yaml --conns-per-ip lots
err_has "conns-per-ip must be a whole number from 0 to 1000"

start_server
python3 tests/cli/slow_clients.py "$URL" "$ADMIN" >"$T/out" 2>"$T/err" ||
    fail "slow clients: $(cat "$T/err")"
cat "$T/out"
grep -q "event=deadline" "$T/server.log" || fail "the server did not log the connections it cut"
# the server is still whole: it answers and stops cleanly
api GET /api/v1/jobs
[ "$STATUS" = 200 ] || fail "the job list answered $STATUS after the slow clients"
kill -TERM "$SERVER_PID"
wait "$SERVER_PID" || fail "the server exited with $? on SIGTERM"
! grep -q "level=error" "$T/server.log" || fail "errors logged: $(grep level=error "$T/server.log" | head -5)"
