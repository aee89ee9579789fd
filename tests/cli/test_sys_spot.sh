#!/bin/sh
# test_sys_spot.sh: a spot interruption notice, end to end. A loopback stand-in for
# AWS's instance metadata service (IMDSv2: a session token from PUT /latest/api/token,
# then /latest/meta-data/spot/instance-action with it; 404 until the notice file
# exists) serves agent h100-0, started with --spot-notice aws. A checkpointing
# training job runs on h100-0 before h100-1 comes up; then the notice appears. The
# agent reports it, the server stops the job with an "interrupted" event and a grace
# cut to the notice, the job checkpoints, is requeued and resumes on h100-1 from its
# step. While the notice lasts h100-0 takes no new job; when it is withdrawn, it does.
# Usage: test_sys_spot.sh PATH/TO/gpuorch (run from the repository root).
set -eu

GPUORCH=${1:?usage: $0 PATH/TO/gpuorch}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sys.sh"

# bad options are refused with a reason, before the agent starts anything
run 1 "$GPUORCH" agent --server http://127.0.0.1:1 --token t --node h100-0 --state-dir "$T/bad" \
    --spot-notice ibm
err_has "gpuorch agent: --spot-notice 'ibm': expected none, aws, gcp or azure"
run 1 "$GPUORCH" agent --server http://127.0.0.1:1 --token t --node h100-0 --state-dir "$T/bad" \
    --metadata-url http://127.0.0.1:1
err_has "gpuorch agent: --metadata-url needs --spot-notice aws, gcp or azure"
[ ! -e "$T/bad" ] || fail "a refused agent made its state directory"
run 2 "$GPUORCH" agent --server http://127.0.0.1:1 --token t --notice-poll-ms 0
err_has "gpuorch agent: --notice-poll-ms '0': expected whole milliseconds, 10 to 3600000"

cat >"$T/imds.py" <<'PY'
import http.server, os, sys, uuid

NOTICE, LOG = sys.argv[1], sys.argv[2]
TOKEN = uuid.uuid4().hex


class Imds(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def reply(self, code, body):
        data = body.encode()
        self.send_response(code)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        with open(LOG, "a") as f:
            f.write("%s %s %d\n" % (self.command, self.path, code))

    def do_PUT(self):
        ttl = self.headers.get("X-aws-ec2-metadata-token-ttl-seconds")
        if self.path == "/latest/api/token" and ttl == "21600":
            return self.reply(200, TOKEN)
        self.reply(400, "bad token request")

    def do_GET(self):
        if self.path != "/latest/meta-data/spot/instance-action":
            return self.reply(404, "Not Found")
        if self.headers.get("X-aws-ec2-metadata-token") != TOKEN:
            return self.reply(401, "")
        if not os.path.exists(NOTICE):
            return self.reply(404, "Not Found")
        with open(NOTICE) as f:
            self.reply(200, f.read())


server = http.server.HTTPServer(("127.0.0.1", 0), Imds)
print(server.server_address[1], flush=True)
server.serve_forever()
PY
python3 "$T/imds.py" "$T/notice" "$T/imds.log" >"$T/imds.port" &
PIDS="$PIDS $!"
i=0
until [ -s "$T/imds.port" ]; do
    i=$((i + 1)); [ $i -lt 100 ] || fail "the metadata stand-in did not start"; sleep 0.1
done
IMDS=http://127.0.0.1:$(cat "$T/imds.port")

start_server
AGENT_ARGS="--spot-notice aws --metadata-url $IMDS --notice-poll-ms 200"
start_agent h100-0 sim:H100-80GB-SXM5:8
AGENT_ARGS=
wait_nodes 1
cat >"$T/idle.sh" <<'SH'
#!/bin/sh
echo "idle on $CUDA_VISIBLE_DEVICES"
exec sleep 300
SH
chmod +x "$T/idle.sh"

# Only h100-0 is up: the job lands there. Its grace (60 s) is longer than the notice.
submit_training 1 60s
json_ok "$T/out" '[w["node"] for w in d["placement"]] == ["h100-0"]'
start_agent h100-1 sim:H100-80GB-SXM5:8
wait_nodes 2
grep -q "^PUT /latest/api/token 200" "$T/imds.log" || fail "the agent took no IMDSv2 token"
grep -q "^GET /latest/meta-data/spot/instance-action 404" "$T/imds.log" ||
    fail "the agent did not ask for instance-action with its token: $(tail -3 "$T/imds.log")"

# AWS's notice: terminate in 20 s.
python3 -c '
import datetime, json, os, sys
t = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=20)
with open(sys.argv[1] + ".tmp", "w") as f:
    json.dump({"action": "terminate", "time": t.strftime("%Y-%m-%dT%H:%M:%SZ")}, f)
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
' "$T/notice"

wait_for "$TRAIN" 'd["preemptions"] == 1 and any(e["type"] == "interrupted" for e in d["events"])' 15
json_ok "$T/out" '[e["detail"] for e in d["events"] if e["type"] == "interrupted"][0].startswith("node h100-0: aws interruption notice (terminate)")'
# the server cut the stop's grace to the notice (the agent bounds it too, below)
json_ok "$T/out" '10000 <= int([e["detail"] for e in d["events"] if e["type"] == "interrupted"][0].split("grace ")[1].split(" ms")[0]) <= 20000'
wait_for "$TRAIN" 'd["state"] == "running" and d["run"] == 2' 30
json_ok "$T/out" '[e["type"] for e in d["events"] if e["type"] in ("start", "interrupted", "preempt", "requeue", "lost")] == ["start", "interrupted", "requeue", "start"]'
json_ok "$T/out" '[w["node"] for w in d["placement"]] == ["h100-1"]'
# the checkpoint run 1 left (run 2 writes its own soon after it starts)
CKPT=$(field "$TRAIN" '[e["detail"] for e in d["events"] if e["type"] == "requeue"][0]')
case $CKPT in "step "*": $T/ckpt/$TRAIN/step-"*/rank-0) ;; *) fail "requeued without a checkpoint: $CKPT" ;; esac

# the agent saw the notice once, and stopped the worker within it: checkpoint signal,
# a grace of at most the 20 s left, not the job's 60 s
LOG0=$T/agent-h100-0.log
[ "$(grep -c 'event=spot_notice source=aws action=terminate' "$LOG0")" = 1 ] ||
    fail "the agent did not log the notice once: $(grep spot_notice "$LOG0")"
GRACE=$(sed -n "s/.*event=worker_stop mode=preempt grace_ms=\([0-9]*\) job=$TRAIN run=1 .*/\1/p" "$LOG0")
[ -n "$GRACE" ] || fail "no preempt stop of run 1 in the agent's log: $(grep worker_stop "$LOG0")"
[ "$GRACE" -le 20000 ] && [ "$GRACE" -ge 10000 ] || fail "the stop's grace is $GRACE ms, not the notice's ~20 s"
grep -q "event=signal job=$TRAIN run=1 rank=0 pid=[0-9]* signal=USR1" "$LOG0" || fail "no checkpoint signal"

# run 2 resumed from the checkpoint run 1 wrote when it was stopped
api GET "/api/v1/jobs/$TRAIN/logs?rank=0&run=1"
grep -q "checkpoint at step .* (signal SIG" "$T/out" || fail "run 1 never checkpointed: $(tail -3 "$T/out")"
i=0
until api GET "/api/v1/jobs/$TRAIN/logs?rank=0&run=2" && grep -q "resuming from" "$T/out"; do
    i=$((i + 1)); [ $i -lt 100 ] || fail "run 2 did not resume: $(head -3 "$T/out")"; sleep 0.1
done
STEP=${CKPT#step }
STEP=${STEP%%:*}
[ "$STEP" -gt 0 ] || fail "the checkpoint holds no progress"
grep -q "resuming from ${CKPT#*: } at step $STEP" "$T/out" || fail "run 2 did not resume at step $STEP: $(head -3 "$T/out")"

# While the notice lasts, h100-0 (idle) takes no new job: one that needs a whole H100
# node waits, h100-1 being busy.
submit "{\"name\": \"next\", \"team\": \"research\", \"gpus\": 8, \"gpu_models\": [\"H100-80GB-SXM5\"],
  \"command\": [\"$T/idle.sh\"]}"
NEXT=$ID
sleep 3
[ "$(field "$NEXT" 'd["state"]')" = pending ] || fail "job $NEXT started on the node under notice: $(head -c 400 "$T/out")"
curl -fsS "$URL/metrics" >"$T/metrics"
grep -q "^gpuorch_spot_interruptions_total 1$" "$T/metrics" ||
    fail "metric: $(grep spot_interruptions "$T/metrics")"

# The notice withdrawn, the node takes work again.
rm -f "$T/notice"
wait_for "$NEXT" 'd["state"] == "running"' 15
json_ok "$T/out" '[w["node"] for w in d["placement"]] == ["h100-0"]'
grep -q "event=spot_notice_cleared source=aws" "$LOG0" || fail "the agent did not log the withdrawal"
! grep -q " 401$" "$T/imds.log" || fail "the agent asked without a valid token"

run 0 "$GPUORCH" cancel "$TRAIN" "$NEXT"
wait_for "$TRAIN" 'd["state"] == "cancelled"' 30
wait_for "$NEXT" 'd["state"] == "cancelled"' 30
echo ok
