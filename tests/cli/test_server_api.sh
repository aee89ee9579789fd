#!/bin/sh
# test_server_api.sh: `gpuorch server` on a loopback port with a fresh SQLite store and
# the demo cluster, driven with curl: the first admin token, 401/403/404/405 for who
# and where, 400 (malformed JSON, an unknown field named), 413 past 1 MiB, 422 for a
# job the cluster can never run, a submission queued first with a reason (no agent has
# reported, so no node is ready), cancellation and its 409, /metrics and /healthz, and
# a member token that may submit for its own team only. No agent runs: nothing starts.
# Usage: test_server_api.sh PATH/TO/gpuorch (run from the repository root).
set -eu

GPUORCH=${1:?usage: $0 PATH/TO/gpuorch}
. "$(dirname "$0")/lib.sh"
command -v curl >/dev/null || fail "curl is needed"

# ---- bad flags: usage, exit 2 ----
run 2 "$GPUORCH" server
err_has "--config FILE is required"
run 2 "$GPUORCH" server --config examples/cluster-demo.yaml --heartbeat-ms soon
err_has "heartbeat-ms must be a whole number"
run 2 "$GPUORCH" server --config examples/cluster-demo.yaml --listen 127.0.0.1:99999 \
    --db "sqlite:$T/gpuorch.db"
err_has "the port must be a number"
[ ! -e "$T/gpuorch.db" ] && [ ! -e "$T/admin.token" ] || fail "a bad flag left files behind"

"$GPUORCH" server --config examples/cluster-demo.yaml --db "sqlite:$T/gpuorch.db" \
    --listen 127.0.0.1:0 >"$T/server.out" 2>"$T/server.err" &
PID=$!
trap 'kill $PID 2>/dev/null || true; wait $PID 2>/dev/null || true; rm -rf "$T"' EXIT INT TERM

# the server prints the port the system gave it
i=0
until grep -q "listening on" "$T/server.out" 2>/dev/null; do
    kill -0 $PID 2>/dev/null || { cat "$T/server.err" >&2; fail "the server exited"; }
    i=$((i + 1))
    [ $i -lt 200 ] || fail "the server did not start within 20 s"
    sleep 0.1
done
URL=$(sed -n 's/^gpuorch server listening on \(http:[^ ]*\)$/\1/p' "$T/server.out")
[ -n "$URL" ] || fail "no URL in: $(cat "$T/server.out")"
grep -q "^admin token written to $T/admin.token$" "$T/server.out" || fail "no admin token line"
[ "$(stat -c %a "$T/admin.token")" = 600 ] || fail "admin.token is not mode 0600"
ADMIN=$(cat "$T/admin.token")

# api WANT_STATUS TOKEN METHOD PATH [curl args]: the body lands in $T/out
api() {
    want=$1 tok=$2 method=$3 path=$4
    shift 4
    if [ -n "$tok" ]; then
        set -- -H "Authorization: Bearer $tok" "$@"
    fi
    code=$(curl -s -o "$T/out" -w '%{http_code}' -X "$method" "$@" "$URL$path") ||
        fail "curl failed: $method $path"
    : >"$T/err"
    [ "$code" = "$want" ] || fail "$method $path: HTTP $code, expected $want"
}
# submit WANT_STATUS TOKEN BODY
submit() {
    api "$1" "$2" POST /api/v1/jobs -H 'Content-Type: application/json' --data-binary "$3"
}
error_has() {
    json_ok "$T/out" "'$1' in d['error']"
}

# a second server cannot take the same port
mkdir "$T/second"
run 1 "$GPUORCH" server --config examples/cluster-demo.yaml --db "sqlite:$T/second/db" \
    --listen "${URL#http://}"
err_has "cannot listen on ${URL#http://}: Address already in use"

# ---- who may call what ----
api 401 "" GET /api/v1/jobs
error_has "no token"
api 401 "gpo_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" GET /api/v1/jobs
api 401 "not-a-token" GET /api/v1/jobs
api 404 "$ADMIN" GET /api/v1/nothing
api 405 "$ADMIN" PUT /api/v1/jobs
error_has "allowed: POST, GET"
api 200 "" GET /healthz
[ "$(cat "$T/out")" = ok ] || fail "/healthz did not say ok"

api 201 "$ADMIN" POST /api/v1/tokens --data-binary '{"role": "viewer", "name": "dash"}'
json_ok "$T/out" "d['role'] == 'viewer' and d['team'] is None and d['token'].startswith('gpo_')"
VIEWER=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["token"])' "$T/out")
api 201 "$ADMIN" POST /api/v1/tokens --data-binary '{"role": "agent"}'
AGENT=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["token"])' "$T/out")
api 400 "$ADMIN" POST /api/v1/tokens --data-binary '{"role": "member"}'
error_has "team"
api 400 "$ADMIN" POST /api/v1/tokens --data-binary '{"role": "member", "team": "nobody"}'
error_has "nobody"
api 400 "$ADMIN" POST /api/v1/tokens --data-binary '{"role": "root"}'
api 403 "$VIEWER" POST /api/v1/tokens --data-binary '{"role": "admin"}'

GOOD='{"name": "bert", "team": "search", "project": "ranking", "gpus": 2, "command": ["sleep", "60"]}'
submit 403 "$VIEWER" "$GOOD"
error_has "viewer"
submit 403 "$AGENT" "$GOOD"
error_has "agent"
api 403 "$ADMIN" POST /api/v1/agent/heartbeat --data-binary '{}'
api 200 "$VIEWER" GET /api/v1/jobs

# ---- bad submissions change nothing ----
submit 400 "$ADMIN" '{"name": "a", "team": '
error_has "request:"
submit 400 "$ADMIN" '{"name": "a", "team": "search", "gpus": 1, "colour": "red", "command": ["x"]}'
error_has "colour"
submit 400 "$ADMIN" ''
head -c 2097152 /dev/zero | tr '\0' 'a' >"$T/big"
api 413 "$ADMIN" POST /api/v1/jobs -H 'Content-Type: application/json' --data-binary "@$T/big"
error_has "1 MiB"
# a MIG profile of the A100-40GB: no GPU of this cluster has it
submit 422 "$ADMIN" '{"name": "m", "team": "search", "mig": "1g.5gb", "command": ["x"]}'
error_has "1g.5gb"
# more GPUs on one node than any node holds
submit 422 "$ADMIN" '{"name": "wide", "team": "research", "gpus": 12, "command": ["x"]}'
error_has "wide"
# spot alone, for work an interruption would lose
submit 422 "$ADMIN" '{"name": "s", "team": "research", "capacity": "spot", "command": ["x"]}'
error_has "work that is not preemptible may not run on spot capacity"
submit 422 "$ADMIN" '{"name": "s", "team": "research", "capacity": "spot", "preemptible": true, "command": ["x"]}'
error_has "give it a checkpoint interval or cost, or allow another tier"
api 200 "$ADMIN" GET /api/v1/jobs
json_ok "$T/out" "d['jobs'] == []"

# ---- a good one waits: no agent has reported, so no node is ready ----
submit 201 "$ADMIN" "$GOOD"
json_ok "$T/out" "d['id'] == 1 and d['name'] == 'bert' and d['state'] == 'pending' and d['position'] == 1"
i=0
while :; do
    api 200 "$VIEWER" GET /api/v1/jobs
    python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))["jobs"][0]["reason"] else 1)' \
        "$T/out" && break
    i=$((i + 1))
    [ $i -lt 50 ] || fail "no reason after 5 s: $(cat "$T/out")"
    sleep 0.1
done
json_ok "$T/out" "len(d['jobs']) == 1 and d['jobs'][0]['state'] == 'pending' and d['jobs'][0]['position'] == 1"
json_ok "$T/out" "d['jobs'][0]['team'] == 'search' and d['jobs'][0]['workers'] == 1 and d['jobs'][0]['gpu_equivalents'] == 2"
api 200 "$VIEWER" GET "/api/v1/jobs?state=running,succeeded"
json_ok "$T/out" "d['jobs'] == []"
api 200 "$VIEWER" GET "/api/v1/jobs?state=active&team=search"
json_ok "$T/out" "[j['id'] for j in d['jobs']] == [1]"
api 400 "$VIEWER" GET "/api/v1/jobs?state=sleeping"
error_has "sleeping"
api 200 "$VIEWER" GET /api/v1/jobs/1
json_ok "$T/out" "d['spec']['name'] == 'bert' and d['spec']['gpus'] == 2 and isinstance(d['events'], list)"
api 404 "$VIEWER" GET /api/v1/jobs/999
api 404 "$VIEWER" GET /api/v1/jobs/abc
# a job's logs are its team's and the admins' (docs/api.md, Who may read what)
api 403 "$VIEWER" GET /api/v1/jobs/1/logs
api 404 "$ADMIN" GET /api/v1/jobs/1/logs

api 200 "$VIEWER" GET /api/v1/nodes
json_ok "$T/out" "len(d['nodes']) == 4 and {n['state'] for n in d['nodes']} == {'unknown'}"
json_ok "$T/out" "[g['mode'] for g in d['nodes'][0]['gpus']] == ['whole'] * 8"
api 200 "$VIEWER" GET /api/v1/teams
json_ok "$T/out" "[t['name'] for t in d['teams']] == ['search', 'research', 'platform']"
json_ok "$T/out" "d['teams'][0]['pending_jobs'] == 1 and d['teams'][0]['guaranteed_gpus'] == 8"
api 403 "$VIEWER" PUT /api/v1/teams/search --data-binary '{"burst_gpus": 20}'
api 200 "$ADMIN" PUT /api/v1/teams/search --data-binary '{"burst_gpus": 20}'
json_ok "$T/out" "d['burst_gpus'] == 20 and d['guaranteed_gpus'] == 8"
api 400 "$ADMIN" PUT /api/v1/teams/search --data-binary '{"burst": 20}'
error_has "burst"
api 404 "$ADMIN" PUT /api/v1/teams/nobody --data-binary '{"weight": 1}'
api 200 "$VIEWER" GET /api/v1/usage
json_ok "$T/out" "d['group_by'] == ['team', 'project'] and d['total']['jobs'] == 0"
api 200 "$VIEWER" GET "/api/v1/usage?format=csv&group_by=team,tier"
[ "$(head -1 "$T/out")" = "team,tier,gpu_hours,cost_usd,jobs,kind" ] || fail "CSV header"
api 400 "$VIEWER" GET "/api/v1/usage?group_by=colour"

# ---- cancel ----
api 200 "$ADMIN" DELETE /api/v1/jobs/1
json_ok "$T/out" "d['id'] == 1 and d['state'] == 'cancelled' and d['position'] is None"
api 409 "$ADMIN" DELETE /api/v1/jobs/1
api 404 "$ADMIN" DELETE /api/v1/jobs/77

# ---- health and metrics ----
api 200 "" GET /metrics
grep -q '^gpuorch_queue_length{priority="normal"} 0$' "$T/out" || fail "metrics: queue length"
grep -q '^gpuorch_gpus{model="H100-80GB-SXM5"} 16$' "$T/out" || fail "metrics: GPUs"
grep -q '^gpuorch_nodes{state="unknown"} 4$' "$T/out" || fail "metrics: nodes"
grep -q '^gpuorch_schedule_cycle_seconds_count [1-9]' "$T/out" || fail "metrics: cycles"

# ---- a member submits for its own team only ----
api 201 "$ADMIN" POST /api/v1/tokens --data-binary '{"role": "member", "team": "search", "name": "ci"}'
json_ok "$T/out" "d['role'] == 'member' and d['team'] == 'search'"
MEMBER=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["token"])' "$T/out")
# team taken from the token; YAML accepted; a list answers with a list
api 201 "$MEMBER" POST /api/v1/jobs -H 'Content-Type: application/yaml' \
    --data-binary "$(printf -- '- name: r1\n  gpus: 1\n  command: [x]\n- name: r2\n  mig: 1g.10gb\n  command: [x]\n')"
json_ok "$T/out" "[j['name'] for j in d['jobs']] == ['r1', 'r2'] and [j['position'] for j in d['jobs']] == [1, 2]"
api 200 "$VIEWER" GET "/api/v1/jobs?state=pending"
json_ok "$T/out" "[j['name'] for j in d['jobs']] == ['r1', 'r2'] and {j['team'] for j in d['jobs']} == {'search'}"
submit 403 "$MEMBER" '{"name": "x", "team": "research", "gpus": 1, "command": ["x"]}'
error_has "research"
api 403 "$MEMBER" PATCH /api/v1/jobs/2 --data-binary '{"priority": "high"}'
api 200 "$ADMIN" PATCH /api/v1/jobs/3 --data-binary '{"priority": "high"}'
json_ok "$T/out" "d['priority'] == 'high' and d['position'] == 1"
api 400 "$ADMIN" PATCH /api/v1/jobs/3 --data-binary '{"priority": "urgent"}'
api 200 "$MEMBER" DELETE /api/v1/jobs/2
# a list of one job is answered as a list, one job as an object
submit 201 "$ADMIN" '[{"name": "l1", "team": "platform", "gpus": 1, "command": ["x"]}]'
json_ok "$T/out" "list(d) == ['jobs'] and [j['name'] for j in d['jobs']] == ['l1']"
api 201 "$ADMIN" POST /api/v1/jobs -H 'Content-Type: application/yaml' \
    --data-binary "$(printf -- '# one job\n---\nname: y1\nteam: platform\ncommand: [x]\n')"
json_ok "$T/out" "d['name'] == 'y1' and d['state'] == 'pending'"

# ---- hostile bodies are answered at once, and the API stays up ----
printf '%%\377' >"$T/hang.body"
api 400 "$ADMIN" POST /api/v1/jobs -H 'Content-Type: application/yaml' --max-time 10 \
    --data-binary @"$T/hang.body"
error_has "not UTF-8 text"
python3 -c '
lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
for i in range(1, 10):
    lines.append("a%d: &a%d [%s]" % (i, i, ", ".join(["*a%d" % (i - 1)] * 10)))
print("\n".join(lines))' >"$T/laughs.body"
api 400 "$ADMIN" POST /api/v1/jobs --max-time 10 --data-binary @"$T/laughs.body"
error_has "expand to more than"
api 200 "$ADMIN" GET /api/v1/jobs --max-time 5
# JSON goes to jansson: blanks after it and thousands of keys cost nothing (they took
# 76 s and 17 s through the YAML reader); the environment's size is bounded by name
python3 -c '
import sys
sys.stdout.write("{\"name\": \"sp\", \"team\": \"search\", \"command\": [\"x\"]}" + " " * 100000)' \
    >"$T/spaces.body"
api 201 "$ADMIN" POST /api/v1/jobs -H 'Content-Type: application/json' --max-time 5 \
    --data-binary @"$T/spaces.body"
json_ok "$T/out" "d['name'] == 'sp'"
api 201 "$ADMIN" POST /api/v1/jobs --max-time 5 --data-binary @"$T/spaces.body"
python3 -c '
import json
env = {"V%d" % i: "x" for i in range(10000)}
print(json.dumps({"name": "env", "team": "search", "command": ["x"], "env": env}))' >"$T/env.body"
api 400 "$ADMIN" POST /api/v1/jobs -H 'Content-Type: application/json' --max-time 5 \
    --data-binary @"$T/env.body"
error_has "has 10000 entries; a job may set at most 1024"
python3 -c '
import json
print(json.dumps([{"name": "n%d" % i, "team": "search", "command": ["x"]} for i in range(1001)]))' \
    >"$T/many.body"
api 413 "$ADMIN" POST /api/v1/jobs -H 'Content-Type: application/json' --max-time 5 \
    --data-binary @"$T/many.body"
error_has "holds 1001 jobs; one request may submit at most 1000"
# YAML: libfyaml looks ahead through a whole flow list (900 KB of '[' took 1.3 s), so a
# request's YAML is bounded in size and in values
python3 -c 'import sys; sys.stdout.write("[x]\n" + "[" * 900000)' >"$T/brackets.body"
api 413 "$ADMIN" POST /api/v1/jobs -H 'Content-Type: application/yaml' --max-time 5 \
    --data-binary @"$T/brackets.body"
error_has "a YAML body is at most 64 KiB"
python3 -c 'import sys; sys.stdout.write("---\n" * 15000)' >"$T/docs.body"
api 400 "$ADMIN" POST /api/v1/jobs -H 'Content-Type: application/yaml' --max-time 5 \
    --data-binary @"$T/docs.body"
error_has "more than 40000 YAML values to read"
# a NUL in YAML (libfyaml 0.7.12 crashed freeing the parser that stopped on it: found by
# fuzz_yaml_guard, tests/fuzz/regressions/yaml_guard/nul-after-merge-key.yaml)
api 400 "$ADMIN" POST /api/v1/jobs -H 'Content-Type: application/yaml' \
    --data-binary @tests/fuzz/regressions/yaml_guard/nul-after-merge-key.yaml
error_has "a control character (byte 0x00): YAML allows none"
api 200 "" GET /healthz
# YAML's flow style with no declared type is still YAML when it is not JSON
api 201 "$ADMIN" POST /api/v1/jobs --data-binary '{name: flow, team: search, command: [x]}'
json_ok "$T/out" "d['name'] == 'flow'"
# and so is such a file given to gpuorch submit, whatever its name
printf '{name: flow-file, team: search, command: [x]}\n' >"$T/flowjob"
"$GPUORCH" submit --server "$URL" --token "$ADMIN" "$T/flowjob" >"$T/flow.out" 2>&1 ||
    fail "gpuorch submit of a flow-style YAML file: $(cat "$T/flow.out")"

# ---- it stops cleanly ----
kill -TERM $PID
wait $PID || fail "the server exited with $? on SIGTERM"
[ ! -s "$T/server.err" ] || ! grep -q "level=error" "$T/server.err" ||
    fail "errors logged: $(cat "$T/server.err")"
