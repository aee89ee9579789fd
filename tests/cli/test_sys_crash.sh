#!/bin/sh
# test_sys_crash.sh: durability and recovery. The server is killed with SIGKILL while
# clients submit; after a restart every acknowledged job is there exactly once. A job
# running across a server crash is reconciled with what its agent reports and
# finishes. An agent killed with its node's jobs: the node is declared lost, the job is
# requeued and runs elsewhere; when the agent comes back it stops the stale worker.
# Usage: test_sys_crash.sh PATH/TO/gpuorch (run from the repository root).
set -eu

GPUORCH=${1:?usage: $0 PATH/TO/gpuorch}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sys.sh"

start_server

# Four clients submit as fast as they can, noting every id the server acknowledged.
cat >"$T/submit.py" <<'PY'
import json, sys, threading, urllib.request
url, token, out = sys.argv[1], sys.argv[2], sys.argv[3]
lock = threading.Lock()
def client(k):
    n = 0
    while True:
        body = json.dumps({"name": "c%d-%d" % (k, n), "team": "search", "gpus": 1,
                           "command": ["true"]}).encode()
        req = urllib.request.Request(url + "/api/v1/jobs", data=body, method="POST",
                                     headers={"Authorization": "Bearer " + token,
                                              "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=5) as r:
                id = json.load(r)["id"]
        except Exception:
            return  # the server is gone: what was not acknowledged may or may not be there
        with lock:
            with open(out, "a") as f:
                f.write("%d c%d-%d\n" % (id, k, n))
        n += 1
ts = [threading.Thread(target=client, args=(k,)) for k in range(4)]
for t in ts: t.start()
for t in ts: t.join()
PY
python3 "$T/submit.py" "$URL" "$ADMIN" "$T/acked" &
CLIENTS=$!
sleep 2
kill -KILL "$SERVER_PID"
wait "$CLIENTS" || true
[ -s "$T/acked" ] || fail "no submission was acknowledged before the kill"
start_server
api GET "/api/v1/jobs?limit=1000000"
python3 - "$T/out" "$T/acked" <<'PY' || fail "acknowledged jobs lost or duplicated after SIGKILL"
import json, sys
jobs = json.load(open(sys.argv[1]))["jobs"]
acked = dict(l.split() for l in open(sys.argv[2]))
ids = [j["id"] for j in jobs]
names = [j["name"] for j in jobs]
assert len(ids) == len(set(ids)), "an id twice"
assert len(names) == len(set(names)), "a submission stored twice"
by_id = {j["id"]: j["name"] for j in jobs}
missing = [i for i in acked if int(i) not in by_id]
assert not missing, "lost: %s" % missing[:5]
wrong = [i for i in acked if by_id[int(i)] != acked[i]]
assert not wrong, "another job under an acknowledged id: %s" % wrong[:5]
print("acknowledged %d, stored %d" % (len(acked), len(jobs)), file=sys.stderr)
PY
# drop the backlog so the rest of the test has the GPUs
python3 -c 'import json,sys; [print(j["id"]) for j in json.load(open(sys.argv[1]))["jobs"] if j["state"] == "pending"]' "$T/out" |
    xargs -r "$GPUORCH" cancel >/dev/null

# A job runs across a server crash and is reconciled.
start_agent h100-0 sim:H100-80GB-SXM5:8
start_agent h100-1 sim:H100-80GB-SXM5:8
wait_nodes 2
submit "{\"name\": \"survivor\", \"team\": \"research\", \"gpus\": 1, \"command\": [\"sh\", \"-c\", \"sleep 3; echo $T >/dev/null\"]}"
SURV=$ID
wait_for "$SURV" 'd["state"] == "running"'
kill -KILL "$SERVER_PID"
sleep 0.5
start_server
wait_for "$SURV" 'd["state"] == "succeeded" and d["run"] == 1' 30

# An agent dies with a job on its node: the job is requeued and runs on the other node.
cat >"$T/long.sh" <<'SH'
#!/bin/sh
echo "run $GPUORCH_RUN on $(hostname)"
sleep 300
SH
chmod +x "$T/long.sh"
submit "{\"name\": \"orphan\", \"team\": \"research\", \"gpus\": 8, \"gpu_models\": [\"H100-80GB-SXM5\"], \"command\": [\"$T/long.sh\"]}"
LONG=$ID
wait_for "$LONG" 'd["state"] == "running"'
NODE=$(field "$LONG" 'd["placement"][0]["node"]')
VAR=AGENT_$(echo "$NODE" | tr -c 'a-zA-Z0-9\n' _)
eval "DEAD=\$$VAR"
kill -KILL "$DEAD"
wait_for "$LONG" 'd["run"] == 2 and d["state"] == "running" and d["placement"][0]["node"] != "'"$NODE"'"' 30
json_ok "$T/out" 'any(e["type"] == "lost" for e in d["events"])'
[ "$(pgrep -fc "$T/long.sh")" = 2 ] || fail "expected the stale worker and the new one to run"
# the agent comes back, finds its stale worker, and stops it: the server no longer wants it
start_agent "$NODE" sim:H100-80GB-SXM5:8
i=0
while [ "$(pgrep -fc "$T/long.sh")" != 1 ]; do
    i=$((i + 1)); [ $i -lt 150 ] || fail "the restarted agent did not stop the stale worker"; sleep 0.1
done
echo ok
