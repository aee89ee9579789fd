#!/bin/sh
# test_sim.sh: `gpuorch sim` end to end on small traces written here: bad input exits 2
# (a malformed trace row with its line), packing mode on an Alibaba pod list, time mode
# with two policies side by side in the table and in JSON, a figure small enough to
# check by hand through the CLI, byte-identical output and event log for the same seed
# (also across thread counts), --out's three files, and --seeds giving the seed list
# and the *_std figures. Packing and input checks come first so that they still run
# when time mode breaks.
# Usage: test_sim.sh PATH/TO/gpuorch (run from the repository root).
set -eu

GPUORCH=${1:?usage: $0 PATH/TO/gpuorch}
. "$(dirname "$0")/lib.sh"
CLUSTER=examples/cluster-demo.yaml

# A small trace in our job CSV for the demo cluster: H100s, A100s (MIG), L4s.
cat >"$T/trace.csv" <<'EOF'
id,kind,priority,workers,gpus,gpu_fraction,mig,gpu_model,submit_s,duration_s,busy,team
j1,training,normal,1,8,,,H100-80GB-SXM5,0,3600,,research
j2,training,high,2,4,,,,60,1800,0.5,research
j3,inference,production,1,,0.25,,L4,120,7200,0.3,search
j4,batch,low,1,1,,,,180,600,,platform
j5,inference,normal,1,,,1g.10gb,A100-80GB,240,900,,search
j6,batch,normal,1,2,,,,300,1200,,platform
EOF

# An Alibaba pod list for packing mode.
cat >"$T/pods.csv" <<'EOF'
name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec
p0,4000,8192,1,1000,
p1,2000,4096,1,500,
p2,2000,4096,1,250,
p3,8000,16384,2,1000,
p4,1000,2048,0,0,
p5,2000,4096,1,300,L4
p6,16000,65536,4,1000,
EOF

# ---- bad input ----

sed 's/^j4,batch,low,1,1,/j4,batch,low,1,lots,/' "$T/trace.csv" >"$T/badrow.csv"
run 2 "$GPUORCH" sim --cluster $CLUSTER --trace "$T/badrow.csv" --policy fifo
err_has "badrow.csv:5:"
err_has "gpus"

printf 'name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1000,1024,1,1000\np1,1000,1024,one,1000\n' \
    >"$T/badpods.csv"
run 2 "$GPUORCH" sim --cluster $CLUSTER --trace "$T/badpods.csv" --policy fgd
err_has "badpods.csv:3: column 'num_gpu'"

printf 'timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-09 07:01:55,66.0,1,66.0,a\n2017-10-09 07:01:55,66.0,0,0,a\n' \
    >"$T/badphilly.csv"
run 2 "$GPUORCH" sim --cluster $CLUSTER --trace "$T/badphilly.csv" --policy fifo
err_has "badphilly.csv:3: column 'num_gpus'"

run 2 "$GPUORCH" sim --cluster $CLUSTER --trace "$T/missing.csv" --policy fifo
err_has "missing.csv"
run 2 "$GPUORCH" sim --cluster $CLUSTER --trace "$T/trace.csv" --policy no-such-policy
err_has "no-such-policy"
run 2 "$GPUORCH" sim --cluster $CLUSTER --trace "$T/trace.csv" --policy first-fit+lifo
err_has "lifo"
run 2 "$GPUORCH" sim --cluster $CLUSTER --trace "$T/trace.csv" --mode sideways
run 2 "$GPUORCH" sim --cluster $CLUSTER --trace "$T/trace.csv" --seeds 3-1
run 2 "$GPUORCH" sim --cluster $CLUSTER --trace "$T/trace.csv" -o xml
run 2 "$GPUORCH" sim --cluster $CLUSTER --trace "$T/trace.csv" --threads 2x
err_has "threads must be from 1 to 256"
run 2 "$GPUORCH" sim --cluster $CLUSTER --trace "$T/trace.csv" --format philly
run 2 "$GPUORCH" sim --cluster $CLUSTER
run 0 "$GPUORCH" sim --help
grep -q 'usage: gpuorch sim' "$T/out" || fail "--help prints no usage"

# ---- packing mode ----

run 0 "$GPUORCH" sim --cluster $CLUSTER --trace "$T/pods.csv" --policy fgd,best-fit,k8s-default --seed 42
grep -q '^Packing mode' "$T/out" || fail "an Alibaba pod list does not default to packing mode"
for p in fgd best-fit k8s-default; do
    grep -q "^$p " "$T/out" || fail "packing table lacks $p"
done
run 0 "$GPUORCH" sim --cluster $CLUSTER --trace "$T/pods.csv" --policy fgd,best-fit --seed 42 -o json \
    --events "$T/pack-events.jsonl"
cp "$T/out" "$T/pack.json"
json_ok "$T/pack.json" 'd["mode"] == "packing" and [r["policy"] for r in d["results"]] == ["fgd", "best-fit"]'
json_ok "$T/pack.json" 'all(sorted(r["allocation_pct"], key=int) == [str(x) for x in range(131)] for r in d["results"])'
json_ok "$T/pack.json" 'all(r["pods"] >= 7 and r["seeds"] == [42] for r in d["results"])'
# every pod's line in the log is JSON, and each run logs one line per pod at least
python3 -c '
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
pods = {r["policy"]: r["pods"] for r in json.load(open(sys.argv[2]))["results"]}
for p, n in pods.items():
    got = len([l for l in lines if l["policy"] == p and l["type"] in ("start", "fail")])
    if got < n:
        sys.exit("%s: %d pod lines for %d pods" % (p, got, n))
' "$T/pack-events.jsonl" "$T/pack.json" || fail "packing event log"

# ---- time mode ----

# two policies side by side
run 0 "$GPUORCH" sim --cluster $CLUSTER --trace "$T/trace.csv" --policy fifo,best-fit+tiresias --seed 3
grep -q '^Time mode' "$T/out" || fail "our job CSV does not default to time mode"
grep -q '^fifo ' "$T/out" || fail "time table lacks fifo"
grep -q '^best-fit+tiresias ' "$T/out" || fail "time table lacks best-fit+tiresias"

run 0 "$GPUORCH" sim --cluster $CLUSTER --trace "$T/trace.csv" --policy fifo,best-fit+tiresias --seed 3 -o json
cp "$T/out" "$T/time.json"
json_ok "$T/time.json" 'd["mode"] == "time" and d["cluster"] == "demo" and d["trace"] == "trace"'
json_ok "$T/time.json" '[(r["policy"], r["placement"], r["order"]) for r in d["results"]] == [("fifo", "gpuorch", "fifo"), ("best-fit+tiresias", "best-fit", "tiresias")]'
json_ok "$T/time.json" 'all(r["jobs_submitted"] == 6 and r["jobs_finished"] == 6 and r["never_placed"] == 0 for r in d["results"])'
json_ok "$T/time.json" 'all(0 < r["utilization_pct"] <= r["allocation_pct"] <= 100 for r in d["results"])'
json_ok "$T/time.json" 'all(r["reconfigurations"] == 1 for r in d["results"])'
json_ok "$T/time.json" 'sorted(d["results"][0]["by_team"]) == ["platform", "research", "search"]'
json_ok "$T/time.json" 'not any(k.endswith("_std") for k in d["results"][0])'

# a figure by hand: one node of 2 GPUs; a takes both for 100 s at 0, b and c one each
# for 50 s at 10: they wait 90 s each (mean 60), the makespan is 150 s, all busy
cat >"$T/two.yaml" <<'EOF'
name: two
pools:
  - name: p
    tier: owned
    nodes: 1
    node: {gpu_model: A100-80GB, gpus: 2}
EOF
printf 'id,kind,gpus,submit_s,duration_s\na,training,2,0,100\nb,training,1,10,50\nc,training,1,10,50\n' \
    >"$T/abc.csv"
run 0 "$GPUORCH" sim --cluster "$T/two.yaml" --trace "$T/abc.csv" --policy first-fit+fifo -o json
cp "$T/out" "$T/abc.json"
json_ok "$T/abc.json" 'd["results"][0]["queue_delay_s"] == {"mean": 60, "p50": 90, "p95": 90, "p99": 90, "max": 90}'
json_ok "$T/abc.json" 'd["results"][0]["makespan_s"] == 150 and d["results"][0]["utilization_pct"] == 100'
json_ok "$T/abc.json" 'd["results"][0]["jobs_per_hour"] == 72'

# --reconfig-delay: a MIG job on an unpartitioned A100 starts after it
printf 'id,kind,mig,gpu_model,submit_s,duration_s\nm,inference,1g.10gb,A100-80GB,0,100\n' >"$T/mig.csv"
run 0 "$GPUORCH" sim --cluster $CLUSTER --trace "$T/mig.csv" --policy first-fit -o json --reconfig-delay 25s
cp "$T/out" "$T/mig.json"
json_ok "$T/mig.json" 'd["results"][0]["queue_delay_s"]["max"] == 25 and d["results"][0]["reconfigurations"] == 1'

# --move-delay: gpuorch moves server x off GPU 0 at 700 s for the 1-GPU job t, which starts
# after the new instance (10 s), the load (90 s) and GPU 0's MIG coming off (10 s): 810 s
cat >"$T/mig2.yaml" <<'EOF'
name: mig2
pools:
  - name: a
    tier: owned
    nodes: 1
    node: {gpu_model: A100-80GB, gpus: 2, mig: true}
EOF
printf 'id,kind,mig,gpus,submit_s,duration_s\nx,inference,3g.40gb,,0,7200\ny,inference,3g.40gb,,0,600\na,inference,3g.40gb,,0,7200\nt,training,,1,700,1000\n' \
    >"$T/move.csv"
run 0 "$GPUORCH" sim --cluster "$T/mig2.yaml" --trace "$T/move.csv" --policy gpuorch -o json \
    --move-delay 90s --events "$T/move.jsonl"
cp "$T/out" "$T/move.json"
json_ok "$T/move.json" 'd["results"][0]["server_moves"] == 1'
grep -q '"t_ms": 700000, "type": "move", "job": "x"' "$T/move.jsonl" || fail "no move of x at 700 s"
grep -q '"t_ms": 810000, "type": "start", "job": "t"' "$T/move.jsonl" || fail "t did not start at 810 s"
run 2 "$GPUORCH" sim --cluster "$T/mig2.yaml" --trace "$T/move.csv" --move-delay soon
err_has "--move-delay: not a duration: 'soon'"

# the same seed twice, and on one thread or several: the same bytes
POLICIES=random,gpuorch+tiresias,k8s-default
run 0 "$GPUORCH" sim --cluster $CLUSTER --trace "$T/trace.csv" --policy $POLICIES --seed 9 -o json \
    --events "$T/ev1.jsonl"
cp "$T/out" "$T/run1.json"
run 0 "$GPUORCH" sim --cluster $CLUSTER --trace "$T/trace.csv" --policy $POLICIES --seed 9 -o json \
    --events "$T/ev2.jsonl" --threads 1
cp "$T/out" "$T/run2.json"
run 0 "$GPUORCH" sim --cluster $CLUSTER --trace "$T/trace.csv" --policy $POLICIES --seed 9 -o json \
    --events "$T/ev3.jsonl" --threads 3
cp "$T/out" "$T/run3.json"
cmp -s "$T/run1.json" "$T/run2.json" || fail "same seed, different JSON (threads 1)"
cmp -s "$T/run1.json" "$T/run3.json" || fail "same seed, different JSON (threads 3)"
cmp -s "$T/ev1.jsonl" "$T/ev2.jsonl" || fail "same seed, different event log (threads 1)"
cmp -s "$T/ev1.jsonl" "$T/ev3.jsonl" || fail "same seed, different event log (threads 3)"
[ -s "$T/ev1.jsonl" ] || fail "empty event log"
python3 -c '
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
for p in ("random", "gpuorch+tiresias", "k8s-default"):
    submits = sorted(l["job"] for l in lines if l["policy"] == p and l["type"] == "submit")
    if submits != ["j1", "j2", "j3", "j4", "j5", "j6"]:
        sys.exit("%s: submits %s" % (p, submits))
    if any(l["seed"] != 9 for l in lines):
        sys.exit("a line of another seed")
' "$T/ev1.jsonl" || fail "time event log"

# --out: summary.json (the JSON report), timeline.csv, chart.svg
run 0 "$GPUORCH" sim --cluster $CLUSTER --trace "$T/trace.csv" --policy fifo,best-fit --seed 3 \
    --out "$T/outdir"
for f in summary.json timeline.csv chart.svg; do
    [ -s "$T/outdir/$f" ] || fail "--out wrote no $f"
done
json_ok "$T/outdir/summary.json" '[r["policy"] for r in d["results"]] == ["fifo", "best-fit"]'
run 0 "$GPUORCH" sim --cluster $CLUSTER --trace "$T/trace.csv" --policy fifo,best-fit --seed 3 -o json
cmp -s "$T/out" "$T/outdir/summary.json" || fail "summary.json differs from -o json"
[ "$(head -n 1 "$T/outdir/timeline.csv")" = "policy,seed,t_s,utilization_pct,allocation_pct,queued,running" ] ||
    fail "timeline.csv header: $(head -n 1 "$T/outdir/timeline.csv")"
[ "$(grep -c '^fifo,3,' "$T/outdir/timeline.csv")" -eq 600 ] || fail "timeline.csv: not 600 fifo points"
head -c 4 "$T/outdir/chart.svg" | grep -q '^<svg' || fail "chart.svg does not start with <svg"
tail -n 1 "$T/outdir/chart.svg" | grep -q '</svg>' || fail "chart.svg does not end with </svg>"
# time mode: a chart per policy too, titled with the policy and its figures
for p in fifo best-fit; do
    f="$T/outdir/chart-$p.svg"
    [ -s "$f" ] || fail "--out wrote no chart-$p.svg"
    python3 -c 'import sys, xml.etree.ElementTree as ET; ET.parse(sys.argv[1])' "$f" ||
        fail "chart-$p.svg is not well-formed XML"
    want=$(python3 -c 'import json, sys
r = [r for r in json.load(open(sys.argv[1]))["results"] if r["policy"] == sys.argv[2]][0]
print("%s: trace on %s (utilisation %.1f%%, allocation %.1f%%)" % (sys.argv[2], sys.argv[3], r["utilization_pct"], r["allocation_pct"]))' \
        "$T/outdir/summary.json" "$p" "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["cluster"])' "$T/outdir/summary.json")")
    grep -qF "$want" "$f" || fail "chart-$p.svg title is not: $want"
done

# --seeds A-B: the seed list, and a standard deviation beside the figures
run 0 "$GPUORCH" sim --cluster $CLUSTER --trace "$T/trace.csv" --policy random,fifo --seeds 1-3 -o json
cp "$T/out" "$T/seeds.json"
json_ok "$T/seeds.json" 'all(r["seeds"] == [1, 2, 3] for r in d["results"])'
json_ok "$T/seeds.json" 'all(k in r for r in d["results"] for k in ("utilization_pct_std", "allocation_pct_std", "makespan_s_std", "jobs_finished_std"))'
json_ok "$T/seeds.json" 'all(r["utilization_pct_std"] >= 0 for r in d["results"])'

# a Philly table whose header never closes its quote: refused, nothing read past it (ASan)
printf '"timestamp,duration,num_gpus,cluster\n1,2,3' >"$T/openquote.csv"
run 2 "$GPUORCH" sim --cluster $CLUSTER --trace "$T/openquote.csv" --format philly --policy fifo
err_has "openquote.csv:1: a Philly job table needs the columns"

echo "ok: test_sim.sh"
