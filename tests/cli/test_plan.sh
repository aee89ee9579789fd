#!/bin/sh
# test_plan.sh: `gpuorch plan` as users run it, on the example files. Checks the exit
# codes (0 even with pending jobs, 2 on bad input with file:line on stderr), that the
# JSON parses and has its four sections, that the pending job says why, that the tiers
# keep work an interruption would lose off spot nodes that are up, and that a
# plan's JSON fed back as --state places nothing twice: jobs already placed keep their
# place, the rest go where nothing else is.
# Usage: test_plan.sh PATH/TO/gpuorch (run from the repository root).
set -eu

GPUORCH=${1:?usage: $0 PATH/TO/gpuorch}
. "$(dirname "$0")/lib.sh"
CLUSTER=examples/cluster-demo.yaml
JOBS=examples/jobs-demo.yaml

# No GPU, MIG slot or share is given twice, and no worker of a job appears twice.
no_double_allocation() {
    python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
kinds, shares, slots, workers = {}, {}, set(), set()
for p in d["placements"]:
    w = (p["job"], p["worker"])
    if w in workers:
        sys.exit("worker placed twice: %s" % (w,))
    workers.add(w)
    for g in p["gpus"]:
        key = (p["node"], g["index"])
        if "mig" in g:
            kind = "mig"
            slot = key + (g["mig"]["start"],)
            if slot in slots:
                sys.exit("MIG slot given twice: %s" % (slot,))
            slots.add(slot)
        elif "fraction" in g:
            kind = "share"
            shares[key] = shares.get(key, 0) + g["fraction"]
            if shares[key] > 1.0005:
                sys.exit("GPU shared past 1: %s" % (key,))
        else:
            kind = "whole"
            if key in kinds:
                sys.exit("whole GPU given twice: %s" % (key,))
        if key in kinds and kinds[key] != kind:
            sys.exit("GPU %s both %s and %s" % (key, kinds[key], kind))
        kinds[key] = kind
' "$1" || fail "$1: double allocation"
}

# ---- the example plan ----

run 0 "$GPUORCH" plan --cluster $CLUSTER --jobs $JOBS -o json
cp "$T/out" "$T/a.json"
json_ok "$T/a.json" 'all(k in d for k in ("placements", "pending", "mig_reconfigurations", "summary"))'
json_ok "$T/a.json" 'd["policy"] == "gpuorch"'
json_ok "$T/a.json" '[p["job"] for p in d["pending"]] == ["llm-pretrain-70b"]'
json_ok "$T/a.json" 'len(d["pending"][0]["reason"].strip()) > 0'
json_ok "$T/a.json" 'd["summary"]["jobs_pending"] == 1 and d["summary"]["gpus"] == 28'
json_ok "$T/a.json" 'd["summary"]["workers_placed"] == len(d["placements"])'
# every job but the pending one is placed, with all its workers (llama-serve and
# vision-train have 2)
json_ok "$T/a.json" 'sorted(set(p["job"] for p in d["placements"])) == sorted(["llama-serve", "ranker-mig", "embed-small", "summarizer", "notebook-alice", "bert-finetune", "vision-train", "llm-sft", "data-prep", "eval-sweep", "ci-smoke"])'
json_ok "$T/a.json" 'sorted(p["worker"] for p in d["placements"] if p["job"] == "vision-train") == [0, 1]'
# the MIG job needs a layout change on the A100 node
json_ok "$T/a.json" 'len(d["mig_reconfigurations"]) >= 1 and all(m["node"] == "a100-0" for m in d["mig_reconfigurations"])'
no_double_allocation "$T/a.json"

# the table says the same in words
run 0 "$GPUORCH" plan --cluster $CLUSTER --jobs $JOBS
grep -q 'Placements (policy gpuorch)' "$T/out" || fail "table lacks its title"
grep -q '^Pending:' "$T/out" || fail "table lacks the pending section"
grep -q 'llm-pretrain-70b' "$T/out" || fail "table lacks the pending job"

# other policies, and the CSV job file
for p in first-fit best-fit k8s-default fgd random; do
    run 0 "$GPUORCH" plan --cluster $CLUSTER --jobs $JOBS --policy $p -o json --seed 3
    cp "$T/out" "$T/p.json"
    json_ok "$T/p.json" "d['policy'] == '$p'"
    no_double_allocation "$T/p.json"
done
run 0 "$GPUORCH" plan --cluster $CLUSTER --jobs examples/jobs-demo.csv -o json
cp "$T/out" "$T/csv.json"
no_double_allocation "$T/csv.json"

# ---- tiers: spot only for work an interruption cannot lose ----

# The spot node is up and met first; reserved is met last. Whatever the policy, work
# that is not preemptible or does not checkpoint never lands on spot; the model servers
# (production, and high inference that cannot be preempted) take reserved capacity; a
# job that asks for spot alone but cannot go there is pending with the reason; one that
# asks for spot or on-demand gets on-demand; checkpointing preemptible work may use spot.
for p in first-fit gpuorch best-fit fgd k8s-default; do
    run 0 "$GPUORCH" plan --cluster tests/cli/data/cluster-spot-up.yaml \
        --jobs tests/cli/data/jobs-tiers.yaml --policy $p -o json
    cp "$T/out" "$T/tiers.json"
    json_ok "$T/tiers.json" 'not [p["job"] for p in d["placements"] if p["node"] == "spot-0" and p["job"] != "ckpt-train"]'
    json_ok "$T/tiers.json" '{p["job"]: p["node"] for p in d["placements"] if p["job"].startswith("serve")} == {"serve": "reserved-0", "serve-high": "reserved-0"}'
    json_ok "$T/tiers.json" '[p["node"] for p in d["placements"] if p["job"] == "spot-or-od"] == ["od-0"]'
    json_ok "$T/tiers.json" '[p["job"] for p in d["pending"]] == ["spot-only"]'
    json_ok "$T/tiers.json" '"not preemptible may not run on spot capacity" in d["pending"][0]["reason"]'
    no_double_allocation "$T/tiers.json"
done
# first-fit meets spot-0 first: the checkpointing job takes it
run 0 "$GPUORCH" plan --cluster tests/cli/data/cluster-spot-up.yaml \
    --jobs tests/cli/data/jobs-tiers.yaml --policy first-fit -o json
json_ok "$T/out" '[p["node"] for p in d["placements"] if p["job"] == "ckpt-train"] == ["spot-0"]'
# the table says why in words
run 0 "$GPUORCH" plan --cluster tests/cli/data/cluster-spot-up.yaml --jobs tests/cli/data/jobs-tiers.yaml
out_has "spot-only  work that is not preemptible may not run on spot capacity"
out_has "make it preemptible with a checkpoint, or allow another tier"

# ---- --state round trip ----

# the whole plan as state: nothing new is placed, nothing is placed twice
run 0 "$GPUORCH" plan --cluster $CLUSTER --jobs $JOBS -o json --state "$T/a.json"
cp "$T/out" "$T/b.json"
json_ok "$T/b.json" 'd["placements"] == json.load(open(sys.argv[1].replace("b.json", "a.json")))["placements"]'
json_ok "$T/b.json" 'd["summary"] == json.load(open(sys.argv[1].replace("b.json", "a.json")))["summary"]'
json_ok "$T/b.json" '[p["job"] for p in d["pending"]] == ["llm-pretrain-70b"]'
no_double_allocation "$T/b.json"

# part of the plan as state: the jobs in it keep their places, the others are placed
# once each, around them
python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
keep = ("llama-serve", "ranker-mig", "llm-sft", "notebook-alice")
d["placements"] = [p for p in d["placements"] if p["job"] in keep]
json.dump(d, open(sys.argv[2], "w"))
' "$T/a.json" "$T/part.json"
run 0 "$GPUORCH" plan --cluster $CLUSTER --jobs $JOBS -o json --state "$T/part.json"
cp "$T/out" "$T/c.json"
no_double_allocation "$T/c.json"
json_ok "$T/c.json" '[p for p in d["placements"] if p["job"] in ("llama-serve", "ranker-mig", "llm-sft", "notebook-alice")] == json.load(open(sys.argv[1].replace("c.json", "part.json")))["placements"]'
json_ok "$T/c.json" 'len(set(p["job"] for p in d["placements"])) == 11'
json_ok "$T/c.json" '[p["job"] for p in d["pending"]] == ["llm-pretrain-70b"]'
# each worker placed once, as in the fresh plan (where the others land, and so the
# GPU-equivalents they hold, may differ: a job asking by memory may take a MIG slice
# there and an MPS share here)
json_ok "$T/c.json" 'sorted((p["job"], p["worker"]) for p in d["placements"]) == sorted((p["job"], p["worker"]) for p in json.load(open(sys.argv[1].replace("c.json", "a.json")))["placements"])'

# a state naming a node the cluster lacks
sed 's/"h100-0"/"h100-9"/' "$T/a.json" >"$T/badnode.json"
run 2 "$GPUORCH" plan --cluster $CLUSTER --jobs $JOBS --seed abc
err_has "seed must be a whole number, not 'abc'"
run 2 "$GPUORCH" plan --cluster $CLUSTER --jobs $JOBS --state "$T/badnode.json"
err_has "badnode.json"
err_has "node"
[ ! -s "$T/out" ] || fail "a refused state still printed a plan"

# a state that gives one GPU twice
python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
whole = [p for p in d["placements"] if p["job"] == "llm-sft"][0]
d["placements"].append(dict(whole, job="intruder"))
json.dump(d, open(sys.argv[2], "w"))
' "$T/a.json" "$T/twice.json"
run 2 "$GPUORCH" plan --cluster $CLUSTER --jobs $JOBS --state "$T/twice.json"
err_has "twice.json"
err_has "does not fit"

# a state that is not JSON, or not a plan
printf '{"placements": [\n' >"$T/broken.json"
run 2 "$GPUORCH" plan --cluster $CLUSTER --jobs $JOBS --state "$T/broken.json"
err_has "broken.json:[0-9]"
printf '{"jobs": []}\n' >"$T/notplan.json"
run 2 "$GPUORCH" plan --cluster $CLUSTER --jobs $JOBS --state "$T/notplan.json"
err_has "notplan.json"

# ---- bad input ----

printf -- '- name: a\n  gpus: 1\n  colour: red\n' >"$T/unknown.yaml"
run 2 "$GPUORCH" plan --cluster $CLUSTER --jobs "$T/unknown.yaml"
err_has "unknown.yaml:3:"
err_has "colour"

printf -- '- name: a\n  gpus: 1\n  gpu_fraction: 0.5\n' >"$T/twoasks.yaml"
run 2 "$GPUORCH" plan --cluster $CLUSTER --jobs "$T/twoasks.yaml"
err_has "twoasks.yaml:3:"
err_has "gpu_fraction"

printf -- '- name: a\n  gpus: [1\n' >"$T/broken.yaml"
run 2 "$GPUORCH" plan --cluster $CLUSTER --jobs "$T/broken.yaml"
err_has "broken.yaml:[0-9]"

printf 'id,gpus\na,1\nb,many\n' >"$T/bad.csv"
run 2 "$GPUORCH" plan --cluster $CLUSTER --jobs "$T/bad.csv"
err_has "bad.csv:3:"
err_has "gpus"

# a cluster where jobs go, and a missing file
run 2 "$GPUORCH" plan --cluster $CLUSTER --jobs $CLUSTER
err_has "cluster"
run 2 "$GPUORCH" plan --cluster $CLUSTER --jobs "$T/missing.yaml"
err_has "missing.yaml"

# options
run 2 "$GPUORCH" plan --cluster $CLUSTER --jobs $JOBS --policy no-such-policy
err_has "no-such-policy"
run 2 "$GPUORCH" plan --cluster $CLUSTER --jobs $JOBS -o xml
run 2 "$GPUORCH" plan --cluster $CLUSTER
run 2 "$GPUORCH" plan --jobs $JOBS
run 0 "$GPUORCH" plan --help
grep -q 'usage: gpuorch plan' "$T/out" || fail "--help prints no usage"

# the policy list names what plan accepts
run 0 "$GPUORCH" policies
for p in gpuorch first-fit best-fit random k8s-default fgd; do
    grep -q "^$p " "$T/out" || fail "policies lacks $p"
done

echo "ok: test_plan.sh"
