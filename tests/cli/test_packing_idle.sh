#!/bin/sh
# test_packing_idle.sh: tools/packing_idle.py on a packing run of a small Alibaba node
# and pod list written here. The tool rebuilds the final state from the event log alone,
# so the allocation it prints must be the simulator's own at the last arrived demand;
# its sections are there; a malformed event line is an error naming the line.
# Usage: test_packing_idle.sh PATH/TO/gpuorch (run from the repository root).
set -eu

GPUORCH=${1:?usage: $0 PATH/TO/gpuorch}
. "$(dirname "$0")/lib.sh"
TOOL=tools/packing_idle.py

cat >"$T/nodes.csv" <<'CSV'
sn,cpu_milli,memory_mib,gpu,model
n0,16000,65536,2,V100M16
n1,8000,32768,4,T4
n2,32000,131072,8,V100M32
CSV
cat >"$T/pods.csv" <<'CSV'
name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec
p0,4000,8192,1,1000,
p1,2000,4096,1,600,
p2,2000,4096,1,600,
p3,1000,2048,1,300,
p4,6000,16384,2,1000,
p5,1000,2048,0,0,
p6,2000,4096,1,810,
CSV

run 0 "$GPUORCH" sim --cluster "$T/nodes.csv" --trace "$T/pods.csv" --mode packing --policy gpuorch \
    --seed 42 -o json --events "$T/ev.jsonl"
cp "$T/out" "$T/sim.json"
run 0 python3 "$TOOL" "$T/nodes.csv" "$T/pods.csv" "$T/ev.jsonl"
out_has "^GPUs 14, idle"
out_has "idle GPUs by kind and cores left on the node:"
out_has "partly used GPUs by what they hold"
out_has "pods that found no room: "
# the allocation the tool rebuilt is the simulator's at 130%
python3 -c '
import json, re, sys
a = json.load(open(sys.argv[1]))["results"][0]["allocation_pct"]
sim = [a[k] for k in sorted(a, key=int) if a[k] is not None][-1]  # the last level reached
got = float(re.search(r"allocated ([0-9.]+)%", open(sys.argv[2]).read()).group(1))
if abs(sim - got) > 0.01:
    sys.exit("tool says %.2f%%, simulator %.2f%%" % (got, sim))
' "$T/sim.json" "$T/out" || fail "packing_idle.py disagrees with the simulator"

# bad input: a broken event line, a missing file, no arguments
head -n 2 "$T/ev.jsonl" >"$T/bad.jsonl"
echo '{"type": "start", "job": "p0"' >>"$T/bad.jsonl"
run 1 python3 "$TOOL" "$T/nodes.csv" "$T/pods.csv" "$T/bad.jsonl"
err_has "bad.jsonl:3: bad event"
run 1 python3 "$TOOL" "$T/nodes.csv" "$T/pods.csv" "$T/missing.jsonl"
err_has "missing.jsonl"
run 1 python3 "$TOOL"
err_has "usage: packing_idle.py"
echo "ok"
