#!/bin/sh
# test_sys_lost_grace.sh: a node that goes silent is lost (after --lost-after-ms, 3 s
# here) and takes no new work, but the work running there keeps its workers for the
# grace (--lost-grace-ms, 8 s here). The agent is frozen (SIGSTOP) while its worker goes
# on running: back within the grace, the same worker runs on, with no requeue; silent
# past the grace, the job is requeued (event lost), and the agent, back, stops the
# stale worker and runs the job's next run.
# Usage: test_sys_lost_grace.sh PATH/TO/gpuorch (run from the repository root).
set -eu

GPUORCH=${1:?usage: $0 PATH/TO/gpuorch}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sys.sh"

start_server --lost-grace-ms 8000
start_agent h100-0 sim:H100-80GB-SXM5:8
wait_nodes 1
submit "{\"name\": \"serve\", \"team\": \"search\", \"kind\": \"inference\", \"gpus\": 1, \"command\": [\"sh\", \"-c\", \"echo run \$GPUORCH_RUN; sleep 300; echo $T/ >/dev/null\"]}"
SERVE=$ID
wait_for "$SERVE" 'd["state"] == "running" and d["placement"][0]["pid"]'
PID=$(field "$SERVE" 'd["placement"][0]["pid"]')

# silent for longer than lost-after, less than lost-after + grace
kill -STOP "$AGENT_h100_0"
wait_node h100-0 'n["state"] == "lost"' 15
submit "{\"name\": \"later\", \"team\": \"search\", \"gpus\": 1, \"command\": [\"sh\", \"-c\", \"sleep 300; echo $T/ >/dev/null\"]}"
LATER=$ID
sleep 2
field "$LATER" 'd["state"]' | grep -qx pending || fail "a job landed on the lost node"
field "$SERVE" 'd["state"], d["run"]' | grep -qx "('running', 1)" || fail "the lost node's job did not keep its run: $(head -c 600 "$T/out")"
kill -CONT "$AGENT_h100_0"
wait_node h100-0 'n["state"] == "ready"' 15
kill -0 "$PID" 2>/dev/null || fail "the worker was stopped although its node came back within the grace"
wait_for "$LATER" 'd["state"] == "running"' 15
field "$SERVE" 'd["state"], d["run"], [e["type"] for e in d["events"] if e["type"] in ("lost", "requeue")]' |
    grep -qx "('running', 1, \[\])" || fail "the job was requeued although its node came back: $(head -c 900 "$T/out")"
kill -0 "$PID" 2>/dev/null || fail "the worker is gone"

# silent past the grace: requeued
kill -STOP "$AGENT_h100_0"
wait_node h100-0 'n["state"] == "lost"' 15
wait_for "$SERVE" 'd["run"] == 1 and d["state"] == "pending" and any(e["type"] == "lost" for e in d["events"])' 20
json_ok "$T/out" 'not any(e["type"] == "fail" for e in d["events"])'
kill -CONT "$AGENT_h100_0"
wait_for "$SERVE" 'd["state"] == "running" and d["run"] == 2' 30
i=0
while kill -0 "$PID" 2>/dev/null; do
    i=$((i + 1)); [ $i -lt 150 ] || fail "the stale worker of run 1 was not stopped"; sleep 0.1
done
echo ok
