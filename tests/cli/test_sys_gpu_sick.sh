#!/bin/sh
# test_sys_gpu_sick.sh: a sick GPU is fenced, end to end. A checkpointing training job
# runs on GPU 3 of h100-0 (simulated GPUs), h100-1 up beside it; then the simulated
# GPU's test hook (<state-dir>/simgpu-sick) says GPU 3 had Xid 79. The agent reports
# it, the server fences h100-0 (event=gpu_fenced), stops the job with a checkpoint and
# requeues it; it resumes on h100-1 from its step. GET /nodes and `gpuorch nodes` show
# the reason, /metrics the gauge, and nothing new lands on h100-0.
# Usage: test_sys_gpu_sick.sh PATH/TO/gpuorch (run from the repository root).
set -eu

GPUORCH=${1:?usage: $0 PATH/TO/gpuorch}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sys.sh"

start_server
start_agent h100-0 sim:H100-80GB-SXM5:8
wait_nodes 1
cat >"$T/idle.sh" <<'SH'
#!/bin/sh
exec sleep 300
SH
chmod +x "$T/idle.sh"

submit_training 1 20s
json_ok "$T/out" '[w["node"] for w in d["placement"]] == ["h100-0"]'
start_agent h100-1 sim:H100-80GB-SXM5:8
wait_nodes 2

echo "3 xid 79" >"$T/agent-h100-0/simgpu-sick"
wait_for "$TRAIN" 'any(e["type"] == "gpu_fenced" for e in d["events"])' 15
json_ok "$T/out" '[e["detail"] for e in d["events"] if e["type"] == "gpu_fenced"][0].startswith("GPU 3 of node h100-0 is sick (xid 79)")'
wait_for "$TRAIN" 'd["state"] == "running" and d["run"] == 2' 40
json_ok "$T/out" '[w["node"] for w in d["placement"]] == ["h100-1"]'
CKPT=$(field "$TRAIN" '[e["detail"] for e in d["events"] if e["type"] == "requeue"][0]')
case $CKPT in "step "*) ;; *) fail "requeued without a checkpoint: $CKPT" ;; esac

LOG0=$T/agent-h100-0.log
grep -q 'event=gpu_sick gpu=3 uuid=GPU-[^ ]* reason="xid 79"' "$LOG0" || fail "agent: $(grep gpu_ "$LOG0")"
grep -q 'event=gpu_fenced node=h100-0 gpu=3 reason="xid 79" jobs_stopped=1' "$T/server.log" ||
    fail "server: $(grep gpu_fenced "$T/server.log")"

api GET /api/v1/nodes
json_ok "$T/out" '[n["sick_gpus"] for n in d["nodes"] if n["name"] == "h100-0"] == [[{"index": 3, "reason": "xid 79"}]]'
json_ok "$T/out" '[n["sick_gpus"] for n in d["nodes"] if n["name"] == "h100-1"] == [[]]'
run 0 "$GPUORCH" nodes
out_has "h100-0"
out_has "GPU 3 sick: xid 79"
curl -fsS "$URL/metrics" >"$T/metrics"
grep -q '^gpuorch_gpu_fenced{node="h100-0",gpu="3",reason="xid 79"} 1$' "$T/metrics" ||
    fail "metric: $(grep gpu_fenced "$T/metrics")"

# nothing new lands on the fenced node, idle as it is
submit "{\"name\": \"next\", \"team\": \"research\", \"gpus\": 1, \"gpu_models\": [\"H100-80GB-SXM5\"],
  \"command\": [\"$T/idle.sh\"]}"
NEXT=$ID
sleep 3
[ "$(field "$NEXT" 'd["state"]')" = pending ] || fail "job $NEXT started on the fenced node: $(head -c 400 "$T/out")"

run 0 "$GPUORCH" cancel "$TRAIN" "$NEXT"
wait_for "$TRAIN" 'd["state"] == "cancelled"' 30
echo ok
