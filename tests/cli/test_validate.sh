#!/bin/sh
# test_validate.sh: `gpuorch validate FILE...`: exit 0 when every file is a valid
# cluster spec or job file, 2 on any bad one (with file:line on stderr) while the good
# ones are still reported; with a cluster among the files, a job that could never run
# on it is an error whatever the order of the files.
# Usage: test_validate.sh PATH/TO/gpuorch (run from the repository root).
set -eu

GPUORCH=${1:?usage: $0 PATH/TO/gpuorch}
. "$(dirname "$0")/lib.sh"

# ---- valid files ----

run 0 "$GPUORCH" validate examples/cluster-demo.yaml examples/jobs-demo.yaml examples/jobs-demo.csv
out_has "examples/cluster-demo.yaml: ok: cluster 'demo', 4 nodes, 28 GPUs, 3 pools, 3 teams"
out_has "examples/jobs-demo.yaml: ok: 12 jobs"
out_has "examples/jobs-demo.csv: ok: 8 jobs"
[ ! -s "$T/err" ] || fail "valid files gave messages on stderr"

run 0 "$GPUORCH" validate examples/cluster-large.yaml
run 0 "$GPUORCH" validate examples/cluster-philly.yaml
out_has "ok: cluster 'philly-512'"

# the Alibaba node list, when the shared traces are there
NODES=../shared/traces/alibaba-gpu-2023/openb_node_list_gpu_node.csv
if [ -r "$NODES" ]; then
    run 0 "$GPUORCH" validate "$NODES"
    out_has "1213 nodes, 6212 GPUs"
fi

# ---- bad files ----

printf -- '- name: a\n  gpus: 1\n  colour: red\n' >"$T/unknown.yaml"
run 2 "$GPUORCH" validate "$T/unknown.yaml"
err_has "unknown.yaml:3:"
err_has "colour"

# one bad file among good ones: exit 2, the good ones still reported
run 2 "$GPUORCH" validate examples/jobs-demo.yaml "$T/unknown.yaml" examples/cluster-demo.yaml
out_has "examples/jobs-demo.yaml: ok"
out_has "examples/cluster-demo.yaml: ok"
err_has "unknown.yaml:3:"

printf 'name: c\npools:\n  - name: p\n    tier: owned\n    nodes: 1\n    node: {gpu_modle: L4, gpus: 1}\n' \
    >"$T/cluster-typo.yaml"
run 2 "$GPUORCH" validate "$T/cluster-typo.yaml"
err_has "cluster-typo.yaml:6:"
err_has "gpu_modle"

printf 'name: c\npools:\n  - name: p\n    tier: owned\n    nodes: two\n    node: {gpu_model: L4, gpus: 1}\n' \
    >"$T/cluster-nodes.yaml"
run 2 "$GPUORCH" validate "$T/cluster-nodes.yaml"
err_has "cluster-nodes.yaml:5:"

printf 'id,gpus,kind\na,1,training\nb,2,serving\n' >"$T/bad.csv"
run 2 "$GPUORCH" validate "$T/bad.csv"
err_has "bad.csv:3:"
err_has "kind"

printf -- '- name: a\n  gpus: [1\n' >"$T/broken.yaml"
run 2 "$GPUORCH" validate "$T/broken.yaml"
err_has "broken.yaml:[0-9]"

: >"$T/empty.yaml"
run 2 "$GPUORCH" validate "$T/empty.yaml"
err_has "empty.yaml"

run 2 "$GPUORCH" validate "$T/missing.yaml"
err_has "missing.yaml"

run 2 "$GPUORCH" validate
err_has "usage: gpuorch validate"
run 0 "$GPUORCH" validate --help
out_has "usage: gpuorch validate"

# ---- jobs against a cluster ----

# 8 L4s per worker: the demo's L4 node has 4. Valid alone, an error beside the cluster,
# in either order.
printf -- '- name: big\n  gpus: 8\n  gpu_models: [L4]\n- name: fine\n  gpus: 1\n' >"$T/big.yaml"
run 0 "$GPUORCH" validate "$T/big.yaml"
out_has "ok: 2 jobs"
run 2 "$GPUORCH" validate examples/cluster-demo.yaml "$T/big.yaml"
err_has "job 'big' cannot run on cluster examples/cluster-demo.yaml"
if grep -q "'fine'" "$T/err"; then fail "a job that fits was reported"; fi
run 2 "$GPUORCH" validate "$T/big.yaml" examples/cluster-demo.yaml
err_has "job 'big' cannot run"

printf -- '- name: h200\n  gpus: 1\n  gpu_models: [H200]\n' >"$T/model.yaml"
run 2 "$GPUORCH" validate examples/cluster-demo.yaml "$T/model.yaml"
err_has "job 'h200' cannot run"

printf -- '- name: mig\n  mig: 1g.10gb\n  gpu_models: [L4]\n' >"$T/mig.yaml"
run 2 "$GPUORCH" validate examples/cluster-demo.yaml "$T/mig.yaml"
err_has "job 'mig' cannot run"

# the demo jobs all could run on the demo cluster (llm-pretrain-70b only waits)
run 0 "$GPUORCH" validate examples/jobs-demo.yaml examples/cluster-demo.yaml

echo "ok: test_validate.sh"
