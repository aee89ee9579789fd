#!/bin/sh
# test_sys_tco.sh: `gpuorch tco --from-server` against a real server: a job runs on a
# simulated agent, and tco's GPU-hours per month are the server's metered GPU-hours of
# the last 30 days (allocations only, not the idle showback of the reserved pool) times
# 730 / 720 (a 730-hour month over the 720-hour window). A token the server refuses is
# a run-time failure, exit 1.
# Usage: test_sys_tco.sh PATH/TO/gpuorch (run from the repository root).
set -eu

GPUORCH=${1:?usage: $0 PATH/TO/gpuorch}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sys.sh"

start_server
start_agent h100-0 sim:H100-80GB-SXM5:8
wait_nodes 1

submit '{"name": "short", "team": "search", "gpus": 2, "command": ["sh", "-c", "sleep 1"]}'
wait_for "$ID" 'd["state"] == "succeeded"'

api GET "/api/v1/usage?include_idle=false"
[ "$STATUS" = 200 ] || fail "usage answered $STATUS"
cp "$T/out" "$T/usage.json"
json_ok "$T/usage.json" 'd["total"]["gpu_hours"] > 0 and d["to_ms"] - d["from_ms"] == 30 * 24 * 3600 * 1000'

run 0 "$GPUORCH" tco --from-server -o json
cp "$T/out" "$T/tco.json"
python3 - "$T/usage.json" "$T/tco.json" <<'EOF' || fail "tco's usage is not the server's"
import json, sys
usage = json.load(open(sys.argv[1]))["total"]["gpu_hours"]
tco = json.load(open(sys.argv[2]))
month = tco["usage"]["gpu_hours_per_month"]
assert len(month) == 36 and len(set(month)) == 1, month[:3]
# a finished job's GPU-hours do not change; printed to the millionth on both sides
assert abs(month[0] - usage * 730 / 720) < 2e-6, (month[0], usage)
assert month[0] < 1, "the idle showback of the reserved pool was counted"
assert tco["usage"]["source"].startswith("http://127.0.0.1:"), tco["usage"]["source"]
assert tco["owned"]["servers"] == 1
EOF

run 0 "$GPUORCH" tco --from-server
out_has "^Usage: .* GPU-hours a month on average.*(http://127.0.0.1:$PORT: .* GPU-hours over 30 days)"

run 1 "$GPUORCH" tco --from-server --token gpo_not_a_token
err_has "gpuorch tco: "
echo "sys tco ok"
