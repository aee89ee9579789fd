#!/bin/sh
# run.sh: run one test (a program and its arguments) under ThreadSanitizer and fail it
# when any process it started reported a data race or another TSan error. Each process
# writes its reports to its own file (log_path) rather than to a stderr the test may
# swallow, and stops at the first (halt_on_error); the suppressions file holds only
# races inside libraries built without TSan, each entry explained there.
# Usage: run.sh PROGRAM [ARGS...] (from the repository root).
set -u
here=$(cd "$(dirname "$0")" && pwd)
reports=$(mktemp -d)
trap 'rm -rf "$reports"' EXIT INT TERM
TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1 log_path=$reports/tsan suppressions=$here/suppressions.txt${TSAN_OPTIONS:+ $TSAN_OPTIONS}"
export TSAN_OPTIONS
"$@"
rc=$?
found=0
for f in "$reports"/tsan.*; do
    [ -e "$f" ] || continue
    found=1
    echo "--- ThreadSanitizer report $(basename "$f"):" >&2
    cat "$f" >&2
done
if [ "$found" -ne 0 ]; then
    echo "FAIL: ThreadSanitizer reported the above in $*" >&2
    exit 1
fi
exit "$rc"
