#!/bin/sh
# test_sys_move.sh: the running system moves a model server, make-before-break, to empty
# a GPU for whole-GPU work (core/consolidate.h, server/move.c). One A100 node of 2 GPUs
# that may be MIG-partitioned; three production servers ask 3g.40gb: two share a GPU,
# one takes the other. One of the two ends, leaving one server on each GPU, and a 1-GPU
# training job arrives: no GPU is whole.
#  1. The core moves one server into the free half of the other GPU: its replacement
#     starts as run 2 beside the old worker, which serves until the replacement runs and
#     is then stopped; the emptied GPU comes back whole and the training job starts on it.
#  2. The same, with servers that exit at once when started as a replacement: the move
#     is abandoned ("move-failed"), the server goes on as run 1 where it was, is not
#     moved again (a ten-minute back-off), and the training job waits.
# Usage: test_sys_move.sh PATH/TO/gpuorch (run from the repository root).
set -eu

GPUORCH=${1:?usage: $0 PATH/TO/gpuorch}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sys.sh"

cat >"$T/cluster.yaml" <<'EOF'
name: move
pools:
  - name: a100
    tier: owned
    nodes: 1
    node: {gpu_model: A100-80GB, gpus: 2, mig: true, cpus: 64, memory_gib: 512}
EOF
CLUSTER=$T/cluster.yaml
start_server
start_agent a100-0 sim:A100-80GB:2
wait_nodes 1

# a server named NAME that runs SECONDS; with $T/fail present, a run after the first
# exits at once. "$T/NAME" in its command names its process.
serve() {
    printf '{"name": "%s", "kind": "inference", "priority": "production", "mig": "3g.40gb", "command": ["sh", "-c", "[ -e %s/fail ] && [ $GPUORCH_RUN != 1 ] && exit 3; echo serving on $CUDA_VISIBLE_DEVICES; sleep %s; : %s/%s"]}' \
        "$1" "$T" "$2" "$T" "$1"
}
gpu_of() {
    field "$1" 'd["placement"][0]["gpus"][0]["index"]'
}
types() {
    field "$1" '" ".join(e["type"] for e in d["events"])'
}

# scenario P: servers xP, yP (short) and aP, then a training job; sets X, A, GX, GA, TRAIN
scenario() {
    submit "$(serve "x$1" 300)"
    X=$ID
    submit "$(serve "y$1" 3)"
    Y=$ID
    submit "$(serve "a$1" 300)"
    A=$ID
    wait_for "$X" 'd["state"] == "running"' 30
    wait_for "$A" 'd["state"] == "running"' 30
    wait_for "$Y" 'd["state"] == "succeeded"' 30
    GX=$(gpu_of "$X")
    GA=$(gpu_of "$A")
    [ "$GX" != "$GA" ] || fail "x$1 and a$1 share GPU $GX: the test needs one on each GPU"
    submit '{"name": "train", "kind": "training", "gpus": 1, "command": ["sh", "-c", "sleep 300; : '"$T"'/train"]}'
    TRAIN=$ID
}

# which of X and A has an event of TYPE: sets M (it), STAY (the other), MN, GM, GSTAY
which_moved() {
    MX=$(types "$X")
    MA=$(types "$A")
    case "$MX|$MA" in
    *"$1"*"|"*"$1"*) fail "both servers have '$1' events: $MX | $MA" ;;
    *"$1"*"|"*) M=$X; STAY=$A; MN=x$2; GM=$GX; GSTAY=$GA ;;
    *"|"*"$1"*) M=$A; STAY=$X; MN=a$2; GM=$GA; GSTAY=$GX ;;
    *) return 1 ;;
    esac
}

# 1. the move
scenario 1
wait_for "$TRAIN" 'd["state"] == "running"' 30
which_moved move 1 || fail "the training job started but no server moved"
wait_for "$M" 'd["state"] == "running" and d["run"] == 2 and "moved" in [e["type"] for e in d["events"]]' 30
[ "$(types "$M")" = "submit start move start moved" ] || fail "the moved server's events: $(types "$M")"
[ "$(gpu_of "$M")" = "$GSTAY" ] || fail "the moved server is not on GPU $GSTAY"
[ "$(field "$STAY" 'd["run"]')" = 1 ] || fail "the server that stayed was restarted"
[ "$(gpu_of "$TRAIN")" = "$GM" ] || fail "training is not on GPU $GM, the one emptied"
# the old worker stopped once the replacement ran: one process of the moved server
i=0
while [ "$(pgrep -c -f "$T/$MN\$" || true)" != 1 ]; do
    i=$((i + 1)); [ $i -lt 100 ] || fail "$(pgrep -c -f "$T/$MN\$") processes of the moved server run"; sleep 0.1
done
for r in 1 2; do
    api GET "/api/v1/jobs/$M/logs?run=$r"
    grep -q "serving on" "$T/out" || fail "run $r of the moved server logged nothing"
done
run 0 "$GPUORCH" cancel "$X" "$A" "$TRAIN"
wait_for "$M" 'd["state"] == "cancelled"' 30
wait_for "$TRAIN" 'd["state"] == "cancelled"' 30

# 2. a replacement that cannot start
touch "$T/fail"
scenario 2
i=0
until which_moved move-failed 2; do
    i=$((i + 1)); [ $i -lt 300 ] || fail "no move failed: $(types "$X") | $(types "$A")"; sleep 0.1
done
sleep 2
[ "$(types "$M")" = "submit start move start move-failed" ] || fail "the server's events: $(types "$M")"
[ "$(field "$M" 'd["state"]')" = running ] || fail "the server whose replacement failed is not running"
[ "$(gpu_of "$M")" = "$GM" ] || fail "the server whose replacement failed is not on GPU $GM"
[ "$(pgrep -c -f "$T/$MN\$" || true)" = 1 ] || fail "the old worker of $MN does not run"
[ "$(field "$STAY" 'd["run"]')" = 1 ] || fail "the other server was restarted"
[ "$(field "$TRAIN" 'd["state"]')" = pending ] || fail "training started with both GPUs partitioned"
run 0 "$GPUORCH" cancel "$X" "$A" "$TRAIN"
