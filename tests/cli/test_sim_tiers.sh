#!/bin/sh
# test_sim_tiers.sh: `gpuorch sim` on pools that come and go, end to end through the
# CLI: a pool field's mistake exits 2 with its line; an autoscaled on-demand pool and a
# spot pool (production, and work an interruption would lose, kept off spot) give the
# bill in the table and in -o json,
# worked out by hand below; the same seed gives the same output; the events name the
# nodes that start and come up.
# Usage: test_sim_tiers.sh PATH/TO/gpuorch (run from the repository root).
set -eu

GPUORCH=${1:?usage: $0 PATH/TO/gpuorch}
. "$(dirname "$0")/lib.sh"

# ---- bad pool fields ----

cat >"$T/bad.yaml" <<'YAML'
pools:
  - name: od
    tier: on-demand
    instance_type: gcp/a3-megagpu-8g
    max_nodes: 2
    interruption_per_hour: 0.5
    node: {gpu_model: H100-80GB-SXM5, gpus: 8}
YAML
run 2 "$GPUORCH" validate "$T/bad.yaml"
err_has "bad.yaml:6: field 'interruption_per_hour': only a spot pool is interrupted"

# ---- the bill ----

# Two autoscaled pools from 0, start-up 180 s (the default): on-demand at 10 USD per
# GPU-hour, spot at 3, no interruptions. p (production, 8 GPUs, 1800 s) may not use
# spot: an on-demand node starts at 0; t (preemptible, checkpoint cost 30 s, 8 GPUs,
# 1800 s) goes to spot. Both nodes are up at 180 s and both jobs run 180-1980 s: the
# run ends at 1980 s.
#   on-demand: 1980/3600 h x 8 GPUs x 10 = 44 USD; spot: x 3 = 13.2 USD; total 57.2
#   at on-demand prices (the spot pool has no instance type: its own 3) the same,
#   savings 0; JCT 1980 s each; 2 nodes started; production on spot 0
cat >"$T/c.yaml" <<'YAML'
pools:
  - {name: od, tier: on-demand, price_per_gpu_hour: 10, max_nodes: 2,
     node: {gpu_model: H100-80GB-SXM5, gpus: 8}}
  - {name: spot, tier: spot, price_per_gpu_hour: 3, max_nodes: 2,
     node: {gpu_model: H100-80GB-SXM5, gpus: 8}}
YAML
cat >"$T/j.csv" <<'CSV'
id,submit_s,duration_s,gpus,priority,preemptible,checkpoint_cost_s
p,0,1800,8,production,false,
t,0,1800,8,normal,true,30
CSV
run 0 "$GPUORCH" sim --cluster "$T/c.yaml" --trace "$T/j.csv" --policy gpuorch
out_has "AT ON-DEMAND [$]"
grep -q '^gpuorch  *57  *0  *0  *44  *13  *57 ' "$T/out" || fail "the bill row is not 57 = 44 + 13"
run 0 "$GPUORCH" sim --cluster "$T/c.yaml" --trace "$T/j.csv" --policy gpuorch -o json \
    --events "$T/ev.jsonl"
cp "$T/out" "$T/a.json"
json_ok "$T/a.json" 'abs(d["results"][0]["cost_usd"] - 57.2) < 0.005'
json_ok "$T/a.json" 'abs(d["results"][0]["cost_by_tier_usd"]["on-demand"] - 44) < 0.005'
json_ok "$T/a.json" 'abs(d["results"][0]["cost_by_tier_usd"]["spot"] - 13.2) < 0.005'
json_ok "$T/a.json" 'd["results"][0]["cost_by_tier_usd"]["reserved"] == 0'
json_ok "$T/a.json" 'abs(d["results"][0]["on_demand_cost_usd"] - 57.2) < 0.005'
json_ok "$T/a.json" 'd["results"][0]["savings_pct"] == 0'
json_ok "$T/a.json" 'd["results"][0]["production_jobs_on_spot"] == 0'
json_ok "$T/a.json" 'd["results"][0]["nodes_started"] == 2'
json_ok "$T/a.json" 'd["results"][0]["interruptions"] == 0'
json_ok "$T/a.json" 'd["results"][0]["jct_s"]["mean"] == 1980'
json_ok "$T/a.json" 'abs(d["results"][0]["capacity_gpu_hours"] - 2 * 8 * 1980 / 3600) < 0.005'
grep -q '"type": "node-start", "node": "od-0", "pool": "od"' "$T/ev.jsonl" ||
    fail "no node-start for od-0"
grep -q '"t_ms": 180000, "type": "node-up", "node": "spot-0"' "$T/ev.jsonl" ||
    fail "spot-0 not up at 180 s"
grep -q '"type": "start", "job": "p", "worker": 0, "node": "od-0"' "$T/ev.jsonl" ||
    fail "p did not run on od-0"

# Work an interruption would lose keeps off spot, also off a spot node that is up. A
# fixed spot pool of one node (3 USD, up from the start) and an on-demand pool of 0-1
# nodes (10 USD). At 0, t (preemptible, checkpoint cost 30 s, 4 GPUs, 1800 s) takes
# spot-0; u (not preemptible, 4 GPUs, 1800 s) does not take the 4 GPUs spot-0 has left:
# an on-demand node starts for it and u runs there 180-1980 s. The run ends at 1980 s:
# spot 1980/3600 h x 8 x 3 = 13.2 USD, on-demand x 10 = 44; JCTs 1800 and 1980 s, mean
# 1890. No job an interruption would lose ran on spot (u did, when only production was
# kept off it, and the run ended at 1800 s with no node started).
cat >"$T/up.yaml" <<'YAML'
pools:
  - {name: spot, tier: spot, price_per_gpu_hour: 3, nodes: 1,
     node: {gpu_model: H100-80GB-SXM5, gpus: 8}}
  - {name: od, tier: on-demand, price_per_gpu_hour: 10, max_nodes: 1,
     node: {gpu_model: H100-80GB-SXM5, gpus: 8}}
YAML
cat >"$T/u.csv" <<'CSV'
id,submit_s,duration_s,gpus,priority,preemptible,checkpoint_cost_s
t,0,1800,4,normal,true,30
u,0,1800,4,normal,false,
CSV
run 0 "$GPUORCH" sim --cluster "$T/up.yaml" --trace "$T/u.csv" --policy gpuorch -o json \
    --events "$T/up.jsonl"
cp "$T/out" "$T/up.json"
json_ok "$T/up.json" 'd["results"][0]["unsaved_jobs_on_spot"] == 0'
json_ok "$T/up.json" 'd["results"][0]["nodes_started"] == 1'
json_ok "$T/up.json" 'd["results"][0]["jct_s"]["mean"] == 1890'
json_ok "$T/up.json" 'abs(d["results"][0]["cost_by_tier_usd"]["spot"] - 13.2) < 0.005'
json_ok "$T/up.json" 'abs(d["results"][0]["cost_by_tier_usd"]["on-demand"] - 44) < 0.005'
grep -q '"type": "start", "job": "t", "worker": 0, "node": "spot-0"' "$T/up.jsonl" ||
    fail "t did not run on spot-0"
grep -q '"t_ms": 180000, "type": "start", "job": "u", "worker": 0, "node": "od-0"' "$T/up.jsonl" ||
    fail "u did not run on od-0 once it was up"
json_ok "$T/a.json" 'd["results"][0]["unsaved_jobs_on_spot"] == 0'

# the same seed, the same figures
run 0 "$GPUORCH" sim --cluster "$T/c.yaml" --trace "$T/j.csv" --policy gpuorch -o json
cmp -s "$T/out" "$T/a.json" || fail "two runs of the same seed differ"

# With interruptions the run stays reproducible per seed (the notices are drawn from
# the seed), and a notice is counted.
sed 's/name: spot, tier: spot, price_per_gpu_hour: 3,/name: spot, tier: spot, price_per_gpu_hour: 3, interruption_per_hour: 20,/' \
    "$T/c.yaml" >"$T/c2.yaml"
run 0 "$GPUORCH" sim --cluster "$T/c2.yaml" --trace "$T/j.csv" --policy gpuorch --seed 7 -o json
cp "$T/out" "$T/b.json"
json_ok "$T/b.json" 'd["results"][0]["interruptions"] >= 1'
json_ok "$T/b.json" 'd["results"][0]["jobs_finished"] == 2'
json_ok "$T/b.json" 'd["results"][0]["production_jobs_on_spot"] == 0'
run 0 "$GPUORCH" sim --cluster "$T/c2.yaml" --trace "$T/j.csv" --policy gpuorch --seed 7 -o json
cmp -s "$T/out" "$T/b.json" || fail "two runs of seed 7 with interruptions differ"
echo "ok"
