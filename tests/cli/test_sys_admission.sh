#!/bin/sh
# test_sys_admission.sh: what a submission may ask for, by role, and what the cluster
# could never run, through the real server (no agent: nothing needs to start). Every
# role (admin, lead, member, viewer, agent) submits a job with each field a role may not
# set (production and high priority, another team, a project outside the team, a tier
# the team may not use) and gets 201 or 403 with the reason; jobs that no state of the
# cluster could run get 422, and `gpuorch validate` prints the same sentence as
# `gpuorch submit` for each of them.
# Usage: test_sys_admission.sh PATH/TO/gpuorch (run from the repository root).
set -eu

GPUORCH=${1:?usage: $0 PATH/TO/gpuorch}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sys.sh"

# the demo cluster, but team search may use only reserved and owned capacity
sed 's/^    projects: \[ranking, retrieval\]$/&\n    capacity: [reserved, owned]/' \
    examples/cluster-demo.yaml >"$T/cluster.yaml"
grep -q 'capacity: \[reserved, owned\]' "$T/cluster.yaml" || fail "the test cluster lacks its capacity line"
CLUSTER=$T/cluster.yaml
start_server

token() { # ROLE [TEAM]: a new token of that role
    "$GPUORCH" token create --role "$1" ${2:+--team "$2"} --name "t-$1" || fail "token create $1"
}
LEAD=$(token lead search)
MEMBER=$(token member search)
VIEWER=$(token viewer)
AGENT=$(token agent)

# job FIELDS: a job with the extra JSON fields, of team search and project ranking unless
# they say otherwise
job() {
    case "$1" in *'"team"'*) team= ;; *) team=', "team": "search"' ;; esac
    case "$1" in *'"project"'*) project= ;; *) project=', "project": "ranking"' ;; esac
    printf '{"name": "j", "gpus": 1, "command": ["sleep", "1"]%s%s%s}' "$team" "$project" "$1"
}
# expect ROLE TOKEN STATUS FIELDS [PHRASE]: submit, check the status (and the error)
expect() {
    TOKEN=$2 api POST /api/v1/jobs "$(job "$4")"
    [ "$STATUS" = "$3" ] || fail "$1 submitting {$4}: HTTP $STATUS, expected $3: $(cat "$T/out")"
    if [ -n "${5:-}" ]; then
        grep -q -- "$5" "$T/out" || fail "$1 submitting {$4}: the reply lacks '$5': $(cat "$T/out")"
    fi
}

PROD=', "priority": "production"'
HIGH=', "priority": "high"'
LOW=', "priority": "low"'
OTHER=', "team": "research", "project": "vision"'
PROJECT=', "project": "vision"'
TIER=', "capacity": ["reserved", "on-demand"]'

expect admin "$ADMIN" 201 ""
expect admin "$ADMIN" 201 "$PROD"
expect admin "$ADMIN" 201 "$HIGH"
expect admin "$ADMIN" 201 "$LOW"
expect admin "$ADMIN" 201 "$OTHER"
expect admin "$ADMIN" 403 "$PROJECT" "team 'search' has no project 'vision' (its projects: ranking, retrieval)"
expect admin "$ADMIN" 403 "$TIER" "team 'search' may use owned, reserved capacity, not on-demand"

expect lead "$LEAD" 201 ""
expect lead "$LEAD" 403 "$PROD" "only an admin may submit production work"
expect lead "$LEAD" 201 "$HIGH"
expect lead "$LEAD" 201 "$LOW"
expect lead "$LEAD" 403 "$OTHER" "a lead of team 'search' may not submit for team 'research'"
expect lead "$LEAD" 403 "$PROJECT" "team 'search' has no project 'vision'"
expect lead "$LEAD" 403 "$TIER" "may use owned, reserved capacity, not on-demand"

expect member "$MEMBER" 201 ""
expect member "$MEMBER" 403 "$PROD" "only an admin may submit production work"
expect member "$MEMBER" 403 "$HIGH" "a member submits at normal or low; the lead of team 'search' may raise it to high"
expect member "$MEMBER" 201 "$LOW"
expect member "$MEMBER" 403 "$OTHER" "a member of team 'search' may not submit for team 'research'"
expect member "$MEMBER" 403 "$PROJECT" "team 'search' has no project 'vision'"
expect member "$MEMBER" 403 "$TIER" "may use owned, reserved capacity, not on-demand"

for f in "" "$PROD" "$HIGH" "$LOW" "$OTHER" "$PROJECT" "$TIER"; do
    expect viewer "$VIEWER" 403 "$f" "a viewer token may not submit jobs"
    expect agent "$AGENT" 403 "$f" "an agent token may only use /api/v1/agent/"
done

# what was accepted is exactly what was allowed, as asked: 5 + 3 + 2 jobs
api GET "/api/v1/jobs?state=pending"
json_ok "$T/out" "len(d['jobs']) == 10"
json_ok "$T/out" "sorted(j['priority'] for j in d['jobs']) == sorted(['normal', 'production', 'high', 'low', 'normal', 'normal', 'high', 'low', 'normal', 'low'])"
json_ok "$T/out" "[j['team'] for j in d['jobs']].count('research') == 1"

# the CLI says the same, exit 1 for a refusal of the role
printf '{"name": "p", "team": "search", "priority": "production", "gpus": 1, "command": ["x"]}' >"$T/prod.json"
GPUORCH_TOKEN=$MEMBER run 1 "$GPUORCH" submit "$T/prod.json"
err_has "only an admin may submit production work (HTTP 403)"

# ---- never: 422 from submit, the same sentence from validate ----
never() { # NAME YAML PHRASE
    printf '%s\n' "$2" >"$T/$1.yaml"
    run 2 "$GPUORCH" submit "$T/$1.yaml"
    err_has "$3"
    grep -q '(HTTP 422)' "$T/err" || fail "$1: not a 422: $(cat "$T/err")"
    said=$(sed -n "s|^gpuorch submit: $T/$1.yaml: \(.*\) (HTTP 422)\$|\1|p" "$T/err")
    [ -n "$said" ] || fail "$1: cannot read the submit message: $(cat "$T/err")"
    run 2 "$GPUORCH" validate "$CLUSTER" "$T/$1.yaml"
    grep -qxF "$T/$1.yaml: $said" "$T/err" || fail "$1: validate said '$(cat "$T/err")', submit '$said'"
}
never huge '{name: huge, team: research, workers: 10000, gpus: 8, command: [x]}' \
    "its 10000 workers could never all run at once: every node it may use together holds at most 3 of them"
never cpus '{name: cpus, team: research, gpus: 1, cpus: 5000, command: [x]}' \
    "it asks for 5000 CPUs per worker, and a node it may use has at most 192"
never mig '{name: mig, team: research, mig: 1g.10gb, gpu_models: [H100], command: [x]}' \
    "none of the pools it may use lets its GPUs be partitioned"
never burst '{name: burst, team: platform, workers: 2, gpus: 4, command: [x]}' \
    "more than team 'platform' may ever hold (its burst limit is 4)"
never leaf '{name: leaf, team: research, workers: 3, gpus: 8, topology: {scope: leaf, mode: required}, command: [x]}' \
    "no leaf holds its 3 workers (the most one holds is 2)"
never spot '{name: spot, team: research, gpus: 1, capacity: spot, preemptible: true, checkpoint: {interval: 30m}, command: [x]}' \
    "it may run on spot capacity"
# spot alone, for work an interruption would lose: refused before any pool is looked at
never unsaved '{name: unsaved, team: research, gpus: 1, capacity: spot, command: [x]}' \
    "work that is not preemptible may not run on spot capacity"
# team search's capacity keeps it off the L4s, the only on-demand pool
never l4 '{name: l4, team: search, gpus: 1, gpu_models: [L4], command: [x]}' \
    "team 'search' may use only the tiers of its 'capacity'"

# nothing of it was queued
api GET "/api/v1/jobs?state=pending"
json_ok "$T/out" "len(d['jobs']) == 10"

echo "ok: test_sys_admission.sh"
