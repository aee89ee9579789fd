#!/bin/sh
# bench/api.sh BUILD OUT: the running system through its HTTP API (section 5 of
# bench/RESULTS.md, appended to OUT).
#   1. sustained submissions per second: a release server with SQLite (WAL,
#      synchronous=FULL, every acknowledged job committed before the reply), eight
#      clients submitting one job per request for 10 s each round, three rounds on one
#      growing queue (no agents: nothing starts, so the queue keeps every job);
#   2. the store alone (bench_store): durable single-job writes from 8 threads;
#   3. history: a fresh server, 8 clients submitting one job per request and cancelling
#      it at once (one in 500 left pending), in rounds of 100,000 until HISTORY_JOBS
#      (default 1,000,000) are stored: each round's submissions per second, the
#      server's RSS, then GET of the live queue and of /metrics with that history;
#   4. submit-to-start latency on an idle cluster: a fresh server and two agents with
#      simulated GPUs; 100 one-GPU jobs one after another, after random pauses, each from its submission to
#      the start of its worker process (the agent's report), as the server records them.
set -eu
BUILD=$1
OUT=$2
BIN=$BUILD/gpuorch
TMP=$(mktemp -d)
PIDS=""
trap 'for p in $PIDS; do kill $p 2>/dev/null || true; done; sleep 0.3; pkill -f "$TMP/" 2>/dev/null || true; rm -rf "$TMP"' EXIT
port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
up() {
    i=0
    until curl -fsS "$1/healthz" >/dev/null 2>&1; do
        i=$((i + 1)); [ $i -lt 100 ] || { echo "bench/api.sh: the server did not start" >&2; exit 1; }
        sleep 0.1
    done
}

P=$(port)
URL=http://127.0.0.1:$P
mkdir -p "$TMP/a"
"$BIN" server --config examples/cluster-demo.yaml --db "sqlite:$TMP/a/gpuorch.db" \
    --listen "127.0.0.1:$P" >/dev/null 2>"$TMP/server-a.log" &
PIDS="$PIDS $!"
up "$URL"
TOKEN=$(cat "$TMP/a/admin.token")
: >"$TMP/submit.txt"
for round in 1 2 3; do
    "$BUILD/bench_api" submit "$URL" "$TOKEN" 8 10 search >>"$TMP/submit.txt"
done
kill $PIDS
PIDS=""
STORE=$("$BUILD/bench_store" 8 5000 "$TMP" 2>&1 | tail -1)

P=$(port)
URL=http://127.0.0.1:$P
mkdir -p "$TMP/b"
"$BIN" server --config examples/cluster-demo.yaml --db "sqlite:$TMP/b/gpuorch.db" \
    --listen "127.0.0.1:$P" >/dev/null 2>"$TMP/server-b.log" &
PIDS="$PIDS $!"
up "$URL"
ADMIN=$(cat "$TMP/b/admin.token")
AGENT=$("$BIN" token create --server "$URL" --token "$ADMIN" --role agent)
for n in h100-0 h100-1; do
    "$BIN" agent --server "$URL" --token "$AGENT" --node $n --gpus sim:H100-80GB-SXM5:8 \
        --state-dir "$TMP/agent-$n" 2>"$TMP/agent-$n.log" &
    PIDS="$PIDS $!"
done
sleep 1
LAT=$("$BUILD/bench_api" latency "$URL" "$ADMIN" 100 search)
kill $PIDS
PIDS=""

HISTORY_JOBS=${HISTORY_JOBS:-1000000}
P=$(port)
URL=http://127.0.0.1:$P
mkdir -p "$TMP/c"
"$BIN" server --config examples/cluster-demo.yaml --db "sqlite:$TMP/c/gpuorch.db" \
    --listen "127.0.0.1:$P" >/dev/null 2>"$TMP/server-c.log" &
SPID=$!
PIDS="$PIDS $SPID"
up "$URL"
"$BUILD/bench_history" "$URL" "$(cat "$TMP/c/admin.token")" "$SPID" 8 "$HISTORY_JOBS" 100000 \
    search >"$TMP/history.txt"

{
    echo "## 5. The running system through its API"
    echo
    echo "A release build of \`gpuorch server\` on loopback with \`examples/cluster-demo.yaml\` and"
    echo "SQLite (WAL, \`synchronous=FULL\`): each submission is committed and synced before its"
    echo "201 reply; concurrent submissions share one commit (group commit)."
    echo
    echo "Sustained submissions (target: at least 2,000 per second), three rounds of 10 s on one"
    echo "queue that grows to tens of thousands of pending jobs (no agents, so nothing starts):"
    echo
    echo '```'
    cat "$TMP/submit.txt"
    echo '```'
    echo
    echo "Command: \`$BUILD/bench_api submit URL TOKEN 8 10 search\` (three times) against"
    echo "\`$BIN server --config examples/cluster-demo.yaml --db sqlite:DIR/gpuorch.db\`."
    echo "The store alone, \`$BUILD/bench_store 8 5000 DIR\`: $STORE"
    echo
    echo "As history grows (targets: the last round within 20% of the first, server RSS under"
    echo "500 MB, the live queue and /metrics under 50 ms at p99): a fresh server, 8 clients"
    echo "each submitting one job per request and cancelling it at once (both writes durable"
    echo "before their replies), one job in 500 left pending, until $HISTORY_JOBS jobs are"
    echo "stored; ended jobs leave the server's memory after the retention (300 s, at most"
    echo "10,000 kept) and are read from the store when asked for:"
    echo
    echo '```'
    cat "$TMP/history.txt"
    echo '```'
    echo
    echo "Command: \`$BUILD/bench_history URL TOKEN PID 8 $HISTORY_JOBS 100000 search\` against a"
    echo "fresh \`$BIN server --config examples/cluster-demo.yaml --db sqlite:DIR/gpuorch.db\`."
    echo
    echo "Submit-to-start latency on an idle cluster (target: p99 under one second): a server"
    echo "and two agents with simulated H100s (heartbeat every 500 ms, the default), 100"
    echo "one-GPU jobs submitted one at a time after random pauses of up to a second (any"
    echo "phase of the heartbeat); each counts from its submission to its worker's process"
    echo "start. The wait is for the node's next heartbeat, which carries the assignment:"
    echo
    echo '```'
    echo "$LAT"
    echo '```'
    echo
    echo "Command: \`$BUILD/bench_api latency URL TOKEN 100 search\` with agents"
    echo "\`$BIN agent --node h100-0 --gpus sim:H100-80GB-SXM5:8\` (and h100-1)."
    echo
} >>"$OUT"
