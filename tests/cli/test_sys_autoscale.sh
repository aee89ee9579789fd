#!/bin/sh
# test_sys_autoscale.sh: an autoscaled pool in the running system with the sim provider.
# The reserved node is busy; a second job makes the server start an on-demand node (a
# local agent with simulated GPUs, after the pool's start-up time); the job runs there;
# once it ended and the node sat idle for the pool's idle time, the node is given back
# and its agent stops; chargeback counts the node from the ask to the release. Then the same with the exec provider: the server runs a script
# with create/delete, POOL and NODE, and the script starts and stops the agent. A bad
# --provider is refused.
# Usage: test_sys_autoscale.sh PATH/TO/gpuorch (run from the repository root).
set -eu

GPUORCH=${1:?usage: $0 PATH/TO/gpuorch}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sys.sh"

run 2 "$GPUORCH" server --config tests/cli/data/cluster-elastic.yaml --provider cloud
err_has "expected none, sim or exec:PATH"
run 2 "$GPUORCH" server --config tests/cli/data/cluster-elastic.yaml --provider exec:/nonexistent
err_has "not an executable file"

CLUSTER=tests/cli/data/cluster-elastic.yaml
start_server --provider sim
start_agent reserved-0 sim:H100-80GB-SXM5:8
wait_nodes 1

node_state() {
    api GET /api/v1/nodes
    python3 -c 'import json,sys; print([n["state"] for n in json.load(open(sys.argv[1]))["nodes"] if n["name"] == sys.argv[2]][0])' "$T/out" "$1"
}
[ "$(node_state burst-0)" != ready ] || fail "the on-demand node is there before anyone asked"

cat >"$T/hold.sh" <<'SH'
#!/bin/sh
sleep "$1"
SH
chmod +x "$T/hold.sh"
submit "{\"name\": \"first\", \"team\": \"research\", \"gpus\": 8, \"command\": [\"$T/hold.sh\", \"30\"]}"
FIRST=$ID
wait_for "$FIRST" 'd["state"] == "running" and d["placement"][0]["node"] == "reserved-0"'
TS=$(python3 -c 'import time; print(int(time.time() * 1000))')
submit "{\"name\": \"second\", \"team\": \"research\", \"gpus\": 8, \"command\": [\"$T/hold.sh\", \"2\"]}"
SECOND=$ID
wait_for "$SECOND" 'd["state"] == "running" and d["placement"][0]["node"].startswith("burst-")' 30
NODE=$(field "$SECOND" 'd["placement"][0]["node"]')
grep -q "event=autoscale_start node=$NODE" "$T/server.log" || fail "no autoscale_start for $NODE"
wait_for "$SECOND" 'd["state"] == "succeeded"' 30
# idle for idle_s (3 s): released, its agent stopped
i=0
until grep -q "event=provider_released node=$NODE" "$T/server.log"; do
    i=$((i + 1)); [ $i -lt 150 ] || fail "$NODE was not released when idle"; sleep 0.1
done
i=0
while pgrep -f "agent.*--node $NODE" >/dev/null; do
    i=$((i + 1)); [ $i -lt 100 ] || fail "the agent of $NODE still runs after the release"; sleep 0.1
done
[ "$(node_state "$NODE")" != ready ] || fail "$NODE still shows ready after its release"
# Idle showback counts an on-demand node the server scales as the cloud bills it: from
# the ask (before its agent came up) to the release. Its idle line plus the job's use is
# its 8 GPUs for exactly that time; the idle line is a row of its own under the pool.
TE=$(python3 -c 'import time; print(int(time.time() * 1000))')
api GET "/api/v1/usage?from=$TS&to=$TE&group_by=pool"
cp "$T/out" "$T/burst.json"
json_ok "$T/burst.json" 'any(r["pool"] == "burst" and r["kind"] == "idle" for r in d["rows"])'
line() { grep -n "$1" "$T/server.log" | head -1 | cut -d: -f1; }
[ "$(line "event=autoscale_start node=$NODE")" -lt "$(line "event=node_counted node=$NODE ")" ] &&
    [ "$(line "event=node_counted node=$NODE ")" -lt "$(line "event=node_ready node=$NODE ")" ] ||
    fail "$NODE was not counted from the ask: $(grep "node=$NODE" "$T/server.log")"
grep -q "event=node_counted node=$NODE pool=burst tier=on-demand basis=present " "$T/server.log" ||
    fail "$NODE counted on another basis"
SA=$(sed -n "s/.*event=node_counted node=$NODE .*since_ms=\([0-9]*\).*/\1/p" "$T/server.log" | head -1)
ER=$(sed -n "s/.*event=node_uncounted node=$NODE .*until_ms=\([0-9]*\).*/\1/p" "$T/server.log" | head -1)
[ -n "$SA" ] && [ -n "$ER" ] && [ "$TS" -le "$SA" ] && [ "$ER" -le "$TE" ] ||
    fail "no span of $NODE in the log between $TS and $TE"
python3 - "$T/burst.json" $((ER - SA)) <<'PY' || fail "the on-demand node's capacity is not use + idle: $(cat "$T/burst.json")"
import json, sys
from decimal import Decimal
d, ms = json.load(open(sys.argv[1])), int(sys.argv[2])
rows = {(r["pool"], r["kind"]): r for r in d["rows"]}
use, idle = rows[("burst", "use")], rows[("burst", "idle")]
got = Decimal(repr(use["gpu_hours"])) + Decimal(repr(idle["gpu_hours"]))
assert got == Decimal(8 * 28000 * ms // 100800) / 10**6, (got, ms)
assert use["jobs"] == 1 and idle["jobs"] == 0 and idle["cost_usd"] > 0
PY
run 0 "$GPUORCH" cancel "$FIRST"
wait_for "$FIRST" 'd["state"] == "cancelled"'

# The exec provider: the script is the cloud.
kill -TERM "$SERVER_PID"
wait "$SERVER_PID" || true
cat >"$T/provider.sh" <<SH
#!/bin/sh
echo "\$1 \$2 \$3" >>"$T/provider.calls"
case \$1 in
create)
    GPUORCH_SIM_MIG_DELAY_MS=0 "$GPUORCH" agent --server "$URL" --token "$AGENT_TOKEN" --node "\$3" \\
        --gpus sim:H100-80GB-SXM5:8 --state-dir "$T/exec-\$3" 2>>"$T/exec-\$3.log" &
    echo \$! >"$T/exec-\$3.pid" ;;
delete) kill "\$(cat "$T/exec-\$3.pid")" ;;
esac
SH
chmod +x "$T/provider.sh"
start_server --provider "exec:$T/provider.sh"
wait_nodes 1 # the reserved node's agent is back before any job comes
submit "{\"name\": \"third\", \"team\": \"research\", \"gpus\": 8, \"command\": [\"$T/hold.sh\", \"30\"]}"
wait_for "$ID" 'd["state"] == "running"' 30
submit "{\"name\": \"fourth\", \"team\": \"research\", \"gpus\": 8, \"command\": [\"$T/hold.sh\", \"1\"]}"
wait_for "$ID" 'd["state"] == "succeeded" and any(e["type"] == "start" and "burst-" in e["detail"] for e in d["events"])' 30
i=0
until grep -q "^delete burst burst-" "$T/provider.calls" 2>/dev/null; do
    i=$((i + 1)); [ $i -lt 150 ] || fail "the exec provider was never told to delete: $(cat "$T/provider.calls")"; sleep 0.1
done
grep -q "^create burst burst-" "$T/provider.calls" || fail "no create call: $(cat "$T/provider.calls")"
echo ok
