#!/bin/sh
# test_sys_tokens.sh: tokens over their life, the user on jobs and the audit log,
# against a real server. Tokens are made with the CLI (a user, an expiry), listed (an
# admin sees all, anyone else their own; never a secret), revoked (the token's very
# next request, even one the cache had seen, gets 401 saying so); an expired token is
# refused saying it expired; the last admin token cannot be revoked. Jobs record their
# submitter's user. Every mutating request leaves one key=value line in
# <data-dir>/audit.log (mode 0600): submit, cancel, priority, team change, token create
# and revoke, and refusals.
# Usage: test_sys_tokens.sh PATH/TO/gpuorch (run from the repository root).
set -eu

GPUORCH=${1:?usage: $0 PATH/TO/gpuorch}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sys.sh"

start_server
AUDIT="$T/var/audit.log"

# ---- create, with a user; the user lands on the jobs it submits
run 0 "$GPUORCH" token create --role lead --team search --user alice --name laptop
ALICE=$(cat "$T/out")
run 0 "$GPUORCH" token create --role viewer --user bob --expires-at 2099-01-01
BOB=$(cat "$T/out")
run 0 "$GPUORCH" token create --role member --team research --user carol -o json
json_ok "$T/out" 'd["user"] == "carol" and d["expires_ms"] is None and d["token"].startswith("gpo_")'
CAROL_ID=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$T/out")
CAROL=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["token"])' "$T/out")
run 2 "$GPUORCH" token create --role viewer --expires-in soon
err_has "expires-in"
run 2 "$GPUORCH" token create --role viewer --expires-in 1h --expires-at 2030-01-01
api POST /api/v1/tokens '{"role": "viewer", "expires_at": "2001-01-01T00:00:00Z"}'
[ "$STATUS" = 400 ] || fail "an expiry in the past answered $STATUS"
api POST /api/v1/tokens '{"role": "viewer", "user": "two words"}'
[ "$STATUS" = 400 ] || fail "a user with a space answered $STATUS"

TOKEN=$ALICE api POST /api/v1/jobs '{"name": "by-alice", "team": "search", "gpus": 1, "command": ["sleep", "60"]}'
[ "$STATUS" = 201 ] || fail "alice's submit answered $STATUS: $(cat "$T/out")"
JA=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$T/out")
submit '{"name": "by-admin", "team": "search", "gpus": 1, "command": ["sleep", "60"]}'
JB=$ID
[ "$(field "$JA" 'd["user"]')" = alice ] || fail "job $JA does not name alice"
[ "$(field "$JB" 'd["user"]')" = admin ] || fail "the admin's job does not name user admin"
run 0 "$GPUORCH" queue
out_has "USER"
out_has "alice"

# ---- list: an admin sees every token, never a secret; carol sees her own
run 0 "$GPUORCH" token list -o json
json_ok "$T/out" 'len(d["tokens"]) == 4 and all("token" not in t and "hash" not in t for t in d["tokens"])'
json_ok "$T/out" '[t["user"] for t in d["tokens"]] == ["admin", "alice", "bob", "carol"]'
json_ok "$T/out" 'all(t["state"] == "active" and t["revoked_ms"] is None for t in d["tokens"])'
run 0 "$GPUORCH" token list
out_has "admin.token"
out_has "laptop"
run 0 env GPUORCH_TOKEN="$CAROL" "$GPUORCH" token list -o json
json_ok "$T/out" "[t['id'] for t in d['tokens']] == [$CAROL_ID]"
json_ok "$T/out" 'd["tokens"][0]["last_used_ms"] is not None'
TOKEN=$CAROL api DELETE "/api/v1/tokens/1"
[ "$STATUS" = 403 ] || fail "a member revoking a token answered $STATUS"

# ---- revoke: carol's token was cached (she used it just now); her next request fails
run 0 "$GPUORCH" token revoke "$CAROL_ID"
out_has "revoked token $CAROL_ID"
TOKEN=$CAROL api GET /api/v1/whoami
[ "$STATUS" = 401 ] || fail "a revoked token's next request answered $STATUS"
json_ok "$T/out" '"revoked" in d["error"]'
run 1 "$GPUORCH" token revoke "$CAROL_ID"
err_has "revoked already"
run 1 "$GPUORCH" token revoke 999
run 2 "$GPUORCH" token revoke abc
run 0 "$GPUORCH" token list -o json
json_ok "$T/out" "[t for t in d['tokens'] if t['id'] == $CAROL_ID][0]['state'] == 'revoked'"
# the last active admin token stays
api DELETE /api/v1/tokens/1
[ "$STATUS" = 409 ] || fail "revoking the last admin token answered $STATUS"

# ---- expiry: a token of 3 s works (and is cached), then is refused saying it expired
TOKEN=$BOB api GET /api/v1/jobs
[ "$STATUS" = 200 ] || fail "bob's token (expiring in 2099) answered $STATUS"
run 0 "$GPUORCH" token create --role viewer --user dave --expires-in 3s
DAVE=$(cat "$T/out")
TOKEN=$DAVE api GET /api/v1/jobs
[ "$STATUS" = 200 ] || fail "a token expiring in 3 s answered $STATUS at once"
sleep 3.2
TOKEN=$DAVE api GET /api/v1/jobs
[ "$STATUS" = 401 ] || fail "an expired token answered $STATUS"
json_ok "$T/out" '"expired" in d["error"]'
run 0 "$GPUORCH" token list -o json
json_ok "$T/out" '[t for t in d["tokens"] if t["user"] == "dave"][0]["state"] == "expired"'
json_ok "$T/out" '[t for t in d["tokens"] if t["user"] == "bob"][0]["expires_ms"] == 4070908800000'

# ---- still refused after a restart (the store, not only the cache, says so)
kill -TERM "$SERVER_PID"
start_server
TOKEN=$CAROL api GET /api/v1/whoami
[ "$STATUS" = 401 ] || fail "a revoked token works after a restart ($STATUS)"
TOKEN=$ALICE api GET /api/v1/whoami
[ "$STATUS" = 200 ] || fail "alice's token stopped working after a restart ($STATUS)"
TOKEN=$DAVE api GET /api/v1/whoami
[ "$STATUS" = 401 ] || fail "an expired token works after a restart ($STATUS)"
[ "$(field "$JA" 'd["user"]')" = alice ] || fail "job $JA lost its user across a restart"

# ---- the audit log: every mutation, with who, what and when
TOKEN=$ALICE api PATCH "/api/v1/jobs/$JA" '{"priority": "high"}'
[ "$STATUS" = 200 ] || fail "alice's priority change answered $STATUS: $(cat "$T/out")"
TOKEN=$ALICE api DELETE "/api/v1/jobs/$JA"
[ "$STATUS" = 200 ] || [ "$STATUS" = 202 ] || fail "alice's cancel answered $STATUS: $(cat "$T/out")"
api PUT /api/v1/teams/search '{"guaranteed_gpus": 8, "burst_gpus": 16, "weight": 2}'
[ "$STATUS" = 200 ] || fail "the team change answered $STATUS: $(cat "$T/out")"
TOKEN=$ALICE api PUT /api/v1/teams/search '{"guaranteed_gpus": 80, "burst_gpus": 160, "weight": 2}'
[ "$STATUS" = 403 ] || fail "a lead's team change answered $STATUS"
TOKEN=gpo_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA api DELETE "/api/v1/jobs/$JB"
[ "$STATUS" = 401 ] || fail "an unknown token's cancel answered $STATUS"
api GET /api/v1/jobs # reads are not audited

[ "$(stat -c %a "$AUDIT")" = 600 ] || fail "the audit log is mode $(stat -c %a "$AUDIT"), not 600"
python3 - "$AUDIT" "$JA" "$JB" "$CAROL_ID" <<'PY' || { cat "$AUDIT" >&2; fail "the audit log lacks a line"; }
import re, sys
path, ja, jb, carol = sys.argv[1:]
lines = [l.rstrip("\n") for l in open(path)]
def parse(l):
    return dict(m.group(1, 2) for m in re.finditer(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)', l))
recs = [parse(l) for l in lines]
assert all(r["time"].endswith("Z") and "method" in r and "status" in r for r in recs), "a line lacks time, method or status"
assert not [r for r in recs if r["method"] == "GET"], "a read was audited"
def one(**want):
    hits = [r for r in recs if all(r.get(k) == v for k, v in want.items())]
    assert hits, "no line with %s" % want
    return hits[0]
one(method="POST", path="/api/v1/tokens", status="201", user="admin", role="admin", target="token/2")
one(method="POST", path="/api/v1/jobs", status="201", user="alice", role="lead", team="search", target="job/" + ja)
one(method="POST", path="/api/v1/jobs", status="201", user="admin", target="job/" + jb)
one(method="PATCH", path="/api/v1/jobs/" + ja, status="200", user="alice", target="job/" + ja)
c = one(method="DELETE", path="/api/v1/jobs/" + ja, user="alice", target="job/" + ja)
assert c["status"] in ("200", "202"), c
one(method="PUT", path="/api/v1/teams/search", status="200", user="admin", target="team/search")
r = one(method="PUT", path="/api/v1/teams/search", status="403", user="alice")
assert "error" in r, r
one(method="DELETE", path="/api/v1/tokens/" + carol, status="200", user="admin", target="token/" + carol)
one(method="DELETE", path="/api/v1/tokens/1", status="409")
one(method="DELETE", path="/api/v1/tokens/1", status="403", role="member", user="carol")
one(method="DELETE", path="/api/v1/jobs/" + jb, status="401", token="-", user="-")
one(method="POST", path="/api/v1/tokens", status="400")
assert all(r["addr"] == "127.0.0.1" for r in recs), "a line without the client's address"
# an agent's accepted heartbeats are not audited (none ran here), a token id is a number
assert all(r["token"] == "-" or r["token"].isdigit() for r in recs)
PY
echo "ok: tokens are created, listed, revoked at once and expire; jobs name their user; the audit log has every change"
