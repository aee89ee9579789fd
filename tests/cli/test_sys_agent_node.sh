#!/bin/sh
# test_sys_agent_node.sh: an agent token bound to a node acts for that node only. It
# runs h100-0's agent; a heartbeat in the name of a100-0 is refused (403), and so is a
# log upload for a worker that ran on another node, for the current run (the server's
# workers) and for a finished one (the run's start event). Bad requests for such a token
# are refused with a reason.
# Usage: test_sys_agent_node.sh PATH/TO/gpuorch (run from the repository root).
set -eu

GPUORCH=${1:?usage: $0 PATH/TO/gpuorch}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sys.sh"

start_server
H100=$("$GPUORCH" token create --role agent --node h100-0 --name h100-agent) || fail "token create --node"
A100=$("$GPUORCH" token create --role agent --node a100-0 --name a100-agent) || fail "token create --node"

# bad requests
run 2 "$GPUORCH" token create --role agent --node nosuch
err_has "the cluster has no node 'nosuch'"
run 2 "$GPUORCH" token create --role member --team search --node h100-0
err_has "--node binds an agent token to a node"
api POST /api/v1/tokens '{"role": "viewer", "node": "h100-0"}'
[ "$STATUS" = 400 ] || fail "a viewer token bound to a node answered $STATUS"
grep -q "only an agent token is bound to a node" "$T/out" || fail "reason: $(cat "$T/out")"

# a heartbeat for another node
TOKEN=$H100 api POST /api/v1/agent/heartbeat '{"node": "a100-0", "workers": []}'
[ "$STATUS" = 403 ] || fail "h100-0's token heartbeating for a100-0 answered $STATUS"
grep -q "this agent token is for node 'h100-0', not 'a100-0'" "$T/out" || fail "reason: $(cat "$T/out")"

# its own node works end to end
AGENT_TOKEN=$H100 start_agent h100-0 sim:H100-80GB-SXM5:8
wait_nodes 1
submit "{\"name\": \"short\", \"team\": \"search\", \"gpus\": 1, \"command\": [\"sh\", \"-c\", \"echo hello-from-h100; echo $T/ >/dev/null\"]}"
SHORT=$ID
wait_for "$SHORT" 'd["state"] == "succeeded"' 30
i=0
until api GET "/api/v1/jobs/$SHORT/logs?rank=0" && grep -q hello-from-h100 "$T/out"; do
    i=$((i + 1))
    [ $i -lt 100 ] || fail "the log of job $SHORT never arrived: $(cat "$T/out")"
    sleep 0.1
done

# a finished run's log: only from the node it ran on
TOKEN=$A100 api POST "/api/v1/agent/logs/$SHORT/0?run=1&offset=0" 'x'
[ "$STATUS" = 403 ] || fail "a100-0's token uploading h100-0's finished log answered $STATUS"
grep -q "this agent token is for node 'a100-0'" "$T/out" || fail "reason: $(cat "$T/out")"
TOKEN=$H100 api POST "/api/v1/agent/logs/$SHORT/0?run=1&offset=0" 'h'
[ "$STATUS" = 200 ] || fail "h100-0's token uploading its own log answered $STATUS: $(cat "$T/out")"
# ... and only for a rank the job has (it has one worker)
TOKEN=$H100 api POST "/api/v1/agent/logs/$SHORT/7?run=1&offset=0" 'h'
[ "$STATUS" = 404 ] || fail "uploading the log of a rank the job lacks answered $STATUS"
grep -q "no rank 7 of run 1" "$T/out" || fail "reason: $(cat "$T/out")"

# the current run's log: the same
submit "{\"name\": \"long\", \"team\": \"search\", \"gpus\": 1, \"command\": [\"sh\", \"-c\", \"sleep 20; echo $T/ >/dev/null\"]}"
LONG=$ID
wait_for "$LONG" 'd["state"] == "running"' 30
TOKEN=$A100 api POST "/api/v1/agent/logs/$LONG/0?run=1&offset=0" 'x'
[ "$STATUS" = 403 ] || fail "a100-0's token uploading h100-0's running log answered $STATUS"
