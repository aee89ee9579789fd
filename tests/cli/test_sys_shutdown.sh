#!/bin/sh
# test_sys_shutdown.sh: an agent stopped with SIGTERM shuts its node down. A training
# job that checkpoints gets the checkpoint signal and writes one before it stops; a
# job that does not is stopped with SIGTERM. The agent tells the server and exits;
# both jobs are requeued (event shutdown), neither failed, the node is down and takes
# no work. The agent started again runs both again, the training job resuming from
# the checkpoint it wrote on the way down. SIGHUP still stops the agent alone.
# Usage: test_sys_shutdown.sh PATH/TO/gpuorch (run from the repository root).
set -eu

GPUORCH=${1:?usage: $0 PATH/TO/gpuorch}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sys.sh"

start_server
start_agent h100-0 sim:H100-80GB-SXM5:8
wait_nodes 1
# $T/ in the commands: the cleanup finds what is left of them
submit "{\"name\": \"train\", \"team\": \"research\", \"kind\": \"training\", \"gpus\": 2, \"preemptible\": true, \"checkpoint\": {\"grace\": \"10s\"}, \"env\": {\"STEPS\": \"3000\", \"STEP_SECONDS\": \"0.1\"}, \"command\": [\"python3\", \"examples/workloads/train.py\", \"$T/\"]}"
TRAIN=$ID
submit "{\"name\": \"serve\", \"team\": \"search\", \"kind\": \"inference\", \"gpus\": 1, \"command\": [\"sh\", \"-c\", \"sleep 300; echo $T/ >/dev/null\"]}"
SERVE=$ID
wait_for "$TRAIN" 'd["state"] == "running" and d["placement"][0]["pid"]'
TRAIN_PID=$(field "$TRAIN" 'd["placement"][0]["pid"]')
wait_for "$SERVE" 'd["state"] == "running" and d["placement"][0]["pid"]'
SERVE_PID=$(field "$SERVE" 'd["placement"][0]["pid"]')
[ "$(field "$TRAIN" 'd["checkpoint"]')" = None ] || fail "the training job checkpointed before the test asked"

kill -TERM "$AGENT_h100_0"
i=0
until grep -q 'event=agent_stop' "$T/agent-h100-0.log"; do
    i=$((i + 1)); [ $i -lt 300 ] || fail "the agent did not stop within 30 s of SIGTERM"; sleep 0.1
done
wait "$AGENT_h100_0" || fail "the agent exited $? after SIGTERM"
grep -q 'event=agent_shutdown workers_checkpointing=1 workers_stopping=1' "$T/agent-h100-0.log" ||
    fail "the agent did not shut down as expected: $(grep -v 'event=gpu ' "$T/agent-h100-0.log" | tail -5)"
kill -0 "$TRAIN_PID" 2>/dev/null && fail "the training worker still runs"
kill -0 "$SERVE_PID" 2>/dev/null && fail "the serving worker still runs"

# both requeued, neither failed; the training job kept the checkpoint it wrote
for id in "$TRAIN" "$SERVE"; do
    wait_for "$id" 'd["state"] == "pending" and d["run"] == 1' 10
    json_ok "$T/out" '[e["type"] for e in d["events"] if e["type"] in ("shutdown", "requeue", "fail", "lost")] == ["shutdown", "requeue"]'
done
[ "$(field "$TRAIN" 'd["checkpoint"]')" != None ] || fail "the training job kept no checkpoint"
ls -d "$T/ckpt/$TRAIN"/step-*/rank-0 >/dev/null 2>&1 || fail "the training job wrote no checkpoint of its rank"
[ "$(field "$SERVE" 'd["checkpoint"]')" = None ] || fail "the serving job has a checkpoint"
wait_node h100-0 'n["state"] == "down"'
# and they wait for it, as their reason says
wait_for "$TRAIN" "'h100-0 is shut down (its agent was stopped)' in (d['reason'] or '')" 10

# started again: both run again, the training job from its checkpoint
start_agent h100-0 sim:H100-80GB-SXM5:8
wait_for "$TRAIN" 'd["state"] == "running" and d["run"] == 2' 30
wait_for "$SERVE" 'd["state"] == "running" and d["run"] == 2' 30
i=0
until api GET "/api/v1/jobs/$TRAIN/logs?rank=0&run=2" && grep -q "resuming from" "$T/out"; do
    i=$((i + 1)); [ $i -lt 150 ] || fail "run 2 of the training job did not say it resumed: $(cat "$T/out")"; sleep 0.1
done
grep -q "resuming from $T/ckpt/$TRAIN/.* at step [1-9]" "$T/out" || fail "run 2 did not resume from its checkpoint: $(cat "$T/out")"

# SIGHUP stops the agent alone: its workers run on, and the next agent takes them back
PID2=$(field "$SERVE" 'd["placement"][0]["pid"]')
kill -HUP "$AGENT_h100_0"
wait "$AGENT_h100_0" || true
kill -0 "$PID2" || fail "SIGHUP stopped the workers too"
start_agent h100-0 sim:H100-80GB-SXM5:8
sleep 2
field "$SERVE" 'd["state"], d["run"]' | grep -qx "('running', 2)" || fail "the worker left running was not taken back: $(head -c 600 "$T/out")"
kill -0 "$PID2" || fail "the worker left running was stopped"
echo ok
