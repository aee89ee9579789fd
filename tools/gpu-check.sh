#!/bin/sh
# tools/gpu-check.sh [PATH/TO/gpuorch]: on a node with NVIDIA GPUs, run the read-only
# parts of the agent against the real driver and say what it saw: `gpuorch agent
# --inventory --gpus nvml` (discovery: models as the catalogue knows them, memory, MIG
# mode and instances with their UUIDs, NVLink peers, the compute processes), beside what
# nvidia-smi says when it is installed, and the RDMA devices and NCCL settings the agent
# would give a multi-node job. Nothing is changed: no MIG layout is applied, no
# worker is started, no server is needed. Exits 1 when the agent cannot read the GPUs.
set -eu
GPUORCH=${1:-build/gpuorch}
[ -x "$GPUORCH" ] || { echo "gpu-check: no gpuorch at $GPUORCH (make build, or give its path)" >&2; exit 1; }
OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT
if ! "$GPUORCH" agent --inventory --gpus nvml >"$OUT"; then
    echo "gpu-check: the agent cannot read this node's GPUs (above); see docs/agent.md" >&2
    exit 1
fi
python3 - "$OUT" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print("gpu-check: %d GPU(s) on %s through NVML" % (len(d["gpus"]), d["node"]))
for g in d["gpus"]:
    print("  GPU %d %s: %s, %d MiB, MIG %s%s" % (
        g["index"], g["uuid"], g["name"], g["memory_mib"],
        "on" if g["mig_enabled"] else ("off" if g["mig_capable"] else "not supported"),
        "" if not g["nvlink_peers"] else ", NVLink to GPU " + ", ".join(map(str, g["nvlink_peers"]))))
    for m in g["mig"]:
        print("    MIG %s at slot %d: %s" % (m["profile"], m["start"], m["uuid"]))
    for k in ("health", "sample"):
        if k in g:
            print("    %s: %s" % (k, json.dumps(g[k])))
print("  %d compute process(es)%s" % (len(d["processes"]), "".join(
    "\n    pid %d: %d MiB" % (p["pid"], p["used_mib"]) for p in d["processes"])))
f = d["fabric"]
print("  fabric: %s; RDMA ports: %s" % (f["inferred"], ", ".join(
    "%s:%d %s%s" % (p["device"], p["port"], p["link"], "" if p["active"] else " (down)")
    for p in f["ports"]) or "none"))
print("  NCCL settings a multi-node job would get (when the pool names no fabric): %s" % (
    " ".join(f["nccl_env"]) or "none"))
PY
if command -v nvidia-smi >/dev/null 2>&1; then
    echo "gpu-check: nvidia-smi says:"
    nvidia-smi --query-gpu=index,uuid,name,memory.total,mig.mode.current --format=csv,noheader | sed 's/^/  /'
    nvidia-smi topo -m 2>/dev/null | sed 's/^/  /' || true
else
    echo "gpu-check: nvidia-smi is not installed; nothing to compare with"
fi
