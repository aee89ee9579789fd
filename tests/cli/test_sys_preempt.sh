#!/bin/sh
# test_sys_preempt.sh: priority preemption with a checkpoint and a resume, end to end.
# A research training gang (examples/workloads/train.py) holds both H100 nodes, half of
# it borrowed; a production job of another team needs one node. The gang gets its
# checkpoint signal, stops, is requeued, and once the production job is cancelled it
# runs again, each rank resuming from its own directory of the step both wrote
# (GPUORCH_RESUME_FROM).
# Usage: test_sys_preempt.sh PATH/TO/gpuorch (run from the repository root).
set -eu

GPUORCH=${1:?usage: $0 PATH/TO/gpuorch}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sys.sh"

start_server
# the gang's ranks meet at MASTER_ADDR:MASTER_PORT; a loopback address of this test's
# own keeps it clear of another test's gang on the same port
AGENT_ARGS="--address $(python3 -c 'import random; print("127.%d.%d.%d" % tuple(random.randint(1, 254) for _ in range(3)))')"
start_agent h100-0 sim:H100-80GB-SXM5:8
start_agent h100-1 sim:H100-80GB-SXM5:8
wait_nodes 2

submit_training 2 5s

cat >"$T/serve.sh" <<'SH'
#!/bin/sh
echo "serving on $CUDA_VISIBLE_DEVICES"
exec sleep 300
SH
chmod +x "$T/serve.sh"
submit "{\"name\": \"prod\", \"team\": \"search\", \"kind\": \"inference\", \"priority\": \"production\",
  \"gpus\": 8, \"gpu_models\": [\"H100-80GB-SXM5\"], \"command\": [\"$T/serve.sh\"]}"
PROD=$ID
wait_for "$PROD" 'd["state"] == "running"' 30
wait_for "$TRAIN" 'd["state"] == "pending" and d["preemptions"] == 1' 30
json_ok "$T/out" '[e["type"] for e in d["events"] if e["type"] in ("start", "preempt", "requeue")] == ["start", "preempt", "requeue"]'
json_ok "$T/out" 'd["checkpoint_ranks"] == ["%s/ckpt/%s/step-%d/rank-%d" % ("'"$T"'", d["id"], d["checkpoint_step"], r) for r in (0, 1)]'
STEP=$(field "$TRAIN" 'd["checkpoint_step"]')
# the training workers are gone: the GPUs are the production job's
i=0
while pgrep -f "$T/train.py" >/dev/null; do
    i=$((i + 1)); [ $i -lt 100 ] || fail "the preempted workers still run"; sleep 0.1
done
# the member of the preempted team may not take production's room by reordering
api GET /api/v1/jobs/$TRAIN/logs?rank=0\&run=1
grep -q "checkpoint at step" "$T/out" || fail "run 1 of the gang never checkpointed: $(tail -3 "$T/out")"

# The production job goes away; the gang comes back and resumes from its checkpoint,
# each rank from its own directory of the step.
run 0 "$GPUORCH" cancel "$PROD"
wait_for "$TRAIN" 'd["state"] == "running" and d["run"] == 2' 30
[ "$STEP" -gt 0 ] || fail "the checkpoint holds no progress"
for r in 0 1; do
    i=0
    until api GET "/api/v1/jobs/$TRAIN/logs?rank=$r&run=2" && grep -q "resuming from" "$T/out"; do
        i=$((i + 1)); [ $i -lt 100 ] || fail "rank $r of run 2 did not resume: $(head -3 "$T/out")"; sleep 0.1
    done
    grep -q "rank $r: resuming from $T/ckpt/$TRAIN/step-$STEP/rank-$r at step $STEP" "$T/out" ||
        fail "rank $r did not resume from its own step $STEP: $(grep resuming "$T/out")"
done
run 0 "$GPUORCH" cancel "$TRAIN"
wait_for "$TRAIN" 'd["state"] == "cancelled"' 30
echo ok
