#!/bin/sh
# test_bad_input.sh: a table of bad requests for every route of the server (sizes,
# nesting, encodings, numbers, types, unknown and duplicate fields, path parameters,
# query strings, tokens), each answered 4xx with a JSON error while /healthz answers
# throughout and memory comes back; then hostile bodies from six threads while /healthz
# and the job list keep answering. The table is tests/cli/bad_input.py.
# Usage: test_bad_input.sh PATH/TO/gpuorch (run from the repository root).
set -eu

GPUORCH=${1:?usage: $0 PATH/TO/gpuorch}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sys.sh"
command -v curl >/dev/null || fail "curl is needed"

# AddressSanitizer keeps freed memory aside (256 MiB by default); with less the
# server's resident memory says what it holds
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=8"
export ASAN_OPTIONS
start_server
python3 tests/cli/bad_input.py "$URL" "$ADMIN" "$SERVER_PID" src/server/http.c \
    >"$T/out" 2>"$T/err" || fail "bad input: $(head -c 6000 "$T/err")"
cat "$T/out"
kill -TERM "$SERVER_PID"
wait "$SERVER_PID" || fail "the server exited with $? on SIGTERM"
! grep -q "level=error" "$T/server.log" ||
    fail "errors logged: $(grep level=error "$T/server.log" | head -5)"
