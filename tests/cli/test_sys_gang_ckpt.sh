#!/bin/sh
# test_sys_gang_ckpt.sh: a gang resumes, each rank from its own directory of the newest
# step that every rank wrote (docs/agent.md, "The checkpoint contract"), end to end.
# Two ranks on two nodes (two agents) both write step 1; rank 1 then writes step 2 and
# is preempted before rank 0 writes it. The job's checkpoint is step 1 throughout: the
# preemption, the requeue and a SIGKILL of the server keep it, and the next run's
# rank 0 resumes from step-1/rank-0, rank 1 from step-1/rank-1. That run's ranks both
# write step 3, which replaces it; then rank 1's agent stops answering, the node is
# lost, and the run after resumes from step 3, each rank its own. Both ranks also write
# the old shared LATEST, as the issue's gang did (its last writer is rank 1's step 2):
# it is not what they resume from. A heartbeat whose checkpoint list is malformed is
# refused whole and changes nothing.
# Usage: test_sys_gang_ckpt.sh PATH/TO/gpuorch (run from the repository root).
set -eu

GPUORCH=${1:?usage: $0 PATH/TO/gpuorch}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sys.sh"

start_server
start_agent h100-0 sim:H100-80GB-SXM5:8
start_agent h100-1 sim:H100-80GB-SXM5:8
wait_nodes 2

# One rank: step 1 at once; rank 1 writes step 2 when $T/go appears. Neither writes
# anything on the checkpoint signal, so a preemption finds them where they are.
cat >"$T/rank.sh" <<'SH'
#!/bin/sh
D=$GPUORCH_CHECKPOINT_DIR
trap 'exit 143' TERM
trap '' USR1
mark() {
    dir=$D/step-$1/rank-$RANK
    mkdir -p "$dir"
    echo "rank=$RANK step=$1" >"$dir/state"
    echo "$1 $dir" >"$D/LATEST.$RANK.tmp" && mv "$D/LATEST.$RANK.tmp" "$D/LATEST.$RANK"
    echo "$dir" >"$D/LATEST.tmp.$RANK" && mv "$D/LATEST.tmp.$RANK" "$D/LATEST"
    echo "rank $RANK: wrote step $1"
}
if [ -n "${GPUORCH_RESUME_FROM:-}" ]; then
    echo "rank $RANK: resuming from $GPUORCH_RESUME_FROM: $(cat "$GPUORCH_RESUME_FROM/state")"
    from=${GPUORCH_RESUME_FROM#"$D"/step-}
    mark $((${from%%/*} + 2))
else
    mark 1
    if [ "$RANK" = 1 ]; then
        until [ -e "$GO" ]; do sleep 0.05; done
        mark 2
    fi
fi
while :; do sleep 0.1; done
SH

submit "{\"name\": \"gang\", \"team\": \"research\", \"kind\": \"training\", \"workers\": 2, \"gpus\": 8,
  \"gpu_models\": [\"H100-80GB-SXM5\"], \"preemptible\": true, \"checkpoint\": {\"grace\": \"1s\"},
  \"command\": [\"sh\", \"$T/rank.sh\"], \"env\": {\"GO\": \"$T/go\"}}"
GANG=$ID
STEP1="[\"$T/ckpt/$GANG/step-1/rank-0\", \"$T/ckpt/$GANG/step-1/rank-1\"]"
wait_for "$GANG" 'd["state"] == "running" and d["checkpoint_step"] == 1' 30
json_ok "$T/out" 'd["checkpoint_ranks"] == '"$STEP1"
json_ok "$T/out" 'd["checkpoint"] == "'"$T/ckpt/$GANG/step-1/rank-0"'"'
json_ok "$T/out" 'sorted(w["node"] for w in d["placement"]) == ["h100-0", "h100-1"]'
NODE1=$(field "$GANG" '[w["node"] for w in d["placement"] if w["rank"] == 1][0]')

# Rank 1 gets one step further; the server hears of it, and the job stays at step 1.
: >"$T/go"
wait_for "$GANG" '[w.get("checkpoint_step") for w in d["placement"]] == [1, 2]' 30
json_ok "$T/out" 'd["checkpoint_step"] == 1 and d["checkpoint_ranks"] == '"$STEP1"
json_ok "$T/out" '[e["type"] for e in d["events"]].count("checkpoint") == 1'
# the shared LATEST names rank 1's step 2, and is not taken for the gang's checkpoint
[ "$(cat "$T/ckpt/$GANG/LATEST")" = "$T/ckpt/$GANG/step-2/rank-1" ] || fail "LATEST: $(cat "$T/ckpt/$GANG/LATEST")"

# A heartbeat for rank 1's node whose step is not a number: 400, and nothing of it is
# taken (it lists no other worker, which accepted would have meant they were gone).
BAD="{\"node\": \"$NODE1\", \"workers\": [{\"job\": $GANG, \"run\": 1, \"rank\": 1, \"state\": \"running\",
  \"checkpoints\": [{\"step\": \"3\", \"path\": \"$T/ckpt/$GANG/step-3/rank-1\"}]}]}"
TOKEN=$AGENT_TOKEN
api POST /api/v1/agent/heartbeat "$BAD"
unset TOKEN
[ "$STATUS" = 400 ] || fail "a malformed checkpoint list answered $STATUS"
grep -q "'checkpoints'\[0\] needs 'step'" "$T/out" || fail "the 400 does not say why: $(cat "$T/out")"
wait_for "$GANG" 'd["state"] == "running" and [w["state"] for w in d["placement"]] == ["running", "running"]' 5
json_ok "$T/out" 'd["checkpoint_step"] == 1'

# Preempted by a production job of another team on one of the nodes.
cat >"$T/serve.sh" <<'SH'
#!/bin/sh
exec sleep 300
SH
chmod +x "$T/serve.sh"
submit "{\"name\": \"prod\", \"team\": \"search\", \"kind\": \"inference\", \"priority\": \"production\",
  \"gpus\": 8, \"gpu_models\": [\"H100-80GB-SXM5\"], \"command\": [\"$T/serve.sh\"]}"
PROD=$ID
wait_for "$GANG" 'd["state"] == "pending" and d["preemptions"] == 1' 30
json_ok "$T/out" 'd["checkpoint_step"] == 1 and d["checkpoint_ranks"] == '"$STEP1"
json_ok "$T/out" '[e["type"] for e in d["events"]].count("checkpoint") == 1'
json_ok "$T/out" '[e["detail"] for e in d["events"] if e["type"] == "requeue"] == ["step 1 of all 2 ranks (rank 0: '"$T/ckpt/$GANG/step-1/rank-0"')"]'

# The server dies and comes back: the checkpoint is in the store.
kill -KILL "$SERVER_PID"
wait "$SERVER_PID" 2>/dev/null || true
start_server
wait_nodes 2
wait_for "$PROD" 'd["state"] == "running"' 30
wait_for "$GANG" 'd["state"] == "pending"' 5
json_ok "$T/out" 'd["checkpoint_step"] == 1 and d["checkpoint_ranks"] == '"$STEP1"

# The production job goes; each rank resumes from its own directory of step 1.
run 0 "$GPUORCH" cancel "$PROD"
wait_for "$GANG" 'd["state"] == "running" and d["run"] == 2' 30
for r in 0 1; do
    i=0
    until api GET "/api/v1/jobs/$GANG/logs?rank=$r&run=2" && grep -q "resuming from" "$T/out"; do
        i=$((i + 1)); [ $i -lt 100 ] || fail "rank $r of run 2 did not resume: $(head -3 "$T/out")"; sleep 0.1
    done
    grep -qx "rank $r: resuming from $T/ckpt/$GANG/step-1/rank-$r: rank=$r step=1" "$T/out" ||
        fail "rank $r did not resume from its own step 1: $(grep resuming "$T/out")"
done
# both ranks of run 2 mark step 3: the run's first common step replaces run 1's
wait_for "$GANG" 'd["checkpoint_step"] == 3' 30
json_ok "$T/out" 'd["checkpoint_ranks"] == ["'"$T/ckpt/$GANG"'/step-3/rank-%d" % r for r in (0, 1)]'

# Rank 1's agent stops answering: its node is lost, the gang is requeued with step 3.
NODE1=$(field "$GANG" '[w["node"] for w in d["placement"] if w["rank"] == 1][0]')
eval "LOST=\$AGENT_$(echo "$NODE1" | tr -c 'a-zA-Z0-9\n' _)"
kill -STOP "$LOST"
wait_for "$GANG" 'd["state"] == "pending" and any(e["type"] == "lost" for e in d["events"])' 30
json_ok "$T/out" 'd["checkpoint_step"] == 3'
kill -CONT "$LOST"
wait_for "$GANG" 'd["state"] == "running" and d["run"] == 3' 30
for r in 0 1; do
    i=0
    until api GET "/api/v1/jobs/$GANG/logs?rank=$r&run=3" && grep -q "resuming from" "$T/out"; do
        i=$((i + 1)); [ $i -lt 100 ] || fail "rank $r of run 3 did not resume: $(head -3 "$T/out")"; sleep 0.1
    done
    grep -qx "rank $r: resuming from $T/ckpt/$GANG/step-3/rank-$r: rank=$r step=3" "$T/out" ||
        fail "rank $r did not resume from its own step 3: $(grep resuming "$T/out")"
done
run 0 "$GPUORCH" cancel "$GANG"
wait_for "$GANG" 'd["state"] == "cancelled"' 30
echo ok
