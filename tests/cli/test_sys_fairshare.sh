#!/bin/sh
# test_sys_fairshare.sh: fair share survives a restart of the server. search runs all
# eight GPUs of h100-0 for 3 s and finishes; the server is killed and started again.
# platform then holds 2 GPUs inside its guarantee (nothing may preempt it), so two
# 8-GPU jobs wait: search's, submitted first, and research's. research has used nothing
# and search has, so research's job comes first. (Before the server rebuilt the decayed
# usage from the store, a restart forgot it, and the older job, search's, came first.)
# Usage: test_sys_fairshare.sh PATH/TO/gpuorch (run from the repository root).
set -eu

GPUORCH=${1:?usage: $0 PATH/TO/gpuorch}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sys.sh"

start_server
start_agent h100-0 sim:H100-80GB-SXM5:8
wait_nodes 1
submit '{"name": "used", "team": "search", "gpus": 8, "command": ["sleep", "3"]}'
USED=$ID
wait_for "$USED" 'd["state"] == "succeeded"' 60

kill -KILL "$SERVER_PID"
wait "$SERVER_PID" 2>/dev/null || true
start_server
wait_nodes 1
submit "{\"name\": \"hold\", \"team\": \"platform\", \"gpus\": 2, \"command\": [\"sh\", \"-c\", \"sleep 20; echo $T/ >/dev/null\"]}"
wait_for "$ID" 'd["state"] == "running"' 30
submit '{"name": "search-next", "team": "search", "gpus": 8, "command": ["true"]}'
SEARCH=$ID
submit '{"name": "research-next", "team": "research", "gpus": 8, "command": ["true"]}'
RESEARCH=$ID
wait_for "$SEARCH" 'd["state"] == "pending" and d["position"] == 2' 10
wait_for "$RESEARCH" 'd["state"] == "pending" and d["position"] == 1' 10
