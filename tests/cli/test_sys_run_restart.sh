#!/bin/sh
# test_sys_run_restart.sh: `make run` (tools/run-local.sh) stopped with SIGTERM and
# started again resumes its jobs. With the README's training gang (checkpointing) and
# model server (not) running, SIGTERM stops the agents first, which checkpoint and stop
# the workers and tell the server, then the server; nothing is left running. Started
# again on the same var/, both jobs run again, none failed, and the gang resumes from
# the checkpoint it wrote on the way down.
# Usage: test_sys_run_restart.sh PATH/TO/gpuorch (run from the repository root).
set -eu

GPUORCH=${1:?usage: $0 PATH/TO/gpuorch}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sys.sh"
REPO=$(pwd)
BUILD=$(cd "$(dirname "$GPUORCH")" && pwd)
mkdir -p "$T/run"
ln -s "$REPO/examples" "$T/run/examples"
PORT=$(free_port)
URL=http://127.0.0.1:$PORT
export GPUORCH_LISTEN=127.0.0.1:$PORT GPUORCH_SIM_MIG_DELAY_MS=0 GPUORCH_SERVER=$URL

# make run's processes (its own session, relative paths) are found by their directory
run_cleanup() {
    for d in /proc/[0-9]*; do
        [ "$(readlink "$d/cwd" 2>/dev/null)" = "$T/run" ] && kill -KILL "${d#/proc/}" 2>/dev/null
    done
    sys_cleanup
}
trap run_cleanup EXIT INT TERM

# make_run N: start make run in $T/run (its output in $T/runN.out); its pid in $RUN
make_run() {
    (cd "$T/run" && exec "$REPO/tools/run-local.sh" "$BUILD") >"$T/run$1.out" 2>&1 &
    RUN=$!
    PIDS="$PIDS $RUN"
    i=0
    until grep -q "gpuorch is running" "$T/run$1.out" && curl -fsS "$URL/healthz" >/dev/null 2>&1; do
        i=$((i + 1))
        [ $i -lt 200 ] || fail "make run did not come up: $(cat "$T/run$1.out")"
        sleep 0.1
    done
    ADMIN=$(cat "$T/run/var/admin.token")
    export GPUORCH_TOKEN="$ADMIN"
}

# stop_run N: SIGTERM, then wait for it to say it stopped and exit 0
stop_run() {
    kill -TERM "$RUN"
    i=0
    until grep -q "stopped; var/ keeps the jobs" "$T/run$1.out"; do
        i=$((i + 1))
        [ $i -lt 600 ] || fail "make run did not stop within 60 s: $(tail -5 "$T/run$1.out")"
        sleep 0.1
    done
    wait "$RUN" || fail "make run exited $? after SIGTERM"
}

make_run 1
run 0 "$GPUORCH" submit examples/run/train.yaml examples/run/serve.yaml
TRAIN=$(sed -n 's/^submitted \([0-9]*\) bert-train.*/\1/p' "$T/out")
SERVE=$(sed -n 's/^submitted \([0-9]*\) embed-serve.*/\1/p' "$T/out")
[ -n "$TRAIN" ] && [ -n "$SERVE" ] || fail "no ids in: $(cat "$T/out")"
wait_for "$TRAIN" 'd["state"] == "running"' 60
wait_for "$SERVE" 'd["state"] == "running"' 60
PIDS_BEFORE=$(field "$TRAIN" '" ".join(str(w["pid"]) for w in d["placement"])')
PIDS_BEFORE="$PIDS_BEFORE $(field "$SERVE" 'd["placement"][0]["pid"]')"
i=0
until api GET "/api/v1/jobs/$TRAIN/logs?rank=0" && grep -q "step 2/" "$T/out"; do
    i=$((i + 1)); [ $i -lt 200 ] || fail "the gang does not step: $(cat "$T/out")"; sleep 0.1
done

stop_run 1
for p in $PIDS_BEFORE; do
    kill -0 "$p" 2>/dev/null && fail "worker $p outlived make run"
done
grep -q "event=agent_shutdown workers_checkpointing=2 workers_stopping=0" "$T/run/var/agent-h100-0.log" ||
    fail "h100-0 did not checkpoint its gang: $(grep -v 'event=gpu ' "$T/run/var/agent-h100-0.log" | tail -5)"
grep -q "event=agent_shutdown workers_checkpointing=0 workers_stopping=1" "$T/run/var/agent-a100-0.log" ||
    fail "a100-0 did not stop its server: $(grep -v 'event=gpu ' "$T/run/var/agent-a100-0.log" | tail -5)"

make_run 2
for id in "$TRAIN" "$SERVE"; do
    wait_for "$id" 'd["state"] == "running" and d["run"] == 2' 60
    json_ok "$T/out" '[e["type"] for e in d["events"] if e["type"] in ("shutdown", "requeue", "fail", "lost")] == ["shutdown", "requeue"]'
done
CKPT=$(field "$TRAIN" 'd["checkpoint"]')
[ "$CKPT" != None ] || fail "the gang kept no checkpoint"
i=0
until api GET "/api/v1/jobs/$TRAIN/logs?rank=0&run=2" && grep -q "resuming from" "$T/out"; do
    i=$((i + 1)); [ $i -lt 200 ] || fail "run 2 of the gang did not resume: $(cat "$T/out")"; sleep 0.1
done
grep -q "resuming from .* at step [1-9]" "$T/out" || fail "run 2 did not resume from a checkpoint: $(cat "$T/out")"
stop_run 2
echo ok
