#!/bin/sh
# test_sys_agent_other_server.sh: an agent's saved workers belong to one server. The
# agent is killed with a job running, the server is killed and its database wiped (a
# reinstalled server, whose job ids start again at 1), and the agent is started again on
# the same state directory. The new server says who it is in the heartbeat reply; the
# agent sees its saved workers are another server's, drops them (killing the one still
# running) with one log line naming both ids, and the new server's job 1 runs and
# succeeds instead of being taken for the old job 1. The next agent sweeps away the
# record of the killed worker's end.
# Usage: test_sys_agent_other_server.sh PATH/TO/gpuorch (run from the repository root).
set -eu

GPUORCH=${1:?usage: $0 PATH/TO/gpuorch}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sys.sh"

start_server
start_agent h100-0 sim:H100-80GB-SXM5:8
wait_nodes 1
submit "{\"name\": \"old\", \"team\": \"search\", \"gpus\": 1, \"command\": [\"sh\", \"-c\", \"sleep 300; : $T/old\"]}"
[ "$ID" = 1 ] || fail "the first job is $ID, not 1"
wait_for 1 'd["state"] == "running" and d["placement"][0]["pid"]'
OLD_PID=$(field 1 'd["placement"][0]["pid"]')
grep -q '"server_id": "[0-9a-f]\{32\}"' "$T/agent-h100-0/workers.json" ||
    fail "the worker table names no server: $(head -c 300 "$T/agent-h100-0/workers.json")"
FIRST=$(sed -n 's/.*"server_id": "\([0-9a-f]*\)".*/\1/p' "$T/agent-h100-0/workers.json")

kill -KILL "$AGENT_h100_0" "$SERVER_PID"
# reaped, not only a zombie: the threads of a killed server hold its port until then
wait "$SERVER_PID" 2>/dev/null || true
rm -rf "$T/var"
unset AGENT_TOKEN
start_server
submit "{\"name\": \"new\", \"team\": \"search\", \"gpus\": 1, \"command\": [\"sh\", \"-c\", \"echo new job; : $T/new\"]}"
[ "$ID" = 1 ] || fail "the new server's first job is $ID, not 1"
start_agent h100-0 sim:H100-80GB-SXM5:8
wait_for 1 'd["state"] == "succeeded"' 30
json_ok "$T/out" 'd["exit_code"] == 0 and d["run"] == 1 and d["name"] == "new"'
i=0
while kill -0 "$OLD_PID" 2>/dev/null; do
    i=$((i + 1)); [ $i -lt 50 ] || fail "the old server's worker was not stopped"; sleep 0.1
done
[ "$(grep -c 'event=server_changed' "$T/agent-h100-0.log")" = 1 ] ||
    fail "not one server_changed line: $(grep 'event=server' "$T/agent-h100-0.log")"
grep 'event=server_changed' "$T/agent-h100-0.log" | grep -q "was=$FIRST .*workers_dropped=1 workers_killed=1" ||
    fail "the log line does not name the old server: $(grep 'event=server_changed' "$T/agent-h100-0.log")"
grep -q "event=server_changed server_id=[0-9a-f]\{32\} was=$FIRST" "$T/agent-h100-0.log" ||
    fail "the log line does not name the new server"

# the killed worker's keeper recorded its end, which no one will read: the next agent
# sweeps it away
# (the new job 1's own record goes when the server lets the agent forget it)
i=0
until grep -q 'event=worker_forget job=1 run=1 rank=0' "$T/agent-h100-0.log"; do
    i=$((i + 1)); [ $i -lt 100 ] || fail "the new job 1 was not forgotten"; sleep 0.1
done
[ "$(ls "$T/agent-h100-0/exits" | grep -c '^1-1-0\.')" = 1 ] ||
    fail "expected only the old worker's record: $(ls "$T/agent-h100-0/exits")"
AGENT_PID=$AGENT_h100_0
kill -HUP "$AGENT_PID"
wait "$AGENT_PID" 2>/dev/null || true
start_agent h100-0 sim:H100-80GB-SXM5:8
i=0
until grep -q 'event=exits_swept .* records=[1-9]' "$T/agent-h100-0.log"; do
    i=$((i + 1)); [ $i -lt 100 ] || fail "the next agent did not sweep the old record"; sleep 0.1
done
[ -z "$(ls "$T/agent-h100-0/exits")" ] || fail "records left: $(ls "$T/agent-h100-0/exits")"
echo ok
