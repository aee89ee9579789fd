#!/bin/sh
# test_sys_oom.sh: the running system learns GPU memory per workload class. A model server
# asks 9 GiB, gets a 1g.10gb slice of an A100-80GB, and (as a real one whose cache grows
# past its slice does) prints PyTorch's out-of-memory error and exits 1 while it has under
# 11,000 MiB (GPUORCH_GPU_MEMORY_MIB, set by the agent). The agent judges the end an
# out-of-memory failure; the server records an "oom" event, learns that search/serve needs
# a fifth above the 9,728 MiB it overran (11,674 MiB) and queues the job again, sized one
# up: 1g.20gb, where it succeeds. The next server of the class starts in 1g.20gb and never
# runs out of memory, and so does one submitted after the server restarted (what the class
# learned is in the store); one that was waiting for an H100 when the class learned is
# sized up where it waits, to an MPS share of two of the H100's eight memory slots
# (20,480 MiB; the H100s here are not partitioned), and does not run out of memory
# either. A class whose need outgrows every GPU here cannot run: its job fails and the
# next job of the class is refused with 422. In a gang, the rank that ran out of memory
# takes the others down and all run again one size up. A failure that is not about GPU
# memory fails the job as before.
# Usage: test_sys_oom.sh PATH/TO/gpuorch (run from the repository root).
set -eu

GPUORCH=${1:?usage: $0 PATH/TO/gpuorch}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sys.sh"

# the worker: out of memory below its third argument in MiB; $T/ in its command lets the cleanup find it
serve() {
    printf '{"name": "%s", "team": "search", "gpu_memory": "%s", "gpu_models": ["A100-80GB"], "command": ["sh", "-c", "echo granted $GPUORCH_GPU_MEMORY_MIB; if [ $GPUORCH_GPU_MEMORY_MIB -lt %s ]; then echo \\"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\\" >&2; exit 1; fi; sleep 0.5; : %s/"]}' \
        "$1" "$2" "$3" "$T"
}
events() {
    api GET "/api/v1/jobs/$1"
    python3 -c 'import json,sys; print(" ".join(e["type"] for e in json.load(open(sys.argv[1]))["events"]))' "$T/out"
}
# wait_log ID RUN TEXT: until the log of rank 0 of that run holds TEXT
wait_log() {
    i=0
    until api GET "/api/v1/jobs/$1/logs?run=$2" && grep -q "$3" "$T/out"; do
        i=$((i + 1))
        [ $i -lt 100 ] || fail "job $1 run $2: no '$3' in its log (last: $(head -c 300 "$T/out"))"
        sleep 0.1
    done
}
event_detail() {
    api GET "/api/v1/jobs/$1"
    python3 -c 'import json,sys; print([e.get("detail") for e in json.load(open(sys.argv[1]))["events"] if e["type"] == sys.argv[2]][0])' "$T/out" "$2"
}

start_server
start_agent a100-0 sim:A100-80GB:8
wait_nodes 1

# a server of the class that waits for an H100 (no H100 agent yet) when the class learns
submit "$(serve serve-0 9GiB 11000 | sed 's/"A100-80GB"/"H100-80GB-SXM5"/')"
ZERO=$ID
submit "$(serve serve-1 9GiB 11000)"
ONE=$ID
wait_for "$ONE" 'd["state"] in ("succeeded", "failed")' 60
[ "$(field "$ONE" 'd["state"]')" = succeeded ] || fail "serve-1 did not succeed: $(events "$ONE")"
[ "$(events "$ONE")" = "submit start oom requeue start finish" ] || fail "serve-1's events: $(events "$ONE")"
DETAIL=$(event_detail "$ONE" oom)
case "$DETAIL" in
*"rank 0 ran out of GPU memory in the 9728 MiB it was given; workload class search/serve now asks 11674 MiB"*) ;;
*) fail "serve-1's oom event says: $DETAIL" ;;
esac
[ "$(field "$ONE" 'd["run"]')" = 2 ] || fail "serve-1 ran $(field "$ONE" 'd["run"]') times"
wait_log "$ONE" 1 "granted 9728"
wait_log "$ONE" 2 "granted 19968"

# the waiting server was sized up with its class, and runs without running out of memory
[ "$(events "$ZERO")" = "submit resized" ] || fail "serve-0's events: $(events "$ZERO")"
[ "$(event_detail "$ZERO" resized)" = "workload class search/serve now asks 11674 MiB" ] ||
    fail "serve-0's resized event says: $(event_detail "$ZERO" resized)"
start_agent h100-0 sim:H100-80GB-SXM5:8
wait_for "$ZERO" 'd["state"] in ("succeeded", "failed")' 60
[ "$(events "$ZERO")" = "submit resized start finish" ] || fail "serve-0's events: $(events "$ZERO")"

# the next server of the class is sized from what the class learned
submit "$(serve serve-2 9GiB 11000)"
TWO=$ID
wait_for "$TWO" 'd["state"] in ("succeeded", "failed")' 60
[ "$(events "$TWO")" = "submit start finish" ] || fail "serve-2's events: $(events "$TWO")"
wait_log "$TWO" 1 "granted 19968"

# ... and so after a restart
kill -KILL "$SERVER_PID"
wait "$SERVER_PID" 2>/dev/null || true
start_server
wait_nodes 2
submit "$(serve serve-3 9GiB 11000)"
THREE=$ID
wait_for "$THREE" 'd["state"] in ("succeeded", "failed")' 60
[ "$(events "$THREE")" = "submit start finish" ] || fail "serve-3's events: $(events "$THREE")"

# platform's server of the same name is another class: it gets the 1g.10gb it asks
submit "$(serve serve-1 9GiB 1 | sed 's/"team": "search"/"team": "platform"/')"
PLAT=$ID
wait_for "$PLAT" 'd["state"] in ("succeeded", "failed")' 60
[ "$(events "$PLAT")" = "submit start finish" ] || fail "platform's serve-1's events: $(events "$PLAT")"
wait_log "$PLAT" 1 "granted 9728"

# a class that overran a whole GPU: nothing here holds it
submit "$(serve big-1 70GiB 999999)"
BIG=$ID
wait_for "$BIG" 'd["state"] in ("succeeded", "failed")' 60
[ "$(field "$BIG" 'd["state"]')" = failed ] || fail "big-1 did not fail"
[ "$(events "$BIG")" = "submit start oom fail" ] || fail "big-1's events: $(events "$BIG")"
api POST /api/v1/jobs "$(serve big-2 70GiB 999999)"
[ "$STATUS" = 422 ] || fail "big-2 answered $STATUS: $(cat "$T/out")"
grep -q "its workload class search/big ran out of GPU memory and needs 86016 MiB, more than any GPU here has" "$T/out" ||
    fail "big-2's refusal: $(cat "$T/out")"

# a gang: rank 1 runs out of memory in its 1g.10gb while rank 0 would run on for a
# minute; rank 0 is stopped, and both run again in 1g.20gb
submit "{\"name\": \"pair-1\", \"team\": \"research\", \"workers\": 2, \"gpu_memory\": \"9GiB\", \"gpu_models\": [\"A100-80GB\"], \"command\": [\"sh\", \"-c\", \"if [ \$GPUORCH_GPU_MEMORY_MIB -ge 11000 ]; then exit 0; fi; if [ \$RANK = 1 ]; then echo 'CUDA error: out of memory' >&2; exit 1; fi; sleep 60; : $T/\"]}"
PAIR=$ID
wait_for "$PAIR" 'd["state"] in ("succeeded", "failed")' 60
[ "$(events "$PAIR")" = "submit start oom requeue start finish" ] || fail "pair-1's events: $(events "$PAIR")"
case "$(event_detail "$PAIR" oom)" in
"rank 1 ran out of GPU memory in the 9728 MiB it was given; workload class research/pair now asks 11674 MiB") ;;
*) fail "pair-1's oom event says: $(event_detail "$PAIR" oom)" ;;
esac

# what the server learned, as the CLI shows it
"$GPUORCH" learned >"$T/learned.txt" 2>&1 || fail "gpuorch learned: $(cat "$T/learned.txt")"
cat >"$T/learned.want" <<'TABLE'
CLASS          ASKS AT LEAST  OOMS  FITS
research/pair       11.4 GiB     1  yes
search/big          84.0 GiB     1  no
search/serve        11.4 GiB     1  yes
TABLE
diff -u "$T/learned.want" "$T/learned.txt" >&2 || fail "gpuorch learned shows something else"
api GET /api/v1/learned
python3 -c 'import json,sys; d = json.load(open(sys.argv[1])); sys.exit(0 if {"class": "search/serve", "team": "search", "name": "serve", "peak_memory_mib": 11674, "ooms": 1, "fits": True} in d["classes"] else 1)' "$T/out" ||
    fail "GET /learned: $(cat "$T/out")"

# an ordinary failure is not retried
submit "{\"name\": \"crash-1\", \"team\": \"search\", \"gpu_memory\": \"9GiB\", \"command\": [\"sh\", \"-c\", \"echo 'Traceback: ValueError' >&2; exit 3; : $T/\"]}"
CRASH=$ID
wait_for "$CRASH" 'd["state"] == "failed"' 60
[ "$(events "$CRASH")" = "submit start fail" ] || fail "crash-1's events: $(events "$CRASH")"
[ "$(field "$CRASH" 'd["run"]')" = 1 ] || fail "crash-1 ran again"
echo "ok: test_sys_oom"
