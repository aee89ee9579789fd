#!/bin/sh
# test_sys_mismatch.sh: an agent whose GPUs are not what the cluster file declares for
# its node. Eight simulated H100s for l4-0 (four L4s): every heartbeat is refused with
# a 409 that states the difference, which the agent logs once and keeps retrying; the
# node shows as mismatched (gpuorch nodes, its JSON, /metrics) and takes no work. Fixing
# the cluster file clears it for the same agent; so does fixing the agent. A job already
# running on the node when it becomes mismatched is not failed: its worker runs on, and
# the right agent takes it back.
# Usage: test_sys_mismatch.sh PATH/TO/gpuorch (run from the repository root).
set -eu

GPUORCH=${1:?usage: $0 PATH/TO/gpuorch}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sys.sh"

DIFF="the agent reports 8 x H100-80GB-SXM5 where the cluster file declares 4 x L4 (pool l4): 8 GPUs, not 4; GPUs 0-7 are H100-80GB-SXM5, not L4"

start_server
AGENT_TOKEN=$("$GPUORCH" token create --role agent --node l4-0 --name l4) || fail "token create"
AGENT_ARGS="--state-dir $T/agent-wrong" start_agent l4-0 sim:H100-80GB-SXM5:8
WRONG=$AGENT_l4_0
wait_node l4-0 'n["state"] == "mismatched"'
json_ok "$T/out" '[n for n in d["nodes"] if n["name"] == "l4-0"][0]["mismatch"] == "'"$DIFF"'"'

# the heartbeat's reply: 409, with the difference
cat >"$T/hb.json" <<'JSON'
{"node": "l4-0", "boot_id": "x", "workers": [],
 "gpus": [{"index": 0, "uuid": "GPU-a", "name": "NVIDIA H100-80GB-SXM5", "memory_mib": 81920}]}
JSON
TOKEN=$AGENT_TOKEN api POST /api/v1/agent/heartbeat "$(cat "$T/hb.json")"
[ "$STATUS" = 409 ] || fail "a mismatched heartbeat answered $STATUS"
json_ok "$T/out" 'd["error"].startswith("node l4-0: the agent reports 1 x H100-80GB-SXM5 where the cluster file declares 4 x L4 (pool l4): 1 GPU, not 4; GPU 0 is H100-80GB-SXM5, not L4; it takes no work")'
json_ok "$T/out" 'd["mismatch"].startswith("the agent reports 1 x H100")'
TOKEN=$AGENT_TOKEN api POST /api/v1/agent/heartbeat '{"node": "l4-0", "workers": [], "gpus": [{"index": 0}]}'
[ "$STATUS" = 400 ] || fail "a heartbeat with malformed GPUs answered $STATUS"
grep -q 'gpus\[0\]: expected' "$T/out" || fail "reason: $(cat "$T/out")"

# no work lands there
submit '{"name": "small", "team": "search", "gpu_fraction": 0.5, "gpu_models": ["L4"], "command": ["sleep", "1"]}'
SMALL=$ID
sleep 3
field "$SMALL" 'd["state"]' | grep -qx pending || fail "a job was placed on the mismatched node"
grep -q "event=worker_start" "$T/agent-l4-0.log" && fail "the mismatched agent started a worker"
# the agent says why, once, and keeps asking
[ "$(grep -c 'event=heartbeat_refused' "$T/agent-l4-0.log")" = 1 ] ||
    fail "the refusal was not logged exactly once: $(grep -c 'event=heartbeat_refused' "$T/agent-l4-0.log")"
grep 'event=heartbeat_refused' "$T/agent-l4-0.log" | grep -qF "409: node l4-0: $DIFF" ||
    fail "the agent's log lacks the difference: $(grep heartbeat_refused "$T/agent-l4-0.log")"
api GET /api/v1/nodes
SEEN1=$(python3 -c 'import json,sys; print([n for n in json.load(open(sys.argv[1]))["nodes"] if n["name"] == "l4-0"][0]["last_seen_ms"])' "$T/out")
sleep 1
api GET /api/v1/nodes
json_ok "$T/out" '[n for n in d["nodes"] if n["name"] == "l4-0"][0]["last_seen_ms"] > '"$SEEN1"

# the operator's views
run 0 "$GPUORCH" nodes
grep -q '^l4-0 .* mismatched' "$T/out" || fail "gpuorch nodes does not show l4-0 mismatched"
out_has "mismatch: the agent reports 8 x H100-80GB-SXM5"
out_has "1 mismatched"
run 0 "$GPUORCH" nodes -o json
json_ok "$T/out" '[n for n in d["nodes"] if n["name"] == "l4-0"][0]["state"] == "mismatched"'
curl -fsS "$URL/metrics" >"$T/metrics"
grep -q '^gpuorch_nodes{state="mismatched"} 1$' "$T/metrics" || fail "metrics: the mismatched count"
grep -q '^gpuorch_node_mismatched{node="l4-0"} 1$' "$T/metrics" || fail "metrics: the mismatched node"
"$GPUORCH" cancel "$SMALL" >/dev/null

# fix the cluster file (l4-0 declared as eight H100s): the same agent is taken
sed -e '/- name: l4/,/memory_gib/{s/gpu_model: L4/gpu_model: H100-80GB-SXM5/;s/gpus: 4/gpus: 8/}' \
    examples/cluster-demo.yaml >"$T/fixed.yaml"
grep -q "gpus: 8" "$T/fixed.yaml" || fail "sed"
kill -TERM "$SERVER_PID"
wait "$SERVER_PID" || true
CLUSTER=$T/fixed.yaml start_server
wait_node l4-0 'n["state"] == "ready" and "mismatch" not in n'
kill -0 "$WRONG" || fail "the agent did not keep retrying"
i=0
until grep -q 'event=heartbeat_accepted' "$T/agent-l4-0.log"; do
    i=$((i + 1)); [ $i -lt 50 ] || fail "the agent did not log that it was accepted again"; sleep 0.1
done

# back to the real cluster file: fix the agent instead
kill -TERM "$SERVER_PID"
wait "$SERVER_PID" || true
start_server
wait_node l4-0 'n["state"] == "mismatched"'
kill -KILL "$WRONG"
start_agent l4-0 sim:L4:4
wait_node l4-0 'n["state"] == "ready" and "mismatch" not in n'
submit "{\"name\": \"serve\", \"team\": \"search\", \"kind\": \"inference\", \"gpu_fraction\": 0.5, \"gpu_models\": [\"L4\"], \"command\": [\"sh\", \"-c\", \"sleep 300; echo $T/ >/dev/null\"]}"
SERVE=$ID
wait_for "$SERVE" 'd["state"] == "running" and d["placement"][0]["pid"]'
PID=$(field "$SERVE" 'd["placement"][0]["pid"]')

# work already there when the node turns mismatched: it runs on, and is not failed
kill -KILL "$AGENT_l4_0"
AGENT_ARGS="--state-dir $T/agent-wrong" start_agent l4-0 sim:H100-80GB-SXM5:8
WRONG=$AGENT_l4_0
wait_node l4-0 'n["state"] == "mismatched"'
sleep 2
field "$SERVE" 'd["state"], d["run"]' | grep -qx "('running', 1)" || fail "the job on the mismatched node did not keep running: $(head -c 600 "$T/out")"
kill -0 "$PID" || fail "the worker on the mismatched node was stopped"
kill -KILL "$WRONG"
start_agent l4-0 sim:L4:4
wait_node l4-0 'n["state"] == "ready"'
sleep 1
field "$SERVE" 'd["state"], d["run"]' | grep -qx "('running', 1)" || fail "the job did not run on once the node matched: $(head -c 600 "$T/out")"
kill -0 "$PID" || fail "the worker was stopped once the node matched"
echo ok
