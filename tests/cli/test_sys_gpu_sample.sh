#!/bin/sh
# test_sys_gpu_sample.sh: measured utilisation end to end. An agent with four simulated
# L4s reports its GPUs' readings with each heartbeat (the simulated figures follow what
# its workers hold: a whole GPU held reads 100 %, 300 W, 75 C); /metrics then carries
# them under DCGM's exporter names and labels, for that node only, and GET
# /api/v1/utilization has the measured busy GPU-equivalents beside the allocated ones,
# and GET /usage a team's measured busy GPU-hours beside its held ones.
# A heartbeat with readings of the wrong type or out of range is still taken, those
# readings left out.
# Usage: test_sys_gpu_sample.sh PATH/TO/gpuorch (run from the repository root).
set -eu

GPUORCH=${1:?usage: $0 PATH/TO/gpuorch}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sys.sh"

start_server
start_agent l4-0 sim:L4:4
wait_node l4-0 'n["state"] == "ready"'

submit '{"name": "busy", "team": "search", "gpus": 1, "gpu_models": ["L4"], "command": ["sleep", "120"]}'
BUSY=$ID
wait_for "$BUSY" 'd["state"] == "running"'

# metric NAME NODE: the lines of NAME for NODE's GPUs in $T/metrics
metric() {
    grep "^$1{gpu=\"[0-9]*\",UUID=\"GPU-[^\"]*\",modelName=\"[^\"]*\",Hostname=\"$2\"} " "$T/metrics" || true
}
i=0
until curl -fsS "$URL/metrics" >"$T/metrics" && [ "$(metric DCGM_FI_DEV_GPU_UTIL l4-0 | grep -c ' 100$')" = 1 ]; do
    i=$((i + 1)); [ $i -lt 100 ] || fail "no GPU of l4-0 reads 100 %: $(grep DCGM_ "$T/metrics")"; sleep 0.1
done
[ "$(metric DCGM_FI_DEV_GPU_UTIL l4-0 | wc -l)" = 4 ] || fail "not four GPUs: $(grep DCGM_ "$T/metrics")"
[ "$(metric DCGM_FI_DEV_GPU_UTIL l4-0 | grep -c ' 0$')" = 3 ] || fail "the idle GPUs do not read 0"
[ "$(metric DCGM_FI_DEV_POWER_USAGE l4-0 | grep -c ' 300$')" = 1 ] || fail "power: $(grep DCGM_FI_DEV_POWER "$T/metrics")"
[ "$(metric DCGM_FI_DEV_POWER_USAGE l4-0 | grep -c ' 60$')" = 3 ] || fail "idle power"
[ "$(metric DCGM_FI_DEV_GPU_TEMP l4-0 | grep -c ' 75$')" = 1 ] || fail "temperature: $(grep DCGM_FI_DEV_GPU_TEMP "$T/metrics")"
[ "$(metric DCGM_FI_DEV_FB_USED l4-0 | grep -c ' 0$')" = 3 ] || fail "memory: $(grep DCGM_FI_DEV_FB_USED "$T/metrics")"
metric DCGM_FI_DEV_FB_USED l4-0 | grep -q ' [1-9][0-9]*$' || fail "the busy GPU's memory"
grep -q '^# TYPE DCGM_FI_DEV_GPU_UTIL gauge$' "$T/metrics" || fail "no TYPE line"
# the other nodes' agents never reported: nothing is said of their GPUs
grep -q 'Hostname="h100-0"' "$T/metrics" && fail "readings for a node without an agent"

# /utilization: within a sample period (10 s) a sample with the readings in it
i=0
until api GET '/api/v1/utilization?minutes=5' &&
    python3 -c 'import json,sys; d = json.load(open(sys.argv[1])); m = [m for m in d["models"] if m["model"] == "L4"][0]; sys.exit(0 if m["measured"] and m["measured"][-1] is not None else 1)' "$T/out"; do
    i=$((i + 1)); [ $i -lt 250 ] || fail "no measured sample: $(cat "$T/out")"; sleep 0.1
done
json_ok "$T/out" '[m for m in d["models"] if m["model"] == "L4"][0]["measured"][-1] == 1'
json_ok "$T/out" '[m for m in d["models"] if m["model"] == "L4"][0]["measured_gpus"][-1] == 4'
json_ok "$T/out" '[m for m in d["models"] if m["model"] == "L4"][0]["allocated"][-1] == 1'
json_ok "$T/out" '[m for m in d["models"] if m["model"] == "L4"][0]["memory_used_mib"][-1] > 0'
json_ok "$T/out" 'all(len(m["measured"]) == len(d["t_ms"]) == len(m["measured_gpus"]) == len(m["memory_used_mib"]) for m in d["models"])'
# no agent on the H100s: unknown, not idle
json_ok "$T/out" 'all(v is None for v in [m for m in d["models"] if m["model"] == "H100-80GB-SXM5"][0]["measured"])'

# bad readings are left out, the heartbeat is taken
python3 - "$T/hb.json" <<'PY'
import json, sys
gpus = [{"index": i, "uuid": "GPU-h1-%d" % i, "name": "NVIDIA H100 80GB HBM3", "memory_mib": 81559,
         "mig_capable": True, "mig_enabled": False, "mig": [], "nvlink_peers": []} for i in range(8)]
gpus[0]["sample"] = {"busy_pct": "x", "memory_used_mib": 1234, "power_w": 700.5, "temperature_c": 65}
gpus[1]["sample"] = {"busy_pct": 150, "memory_used_mib": -5}
gpus[2]["sample"] = "warm"
json.dump({"node": "h100-1", "boot_id": "b", "workers": [], "gpus": gpus}, open(sys.argv[1], "w"))
PY
TOKEN=$AGENT_TOKEN api POST /api/v1/agent/heartbeat "$(cat "$T/hb.json")"
[ "$STATUS" = 200 ] || fail "a heartbeat with bad readings answered $STATUS: $(cat "$T/out")"
curl -fsS "$URL/metrics" >"$T/metrics"
[ -z "$(metric DCGM_FI_DEV_GPU_UTIL h100-1)" ] || fail "a bad busy share was taken"
[ "$(metric DCGM_FI_DEV_FB_USED h100-1)" = 'DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-h1-0",modelName="NVIDIA H100 80GB HBM3",Hostname="h100-1"} 1234' ] ||
    fail "memory of h100-1: $(grep 'h100-1' "$T/metrics")"
metric DCGM_FI_DEV_POWER_USAGE h100-1 | grep -q '} 700.5$' || fail "power of h100-1"
metric DCGM_FI_DEV_GPU_TEMP h100-1 | grep -q '} 65$' || fail "temperature of h100-1"
[ "$(grep -c 'Hostname="h100-1"' "$T/metrics")" = 3 ] || fail "readings of h100-1: $(grep 'h100-1' "$T/metrics")"

# the chargeback: the busy job's held GPU-hours beside what its GPU measured (the
# simulated L4 reads 100 % while held): measured and busy about all of them
sleep 2
api GET '/api/v1/usage?group_by=team&include_idle=false'
json_ok "$T/out" '[r for r in d["rows"] if r["team"] == "search"][0]["measured_gpu_hours"] > 0'
json_ok "$T/out" 'abs(d["total"]["busy_gpu_hours"] - d["total"]["measured_gpu_hours"]) < 1e-5'
json_ok "$T/out" 'd["total"]["measured_gpu_hours"] <= d["total"]["gpu_hours"] + 1e-6'
json_ok "$T/out" 'd["total"]["measured_gpu_hours"] > 0.8 * d["total"]["gpu_hours"] - 2.0 / 3600'
"$GPUORCH" cancel "$BUSY" >/dev/null
# and once the run is over, the stored segment keeps it
wait_for "$BUSY" 'd["state"] == "cancelled"'
api GET '/api/v1/usage?group_by=team&include_idle=false'
json_ok "$T/out" 'd["total"]["busy_gpu_hours"] > 0 and abs(d["total"]["busy_gpu_hours"] - d["total"]["measured_gpu_hours"]) < 1e-5'
echo "test_sys_gpu_sample: ok"
