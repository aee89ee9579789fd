#!/bin/sh
# test_tracegen.sh: `gpuorch trace gen` end to end: bad usage and bad mixes exit 2 (a
# mix mistake with its file:line), a training entry whose Philly table is absent says
# so, and the CSV it writes is byte-identical for the same seed, different for another,
# accepted by `gpuorch validate` with examples/cluster-mixed.yaml and run by
# `gpuorch sim` under two policies, and with --window (its columns, its JSON, its
# errors). The demo mix needs the Philly table in
# ../shared/traces/philly; without it those steps are skipped with a message and a mix
# without training covers the rest.
# Usage: test_tracegen.sh PATH/TO/gpuorch (run from the repository root).
set -eu

GPUORCH=${1:?usage: $0 PATH/TO/gpuorch}
. "$(dirname "$0")/lib.sh"
CLUSTER=examples/cluster-mixed.yaml
PHILLY=../shared/traces/philly/philly_jobs_82k.csv

# A mix without training: runs whether or not the Philly table is there.
cat >"$T/serve.yaml" <<'EOF'
teams:
  - {name: search, projects: [ranking, retrieval]}
  - {name: platform, projects: [assistant, notebooks]}
inference:
  - name: llama-8b-serve
    team: search
    project: ranking
    priority: production
    rate_per_hour: 6
    lifetime: {mean: 2h, min: 30m, max: 8h}
    model_params_b: 8
    kv_cache: 1GiB
    busy: 0.15
    peak_memory_overrun: 0.1
batch:
  - name: eval
    team: search
    rate_per_hour: 10
    duration: {mean: 30m, min: 5m, max: 2h}
    gpus: 1
    busy: 0.8
    preemptible: true
    checkpoint: {interval: 10m, cost: 20s}
interactive:
  - name: notebook
    team: platform
    project: notebooks
    rate_per_hour: 4
    duration: {mean: 1h, min: 10m, max: 4h}
    gpu_fraction: 0.25
    busy: 0.05
EOF

# ---- bad usage ----

run 2 "$GPUORCH" trace
run 2 "$GPUORCH" trace frobnicate
err_has "unknown subcommand 'frobnicate'"
run 2 "$GPUORCH" trace gen
err_has "required"
run 2 "$GPUORCH" trace gen --mix "$T/serve.yaml"
run 2 "$GPUORCH" trace gen --hours 24
run 2 "$GPUORCH" trace gen --mix "$T/serve.yaml" --hours 0
err_has "--hours"
run 2 "$GPUORCH" trace gen --mix "$T/serve.yaml" --hours lots
run 2 "$GPUORCH" trace gen --mix "$T/serve.yaml" --hours 24 --seed -3
err_has "--seed"
run 2 "$GPUORCH" trace gen --mix "$T/serve.yaml" --hours 24 --colour
run 2 "$GPUORCH" trace gen --mix "$T/serve.yaml" --hours 24 stray
err_has "unexpected argument 'stray'"
run 0 "$GPUORCH" trace --help
out_has "trace gen --mix FILE"
run 0 "$GPUORCH" trace gen --help
run 0 "$GPUORCH" --help
out_has "trace"

# ---- bad mixes ----

run 2 "$GPUORCH" trace gen --mix "$T/none.yaml" --hours 1
err_has "none.yaml: No such file"

sed 's/^    kv_cache: 1GiB/    kv_cahce: 1GiB/' "$T/serve.yaml" >"$T/typo.yaml"
run 2 "$GPUORCH" trace gen --mix "$T/typo.yaml" --hours 1 -o "$T/typo.csv"
err_has "typo.yaml:12: unknown field 'kv_cahce' in inference entry 'llama-8b-serve' (did you mean 'kv_cache'?)"
[ ! -e "$T/typo.csv" ] || fail "a bad mix still wrote its CSV"

sed 's/^    team: platform/    team: platfrom/' "$T/serve.yaml" >"$T/team.yaml"
run 2 "$GPUORCH" trace gen --mix "$T/team.yaml" --hours 1
err_has "team.yaml:26: field 'team': 'platfrom' is not one of the mix's teams"

cat >"$T/nophilly.yaml" <<'EOF'
teams: [research]
training:
  - name: pretrain
    team: research
    rate_per_hour: 1
    philly: /nonexistent/philly_jobs_82k.csv
EOF
run 2 "$GPUORCH" trace gen --mix "$T/nophilly.yaml" --hours 1
err_has "nophilly.yaml:6: field 'philly': the Philly job table '/nonexistent/philly_jobs_82k.csv' is absent"

# ---- a mix without training ----

run 0 "$GPUORCH" trace gen --mix "$T/serve.yaml" --seed 3 --hours 12 -o "$T/serve.csv"
err_has "wrote $T/serve.csv"
head -1 "$T/serve.csv" | grep -q '^id,submit_s,duration_s,duration_estimate_s,' ||
    fail "serve.csv lacks the job CSV header"
[ "$(wc -l <"$T/serve.csv")" -gt 50 ] || fail "serve.csv has too few jobs"
grep -q ',inference,production,llama-8b-serve,' "$T/serve.csv" || fail "no inference rows"
grep -q ',owned|reserved|on-demand,' "$T/serve.csv" || fail "production rows lack their tiers"

# the same seed gives the same bytes, to a file or to standard output; another differs
run 0 "$GPUORCH" trace gen --mix "$T/serve.yaml" --seed 3 --hours 12
cmp -s "$T/out" "$T/serve.csv" || fail "standard output differs from -o for the same seed"
run 0 "$GPUORCH" trace gen --mix "$T/serve.yaml" --seed 3 --hours 12 -o -
cmp -s "$T/out" "$T/serve.csv" || fail "'-o -' differs from -o FILE"
run 0 "$GPUORCH" trace gen --mix "$T/serve.yaml" --seed 4 --hours 12 -o "$T/serve4.csv"
if cmp -s "$T/serve.csv" "$T/serve4.csv"; then fail "seeds 3 and 4 gave the same trace"; fi

run 0 "$GPUORCH" validate "$CLUSTER" "$T/serve.csv"
out_has "serve.csv: ok:"
run 0 "$GPUORCH" sim --cluster "$CLUSTER" --trace "$T/serve.csv" --policy gpuorch,k8s-default
out_has "gpuorch"
out_has "k8s-default"
# --window: utilisation over it beside the whole run's, named in the header
run 0 "$GPUORCH" sim --cluster "$CLUSTER" --trace "$T/serve.csv" --policy gpuorch --window 1h-12h
out_has "UTIL% 1h-12h"
out_has "ALLOC% 1h-12h"
out_has "1h-12h: over that stretch from the first submission"
run 0 "$GPUORCH" sim --cluster "$CLUSTER" --trace "$T/serve.csv" --policy gpuorch --window 1h-12h \
    -o json
python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["window_s"] == [3600, 43200], d["window_s"]
r = d["results"][0]
assert 0 < r["window_utilization_pct"] <= r["window_allocation_pct"] <= 100, r
' "$T/out" || fail "sim JSON with --window"
for bad in 12h 12h-1h 1h- x-1h; do
    run 2 "$GPUORCH" sim --cluster "$CLUSTER" --trace "$T/serve.csv" --window "$bad"
    err_has "--window must be FROM-TO, like 4h-24h"
done

# ---- the demo mix (training drawn from Philly) ----

if [ ! -f "$PHILLY" ]; then
    echo "SKIP: $PHILLY is absent: the demo mix (training from Philly) was not generated"
    echo "ok"
    exit 0
fi

run 0 "$GPUORCH" trace gen --mix examples/mix-demo.yaml --seed 1 --hours 24 -o "$T/demo.csv"
err_has "inference"
for kind in inference training batch interactive; do
    grep -q ",$kind," "$T/demo.csv" || fail "demo.csv has no $kind rows"
done
run 0 "$GPUORCH" trace gen --mix examples/mix-demo.yaml --seed 1 --hours 24 -o "$T/demo2.csv"
cmp -s "$T/demo.csv" "$T/demo2.csv" || fail "the demo mix is not reproducible"
run 0 "$GPUORCH" validate "$CLUSTER" "$T/demo.csv"
out_has "demo.csv: ok:"
run 0 "$GPUORCH" sim --cluster "$CLUSTER" --trace "$T/demo.csv" --policy gpuorch,k8s-default -o json
python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
names = [r["policy"] for r in d["results"]]
assert names == ["gpuorch", "k8s-default"], names
for r in d["results"]:
    assert r["jobs_submitted"] > 1000 and r["unschedulable"] == 0, r
' "$T/out" || fail "sim JSON on the demo trace"

# the backlog mix: every class of work it names, accepted against the cluster
run 0 "$GPUORCH" trace gen --mix examples/mix-backlog.yaml --seed 1 --hours 24 -o "$T/backlog.csv"
for name in llama-8b-serve qwen-7b-int8-serve llama-13b-serve codellama-13b-serve pretrain \
    finetune ads-train sweep embed-batch; do
    grep -q "^$name-[0-9]*," "$T/backlog.csv" || fail "backlog.csv has no $name jobs"
done
run 0 "$GPUORCH" validate "$CLUSTER" "$T/backlog.csv"
out_has "backlog.csv: ok:"

# the cold start: its bursts inside their windows, accepted against the cluster
run 0 "$GPUORCH" trace gen --mix examples/mix-coldstart.yaml --seed 1 --hours 24 -o "$T/cold.csv"
python3 -c '
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
def times(prefix):
    return [float(r["submit_s"]) for r in rows if r["id"].startswith(prefix + "-")]
for name in ("pretrain-burst", "ads-train-burst", "sweep-burst"):
    t = times(name)
    assert t and max(t) < 30, (name, len(t), max(t, default=None))
for name in ("llama-8b-rollout", "qwen-7b-int8-rollout"):
    t = times(name)
    assert len(t) >= 5 and min(t) >= 60 and max(t) < 120, (name, t)
assert times("sweep") and max(times("sweep")) > 20 * 3600
' "$T/cold.csv" || fail "cold.csv: bursts outside their windows"
run 0 "$GPUORCH" validate "$CLUSTER" "$T/cold.csv"
out_has "cold.csv: ok:"
echo "ok"
