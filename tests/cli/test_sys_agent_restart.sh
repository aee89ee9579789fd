#!/bin/sh
# test_sys_agent_restart.sh: an agent restarted while its workers run (killed with
# SIGKILL, or stopped alone with SIGHUP as for an upgrade) fails none of them. Each
# worker runs under a keeper process that outlives the agent and records the worker's
# exit status; the next agent takes the running workers back and reports every end
# with its real exit code: a job that exits 0 while no agent runs succeeds, one that
# exits 3 then fails with exit code 3, one still running when the agent is back
# succeeds later and its log, written on both sides of the restart, is all uploaded.
# An agent stopped with SIGTERM shuts the node down: its workers stop, their jobs are
# requeued, not failed, and their second runs end as the first would have.
# Usage: test_sys_agent_restart.sh PATH/TO/gpuorch (run from the repository root).
set -eu

GPUORCH=${1:?usage: $0 PATH/TO/gpuorch}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sys.sh"

# the node is not declared lost while its agent is away
start_server --lost-after-ms 60000
start_agent h100-0 sim:H100-80GB-SXM5:8
wait_nodes 1

# job NAME SCRIPT: submit a one-GPU job running sh -c SCRIPT; its id in $ID
job() {
    submit "{\"name\": \"$1\", \"team\": \"search\", \"gpus\": 1, \"command\": [\"sh\", \"-c\", \"$2; : $T/\"]}"
}

# round SIGNAL RUN: three jobs across an agent restart by SIGNAL, ending in run RUN
round() {
    rm -f "$T/go-$1"
    job "ok-$1" "echo started; until [ -e $T/go-$1 ]; do sleep 0.1; done; exit 0"
    OK=$ID
    job "bad-$1" "until [ -e $T/go-$1 ]; do sleep 0.1; done; exit 3"
    BAD=$ID
    job "long-$1" "echo before; until [ -e $T/go-$1 ]; do sleep 0.1; done; sleep 2; echo after"
    LONG=$ID
    for id in $OK $BAD $LONG; do
        wait_for "$id" 'd["state"] == "running" and d["placement"][0]["pid"]'
    done
    kill "-$1" "$AGENT_h100_0"
    i=0
    while kill -0 "$AGENT_h100_0" 2>/dev/null && ! grep -q '^State:.*Z' "/proc/$AGENT_h100_0/status" 2>/dev/null; do
        i=$((i + 1)); [ $i -lt 100 ] || fail "the agent did not exit on SIG$1"; sleep 0.1
    done
    # the first two end while no agent runs; the third runs on past the restart
    touch "$T/go-$1"
    i=0
    while pgrep -f "until \[ -e $T/go-$1 \]; do sleep 0.1; done; exit" >/dev/null; do
        i=$((i + 1)); [ $i -lt 100 ] || fail "the workers did not end"; sleep 0.1
    done
    start_agent h100-0 sim:H100-80GB-SXM5:8
    wait_for "$OK" 'd["state"] == "succeeded"' 30
    json_ok "$T/out" "d['exit_code'] == 0 and d['run'] == $2"
    json_ok "$T/out" 'not any(e["type"] == "fail" for e in d["events"])'
    wait_for "$BAD" 'd["state"] == "failed"' 30
    json_ok "$T/out" "d['exit_code'] == 3 and d['run'] == $2"
    wait_for "$LONG" 'd["state"] == "succeeded"' 30
    json_ok "$T/out" "d['exit_code'] == 0 and d['run'] == $2"
    json_ok "$T/out" 'not any(e["type"] == "fail" for e in d["events"])'
    i=0
    until api GET "/api/v1/jobs/$LONG/logs?rank=0&run=$2" && grep -q after "$T/out"; do
        i=$((i + 1)); [ $i -lt 100 ] || fail "the log written after the restart was not uploaded: $(cat "$T/out")"; sleep 0.1
    done
    grep -q before "$T/out" || fail "the log lost what was written before the restart: $(cat "$T/out")"
}

round KILL 1
round HUP 1
# SIGTERM shuts the node down instead: the workers are stopped and their jobs requeued
# (never failed for it), and run 2 runs under the next agent
round TERM 2
grep -q 'event=worker_found' "$T/agent-h100-0.log" || fail "the agent took no worker back"
! grep -q 'event=keeper_lost\|Sanitizer\|runtime error' "$T/agent-h100-0.log" ||
    fail "$(grep 'event=keeper_lost\|Sanitizer\|runtime error' "$T/agent-h100-0.log" | head -3)"
echo ok
