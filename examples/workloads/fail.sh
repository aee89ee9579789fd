#!/bin/sh
# fail.sh: a job that fails, for trying out failure handling: after DELAY seconds
# (default 1) it exits with EXIT_CODE (default 3).
DELAY=${DELAY:-1}
EXIT_CODE=${EXIT_CODE:-3}
echo "fail: rank ${RANK:-0} exits with $EXIT_CODE in $DELAY s"
sleep "$DELAY"
echo "fail: exiting with $EXIT_CODE" >&2
exit "$EXIT_CODE"
