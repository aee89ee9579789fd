# sys.sh: helpers for the black-box tests of the running system, sourced after lib.sh:
# a server on a free loopback port with its database under $T, agents with simulated
# GPUs, API calls with curl, and waiting for a job to reach a state. Everything started
# here (and every worker whose command names $T) is killed on exit.

# without $T the cleanup below would kill every process with a '/' in its command line
: "${T:?sys.sh is sourced after lib.sh, which sets T}"

# Run as root, the agent runs workers as nobody (docs/agent.md, "Who workers run as"),
# and the jobs here read scripts from $T and write files there: $T is nobody's (the
# server and agents, root, still write everywhere in it).
if [ "$(id -u)" = 0 ]; then
    chown 65534:65534 "$T" && chmod 0755 "$T"
fi

# worker_python: a python3 the workers can run: this shell's, or, run as root where
# nobody cannot reach it (a pyenv under /root), the system's.
worker_python() {
    wp=$(python3 -c 'import sys; print(sys.executable)')
    if [ "$(id -u)" = 0 ] && ! runuser -u nobody -- "$wp" -c '' 2>/dev/null; then
        wp=/usr/bin/python3
    fi
    echo "$wp"
}

PIDS=""
sys_cleanup() {
    for p in $PIDS; do kill -KILL "$p" 2>/dev/null || true; done
    [ -z "${T:-}" ] || pkill -KILL -f "$T/" 2>/dev/null || true
    if [ -n "${KEEP_LOGS:-}" ]; then
        for f in "$T"/*.log; do [ -f "$f" ] && { echo "--- $f" >&2; tail -20 "$f" >&2; }; done
    fi
    rm -rf "$T"
}
trap sys_cleanup EXIT INT TERM

# free_port: a port nothing listens on, below the kernel's ephemeral range
# (/proc/sys/net/ipv4/ip_local_port_range): a server restarted on its port must not find
# it taken by some client connection's source port meanwhile (test_sys_chargeback once).
free_port() {
    python3 -c '
import random, socket
lo = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
for _ in range(200):
    p = random.randrange(10000, max(lo, 10001))
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p))
        print(p)
        break
    except OSError:
        pass
    finally:
        s.close()
else:
    s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])
'
}

# start_server [EXTRA ARGS]: start (or restart, on the same database and port) the server.
# A node is lost after 3 s of silence and its jobs requeued at once; EXTRA ARGS, coming
# later, override that.
start_server() {
    # a restart: the server stopped before must be gone (it holds the port until it has)
    if [ -n "${SERVER_PID:-}" ]; then
        i=0
        while kill -0 "$SERVER_PID" 2>/dev/null && ! grep -q '^State:.*Z' "/proc/$SERVER_PID/status" 2>/dev/null; do
            i=$((i + 1))
            [ $i -lt 100 ] || fail "the server stopped before (pid $SERVER_PID) is still running"
            sleep 0.1
        done
    fi
    [ -n "${PORT:-}" ] || PORT=$(free_port)
    URL=http://127.0.0.1:$PORT
    mkdir -p "$T/var"
    "$GPUORCH" server --config "${CLUSTER:-examples/cluster-demo.yaml}" --db "sqlite:$T/var/gpuorch.db" \
        --listen "127.0.0.1:$PORT" --heartbeat-ms 200 --lost-after-ms 3000 --lost-grace-ms 0 --min-runtime-s 0 "$@" \
        >>"$T/server.out" 2>>"$T/server.log" &
    SERVER_PID=$!
    PIDS="$PIDS $SERVER_PID"
    i=0
    until curl -fsS "$URL/healthz" >/dev/null 2>&1; do
        i=$((i + 1))
        [ $i -lt 150 ] || { tail -5 "$T/server.log" >&2; fail "the server did not come up on $URL"; }
        sleep 0.1
    done
    ADMIN=$(cat "$T/var/admin.token")
    export GPUORCH_SERVER="$URL" GPUORCH_TOKEN="$ADMIN"
}

# start_agent NODE GPUS: an agent for NODE with simulated GPUs (sim:MODEL:COUNT). Words in
# $AGENT_ARGS (when set) are added to its command line.
# worker_args: how the agents run workers. As nobody (the agent's default), which is what
# the tests check, when nobody can read the checkout (the tests' workloads live there);
# a checkout only root can reach (a clone under /root, 0700) leaves no user but root to
# run them, and the tests say so. test_sys_runas sets WORKER_ARGS itself.
worker_args() {
    if [ "$(id -u)" = 0 ] && ! runuser -u nobody -- test -r "$PWD/examples/workloads/train.py" \
        2>/dev/null; then
        echo "note: nobody cannot read $PWD (a checkout only root reaches): the agents run" \
            "workers as root (--worker-user root --allow-root-workers)" >&2
        echo "--worker-user root --allow-root-workers"
    fi
}

start_agent() {
    [ -n "${WORKER_ARGS+set}" ] || WORKER_ARGS=$(worker_args)
    if [ -z "${AGENT_TOKEN:-}" ]; then
        AGENT_TOKEN=$("$GPUORCH" token create --role agent --name test) || fail "token create"
    fi
    # shellcheck disable=SC2086 # WORKER_ARGS and AGENT_ARGS are lists of words
    GPUORCH_SIM_MIG_DELAY_MS=0 "$GPUORCH" agent --server "$URL" --token "$AGENT_TOKEN" --node "$1" \
        --gpus "$2" --address 127.0.0.1 --state-dir "$T/agent-$1" --checkpoint-root "$T/ckpt" \
        ${WORKER_ARGS} ${AGENT_ARGS:-} 2>>"$T/agent-$1.log" &
    pid=$!
    PIDS="$PIDS $pid"
    eval "AGENT_$(echo "$1" | tr -c 'a-zA-Z0-9\n' _)=$pid"
}

# api METHOD PATH [BODY]: the reply body in $T/out, the status in $STATUS.
api() {
    if [ $# -ge 3 ]; then
        STATUS=$(curl -sS -o "$T/out" -w '%{http_code}' -X "$1" -H "Authorization: Bearer ${TOKEN:-$ADMIN}" \
            -H 'Content-Type: application/json' --data-binary "$3" "$URL$2")
    else
        STATUS=$(curl -sS -o "$T/out" -w '%{http_code}' -X "$1" -H "Authorization: Bearer ${TOKEN:-$ADMIN}" "$URL$2")
    fi
}

# submit JSON: submit one job as admin; its id in $ID.
submit() {
    api POST /api/v1/jobs "$1"
    [ "$STATUS" = 201 ] || fail "submit answered $STATUS: $(cat "$T/out")"
    ID=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$T/out")
}

# submit_training WORKERS GRACE: a research training job of WORKERS x 8 H100s running
# examples/workloads/train.py (a step every 50 ms, a checkpoint every second, stopped
# within GRACE), its id in TRAIN once it runs and has checkpointed. The command is the
# interpreter itself: a wrapper in front of it (pyenv's shim is a shell script) dies of
# a checkpoint signal that comes before python has its handler, on a loaded machine.
submit_training() {
    cp examples/workloads/train.py "$T/train.py"
    tp=$(worker_python)
    submit "{\"name\": \"train\", \"team\": \"research\", \"kind\": \"training\", \"workers\": $1, \"gpus\": 8,
  \"gpu_models\": [\"H100-80GB-SXM5\"], \"preemptible\": true,
  \"checkpoint\": {\"interval\": \"1s\", \"grace\": \"$2\"},
  \"command\": [\"$tp\", \"$T/train.py\"], \"env\": {\"STEPS\": \"100000\", \"STEP_SECONDS\": \"0.05\"}}"
    TRAIN=$ID
    wait_for "$TRAIN" 'd["state"] == "running" and d["checkpoint"]' 30
}

# field ID EXPR: a Python expression over the job d (GET /jobs/ID), printed.
field() {
    api GET "/api/v1/jobs/$1"
    python3 -c 'import json,sys; d = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$T/out" "$2"
}

# wait_for ID EXPR [SECONDS]: until the Python expression over the job d holds.
wait_for() {
    limit=$(( ${3:-30} * 10 ))
    i=0
    while :; do
        api GET "/api/v1/jobs/$1"
        if [ "$STATUS" = 200 ] && python3 -c 'import json,sys; d = json.load(open(sys.argv[1])); sys.exit(0 if eval(sys.argv[2]) else 1)' "$T/out" "$2" 2>/dev/null; then
            return 0
        fi
        i=$((i + 1))
        [ $i -lt "$limit" ] || fail "job $1: '$2' did not come true in ${3:-30} s (last: $(head -c 600 "$T/out"))"
        sleep 0.1
    done
}

# wait_nodes N: until N nodes are ready.
wait_nodes() {
    i=0
    until api GET /api/v1/nodes && python3 -c 'import json,sys; d = json.load(open(sys.argv[1])); sys.exit(0 if sum(n["state"] == "ready" for n in d["nodes"]) >= int(sys.argv[2]) else 1)' "$T/out" "$1" 2>/dev/null; do
        i=$((i + 1))
        [ $i -lt 200 ] || fail "$1 nodes did not become ready"
        sleep 0.1
    done
}

# wait_node NODE EXPR [SECONDS]: until the Python expression over the node n (as GET
# /nodes lists it) holds.
wait_node() {
    limit=$(( ${3:-30} * 10 ))
    i=0
    until api GET /api/v1/nodes && python3 -c 'import json,sys; n = [n for n in json.load(open(sys.argv[1]))["nodes"] if n["name"] == sys.argv[2]][0]; sys.exit(0 if eval(sys.argv[3]) else 1)' "$T/out" "$1" "$2" 2>/dev/null; do
        i=$((i + 1))
        [ $i -lt "$limit" ] || fail "node $1: '$2' did not come true in ${3:-30} s (last: $(head -c 600 "$T/out"))"
        sleep 0.1
    done
}
