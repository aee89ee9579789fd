#!/bin/sh
# test_sys_retention.sh: ended jobs leave the server's memory after the retention
# (--job-retention-s, as Slurm's MinJobAge) and are read from the store when asked for,
# answering as they did while in memory: the job, its events, a cancel of it (409), its
# priority; a listing with ended states pages through the store (limit, after,
# next_after); a restart loads only what is live and what ended inside the retention.
# Usage: test_sys_retention.sh PATH/TO/gpuorch (run from the repository root).
set -eu

GPUORCH=${1:?usage: $0 PATH/TO/gpuorch}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sys.sh"

# a long retention first: the ended jobs' answers while they are in memory
start_server --job-retention-s 3600
for n in 1 2 3 4 5; do
    api POST /api/v1/jobs "{\"name\": \"short-$n\", \"team\": \"search\", \"gpus\": 1, \"command\": [\"true\"]}"
    [ "$STATUS" = 201 ] || fail "submit $n answered $STATUS: $(cat "$T/out")"
done
api POST /api/v1/jobs '{"name": "waits", "team": "search", "gpus": 1, "command": ["true"]}'
LIVE=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$T/out")
for id in 1 2 3 4 5; do
    api DELETE "/api/v1/jobs/$id"
    [ "$STATUS" = 200 ] || fail "cancel $id answered $STATUS"
done
answers() { # answers DIR: what the API says of the ended job 2
    mkdir -p "$1"
    api GET /api/v1/jobs/2; echo "$STATUS" >"$1/get.status"
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(json.dumps(d, sort_keys=True))' "$T/out" >"$1/get"
    api DELETE /api/v1/jobs/2; echo "$STATUS" >"$1/cancel.status"; cp "$T/out" "$1/cancel"
    api PATCH /api/v1/jobs/2 '{"priority": "high"}'; echo "$STATUS" >"$1/patch.status"; cp "$T/out" "$1/patch"
    api GET "/api/v1/jobs?state=cancelled&limit=2"; cp "$T/out" "$1/page1"
    api GET "/api/v1/jobs?state=cancelled&limit=2&after=2"; cp "$T/out" "$1/page2"
}
answers "$T/in-memory"
kill -TERM "$SERVER_PID"

# retention 0: the ended jobs leave memory within a scheduling pass of the start
start_server --job-retention-s 0
sleep 1.5
grep -q 'holding=0 queued=1' "$T/server.log" || fail "the restart did not load the live job alone: $(grep store_loaded "$T/server.log" | tail -1)"
answers "$T/from-store"
for f in get.status get cancel.status cancel patch.status patch page1 page2; do
    cmp -s "$T/in-memory/$f" "$T/from-store/$f" ||
        fail "$f differs once the job left memory: $(cat "$T/in-memory/$f") / $(cat "$T/from-store/$f")"
done
json_ok "$T/from-store/get" 'd["state"] == "cancelled" and any(e["type"] == "cancel" for e in d["events"])'
json_ok "$T/from-store/page1" '[j["id"] for j in d["jobs"]] == [1, 2] and d["next_after"] == 2'
json_ok "$T/from-store/page2" '[j["id"] for j in d["jobs"]] == [3, 4] and d["next_after"] == 4'
api GET "/api/v1/jobs?state=cancelled&after=4"
json_ok "$T/out" '[j["id"] for j in d["jobs"]] == [5] and "next_after" not in d'
# the live queue from memory, the whole history by default: live first, then ended by id
api GET "/api/v1/jobs?state=active"
json_ok "$T/out" "[j['id'] for j in d['jobs']] == [$LIVE]"
api GET /api/v1/jobs
json_ok "$T/out" "[j['id'] for j in d['jobs']] == [$LIVE, 1, 2, 3, 4, 5]"
api GET /api/v1/jobs/999
[ "$STATUS" = 404 ] || fail "an unknown job answered $STATUS"
api GET "/api/v1/jobs?after=x"
[ "$STATUS" = 400 ] || fail "a bad cursor answered $STATUS"

# a job that ends now leaves memory too, and the CLI still shows it
api DELETE "/api/v1/jobs/$LIVE"
sleep 1.5
api GET "/api/v1/jobs/$LIVE"
json_ok "$T/out" 'd["state"] == "cancelled"'
run 0 "$GPUORCH" queue --all
out_has "waits.*cancelled"
echo "ok: ended jobs are read from the store, as they were from memory"
