#!/bin/sh
# test_sys_reorder.sh: a team lead reorders the team's pending jobs (PATCH before/after),
# a member and another team's lead may not, and the order survives a SIGKILL of the
# server. No agents: every job stays pending.
# Usage: test_sys_reorder.sh PATH/TO/gpuorch (run from the repository root).
set -eu

GPUORCH=${1:?usage: $0 PATH/TO/gpuorch}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sys.sh"

start_server
LEAD=$("$GPUORCH" token create --role lead --team research)
MEMBER=$("$GPUORCH" token create --role member --team research)
OTHER=$("$GPUORCH" token create --role lead --team search)
for n in a b c; do
    submit "{\"name\": \"$n\", \"team\": \"research\", \"gpus\": 1, \"command\": [\"true\"]}"
    eval "ID_$n=$ID"
done

order() {
    api GET "/api/v1/jobs?state=pending"
    python3 -c 'import json,sys; print(" ".join("%s%s" % (j["name"], j["position"]) for j in json.load(open(sys.argv[1]))["jobs"]))' "$T/out"
}
[ "$(order)" = "a1 b2 c3" ] || fail "initial order: $(order)"

TOKEN=$MEMBER api PATCH "/api/v1/jobs/$ID_c" "{\"before\": $ID_a}"
[ "$STATUS" = 403 ] || fail "a member reordered (status $STATUS)"
TOKEN=$OTHER api PATCH "/api/v1/jobs/$ID_c" "{\"before\": $ID_a}"
[ "$STATUS" = 403 ] || fail "another team's lead reordered (status $STATUS)"
TOKEN=$LEAD api PATCH "/api/v1/jobs/$ID_c" "{\"before\": $ID_a, \"after\": $ID_b}"
[ "$STATUS" = 400 ] || fail "before and after at once answered $STATUS"
[ "$(order)" = "a1 b2 c3" ] || fail "a refused request changed the order: $(order)"

TOKEN=$LEAD api PATCH "/api/v1/jobs/$ID_c" "{\"before\": $ID_a}"
[ "$STATUS" = 200 ] || fail "the lead's move answered $STATUS: $(cat "$T/out")"
[ "$(order)" = "c1 a2 b3" ] || fail "after moving c before a: $(order)"
TOKEN=$LEAD api PATCH "/api/v1/jobs/$ID_a" "{\"after\": $ID_b}"
[ "$(order)" = "c1 b2 a3" ] || fail "after moving a after b: $(order)"

kill -KILL "$SERVER_PID"
start_server
[ "$(order)" = "c1 b2 a3" ] || fail "the order did not survive a restart: $(order)"
echo ok
