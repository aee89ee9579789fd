#!/bin/sh
# test_sys_reasons.sh: the reasons a waiting job is given by the running system name the
# real cause. On the demo cluster with only h100-0's agent up: a gang that needs both
# H100 nodes is told that h100-1 has not registered (not that the cluster lacks free
# GPUs); a MIG job is told that a100-0, the one node it may use, has not registered.
# Once a100-0's agent has come and gone, a new MIG job is told the node is lost. A job
# of 8 GPUs behind running work with an estimate is told it holds a reservation of
# h100-0, and `gpuorch queue -w` shows the reasons whole.
# Usage: test_sys_reasons.sh PATH/TO/gpuorch (run from the repository root).
set -eu

GPUORCH=${1:?usage: $0 PATH/TO/gpuorch}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sys.sh"

start_server
start_agent h100-0 sim:H100-80GB-SXM5:8
wait_nodes 1

# reason_has ID PHRASE: within 10 s, the pending job's reason holds the phrase
reason_has() {
    wait_for "$1" "d['state'] == 'pending' and d['reason'] and '$2' in d['reason']" 10
}

submit '{"name": "gang", "team": "research", "workers": 2, "gpus": 8, "gpu_models": ["H100-80GB-SXM5"], "command": ["sleep", "600"]}'
GANG=$ID
reason_has "$GANG" "the cluster does not have 16 free GPUs of model H100-80GB-SXM5 for 2 workers of 8 (room for 1 of 2 workers): of the 2 nodes it may use, h100-1 has not registered (no agent has reported for it); it can start when h100-1 is ready"

submit '{"name": "slice", "team": "search", "mig": "1g.10gb", "command": ["sleep", "600"]}'
SLICE=$ID
reason_has "$SLICE" "no node has a free 1g.10gb MIG slice of model A100-80GB: the one node it may use, a100-0, has not registered (no agent has reported for it); it can start when a100-0 is ready"

# the A100's agent comes and goes: the slice runs, then its node is lost
start_agent a100-0 sim:A100-80GB:8
wait_for "$SLICE" "d['state'] == 'running'" 30
kill -KILL "$AGENT_a100_0"
submit '{"name": "slice2", "team": "search", "mig": "1g.10gb", "command": ["sleep", "600"]}'
reason_has "$ID" "the one node it may use, a100-0, is lost (its agent stopped answering); it can start when a100-0 is ready"

# h100-0 runs a job that says when it ends; the next 8-GPU job reserves the node
run 0 "$GPUORCH" cancel "$GANG"
submit '{"name": "first", "team": "research", "gpus": 8, "gpu_models": ["H100-80GB-SXM5"], "duration_estimate": "1h", "command": ["sleep", "600"]}'
wait_for "$ID" "d['state'] == 'running'" 30
submit '{"name": "next", "team": "research", "gpus": 8, "gpu_models": ["H100-80GB-SXM5"], "command": ["sleep", "600"]}'
NEXT=$ID
reason_has "$NEXT" "it holds a reservation: h100-0 is kept for it and should be free in about 60 min, when the work there ends by its estimates"
run 0 "$GPUORCH" queue -w
out_has "it holds a reservation: h100-0 is kept for it"
out_has "a100-0, is lost (its agent stopped answering)"

echo "ok: test_sys_reasons.sh"
