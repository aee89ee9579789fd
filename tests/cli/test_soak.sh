#!/bin/sh
# test_soak.sh: the soak. Concurrent clients submit short jobs, cancel them and change
# their priorities against a real server with two agents on simulated GPUs, while the
# server is SIGKILLed at random (SOAK_KILLS times, 100 by default) and the agents are
# restarted (SOAK_AGENT_RESTARTS times, 20 by default, with SIGTERM or SIGKILL drawn
# from SOAK_AGENT_SIGNALS, "TERM KILL"). Then the queue drains and tests/cli/soak.py
# judges: no acknowledged submission, cancel or priority change lost or duplicated, no
# job failed (every command exits 0), none left unfinished, and the server's view, its
# view after one more SIGKILL and the database agree. The plan and the clients' random
# sources come from one seed, printed at the start: a replay kills and restarts the
# same way, though the timing (which request meets a dead server) differs.
# Environment: SOAK_SEED (replay a run), SOAK_KILLS, SOAK_AGENT_RESTARTS, SOAK_SECONDS
# (the servers' summed uptime, 60 by default), SOAK_CLIENTS (4), SOAK_PAUSE_S (0.4, a
# client's mean pause between requests), SOAK_DRAIN_S (180, the longest wait for the
# queue to empty), SOAK_KEEP (a folder to copy the journal, views, logs and database
# to). A longer soak by hand, e.g.:
#   SOAK_KILLS=1000 SOAK_AGENT_RESTARTS=200 SOAK_SECONDS=900 tests/cli/test_soak.sh build-test/gpuorch
# Usage: test_soak.sh PATH/TO/gpuorch (run from the repository root).
set -eu

GPUORCH=${1:?usage: $0 PATH/TO/gpuorch}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sys.sh"
SOAK="python3 $(dirname "$0")/soak.py"

SEED=${SOAK_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
echo "soak: seed $SEED (replay with SOAK_SEED=$SEED) kills ${SOAK_KILLS:-100}" \
    "agent restarts ${SOAK_AGENT_RESTARTS:-20} seconds ${SOAK_SECONDS:-60}" >&2
START=$(date +%s)

# forget a process that has gone (reaped, so its pid is not reused under sys.sh's cleanup)
forget() {
    wait "$1" 2>/dev/null || true
    PIDS=$(for p in $PIDS; do [ "$p" = "$1" ] || echo "$p"; done)
}

start_server
start_agent h100-0 sim:H100-80GB-SXM5:8
start_agent h100-1 sim:H100-80GB-SXM5:8
wait_nodes 2

$SOAK plan "$SEED" >"$T/plan"
$SOAK clients "$URL" "$T/var/admin.token" "$T/journal" "$SEED" "$T/stop" "$T" &
CLIENTS=$!
PIDS="$PIDS $CLIENTS"

KILLS=0
AGENTS=0
while read -r what a b c <&3; do
    case $what in
    server)
        sleep "$a"
        kill -KILL "$SERVER_PID"
        forget "$SERVER_PID"
        start_server
        KILLS=$((KILLS + 1))
        ;;
    agent)
        var=AGENT_$(echo "$a" | tr -c 'a-zA-Z0-9\n' _)
        eval "pid=\$$var"
        kill -"$b" "$pid"
        # SIGTERM: the agent stops its workers and tells the server (at most 10 s when
        # the server cannot be reached, docs/agent.md), then exits
        i=0
        while kill -0 "$pid" 2>/dev/null && ! grep -q '^State:.*Z' "/proc/$pid/status" 2>/dev/null; do
            i=$((i + 1)); [ $i -lt 300 ] || fail "agent $a did not stop within 30 s of SIG$b"; sleep 0.1
        done
        forget "$pid"
        sleep "$c"
        start_agent "$a" sim:H100-80GB-SXM5:8
        AGENTS=$((AGENTS + 1))
        ;;
    esac
done 3<"$T/plan"

touch "$T/stop"
wait "$CLIENTS" || fail "the clients failed"
forget "$CLIENTS"
RUN_S=$(($(date +%s) - START))
echo "soak: server SIGKILLs $KILLS, agent restarts $AGENTS in $RUN_S s; draining" >&2

# the queue drains: every job ends (a job still active after SOAK_DRAIN_S is reported)
i=0
limit=$(( ${SOAK_DRAIN_S:-180} * 2 ))
while :; do
    api GET "/api/v1/jobs?state=active&limit=1000000"
    [ "$STATUS" = 200 ] || fail "GET /jobs answered $STATUS"
    python3 -c 'import json,sys; sys.exit(0 if not json.load(open(sys.argv[1]))["jobs"] else 1)' "$T/out" && break
    i=$((i + 1))
    [ $i -lt "$limit" ] || { echo "soak: the queue did not drain in ${SOAK_DRAIN_S:-180} s" >&2; break; }
    sleep 0.5
done

api GET "/api/v1/jobs?limit=1000000"
cp "$T/out" "$T/before.json"
$SOAK events "$URL" "$T/var/admin.token" "$T/before.json" "$T/events.json" || fail "reading the jobs' events"
kill -KILL "$SERVER_PID"
forget "$SERVER_PID"
start_server
api GET "/api/v1/jobs?limit=1000000"
cp "$T/out" "$T/after.json"
rm -f "$T/out" "$T/err"
rc=0
$SOAK check "$T/journal" "$T/before.json" "$T/after.json" "$T/var/gpuorch.db" "$T/events.json" \
    "$T/figures.json" "$T" || rc=$?
if [ -n "${SOAK_KEEP:-}" ]; then
    mkdir -p "$SOAK_KEEP"
    cp "$T/plan" "$T/journal" "$T"/*.json "$T"/*.log "$T/var"/gpuorch.db* "$SOAK_KEEP/"
fi
[ "$rc" = 0 ] || fail "the soak found problems (seed $SEED): see the PROBLEM lines above"

# the verdict can fail: on copies with an acknowledged job gone, one stored twice, an
# acknowledged cancel undone and a priority only the database holds, it names each
mkdir "$T/tampered"
$SOAK tamper "$T/journal" "$T/before.json" "$T/after.json" "$T/var/gpuorch.db" "$T/tampered" \
    >"$T/tampered/want" || fail "tampering with copies of the views"
if $SOAK check "$T/journal" "$T/tampered/before.json" "$T/tampered/after.json" \
    "$T/tampered/gpuorch.db" "$T/events.json" "$T/tampered/figures.json" "$T" 2>"$T/tampered/said"; then
    fail "the verdict passed views with a job lost, one duplicated and a cancel undone"
fi
while read -r line; do
    grep -qF "PROBLEM: $line" "$T/tampered/said" || fail "the verdict on the tampered copies lacks '$line'"
done <"$T/tampered/want"
echo "soak: server SIGKILLs $KILLS, agent restarts $AGENTS, wall $(($(date +%s) - START)) s, seed $SEED" >&2
echo ok
