#!/bin/sh
# test_sys_ha.sh: two servers on one PostgreSQL store, one leading, one standing by
# (docs/ha.md). The standby sends clients to the leader (307) and says it is not ready.
# Under concurrent submissions (three clients that know both servers, and the CLI with
# both in --server) the leader is killed with SIGKILL 20 times and started again as the
# standby: every submission that got a 201 is stored exactly once, no job runs twice (each
# run of a job leaves a file its worker makes with O_EXCL; a job's runs are its stored
# runs, one each, and no job ran twice at the same time), a standby leads within 10 s
# every time (the times printed: the figure of bench/RESULTS.md), and the agents, given
# both servers, keep their workers through every failover.
# Usage: test_sys_ha.sh PATH/TO/gpuorch (run from the repository root).
set -eu

GPUORCH=${1:?usage: $0 PATH/TO/gpuorch}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sys.sh"
. "$(dirname "$0")/pg.sh"
trap 'pg_stop; sys_cleanup' EXIT INT TERM

FAILOVERS=${HA_FAILOVERS:-20}
pg_start

PORT_A=$(free_port)
PORT_B=$(free_port)
URL_A=http://127.0.0.1:$PORT_A
URL_B=http://127.0.0.1:$PORT_B
BOTH="$URL_A,$URL_B"

# serve A|B: start that server on its port, its own data directory, the shared store.
serve() {
    eval "port=\$PORT_$1"
    mkdir -p "$T/var$1"
    "$GPUORCH" server --config examples/cluster-demo.yaml --db "$PG_URL" --data-dir "$T/var$1" \
        --listen "127.0.0.1:$port" --heartbeat-ms 200 --lost-after-ms 5000 --lost-grace-ms 0 \
        --min-runtime-s 0 >>"$T/server$1.out" 2>>"$T/server$1.log" &
    eval "PID_$1=$!"
    PIDS="$PIDS $!"
}

# ready URL: 200 from /readyz (the leader) or not.
ready() {
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$1/readyz")" = 200 ]
}

up() {
    i=0
    until curl -fsS "$1/healthz" >/dev/null 2>&1; do
        i=$((i + 1))
        [ $i -lt 300 ] || fail "no server came up on $1"
        sleep 0.05
    done
}

serve A
up "$URL_A"
i=0
until ready "$URL_A"; do
    i=$((i + 1))
    [ $i -lt 200 ] || fail "server A does not lead"
    sleep 0.05
done
ADMIN=$(cat "$T/varA/admin.token")
serve B
up "$URL_B"
ready "$URL_B" && fail "two servers lead one store"
grep -q "standing by at $URL_B" "$T/serverB.out" || fail "B does not say it stands by"

# The standby sends clients to the leader, and its metrics say it does not lead.
code=$(curl -s -o "$T/out" -w '%{http_code} %{redirect_url}' -H "Authorization: Bearer $ADMIN" \
    "$URL_B/api/v1/jobs?limit=1")
[ "$code" = "307 $URL_A/api/v1/jobs?limit=1" ] || fail "the standby answered '$code'"
curl -fsS "$URL_B/metrics" | grep -qx 'gpuorch_leader 0' || fail "standby metrics"
curl -fsS "$URL_A/metrics" | grep -qx 'gpuorch_leader 1' || fail "leader metrics"
# the CLI, given the standby first, follows it to the leader
GPUORCH_SERVER="$URL_B,$URL_A" GPUORCH_TOKEN=$ADMIN run 0 "$GPUORCH" nodes
GPUORCH_SERVER=$BOTH GPUORCH_TOKEN=$ADMIN run 0 "$GPUORCH" queue

# Workers make one file per run of their job; a second worker for the same run fails to.
mkdir -p "$T/runs"
[ "$(id -u)" != 0 ] || chown 65534:65534 "$T/runs"
cat >"$T/job.sh" <<'SH'
#!/bin/sh
set -C
echo "$(date +%s%N) start" >"$RUNS/$GPUORCH_JOB_ID.$GPUORCH_RUN" || echo "$GPUORCH_JOB_ID.$GPUORCH_RUN" >>"$RUNS/dup"
sleep 1
echo "$(date +%s%N) end" >>"$RUNS/$GPUORCH_JOB_ID.$GPUORCH_RUN"
SH
chmod 0755 "$T/job.sh"

TOKEN=$ADMIN
URL=$URL_A # for sys.sh's helpers until the first failover
AGENT_TOKEN=$(GPUORCH_SERVER=$BOTH GPUORCH_TOKEN=$ADMIN "$GPUORCH" token create --role agent --name ha) ||
    fail "token create"
URL=$BOTH # the agents know both servers
start_agent h100-0 sim:H100-80GB-SXM5:8
start_agent a100-0 sim:A100-80GB:8
URL=$URL_A
wait_nodes 2

# Submitters: three threads that know both servers (a 307 followed, a refused connection or
# a standby's 503 sent to the other) and one that runs the CLI with both in --server.
cat >"$T/submit.py" <<'PY'
import json, os, subprocess, sys, threading, time, urllib.request, urllib.error
urls, token, out, stop, gpuorch, job = sys.argv[1].split(","), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6]
lock = threading.Lock()
def spec(name):
    return json.dumps({"name": name, "team": "search", "gpus": 1,
                       "env": {"RUNS": os.path.dirname(out) + "/runs"},
                       "command": [job]}).encode()
def post(url, body):
    req = urllib.request.Request(url + "/api/v1/jobs", data=body, method="POST",
                                 headers={"Authorization": "Bearer " + token,
                                          "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.load(r), None
    except urllib.error.HTTPError as e:
        return e.code, None, e.headers.get("Location")
def note(id, name):
    with lock:
        with open(out, "a") as f:
            f.write("%d %s\n" % (id, name))
def client(k):
    n, cur = 0, 0
    while not os.path.exists(stop):
        name, body, url = "c%d-%d" % (k, n), None, urls[cur]
        body = spec(name)
        for hop in range(4):
            try:
                status, reply, loc = post(url, body)
            except Exception:
                status, reply, loc = 0, None, None  # gone: not known whether it was taken
            if status == 307 and loc:
                url = loc.rsplit("/api/v1/jobs", 1)[0]
                continue
            break
        if status == 201:
            note(reply["id"], name)
        elif status in (0, 503, 307):
            cur = (cur + 1) % len(urls)
            time.sleep(0.05)
        else:
            sys.exit("submission %s answered %d" % (name, status))
        n += 1
        time.sleep(0.05)
def cli():
    n = 0
    while not os.path.exists(stop):
        name = "cli-%d" % n
        p = subprocess.run([gpuorch, "submit", "-o", "json", "-"], input=spec(name),
                           capture_output=True, env=dict(os.environ, GPUORCH_SERVER=",".join(urls),
                                                         GPUORCH_TOKEN=token))
        if p.returncode == 0:
            note(json.loads(p.stdout)["id"], name)
        n += 1
        time.sleep(0.1)
ts = [threading.Thread(target=client, args=(k,)) for k in range(3)] + [threading.Thread(target=cli)]
for t in ts: t.start()
for t in ts: t.join()
PY
python3 "$T/submit.py" "$BOTH" "$ADMIN" "$T/acked" "$T/stop" "$GPUORCH" "$T/job.sh" 2>"$T/submit.err" &
CLIENTS=$!
sleep 2

# The failovers: kill whichever leads, time until the other leads, start the killed one
# again (it stands by).
now_ms() { python3 -c 'import time; print(int(time.time() * 1000))'; }
: >"$T/takeover"
k=0
while [ $k -lt "$FAILOVERS" ]; do
    if ready "$URL_A"; then lead=A other=B; else lead=B other=A; fi
    ready "$(eval echo "\$URL_$lead")" || fail "failover $k: no server leads"
    eval "victim=\$PID_$lead; next=\$URL_$other"
    t0=$(now_ms)
    kill -KILL "$victim"
    until ready "$next"; do
        [ $(($(now_ms) - t0)) -lt 10000 ] || fail "failover $k: $other did not lead within 10 s"
        sleep 0.02
    done
    echo $(($(now_ms) - t0)) >>"$T/takeover"
    wait "$victim" 2>/dev/null || true
    serve "$lead"
    up "$(eval echo "\$URL_$lead")"
    ready "$(eval echo "\$URL_$lead")" && fail "failover $k: both servers lead"
    k=$((k + 1))
    sleep 1.5
done
touch "$T/stop"
wait "$CLIENTS" || { cat "$T/submit.err" >&2; fail "a submitter failed"; }
python3 - "$T/takeover" <<'PY'
import sys
t = sorted(int(l) for l in open(sys.argv[1]))
print("takeover ms over %d failovers: min %d, median %d, p90 %d, max %d" % (
    len(t), t[0], t[len(t) // 2], t[int(len(t) * 0.9) - 1 if len(t) >= 10 else -1], t[-1]))
PY

if ready "$URL_A"; then URL=$URL_A; else URL=$URL_B; fi
# What was acknowledged is there once; what is still queued is dropped, and what runs ends.
api GET "/api/v1/jobs?limit=1000000"
python3 - "$T/out" "$T/acked" <<'PY' || fail "acknowledged jobs lost or duplicated across failovers"
import json, sys
jobs = json.load(open(sys.argv[1]))["jobs"]
acked = dict(l.split() for l in open(sys.argv[2]))
names = [j["name"] for j in jobs]
assert len(names) == len(set(names)), "a submission stored twice"
by_id = {j["id"]: j["name"] for j in jobs}
missing = [i for i in acked if int(i) not in by_id]
assert not missing, "lost: %s" % missing[:5]
wrong = [i for i in acked if by_id[int(i)] != acked[i]]
assert not wrong, "another job under an acknowledged id: %s" % wrong[:5]
print("acknowledged %d submissions (%d through the CLI), stored %d jobs" % (
    len(acked), sum(n.startswith("cli-") for n in acked.values()), len(jobs)), file=sys.stderr)
PY
python3 -c 'import json,sys; [print(j["id"]) for j in json.load(open(sys.argv[1]))["jobs"] if j["state"] == "pending"]' "$T/out" |
    GPUORCH_SERVER=$BOTH GPUORCH_TOKEN=$ADMIN xargs -r "$GPUORCH" cancel >/dev/null
i=0
until api GET "/api/v1/jobs?state=active&limit=1" &&
    python3 -c 'import json,sys; sys.exit(len(json.load(open(sys.argv[1]))["jobs"]) != 0)' "$T/out"; do
    i=$((i + 1))
    [ $i -lt 300 ] || fail "jobs still active 30 s after the submissions stopped"
    sleep 0.1
done
[ ! -s "$T/runs/dup" ] || fail "a run started twice: $(head -5 "$T/runs/dup")"
api GET "/api/v1/jobs?limit=1000000"
python3 - "$T/out" "$T/runs" <<'PY' || fail "a job ran twice"
import json, os, sys
jobs = json.load(open(sys.argv[1]))["jobs"]
runs = {}
for f in os.listdir(sys.argv[2]):
    if f == "dup":
        continue
    job, run = f.split(".")
    lines = open(os.path.join(sys.argv[2], f)).read().split("\n")
    start = int(lines[0].split()[0])
    end = int(lines[1].split()[0]) if len(lines) > 1 and lines[1] else None
    runs.setdefault(int(job), []).append((int(run), start, end))
ran = 0
for j in jobs:
    r = sorted(runs.get(j["id"], []))
    if j["state"] == "succeeded":
        ran += 1
        assert [x[0] for x in r] == list(range(1, j["run"] + 1)), "job %d: runs %s, stored run %d" % (j["id"], r, j["run"])
    for a, b in zip(r, r[1:]):  # one run after another, never two at once
        assert a[2] is not None and a[2] <= b[1], "job %d: runs %s overlap" % (j["id"], r)
again = sum(j["run"] > 1 for j in jobs)
print("%d jobs ran to success, %d of them more than once" % (ran, again), file=sys.stderr)
assert ran > 0, "no job ran"
PY
echo "ok: $FAILOVERS failovers"
