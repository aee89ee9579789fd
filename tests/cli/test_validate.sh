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
# in either order, in the words the server would answer a submission with.
printf -- '- name: big\n  team: search\n  gpus: 8\n  gpu_models: [L4]\n  command: [x]\n- name: fine\n  team: search\n  gpus: 1\n  command: [x]\n' >"$T/big.yaml"
run 0 "$GPUORCH" validate "$T/big.yaml"
out_has "ok: 2 jobs"
run 2 "$GPUORCH" validate examples/cluster-demo.yaml "$T/big.yaml"
err_has "big.yaml: job big cannot run on cluster demo: asks for 8 GPUs per worker; no node of an allowed model has that many"
if grep -q "job fine" "$T/err"; then fail "a job that fits was reported"; fi
run 2 "$GPUORCH" validate "$T/big.yaml" examples/cluster-demo.yaml
err_has "job big cannot run"

printf -- '- name: h200\n  team: search\n  gpus: 1\n  gpu_models: [H200]\n  command: [x]\n' >"$T/model.yaml"
run 2 "$GPUORCH" validate examples/cluster-demo.yaml "$T/model.yaml"
err_has "job h200 cannot run"

printf -- '- name: mig\n  team: search\n  mig: 1g.10gb\n  gpu_models: [L4]\n  command: [x]\n' >"$T/mig.yaml"
run 2 "$GPUORCH" validate examples/cluster-demo.yaml "$T/mig.yaml"
err_has "job mig cannot run"

# what submit refuses before it asks the cluster: no command, no team, a project the team
# does not have (the CSV job table is for plan and sim: it has no commands)
printf -- '- name: nocmd\n  team: search\n  gpus: 1\n' >"$T/nocmd.yaml"
run 2 "$GPUORCH" validate examples/cluster-demo.yaml "$T/nocmd.yaml"
err_has "nocmd.yaml: job nocmd: field 'command' is required: the agent runs it"
printf -- '- name: noteam\n  gpus: 1\n  command: [x]\n' >"$T/noteam.yaml"
run 2 "$GPUORCH" validate examples/cluster-demo.yaml "$T/noteam.yaml"
err_has "job noteam: field 'team' is required: the cluster has teams"
printf -- '- name: proj\n  team: search\n  project: vision\n  gpus: 1\n  command: [x]\n' >"$T/proj.yaml"
run 2 "$GPUORCH" validate examples/cluster-demo.yaml "$T/proj.yaml"
err_has "job proj: field 'project': team 'search' has no project 'vision' (its projects: ranking, retrieval)"
# alone, a job file says nothing of commands, teams or capacity
run 0 "$GPUORCH" validate "$T/nocmd.yaml" "$T/noteam.yaml"

# what could never run: a gang bigger than the cluster, CPUs no node has, MIG where no
# pool may be partitioned, a gang over its team's burst limit
printf -- '- name: huge\n  team: research\n  workers: 10000\n  gpus: 8\n  command: [x]\n' >"$T/huge.yaml"
run 2 "$GPUORCH" validate examples/cluster-demo.yaml "$T/huge.yaml"
err_has "job huge cannot run on cluster demo: its 10000 workers could never all run at once: every node it may use together holds at most 3 of them"
printf -- '- name: cpus\n  team: search\n  gpus: 1\n  cpus: 5000\n  command: [x]\n' >"$T/cpus.yaml"
run 2 "$GPUORCH" validate examples/cluster-demo.yaml "$T/cpus.yaml"
err_has "job cpus cannot run on cluster demo: it asks for 5000 CPUs per worker, and a node it may use has at most 192"
printf -- '- name: migh\n  team: search\n  mig: 1g.10gb\n  gpu_models: [H100]\n  command: [x]\n' >"$T/migh.yaml"
run 2 "$GPUORCH" validate examples/cluster-demo.yaml "$T/migh.yaml"
err_has "none of the pools it may use lets its GPUs be partitioned"
printf -- '- name: gang\n  team: platform\n  workers: 2\n  gpus: 4\n  command: [x]\n' >"$T/gang.yaml"
run 2 "$GPUORCH" validate examples/cluster-demo.yaml "$T/gang.yaml"
err_has "job gang cannot run on cluster demo: it would hold 8 GPU-equivalents, more than team 'platform' may ever hold (its burst limit is 4)"

# the demo jobs all could run on the demo cluster (llm-pretrain-70b only waits), the CSV
# table too
run 0 "$GPUORCH" validate examples/jobs-demo.yaml examples/jobs-demo.csv examples/cluster-demo.yaml

# hostile YAML is refused before it is built: invalid bytes after a '%' (libfyaml 0.7.12
# loops for ever on them), directives, and aliases that expand without end
printf '%%\377' >"$T/hang.yaml"
run 2 timeout 10 "$GPUORCH" validate "$T/hang.yaml"
err_has "not UTF-8 text"
printf '%%YAML 1.2\n---\nname: x\nteam: t\ngpus: 1\ncommand: [true]\n' >"$T/directive.yaml"
run 2 "$GPUORCH" validate "$T/directive.yaml"
err_has "directive.yaml:1: a YAML directive"
python3 -c '
lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
for i in range(1, 10):
    lines.append("a%d: &a%d [%s]" % (i, i, ", ".join(["*a%d" % (i - 1)] * 10)))
print("\n".join(lines))' >"$T/laughs.yaml"
run 2 timeout 10 "$GPUORCH" validate "$T/laughs.yaml"
err_has "expand to more than"
# blanks after a flow collection cost libfyaml the square of their run
python3 -c 'print("{\"name\": \"x\", \"team\": \"t\", \"gpus\": 1, \"command\": [\"true\"]}" + " " * 100000)' \
    >"$T/blanks.json"
run 2 timeout 10 "$GPUORCH" validate "$T/blanks.json"
err_has "blanks.json:1: more than 256 spaces or tabs in a row"
# and each key of a mapping against every other: 10,000 took 18 s
python3 -c '
print("name: x\nteam: t\ngpus: 1\ncommand: [\"true\"]\nenv:")
for i in range(10000):
    print("  K%d: v" % i)' >"$T/env.yaml"
run 2 timeout 10 "$GPUORCH" validate "$T/env.yaml"
err_has "a mapping of more than 512 keys"
# libfyaml 0.7.12 crashed formatting the source line of some syntax errors (tabs, an
# escape character, a long line: SIGSEGV in validate and in the server); found by
# tests/fuzz/fuzz_job_body. Its escape character is now refused before libfyaml reads
# it (YAML allows no control characters; a NUL crashed libfyaml freeing its parser);
# without them it is the syntax error it was
run 2 "$GPUORCH" validate tests/fuzz/regressions/job_body/diag-source-line.yaml
err_has "diag-source-line.yaml:1: a control character (byte 0x1b): YAML allows none"
python3 -c 'import sys; d = open(sys.argv[1], "rb").read(); sys.stdout.buffer.write(bytes(c if c >= 32 or c in (9, 10) else 101 for c in d))' \
    tests/fuzz/regressions/job_body/diag-source-line.yaml >"$T/diag.yaml"
run 2 "$GPUORCH" validate "$T/diag.yaml"
err_has "invalid YAML"

echo "ok: test_validate.sh"
