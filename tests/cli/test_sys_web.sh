#!/bin/sh
# test_sys_web.sh: what the portal needs of the server, without a browser: the static
# files at / and /web/... (their types, 404 for what is not there or not the portal's,
# no way out of the web directory, no token needed), GET /api/v1/whoami for each role,
# GET /api/v1/utilization's shape and its query check, and `server --web` refusing a
# directory that is not there.
# Usage: test_sys_web.sh PATH/TO/gpuorch (run from the repository root).
set -eu

GPUORCH=${1:?usage: $0 PATH/TO/gpuorch}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sys.sh"

run 2 "$GPUORCH" server --config examples/cluster-demo.yaml --db "sqlite:$T/x.db" --listen 127.0.0.1:0 \
    --web "$T/nowhere"
grep -q -- "--web $T/nowhere: no such directory" "$T/err" || fail "no clear error for a missing --web"

# A web directory of our own, with a file beside it that must stay out of reach.
mkdir -p "$T/site/views"
echo '<h1>portal</h1>' >"$T/site/index.html"
echo 'export const x = 1;' >"$T/site/views/a.js"
echo 'body {}' >"$T/site/style.css"
echo 'secret' >"$T/site/.env"
echo 'secret' >"$T/outside.txt"
start_server --web "$T/site"

# get PATH: the status in $STATUS, the Content-Type in $CTYPE, the body in $T/out
get() {
    STATUS=$(curl -sS --path-as-is -o "$T/out" -D "$T/headers" -w '%{http_code}' "$URL$1")
    CTYPE=$(sed -n 's/^[Cc]ontent-[Tt]ype: *//p' "$T/headers" | tr -d '\r')
}
get /
[ "$STATUS" = 200 ] && [ "$CTYPE" = "text/html; charset=utf-8" ] || fail "/: $STATUS $CTYPE"
grep -q '<h1>portal</h1>' "$T/out" || fail "/ is not index.html"
get /web/views/a.js
[ "$STATUS" = 200 ] && [ "$CTYPE" = "text/javascript; charset=utf-8" ] || fail "a.js: $STATUS $CTYPE"
get /web/style.css
[ "$STATUS" = 200 ] && [ "$CTYPE" = "text/css; charset=utf-8" ] || fail "style.css: $STATUS $CTYPE"
for p in /web/missing.js /web/.env /web/../outside.txt /web/views/../../outside.txt \
    /web/%2e%2e/outside.txt /web/ /web/views /index.html /outside.txt; do
    get "$p"
    [ "$STATUS" = 404 ] || fail "$p answered $STATUS, not 404"
    if grep -q secret "$T/out"; then fail "$p leaked a file"; fi
done
STATUS=$(curl -sS -o "$T/out" -w '%{http_code}' -X POST "$URL/")
[ "$STATUS" = 405 ] || fail "POST / answered $STATUS, not 405"

# whoami, for every role but an agent's
api GET /api/v1/whoami
[ "$STATUS" = 200 ] || fail "whoami answered $STATUS"
json_ok "$T/out" 'd["role"] == "admin" and d["team"] is None and d["user"] == "admin" and isinstance(d["token_id"], int)'
for spec in "lead research" "member search" "viewer"; do
    set -- $spec
    if [ $# = 2 ]; then
        body="{\"role\": \"$1\", \"team\": \"$2\", \"user\": \"u-$1\"}"
        team="'$2'"
    else
        body="{\"role\": \"$1\"}"
        team=None
    fi
    api POST /api/v1/tokens "$body"
    [ "$STATUS" = 201 ] || fail "token create answered $STATUS"
    tok=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["token"])' "$T/out")
    id=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$T/out")
    TOKEN=$tok api GET /api/v1/whoami
    [ "$STATUS" = 200 ] || fail "whoami for $1 answered $STATUS"
    user=None
    [ $# = 2 ] && user="'u-$1'"
    json_ok "$T/out" "d == {'role': '$1', 'team': $team, 'user': $user, 'token_id': $id}"
done
api POST /api/v1/tokens '{"role": "agent"}'
agent=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["token"])' "$T/out")
TOKEN=$agent api GET /api/v1/whoami
[ "$STATUS" = 403 ] || fail "whoami for an agent answered $STATUS, not 403"
TOKEN=gpo_unknown api GET /api/v1/whoami
[ "$STATUS" = 401 ] || fail "whoami with an unknown token answered $STATUS, not 401"

# utilization: the models of the cluster with their GPUs, a sample taken at start
api GET '/api/v1/utilization?minutes=60'
[ "$STATUS" = 200 ] || fail "utilization answered $STATUS"
json_ok "$T/out" 'd["period_ms"] == 10000 and d["to_ms"] - d["from_ms"] == 3600000 and len(d["t_ms"]) >= 1'
json_ok "$T/out" '{m["model"]: m["gpus"] for m in d["models"]} == {"H100-80GB-SXM5": 16, "A100-80GB": 8, "L4": 4}'
json_ok "$T/out" 'all(len(m["allocated"]) == len(d["t_ms"]) == len(m["busy"]) for m in d["models"])'
api GET '/api/v1/utilization'
[ "$STATUS" = 200 ] || fail "utilization without minutes answered $STATUS"
for bad in 0 61 x 1.5 ''; do
    api GET "/api/v1/utilization?minutes=$bad"
    [ "$STATUS" = 400 ] || fail "minutes=$bad answered $STATUS, not 400"
    grep -q "query 'minutes': expected a whole number from 1 to 60" "$T/out" || fail "minutes=$bad: $(cat "$T/out")"
done
echo "ok"
