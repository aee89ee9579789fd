#!/bin/sh
# tools/run-local.sh BUILD_DIR: the main job (`make run`). Starts a gpuorch server with
# SQLite under ./var/ and two agents with simulated GPUs for examples/cluster-demo.yaml
# (h100-0: eight H100s, a100-0: eight MIG-capable A100s), prints the URL and an admin
# token, and stays in the foreground until Ctrl-C or SIGTERM.
#
# Stopping goes in order: the agents first, each of which checkpoints the workers that
# can, stops them and tells the server, which requeues their jobs; then the server. So
# `make run` started again resumes the jobs. A second Ctrl-C kills everything at once.
#
# Everything runs in a session of its own, so that nothing it started outlives it (the
# workers run in process groups of their own, as on a real node). GPUORCH_LISTEN
# changes the address (default 127.0.0.1:8080); when something already listens there,
# it says so and exits 1 without touching it.
set -eu
BUILD=${1:-build}
BIN=$BUILD/gpuorch
LISTEN=${GPUORCH_LISTEN:-127.0.0.1:8080}
URL=http://$LISTEN

if [ -z "${GPUORCH_RUN_INNER:-}" ]; then
    GPUORCH_RUN_INNER=1 setsid "$0" "$@" &
    inner=$!
    stopping=""
    stop() {
        if [ -n "$stopping" ]; then
            echo "killing the server, the agents and their workers"
            pkill -KILL -s "$inner" 2>/dev/null || true
            return
        fi
        stopping=1
        echo
        echo "stopping: the agents first (they checkpoint and stop their workers, whose jobs" \
            "are requeued), then the server; Ctrl-C again to kill everything now"
        kill -TERM "$inner" 2>/dev/null || true
    }
    trap stop INT TERM
    rc=0
    # a trapped signal ends a wait early: wait again until the inner script has ended
    while kill -0 "$inner" 2>/dev/null; do
        wait "$inner" && rc=0 || rc=$?
    done
    # whatever is left of the session (nothing, after an orderly stop)
    pkill -KILL -s "$inner" 2>/dev/null || true
    [ -n "$stopping" ] && exit 0
    exit "$rc"
fi

if curl -fsS --max-time 2 "$URL/healthz" >/dev/null 2>&1; then
    echo "gpuorch: $LISTEN is taken: a server already answers there (another make run?)." >&2
    echo "Stop it, or pick another address: GPUORCH_LISTEN=127.0.0.1:8081 make run" >&2
    exit 1
fi

SERVER="" AGENTS=""
stop_inner() {
    trap - INT TERM
    # the agents tell the server what they stopped, so it goes after them
    for p in $AGENTS; do kill -TERM "$p" 2>/dev/null || true; done
    for p in $AGENTS; do wait "$p" 2>/dev/null || true; done
    if [ -n "$SERVER" ]; then
        kill -TERM "$SERVER" 2>/dev/null || true
        wait "$SERVER" 2>/dev/null || true
    fi
    echo "stopped; var/ keeps the jobs: make run again resumes them"
    exit "${1:-0}"
}
trap stop_inner INT TERM

mkdir -p var
"$BIN" server --config examples/cluster-demo.yaml --db sqlite:var/gpuorch.db --listen "$LISTEN" \
    --min-runtime-s 20 2>var/server.log &
SERVER=$!
up=""
for _ in $(seq 1 50); do
    # its fatal errors ("gpuorch server: cannot listen on ...") end the wait at once
    if ! kill -0 "$SERVER" 2>/dev/null || grep -q '^gpuorch server: ' var/server.log; then
        break
    fi
    if curl -fsS --max-time 2 "$URL/healthz" >/dev/null 2>&1; then
        up=1
        break
    fi
    sleep 0.2
done
if [ -z "$up" ]; then
    echo "the server did not start; see var/server.log:" >&2
    tail -5 var/server.log >&2
    kill -TERM "$SERVER" 2>/dev/null || true
    exit 1
fi
ADMIN=$(cat var/admin.token)
# each agent with a token bound to its node: it can act for no other
for node in h100-0 a100-0; do
    if [ ! -s "var/agent-$node.token" ]; then
        (umask 077 && "$BIN" token create --server "$URL" --token "$ADMIN" --role agent \
            --node "$node" --name "agent-$node" >"var/agent-$node.token")
    fi
done
# Workers run as nobody (the agent's default) unless nobody cannot read the checkout,
# where the demo's workloads are (a clone under /root, 0700): then, this being one
# person's machine, as root, and it says so.
WORKERS=""
if [ "$(id -u)" = 0 ] && ! runuser -u nobody -- test -r "$PWD/examples/workloads/train.py" \
    2>/dev/null; then
    echo "note: nobody cannot read $PWD, so the demo's workers run as root" \
        "(--worker-user root --allow-root-workers); a checkout others can read runs them as nobody"
    WORKERS="--worker-user root --allow-root-workers"
fi
# shellcheck disable=SC2086 # WORKERS is a list of words
GPUORCH_SIM_MIG_DELAY_MS=${GPUORCH_SIM_MIG_DELAY_MS:-2000} \
    "$BIN" agent --server "$URL" --token "$(cat var/agent-h100-0.token)" --node h100-0 \
    --gpus sim:H100-80GB-SXM5:8 --address 127.0.0.1 --checkpoint-root var/checkpoints \
    --state-dir var/agent-h100-0 $WORKERS 2>var/agent-h100-0.log &
AGENTS="$!"
# shellcheck disable=SC2086
GPUORCH_SIM_MIG_DELAY_MS=${GPUORCH_SIM_MIG_DELAY_MS:-2000} \
    "$BIN" agent --server "$URL" --token "$(cat var/agent-a100-0.token)" --node a100-0 \
    --gpus sim:A100-80GB:8 --address 127.0.0.1 --checkpoint-root var/checkpoints \
    --state-dir var/agent-a100-0 $WORKERS 2>var/agent-a100-0.log &
AGENTS="$AGENTS $!"

cat <<MSG

gpuorch is running: server $URL, agents h100-0 and a100-0 (simulated GPUs).
The portal: open $URL/ in a browser and sign in with the admin token below.
Logs: var/server.log, var/agent-*.log.   Stop everything with Ctrl-C.

  export GPUORCH_SERVER=$URL
  export GPUORCH_TOKEN=$ADMIN
  $BIN submit examples/run/serve.yaml examples/run/train.yaml
  $BIN queue
  $BIN nodes
  $BIN logs 2 -f

MSG
# a trapped signal ends the wait early; the trap then stops everything and exits
wait "$SERVER" || true
echo "the server stopped by itself; see var/server.log:" >&2
tail -5 var/server.log >&2
SERVER=""
stop_inner 1
