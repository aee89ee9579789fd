#!/bin/sh
# test_agent_inventory.sh: `gpuorch agent --inventory` on the NVML path, through the NVML
# test double (tests/nvml/nvml_double.c, built beside the test binaries: no GPU here):
# the GPUs as the heartbeat would report them (models, memory, MIG instances with their
# UUIDs, NVLink peers from the links NVML reports), the processes with their memory, and
# nothing changed; without a driver, a clear error. Simulated GPUs print the same shape;
# the RDMA devices of a fake sysfs give the NCCL settings a multi-node job would get.
# Usage: test_agent_inventory.sh PATH/TO/gpuorch (run from the repository root).
set -eu

GPUORCH=${1:?usage: $0 PATH/TO/gpuorch}
. "$(dirname "$0")/lib.sh"

DOUBLE=$(dirname "$GPUORCH")/tests/nvml
[ -f "$DOUBLE/libnvidia-ml.so.1" ] || fail "no NVML test double at $DOUBLE (built with the tests)"
cat >"$T/gpus.json" <<'JSON'
{"devices": [
 {"uuid": "GPU-a0", "name": "NVIDIA A100-SXM4-80GB", "memory_mib": 81920,
  "mig_capable": true, "mig_enabled": true,
  "nvlinks": [{"link": 0, "peer": "GPU-a1"}],
  "gpu_instances": [
   {"profile": "3g.40gb", "start": 4, "compute_instances": [{"uuid": "MIG-3g"}],
    "processes": [{"pid": 200, "used_mib": 30000}]},
   {"profile": "1g.10gb", "start": 0, "compute_instances": [{"uuid": "MIG-1g"}]}]},
 {"uuid": "GPU-a1", "name": "NVIDIA A100-SXM4-80GB", "memory_mib": 81920,
  "mig_capable": true, "mig_enabled": false,
  "nvlinks": [{"link": 0, "peer": "GPU-a0"}],
  "processes": [{"pid": 100, "used_mib": 2000}]},
 {"uuid": "GPU-t2", "name": "Tesla T4", "memory_mib": 15360, "ecc_uncorrected": 2,
  "sample": {"gpu_util": 87, "power_mw": 70500, "temperature_c": 61}}]}
JSON
cp "$T/gpus.json" "$T/before.json"
LD_LIBRARY_PATH=$DOUBLE GPUORCH_NVML_DOUBLE=$T/gpus.json run 0 "$GPUORCH" agent --inventory \
    --gpus nvml --node n1
json_ok "$T/out" 'd["node"] == "n1" and d["backend"] == "nvml" and len(d["gpus"]) == 3'
json_ok "$T/out" '[g["uuid"] for g in d["gpus"]] == ["GPU-a0", "GPU-a1", "GPU-t2"]'
json_ok "$T/out" 'd["gpus"][0]["mig_enabled"] and [(m["profile"], m["start"], m["uuid"]) for m in d["gpus"][0]["mig"]] == [("1g.10gb", 0, "MIG-1g"), ("3g.40gb", 4, "MIG-3g")]'
json_ok "$T/out" 'd["gpus"][0]["nvlink_peers"] == [1] and d["gpus"][1]["nvlink_peers"] == [0] and d["gpus"][2]["nvlink_peers"] == []'
json_ok "$T/out" 'd["gpus"][2]["memory_mib"] == 15360 and not d["gpus"][2]["mig_capable"]'
json_ok "$T/out" 'sorted((p["pid"], p["used_mib"]) for p in d["processes"]) == [(100, 2000), (200, 30000)]'
# what the heartbeat would carry of their readings and health
json_ok "$T/out" 'd["gpus"][2]["sample"]["busy_pct"] == 87 and d["gpus"][2]["sample"]["power_w"] == 70.5 and d["gpus"][2]["sample"]["temperature_c"] == 61'
json_ok "$T/out" 'd["gpus"][2]["health"] == "ecc uncorrected 2" and d["gpus"][1]["health"] == "ok"'
cmp -s "$T/gpus.json" "$T/before.json" || fail "the inventory changed the GPUs"

# no driver (where this machine has none of its own): said so, exit 1
if ! /sbin/ldconfig -p 2>/dev/null | grep -q 'libnvidia-ml\.so\.1'; then
    env -u LD_LIBRARY_PATH "$GPUORCH" agent --inventory --gpus nvml --node n1 >"$T/out" 2>"$T/err" &&
        fail "no driver, yet exit 0"
    grep -q "NVML not found (libnvidia-ml.so.1)" "$T/err" || fail "no driver: $(cat "$T/err")"
fi

# the RDMA devices NCCL's settings come from: a fake sysfs with one active InfiniBand port
# and its IPoIB interface; what a multi-node job would get, the fabric inferred
S=$T/sys
mkdir -p "$S/class/infiniband/mlx5_0/ports/1" "$S/class/net/ib0/device" "$S/drivers/mlx5_core"
echo "4: ACTIVE" >"$S/class/infiniband/mlx5_0/ports/1/state"
echo "InfiniBand" >"$S/class/infiniband/mlx5_0/ports/1/link_layer"
echo "400 Gb/sec (4X NDR)" >"$S/class/infiniband/mlx5_0/ports/1/rate"
echo up >"$S/class/net/ib0/operstate"
ln -s "$S/drivers/mlx5_core" "$S/class/net/ib0/device/driver"
run 0 "$GPUORCH" agent --inventory --gpus sim:H100-80GB-SXM5:1 --node n3 --sysfs-root "$S"
json_ok "$T/out" 'd["fabric"]["inferred"] == "infiniband" and d["fabric"]["ports"][0]["device"] == "mlx5_0" and d["fabric"]["ports"][0]["rate_gbps"] == 400'
json_ok "$T/out" '"NCCL_IB_HCA==mlx5_0:1" in d["fabric"]["nccl_env"] and "NCCL_SOCKET_IFNAME==ib0" in d["fabric"]["nccl_env"]'

# simulated GPUs: the same shape
run 0 "$GPUORCH" agent --inventory --gpus sim:H100-80GB-SXM5:2 --node n2
json_ok "$T/out" 'd["backend"] == "sim" and len(d["gpus"]) == 2 and d["processes"] == []'
echo "ok: agent --inventory"
