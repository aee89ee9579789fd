# lib.sh: what every CLI test script shares, sourced after it sets GPUORCH: a scratch
# folder $T removed on exit, and the helpers below. Not a test itself (no test_ prefix).

T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT INT TERM

# fail MESSAGE: say what failed, with the last command's output, and stop.
fail() {
    echo "FAIL: $*" >&2
    for f in "$T/out" "$T/err"; do
        [ -s "$f" ] && { echo "--- $(basename "$f"):" >&2; head -c 2000 "$f" >&2; echo >&2; }
    done
    exit 1
}

# run WANT_RC CMD...: run, keeping stdout in $T/out and stderr in $T/err.
run() {
    want=$1
    shift
    set +e
    "$@" >"$T/out" 2>"$T/err"
    rc=$?
    set -e
    [ "$rc" -eq "$want" ] || fail "exit $rc, expected $want: $*"
}

# json_ok FILE EXPR: FILE parses as JSON and the Python expression EXPR over d holds.
json_ok() {
    python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
if not eval(sys.argv[2]):
    sys.exit("does not hold: " + sys.argv[2])
' "$1" "$2" || fail "$1: $2"
}

out_has() {
    grep -q -- "$1" "$T/out" || fail "stdout lacks '$1'"
}

err_has() {
    grep -q -- "$1" "$T/err" || fail "stderr lacks '$1'"
}
