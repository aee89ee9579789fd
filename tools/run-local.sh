#!/bin/sh
# tools/run-local.sh BUILD_DIR: the main job (`make run`). Starts a gpuorch server with
# SQLite under ./var/ and two agents with simulated GPUs for examples/cluster-demo.yaml
# (h100-0: eight H100s, a100-0: eight MIG-capable A100s), prints the URL and an admin
# token, and stays in the foreground until Ctrl-C, which stops the server, the agents
# and the workers they started.
#
# Everything runs in a session of its own, so that Ctrl-C can stop the workers too (they
# run in process groups of their own, as on a real node). GPUORCH_LISTEN changes the
# address (default 127.0.0.1:8080).
set -eu
BUILD=${1:-build}
BIN=$BUILD/gpuorch
LISTEN=${GPUORCH_LISTEN:-127.0.0.1:8080}
URL=http://$LISTEN

if [ -z "${GPUORCH_RUN_INNER:-}" ]; then
    GPUORCH_RUN_INNER=1 setsid "$0" "$@" &
    inner=$!
    stop() {
        trap - INT TERM
        echo
        echo "stopping the server, the agents and their workers"
        pkill -TERM -s "$inner" 2>/dev/null || true
        sleep 1
        pkill -KILL -s "$inner" 2>/dev/null || true
        wait "$inner" 2>/dev/null || true
        exit 0
    }
    trap stop INT TERM
    wait "$inner" || true
    exit 0
fi

mkdir -p var
"$BIN" server --config examples/cluster-demo.yaml --db sqlite:var/gpuorch.db --listen "$LISTEN" \
    --min-runtime-s 20 2>var/server.log &
for _ in $(seq 1 50); do
    curl -fsS "$URL/healthz" >/dev/null 2>&1 && break
    sleep 0.2
done
if ! curl -fsS "$URL/healthz" >/dev/null 2>&1; then
    echo "the server did not start; see var/server.log:" >&2
    tail -5 var/server.log >&2
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
GPUORCH_SIM_MIG_DELAY_MS=${GPUORCH_SIM_MIG_DELAY_MS:-2000} \
    "$BIN" agent --server "$URL" --token "$(cat var/agent-h100-0.token)" --node h100-0 \
    --gpus sim:H100-80GB-SXM5:8 --address 127.0.0.1 --checkpoint-root var/checkpoints \
    --state-dir var/agent-h100-0 2>var/agent-h100-0.log &
GPUORCH_SIM_MIG_DELAY_MS=${GPUORCH_SIM_MIG_DELAY_MS:-2000} \
    "$BIN" agent --server "$URL" --token "$(cat var/agent-a100-0.token)" --node a100-0 \
    --gpus sim:A100-80GB:8 --address 127.0.0.1 --checkpoint-root var/checkpoints \
    --state-dir var/agent-a100-0 2>var/agent-a100-0.log &

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
wait
