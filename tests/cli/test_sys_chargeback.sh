#!/bin/sh
# test_sys_chargeback.sh: chargeback totals equal metered totals, end to end, and team
# budgets. Jobs of two teams run on simulated agents (whole GPUs on a reserved pool,
# a MIG slice and whole GPUs on an owned pool, an on-demand pool); one still runs when
# the window closes. Over a fixed window in the past:
#  - each job's row is exactly its own metering (its start to its end, its GPUs, the
#    pool's price, rounded down to millionths), worked out here from the job's times;
#  - under every grouping the rows add up exactly to the total, and the total is the
#    same under every grouping; idle is a row of its own (kind "idle") under every
#    grouping, the use rows add up to the allocations and use + idle = total;
#  - each pool's idle line plus its allocations is its capacity over the window (its
#    node was ready all of it), metered the same way, and the total is what the
#    cluster cost: all its capacity;
#  - include_idle=false drops exactly the idle lines; the CSV says what the JSON says.
# Budgets: a team of the cluster file shows its budget; a team given a tiny one
# through the API runs one job, then its next normal job waits with the budget reason
# (also after a restart) while its production job starts, the metric says 1, and
# lifting the budget lets the job start.
# Usage: test_sys_chargeback.sh PATH/TO/gpuorch (run from the repository root).
set -eu

GPUORCH=${1:?usage: $0 PATH/TO/gpuorch}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sys.sh"

CLUSTER="$T/cluster.yaml"
cat >"$CLUSTER" <<'YAML'
name: chargeback
pools:
  - name: h100
    tier: reserved
    price_per_gpu_hour: 2.50
    nodes: 1
    node: {gpu_model: H100-80GB-SXM5, gpus: 8, interconnect: nvswitch, cpus: 64, memory_gib: 512}
  - name: a100
    tier: owned
    price_per_gpu_hour: 1.10
    nodes: 1
    node: {gpu_model: A100-80GB, gpus: 8, interconnect: nvswitch, cpus: 64, memory_gib: 512, mig: true}
  - name: l4
    tier: on-demand
    price_per_gpu_hour: 0.80
    nodes: 1
    node: {gpu_model: L4, gpus: 4, interconnect: pcie, cpus: 32, memory_gib: 128}
teams:
  - {name: search, guaranteed_gpus: 8, burst_gpus: 16, projects: [ranking, retrieval]}
  - {name: research, guaranteed_gpus: 8, burst_gpus: 16, projects: [llm, vision],
     budget_gpu_hours_per_month: 500}
  - {name: platform, guaranteed_gpus: 2, burst_gpus: 4, projects: [ci]}
YAML

now_ms() { python3 -c 'import time; print(int(time.time() * 1000))'; }

start_server
start_agent h100-0 sim:H100-80GB-SXM5:8
start_agent a100-0 sim:A100-80GB:8
start_agent l4-0 sim:L4:4
wait_nodes 3

T0=$(now_ms)
sleep 0.2
job() { # TEAM PROJECT SECONDS REQUEST
    submit "{\"name\": \"$1-$2\", \"team\": \"$1\", \"project\": \"$2\", $4,
      \"command\": [\"sleep\", \"$3\"]}"
}
job search ranking 1 '"gpus": 2, "gpu_models": ["H100-80GB-SXM5"]'
RANKING=$ID
job search retrieval 1 '"gpus": 1, "gpu_models": ["L4"]'
RETRIEVAL=$ID
job research llm 1 '"mig": "1g.10gb", "kind": "inference"'
LLM=$ID
job research vision 1 '"gpus": 4, "gpu_models": ["A100-80GB"]'
VISION=$ID
job research vision 300 '"gpus": 1, "gpu_models": ["H100-80GB-SXM5"]'
LONG=$ID
for j in $RANKING $RETRIEVAL $LLM $VISION; do wait_for "$j" 'd["state"] == "succeeded"' 60; done
wait_for "$LONG" 'd["state"] == "running"'
sleep 0.3
T1=$(now_ms)
sleep 0.2

# the jobs' own times, for their expected metering
for j in $RANKING $RETRIEVAL $LLM $VISION $LONG; do
    api GET "/api/v1/jobs/$j"
    cp "$T/out" "$T/job$j.json"
done
W="from=$T0&to=$T1"
for by in team,project team,project,tier pool team,project,pool,model,tier model ""; do
    f=$(echo "${by:-none}" | tr , _)
    api GET "/api/v1/usage?$W&group_by=$by"
    [ "$STATUS" = 200 ] || fail "usage by '$by' answered $STATUS"
    cp "$T/out" "$T/u_$f.json"
    api GET "/api/v1/usage?$W&group_by=$by&format=csv"
    [ "$STATUS" = 200 ] || fail "usage CSV by '$by' answered $STATUS"
    cp "$T/out" "$T/u_$f.csv"
done
api GET "/api/v1/usage?$W&group_by=team,project,pool&include_idle=false"
cp "$T/out" "$T/u_noidle.json"
api GET "/api/v1/usage?$W&include_idle=maybe"
[ "$STATUS" = 400 ] || fail "include_idle=maybe answered $STATUS"

python3 - "$T" "$T0" "$T1" "$RANKING $RETRIEVAL $LLM $VISION $LONG" <<'PY' || fail "chargeback does not add up"
import csv, json, sys
from decimal import Decimal

t, t0, t1, ids = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4].split()
window = t1 - t0
MICRO = Decimal(1000000)
price = {"h100": 2500000, "a100": 1100000, "l4": 800000}  # micro-dollars per GPU-hour
units = {"2gpus": 2 * 28000, "1gpu": 28000, "mig1g": 4000, "4gpus": 4 * 28000}

def dec(x):  # a JSON number as the exact decimal it was written as
    return Decimal(repr(x)) if isinstance(x, float) else Decimal(x)

def meter(u, ms, p):  # metering.h: GPU_UNITS x ms, rounded down to millionths
    return Decimal(u * ms // 100800) / MICRO, Decimal(u * ms * p // (100800 * 10**6)) / MICRO

def load(name):
    return json.load(open(f"{t}/u_{name}.json"))

def check(cond, what):
    if not cond:
        sys.exit("FAIL: " + what)

# every job's own row: its run from its placement (the "start" event) to its end (the
# long one: to the window's end)
jobs = {i: json.load(open(f"{t}/job{i}.json")) for i in ids}
shape = dict(zip(ids, [("2gpus", "h100"), ("1gpu", "l4"), ("mig1g", "a100"),
                       ("4gpus", "a100"), ("1gpu", "h100")]))
full = load("team_project_pool_model_tier")
got = {}
for r in full["rows"]:
    key = (r["team"], r["project"], r["pool"])
    check(key not in got, f"row {key} twice")
    got[key] = (dec(r["gpu_hours"]), dec(r["cost_usd"]))
want = {}
for i, j in jobs.items():
    u, pool = shape[i]
    start = [e["t_ms"] for e in j["events"] if e["type"] == "start"]
    end = j["end_ms"] if j["end_ms"] is not None else t1
    check(len(start) == 1 and t0 <= start[0] < end <= t1, f"job {i} ran outside the window")
    h, c = meter(units[u], end - start[0], price[pool])
    k = (j["team"], j["project"], pool)
    old = want.get(k, (0, 0))
    want[k] = (old[0] + h, old[1] + c)
for k, v in want.items():
    check(got.get(k) == v, f"row {k}: {got.get(k)}, metered {v}")

# idle showback: capacity less allocations, for every pool (its node was ready all the
# window: owned, reserved and fixed on-demand nodes count while ready)
cap = {}
for pool, gpus in (("h100", 8), ("a100", 8), ("l4", 4)):
    cap[pool] = meter(gpus * 28000, window, price[pool])
    used = [v for k, v in got.items() if k[2] == pool and k[0] != "(idle)"]
    idle = got.get(("(idle)", "(idle)", pool))
    check(idle is not None, f"no idle line for {pool}")
    check(idle[0] + sum(u[0] for u in used) == cap[pool][0], f"{pool}: idle + used GPU-hours != capacity")
    check(idle[1] + sum(u[1] for u in used) == cap[pool][1], f"{pool}: idle + used cost != capacity")
    check(idle[0] > 0, f"{pool}: nothing idle in a mostly empty window")
r_idle = [r for r in full["rows"] if r["team"] == "(idle)"]
check(all(r["project"] == "(idle)" and r["jobs"] == 0 and r["kind"] == "idle" for r in r_idle),
      "idle lines' project/jobs/kind")
check(all(r["kind"] == "use" for r in full["rows"] if r["team"] != "(idle)"), "use lines' kind")
check({r["tier"] for r in r_idle} == {"reserved", "owned", "on-demand"}, "idle lines' tiers")

# the total is what the cluster cost, and the metered GPU-hours
total = (dec(full["total"]["gpu_hours"]), dec(full["total"]["cost_usd"]))
check(total[1] == sum(c[1] for c in cap.values()), f"total cost {total[1]}")
check(total[0] == sum(c[0] for c in cap.values()), f"total GPU-hours {total[0]}")
check(full["total"]["jobs"] == 5, "jobs in the total")
use = (sum(v[0] for v in want.values()), sum(v[1] for v in want.values()))

# every grouping adds up exactly, to the same totals; the CSV says the same
for name in ("team_project", "team_project_tier", "pool", "team_project_pool_model_tier",
             "model", "none"):
    d = load(name)
    for i, what in ((0, "gpu_hours"), (1, "cost_usd")):
        s = sum(dec(r[what]) for r in d["rows"])
        check(s == dec(d["total"][what]), f"{name}: rows' {what} {s} != total {d['total'][what]}")
        check(dec(d["total"][what]) == total[i], f"{name}: total {what} differs")
        # idle stays apart: the use rows are the allocations, use + idle = total
        u = sum(dec(r[what]) for r in d["rows"] if r["kind"] == "use")
        idle = sum(dec(r[what]) for r in d["rows"] if r["kind"] == "idle")
        check(u == use[i] and dec(d["use"][what]) == u, f"{name}: use {what} {u} != {use[i]}")
        check(dec(d["idle"][what]) == idle and u + idle == total[i], f"{name}: use + idle {what}")
    check(sum(r["kind"] == "idle" for r in d["rows"]) >= (3 if "pool" in d["group_by"] or "model" in d["group_by"] else 1),
          f"{name}: idle rows {d['rows']}")
    rows = list(csv.reader(open(f"{t}/u_{name}.csv")))
    keys = d["group_by"]
    check(rows[0] == keys + ["gpu_hours", "cost_usd", "jobs", "kind"], f"{name}: CSV header {rows[0]}")
    check(len(rows) == len(d["rows"]) + 1, f"{name}: CSV rows")
    for c, r in zip(rows[1:], d["rows"]):
        check(c[:len(keys)] == [r[k] or "" for k in keys], f"{name}: CSV keys {c}")
        check([Decimal(x) for x in c[len(keys):len(keys) + 2]] == [dec(r["gpu_hours"]), dec(r["cost_usd"])],
              f"{name}: CSV {c} != JSON {r}")
        check(int(c[-2]) == r["jobs"] and c[-1] == r["kind"], f"{name}: CSV jobs, kind {c}")
team = load("team_project")
check({r["team"] for r in team["rows"]} == {"search", "research", "(idle)"}, "teams in the report")

# without idle lines: the allocations alone
d = json.load(open(f"{t}/u_noidle.json"))
check(not any(r["team"] == "(idle)" for r in d["rows"]), "include_idle=false kept idle lines")
check({(r["team"], r["project"], r["pool"]): (dec(r["gpu_hours"]), dec(r["cost_usd"])) for r in d["rows"]}
      == {k: v for k, v in got.items() if k[0] != "(idle)"}, "include_idle=false changed the rows")
PY

# The CLI shows the same report, idle lines included, closed by their subtotals.
run 0 "$GPUORCH" usage --from "$T0" --to "$T1" --by team,project,tier
out_has "(idle)"
out_has "^USE "
out_has "^IDLE "
out_has "TOTAL"
run 0 "$GPUORCH" usage --from "$T0" --to "$T1" --by pool -o csv
cmp -s "$T/out" "$T/u_pool.csv" || fail "usage -o csv differs from the API's CSV"
run 0 "$GPUORCH" teams
out_has "BUDGET"
run 0 "$GPUORCH" cancel "$LONG"

# ---- budgets ----
api GET /api/v1/teams/research
json_ok "$T/out" 'd["budget_gpu_hours"] == 500 and d["used_gpu_hours_month"] > 0 and 0 <= d["burn_pct"] < 1 and not d["over_budget"]'
api GET /api/v1/teams/platform
json_ok "$T/out" 'd["budget_gpu_hours"] == 0 and d["burn_pct"] is None'
api PUT /api/v1/teams/platform '{"budget_gpu_hours_per_month": -1}'
[ "$STATUS" = 400 ] || fail "a negative budget answered $STATUS"
api PUT /api/v1/teams/platform '{"budget_gpu_hours_per_month": 0.0001}'
[ "$STATUS" = 200 ] || fail "PUT budget answered $STATUS: $(cat "$T/out")"
json_ok "$T/out" 'd["budget_gpu_hours"] == 0.0001 and not d["over_budget"]'

submit '{"name": "first", "team": "platform", "project": "ci", "gpus": 1, "gpu_models": ["L4"], "command": ["sleep", "1"]}'
wait_for "$ID" 'd["state"] == "succeeded"' 30
REASON="team platform used its GPU-hour budget for this month"
submit '{"name": "second", "team": "platform", "project": "ci", "gpus": 1, "gpu_models": ["L4"], "command": ["sleep", "1"]}'
SECOND=$ID
wait_for "$SECOND" 'd["state"] == "pending" and d["reason"].startswith("'"$REASON"' (0.0")' 10
sleep 1
wait_for "$SECOND" 'd["state"] == "pending" and d["reason"].endswith(" of 0.0001)")' 5
submit '{"name": "prod", "team": "platform", "project": "ci", "priority": "production", "gpus": 1, "gpu_models": ["L4"], "command": ["sleep", "1"]}'
wait_for "$ID" 'd["state"] in ("running", "succeeded")' 30
api GET /api/v1/teams/platform
json_ok "$T/out" 'd["over_budget"] and d["burn_pct"] > 100 and d["used_gpu_hours_month"] > 0.0001'
api GET /metrics
grep -q '^gpuorch_team_budget_exhausted{team="platform"} 1$' "$T/out" || fail "metric: platform not exhausted"
grep -q '^gpuorch_team_budget_exhausted{team="search"} 0$' "$T/out" || fail "metric: search exhausted"
USED=$(sed -n 's/^gpuorch_team_used_gpu_hours_month{team="platform"} //p' "$T/out")
python3 -c 'import sys; sys.exit(not float(sys.argv[1]) > 0.0001)' "${USED:-0}" || fail "metric: platform used '$USED'"

# A restart counts the month from the store and keeps the budget set through the API.
kill -KILL "$SERVER_PID"
start_server
wait_nodes 3
api GET /api/v1/teams/platform
json_ok "$T/out" 'd["budget_gpu_hours"] == 0.0001'
wait_for "$SECOND" 'd["state"] == "pending" and d["reason"].startswith("'"$REASON"'")' 10
api GET /api/v1/teams/platform
json_ok "$T/out" 'd["over_budget"] and d["used_gpu_hours_month"] > 0.0001'

# Lifting the budget lets the waiting job start.
api PUT /api/v1/teams/platform '{"budget_gpu_hours_per_month": 0}'
[ "$STATUS" = 200 ] || fail "PUT budget 0 answered $STATUS"
wait_for "$SECOND" 'd["state"] in ("running", "succeeded")' 30
api GET /metrics
grep -q '^gpuorch_team_budget_exhausted{team="platform"} 0$' "$T/out" || fail "metric: still exhausted"
echo ok
