#!/bin/sh
# test_sys_port.sh: a port already in use. A second `gpuorch server` on the port of a
# running one exits 1 saying the port is taken, before it opens its store or writes an
# admin token (not even on the first server's own database). `make run`
# (tools/run-local.sh) on that port says the address is taken and exits 1 without
# starting anything, and on a port held by something that is not a gpuorch server it
# passes on the server's reason and exits 1. The first server goes on serving.
# Usage: test_sys_port.sh PATH/TO/gpuorch (run from the repository root).
set -eu

GPUORCH=${1:?usage: $0 PATH/TO/gpuorch}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sys.sh"
REPO=$(pwd)

start_server
submit '{"name": "kept", "team": "search", "gpus": 1, "command": ["true"]}'
KEPT=$ID

# gpuorch server on the taken port, with a database of its own
mkdir -p "$T/other"
run 1 "$GPUORCH" server --config examples/cluster-demo.yaml --db "sqlite:$T/other/gpuorch.db" \
    --listen "127.0.0.1:$PORT"
err_has "cannot listen on 127.0.0.1:$PORT: Address already in use: the port is taken"
[ -z "$(ls -A "$T/other")" ] || fail "the refused server left files: $(ls -A "$T/other")"
# ... and with the running server's own database: nothing of it is touched
cp "$T/var/admin.token" "$T/admin.before"
run 1 "$GPUORCH" server --config examples/cluster-demo.yaml --db "sqlite:$T/var/gpuorch.db" \
    --listen "127.0.0.1:$PORT"
err_has "the port is taken"
cmp -s "$T/admin.before" "$T/var/admin.token" || fail "the refused server rewrote admin.token"

# make run on the taken port: no server, no var/, exit 1
mkdir -p "$T/run"
ln -s "$REPO/examples" "$T/run/examples"
BUILD=$(cd "$(dirname "$GPUORCH")" && pwd)
(cd "$T/run" && export GPUORCH_LISTEN="127.0.0.1:$PORT" && run 1 "$REPO/tools/run-local.sh" "$BUILD")
err_has "127.0.0.1:$PORT is taken: a server already answers there"
[ ! -e "$T/run/var" ] || fail "make run on a taken port made var/"

# a port held by something else: the server's own reason comes through
HELD=$(free_port)
python3 -c '
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(); time.sleep(60)
' "$HELD" &
HOLDER=$!
PIDS="$PIDS $HOLDER"
i=0
until python3 -c 'import socket,sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1)' "$HELD" 2>/dev/null; do
    i=$((i + 1)); [ $i -lt 50 ] || fail "the holder did not listen"; sleep 0.1
done
(cd "$T/run" && export GPUORCH_LISTEN="127.0.0.1:$HELD" && run 1 "$REPO/tools/run-local.sh" "$BUILD")
err_has "the server did not start"
err_has "cannot listen on 127.0.0.1:$HELD: Address already in use: the port is taken"

# the first server is untouched and serving
api GET "/api/v1/jobs/$KEPT"
[ "$STATUS" = 200 ] || fail "the running server answered $STATUS after the refused starts"
curl -fsS "$URL/healthz" >/dev/null || fail "the running server stopped answering"
echo ok
