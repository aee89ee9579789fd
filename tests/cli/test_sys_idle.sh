#!/bin/sh
# test_sys_idle.sh: idle showback counts what really was there. On the demo cluster
# (two reserved H100 nodes, an owned A100 node, an on-demand L4 node) a server runs for
# seconds with one agent, h100-0's:
#  - idle is h100-0's 8 GPUs from the moment its agent registered (the server logs the
#    span it opened) to the window's end, exactly as metering.h meters it; the nodes
#    that never registered count nothing, and the default 30-day window holds those few
#    seconds, not 30 days of the whole cluster;
#  - idle is a row of its own under every grouping (never folded into a model's or a
#    tier's use), and use + idle = total, in the table, JSON and CSV;
#  - the server is killed (SIGKILL) and started again: the time it was down has no idle
#    at all, and of the time before, at most the last 6 s is lost (the spans' ends are
#    written every 5 s);
#  - the server is stopped (SIGTERM) and started again: the span ends exactly at the
#    stop, and the down time again has no idle;
#  - the agent goes silent: from the moment the node is lost, it counts no more.
# Usage: test_sys_idle.sh PATH/TO/gpuorch (run from the repository root).
set -eu

GPUORCH=${1:?usage: $0 PATH/TO/gpuorch}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sys.sh"

now_ms() { python3 -c 'import time; print(int(time.time() * 1000))'; }

# log_ms EVENT NODE KEY N: KEY's value in the N-th server log line of EVENT for NODE.
log_ms() {
    grep "event=$1 node=$2 " "$T/server.log" | sed -n "$4p" | sed -n "s/.* $3=\\([0-9]*\\).*/\\1/p"
}

# usage FROM TO [GROUP_BY]: the report as JSON in $T/u.json.
usage() {
    api GET "/api/v1/usage?from=$1&to=$2&group_by=${3-team,project,pool,model,tier}"
    [ "$STATUS" = 200 ] || fail "usage answered $STATUS: $(cat "$T/out")"
    cp "$T/out" "$T/u.json"
}

# check_idle MS: the report in $T/u.json holds one idle row, h100's, of h100-0's 8 GPUs
# at $2.50 for MS milliseconds exactly (or for LO to HI ms, given as LO-HI), and nothing
# else.
check_idle() {
    python3 - "$T/u.json" "$1" <<'PY' || fail "idle is not h100-0's 8 GPUs for $1 ms: $(cat "$T/u.json")"
import json, sys
from decimal import Decimal
d = json.load(open(sys.argv[1]))
lo, _, hi = sys.argv[2].partition("-")
lo, hi = int(lo), int(hi or lo)
def meter(ms):  # metering.h: GPU_UNITS x ms, rounded down to millionths
    u = 8 * 28000
    return Decimal(u * ms // 100800) / 10**6, Decimal(u * ms * 2500000 // (100800 * 10**6)) / 10**6
dec = lambda x: Decimal(repr(x)) if isinstance(x, float) else Decimal(x)
rows = d["rows"]
want = {"team": "(idle)", "project": "(idle)", "pool": "h100", "model": "H100-80GB-SXM5",
        "tier": "reserved"}
assert len(rows) == 1 and rows[0]["kind"] == "idle" and rows[0]["jobs"] == 0, rows
assert all(rows[0][k] == want[k] for k in d["group_by"]), rows
h, c = dec(rows[0]["gpu_hours"]), dec(rows[0]["cost_usd"])
assert meter(lo) <= (h, c) <= meter(hi), ((h, c), meter(lo), meter(hi))
if lo == hi:
    assert (h, c) == meter(lo), ((h, c), meter(lo))
assert dec(d["total"]["gpu_hours"]) == h and dec(d["idle"]["cost_usd"]) == c
assert dec(d["use"]["gpu_hours"]) == 0
PY
}

# no_idle FROM TO: nothing at all in the window.
no_idle() {
    usage "$1" "$2"
    json_ok "$T/u.json" 'd["rows"] == [] and d["total"]["gpu_hours"] == 0 and d["total"]["cost_usd"] == 0'
}

T0=$(now_ms)
start_server
TA=$(now_ms)
start_agent h100-0 sim:H100-80GB-SXM5:8
wait_nodes 1
TR=$(now_ms)
# the spans' ends are written every 5 s: wait past one
sleep 9

# Only h100-0's GPUs, from its registration (between TA and TR) to the window's end;
# exactly from the moment the server logged.
T1=$(now_ms)
usage "$T0" "$T1"
check_idle "$((T1 - TR))-$((T1 - TA))"
S1=$(log_ms node_counted h100-0 since_ms 1)
[ -n "$S1" ] && [ "$TA" -le "$S1" ] && [ "$S1" -le "$TR" ] ||
    fail "h100-0 counted from '$S1', not between $TA and $TR"
grep -q "event=node_counted node=h100-0 pool=h100 tier=reserved basis=ready gpus=8 " "$T/server.log" ||
    fail "h100-0 counted on another basis: $(grep node_counted "$T/server.log")"
check_idle $((T1 - S1))
[ "$(grep -c 'event=node_counted' "$T/server.log")" = 1 ] || fail "a node that never registered counted"

# Idle is a row of its own under every grouping; use + idle = total; the CSV says so.
for by in team team,project model tier pool ""; do
    usage "$T0" "$T1" "$by"
    check_idle $((T1 - S1))
    api GET "/api/v1/usage?from=$T0&to=$T1&group_by=$by&format=csv"
    want="${by:+$by,}gpu_hours,cost_usd,jobs,kind"
    [ "$(head -1 "$T/out")" = "$want" ] || fail "CSV by '$by': header $(head -1 "$T/out")"
    [ "$(sed -n 2p "$T/out" | cut -d, -f"$(echo "$want" | tr , '\n' | grep -n '^kind$' | cut -d: -f1)")" = idle ] ||
        fail "CSV by '$by': the row is not idle: $(cat "$T/out")"
    [ "$(wc -l <"$T/out")" = 2 ] || fail "CSV by '$by': $(cat "$T/out")"
done
run 0 "$GPUORCH" usage --from "$T0" --to "$T1" --by model
out_has "^H100-80GB-SXM5 "
out_has "^USE  *0.00  *0.00  *0$"
out_has "^IDLE "
grep -q "A100\|L4" "$T/out" && fail "a model that never registered shows: $(cat "$T/out")"
# the issue's report: the last 30 days hold the few seconds the server has run
run 0 "$GPUORCH" usage -o json
json_ok "$T/out" "0 < d['total']['gpu_hours'] <= 8 * ($(now_ms) - $T0) / 3600000 and d['idle']['gpu_hours'] == d['total']['gpu_hours']"

# SIGKILL: the down time has no idle; at most the last 6 s before the kill is lost.
TK=$(now_ms)
kill -KILL "$SERVER_PID"
wait "$SERVER_PID" 2>/dev/null || true
sleep 2
start_server
wait_nodes 1
grep -q "event=node_spans_recovered closed=1" "$T/server.log" || fail "the open span was not closed at restart"
S2=$(log_ms node_counted h100-0 since_ms 2)
[ -n "$S2" ] && [ "$S2" -ge $((TK + 2000)) ] || fail "h100-0 counted again from '$S2', before the restart"
no_idle "$TK" "$S2"
usage "$T0" "$TK"
check_idle "$((TK - S1 - 6000))-$((TK - S1))"

# SIGTERM: the span ends exactly when the server stops.
sleep 1
kill -TERM "$SERVER_PID"
wait "$SERVER_PID" 2>/dev/null || true
E2=$(sed -n 's/.*event=node_spans_closed closed=1 until_ms=\([0-9]*\).*/\1/p' "$T/server.log" | tail -1)
[ -n "$E2" ] || fail "a clean stop did not close the span"
sleep 1
start_server
wait_nodes 1
S3=$(log_ms node_counted h100-0 since_ms 3)
[ -n "$S3" ] && [ "$S3" -gt "$E2" ] || fail "h100-0 counted again from '$S3'"
usage "$S2" "$E2"
check_idle $((E2 - S2))
no_idle "$E2" "$S3"

# The agent goes silent: lost after 3 s, and counted no more from then.
kill -KILL "$AGENT_h100_0"
i=0
until grep -q "event=node_uncounted node=h100-0 " "$T/server.log"; do
    i=$((i + 1)); [ $i -lt 100 ] || fail "h100-0 was not lost"; sleep 0.1
done
EL=$(log_ms node_uncounted h100-0 until_ms 1)
sleep 0.5
T4=$(now_ms)
usage "$S3" "$T4"
check_idle $((EL - S3))
no_idle "$EL" "$T4"
echo ok
