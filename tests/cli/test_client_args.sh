#!/bin/sh
# test_client_args.sh: the client commands (submit, queue, cancel, priority, nodes,
# learned, teams, usage, logs, token) without a server: what they refuse before sending
# anything (exit 2, a message naming the argument), a server that is not there (exit
# 1, "cannot reach"), and --help (exit 0). Their exchanges with a running server are
# checked by the test_sys_*.sh scripts.
# Usage: test_client_args.sh PATH/TO/gpuorch (run from the repository root).
set -eu

GPUORCH=${1:?usage: $0 PATH/TO/gpuorch}
. "$(dirname "$0")/lib.sh"

# a loopback port nothing listens on: the checks below that must not reach a server
# would fail with exit 1 instead of 2 if they tried
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export GPUORCH_SERVER=http://127.0.0.1:$PORT GPUORCH_TOKEN=t

for cmd in submit queue cancel priority nodes learned teams usage logs token; do
    run 0 "$GPUORCH" $cmd --help
    out_has "usage: gpuorch $cmd"
    out_has "GPUORCH_SERVER"
done

# ---- refused before sending ----
run 2 "$GPUORCH" submit
err_has "gpuorch submit: no job file given"
run 2 "$GPUORCH" submit "$T/missing.yaml"
err_has "gpuorch submit: cannot read $T/missing.yaml"
printf '  \n' >"$T/empty.yaml"
run 2 "$GPUORCH" submit "$T/empty.yaml"
err_has "empty.yaml is empty"
# a missing file among good ones: nothing is sent (else this would be exit 1)
printf 'name: a\nteam: search\n' >"$T/a.yaml"
run 2 "$GPUORCH" submit "$T/a.yaml" "$T/missing.yaml"
run 2 "$GPUORCH" submit -o yaml "$T/a.yaml"
err_has "\-o must be table or json, not 'yaml'"

run 2 "$GPUORCH" queue --state runing
err_has "gpuorch queue: --state takes states"
run 2 "$GPUORCH" queue --all --state pending
run 2 "$GPUORCH" queue extra
run 2 "$GPUORCH" queue --bogus

run 2 "$GPUORCH" cancel
run 2 "$GPUORCH" cancel 17 x
err_has "a job id is a whole number above 0, not 'x'"
run 2 "$GPUORCH" cancel 0

run 2 "$GPUORCH" priority 17
run 2 "$GPUORCH" priority 17 urgent
err_has "gpuorch priority: the class must be production, high, normal, low or batch, not 'urgent'"
run 2 "$GPUORCH" priority -3 high

run 2 "$GPUORCH" teams --set-burst 4
err_has "name the team"
run 2 "$GPUORCH" teams search --set-weight -1
err_has "\-\-set-weight must be a number from 0, not '-1'"
run 2 "$GPUORCH" teams search --set-guaranteed 8 --set-burst 4
err_has "must be at least"
run 2 "$GPUORCH" teams a b

run 2 "$GPUORCH" usage --from 2026-02-30
err_has "gpuorch usage: --from takes YYYY-MM-DD"
run 2 "$GPUORCH" usage --to yesterday
run 2 "$GPUORCH" usage --from 2026-03-01 --to 2026-02-01
err_has "\-\-from must come before --to"
run 2 "$GPUORCH" usage --by team,user
err_has "\-\-by takes team, project, pool, model or tier"
run 2 "$GPUORCH" usage -o xml
err_has "\-o must be table, json or csv"

run 2 "$GPUORCH" logs
run 2 "$GPUORCH" logs 17 --rank -1
err_has "\-\-rank must be a whole number"
run 2 "$GPUORCH" logs 17 -o json

run 2 "$GPUORCH" token
run 2 "$GPUORCH" token delete
err_has "unknown action 'delete'"
run 2 "$GPUORCH" token create
err_has "\-\-role is required"
run 2 "$GPUORCH" token create --role root
run 2 "$GPUORCH" token create --role member
err_has "a member token belongs to a team"
run 2 "$GPUORCH" token create --role viewer --team search
err_has "the viewer role has no team"

run 2 "$GPUORCH" nodes --server ftp://example
err_has "gpuorch nodes: --server must be an http:// or https:// URL"
run 2 env GPUORCH_SERVER=localhost:8080 "$GPUORCH" nodes
err_has "GPUORCH_SERVER must be an http:// or https:// URL"
run 2 "$GPUORCH" learned search
err_has "gpuorch learned: unexpected argument 'search'"
run 2 "$GPUORCH" learned -o csv
err_has "gpuorch learned: -o must be table or json, not 'csv'"
run 2 "$GPUORCH" learned reset
err_has "gpuorch learned: reset: no class given (TEAM/NAME)"
for key in search /serve search/; do
    run 2 "$GPUORCH" learned reset "$key"
    err_has "gpuorch learned: '$key' is not TEAM/NAME"
done
run 2 "$GPUORCH" learned reset search/serve search/other
err_has "gpuorch learned: unexpected argument 'search/other'"
run 2 "$GPUORCH" learned reset --team search search/serve
err_has "usage: gpuorch learned"
run 0 "$GPUORCH" learned reset --help
out_has "gpuorch learned reset \[OPTIONS\] TEAM/NAME"

# ---- the same commands, well formed, find no server ----
run 1 "$GPUORCH" submit "$T/a.yaml"
err_has "gpuorch submit: $T/a.yaml: cannot reach the gpuorch server at http://127.0.0.1:$PORT"
for args in "queue" "cancel 17" "priority 17 high" "nodes" "learned" "learned --team search" \
    "learned reset search/serve" "teams" "teams search --set-burst 4" \
    "usage --from 2026-01-01 --by tier" "logs 17" "logs -f 17" "token create --role viewer"; do
    # shellcheck disable=SC2086
    run 1 "$GPUORCH" $args
    err_has "cannot reach the gpuorch server"
    [ ! -s "$T/out" ] || fail "$args printed on stdout without a server"
done
echo "ok"
