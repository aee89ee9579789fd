#!/bin/sh
# test_sys_lost_ckpt.sh: a node declared lost whose worker runs on. A checkpointing job
# runs on h100-0; its agent is frozen (SIGSTOP) past the lost-node grace, so the job is
# requeued and its run 2 starts on a100-0, resuming from run 1's checkpoint, while run
# 1's worker goes on writing markers into the job's checkpoint directory, which both
# nodes share. Each marker names its run ("run N"): a100-0's agent leaves run 1's out
# (event=checkpoint_other_run), so the job's checkpoint is the one run 2 wrote. When
# h100-0's agent thaws (SIGCONT), it stops the old worker, whose run the server moved
# elsewhere, and its report of run 1's checkpoints is ignored and logged.
# Usage: test_sys_lost_ckpt.sh PATH/TO/gpuorch (run from the repository root).
set -eu

GPUORCH=${1:?usage: $0 PATH/TO/gpuorch}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sys.sh"

# the worker: a marker every 0.1 s, steps from 1000 up in run 1, from 1 up in a later
# run (so run 1's steps are always the newest numbers), each naming its run
cat >"$T/ckpt.sh" <<'SH'
#!/bin/sh
step=1
[ "$GPUORCH_RUN" = 1 ] && step=1000
echo "run $GPUORCH_RUN resumes from ${GPUORCH_RESUME_FROM:-nothing}"
while :; do
    dir="$GPUORCH_CHECKPOINT_DIR/run-$GPUORCH_RUN/step-$step"
    mkdir -p "$dir"
    printf '%s %s\nrun %s\n' "$step" "$dir" "$GPUORCH_RUN" >"$GPUORCH_CHECKPOINT_DIR/.m.$GPUORCH_RUN"
    mv "$GPUORCH_CHECKPOINT_DIR/.m.$GPUORCH_RUN" "$GPUORCH_CHECKPOINT_DIR/LATEST.$RANK"
    step=$((step + 1))
    sleep 0.1
done
SH
chmod +x "$T/ckpt.sh"

start_server
start_agent h100-0 sim:H100-80GB-SXM5:8
wait_nodes 1
submit "{\"name\": \"ckpt\", \"team\": \"search\", \"gpus\": 1, \"checkpoint\": {\"grace\": \"5s\"}, \"command\": [\"$T/ckpt.sh\"]}"
JOB=$ID
wait_for "$JOB" 'd["state"] == "running" and d["placement"][0]["node"] == "h100-0" and (d["checkpoint"] or "").find("/run-1/") > 0' 20
OLD=$(field "$JOB" 'd["placement"][0]["pid"]')
start_agent a100-0 sim:A100-80GB:8
wait_nodes 2

kill -STOP "$AGENT_h100_0"
wait_for "$JOB" 'd["run"] == 2 and d["state"] == "running" and d["placement"][0]["node"] == "a100-0"' 30
kill -0 "$OLD" || fail "run 1's worker should still be running on the frozen node"
wait_for "$JOB" '"/run-2/" in (d["checkpoint"] or "")' 20
# run 1's worker writes on: its markers never become the job's checkpoint
i=0
while [ $i -lt 15 ]; do
    field "$JOB" 'd["checkpoint"]' | grep -q "/run-2/" ||
        fail "the job's checkpoint is not run 2's: $(field "$JOB" 'd["checkpoint"], d["checkpoint_step"]')"
    i=$((i + 1)); sleep 0.1
done
grep -q 'event=checkpoint_other_run job=1 run=2 rank=0 .* marker_run=1' "$T/agent-a100-0.log" ||
    fail "a100-0's agent did not say it left run 1's marker out"

kill -CONT "$AGENT_h100_0"
i=0
while kill -0 "$OLD" 2>/dev/null; do
    i=$((i + 1)); [ $i -lt 100 ] || fail "the thawed agent did not stop run 1's worker"; sleep 0.1
done
grep -q "event=worker_stop mode=cancel .*job=1 run=1 rank=0" "$T/agent-h100-0.log" ||
    fail "h100-0 did not say it stopped run 1's worker"
grep -q "event=checkpoint_stale job=1 run=1 current_run=2 node=h100-0" "$T/server.log" ||
    fail "the server did not log run 1's checkpoint report as ignored"
sleep 0.5
field "$JOB" 'd["state"], d["run"]' | grep -qx "('running', 2)" || fail "run 2 did not run on: $(head -c 600 "$T/out")"
field "$JOB" 'd["checkpoint"]' | grep -q "/run-2/" || fail "the job's checkpoint is not run 2's at the end"
echo ok
