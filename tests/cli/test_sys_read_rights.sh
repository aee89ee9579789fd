#!/bin/sh
# test_sys_read_rights.sh: who may read a job's secrets. A job's env values and its
# logs are for admins and the leads and members of its team, as Kubernetes keeps
# Secrets to a namespace; a viewer, a lead or member of another team sees the job with
# its env names and null values ("env_redacted": true) and gets 403 on its logs; agent
# tokens read no job at all. Checked for each role against a running job with a real
# agent (simulated GPUs), through the API and the CLI.
# Usage: test_sys_read_rights.sh PATH/TO/gpuorch (run from the repository root).
set -eu

GPUORCH=${1:?usage: $0 PATH/TO/gpuorch}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sys.sh"

start_server
start_agent h100-0 sim:H100-80GB-SXM5:8
wait_nodes 1

MEMBER=$("$GPUORCH" token create --role member --team search --user mia)
LEAD=$("$GPUORCH" token create --role lead --team search --user leo)
OTHER=$("$GPUORCH" token create --role member --team research --user olga)
OTHER_LEAD=$("$GPUORCH" token create --role lead --team research --user otto)
VIEWER=$("$GPUORCH" token create --role viewer --user vera)

TOKEN=$MEMBER api POST /api/v1/jobs '{"name": "secretive", "team": "search", "gpus": 1,
  "env": {"DB_PASSWORD": "hunter2", "MODE": "train"},
  "command": ["sh", "-c", "echo the output of rank $RANK"]}'
[ "$STATUS" = 201 ] || fail "the member's submit answered $STATUS: $(cat "$T/out")"
ID=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$T/out")
wait_for "$ID" 'd["state"] == "succeeded"'
i=0
until "$GPUORCH" logs "$ID" >"$T/log" 2>/dev/null && grep -q "the output of rank 0" "$T/log"; do
    i=$((i + 1)); [ $i -lt 50 ] || fail "the log of job $ID never showed its output"; sleep 0.1
done

# may read: env values and logs
for who in ADMIN MEMBER LEAD; do
    eval "TOKEN=\$$who"
    export TOKEN
    api GET "/api/v1/jobs/$ID"
    [ "$STATUS" = 200 ] || fail "$who: the job answered $STATUS"
    json_ok "$T/out" 'd["spec"]["env"] == {"DB_PASSWORD": "hunter2", "MODE": "train"} and "env_redacted" not in d'
    api GET "/api/v1/jobs/$ID/logs"
    [ "$STATUS" = 200 ] || fail "$who: the logs answered $STATUS"
    grep -q "the output of rank 0" "$T/out" || fail "$who: the logs lack the output"
    run 0 env GPUORCH_TOKEN="$TOKEN" "$GPUORCH" logs "$ID"
    out_has "the output of rank 0"
done

# may not: the job without env values, no logs
for who in VIEWER OTHER OTHER_LEAD; do
    eval "TOKEN=\$$who"
    export TOKEN
    api GET "/api/v1/jobs/$ID"
    [ "$STATUS" = 200 ] || fail "$who: the job answered $STATUS"
    json_ok "$T/out" 'd["spec"]["env"] == {"DB_PASSWORD": None, "MODE": None} and d["env_redacted"] is True'
    grep -q hunter2 "$T/out" && fail "$who: the secret is in the job's reply"
    api GET "/api/v1/jobs/$ID/logs"
    [ "$STATUS" = 403 ] || fail "$who: the logs answered $STATUS"
    json_ok "$T/out" '"only admins and the leads and members of its team" in d["error"]'
    api GET "/api/v1/jobs/$ID/logs?rank=0&run=1"
    [ "$STATUS" = 403 ] || fail "$who: the logs of run 1 answered $STATUS"
    # the listing carries no spec; the job itself is visible
    api GET "/api/v1/jobs"
    grep -q hunter2 "$T/out" && fail "$who: the secret is in the job list"
    run 1 env GPUORCH_TOKEN="$TOKEN" "$GPUORCH" logs "$ID"
    err_has "may not read the logs"
    run 0 env GPUORCH_TOKEN="$TOKEN" "$GPUORCH" queue --state succeeded
    out_has "secretive"
done

# an agent token reads no job
TOKEN=$AGENT_TOKEN api GET "/api/v1/jobs/$ID"
[ "$STATUS" = 403 ] || fail "an agent token reading a job answered $STATUS"
TOKEN=$AGENT_TOKEN api GET "/api/v1/jobs/$ID/logs"
[ "$STATUS" = 403 ] || fail "an agent token reading logs answered $STATUS"
echo "ok: env values and logs for admins and the job's team; others see names only and get 403"
