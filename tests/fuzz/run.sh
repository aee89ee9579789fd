#!/bin/sh
# tests/fuzz/run.sh: runs the libFuzzer targets of tests/fuzz (built by `make fuzz` into
# build-fuzz/fuzz/). Two modes:
#
#   run.sh check FUZZER SECONDS      one target, as a test (the fuzz_* tests of ctest):
#       every input of tests/fuzz/corpus/T and tests/fuzz/regressions/T replayed once,
#       then SECONDS of fuzzing from that corpus (new inputs into a temporary directory,
#       the repository's corpus is not changed), from a fixed seed (FUZZ_SEED, 1). An
#       input of the corpus or the regressions that fails is exit 1: a known input
#       broke again. A new finding of the short fuzzing is saved and reported, and is
#       exit 77 (ctest lists the test as skipped, with the report) unless FUZZ_STRICT=1
#       makes it 1: libFuzzer's path differs from one machine to the next even from one
#       seed, and a change should not fail at random on a bug another machine happened
#       upon, while `make fuzz` (which fails on any) is where findings are looked for.
#   run.sh fuzz DIR SECONDS [T...]   each target of DIR (or the ones named) for SECONDS,
#       one after the other, for `make fuzz`: the corpus grows in DIR/../corpus/T and is
#       kept for the next run; libFuzzer's fork mode goes on past a crash, a hang or
#       running out of memory, so one run finds what it can; a summary line per target.
#
# A crash, a hang (an input over FUZZ_TIMEOUT seconds, 2), a leak or a run past
# FUZZ_RSS_MB (2048) is saved as DIR/../crashes/T/crash-<sha1> (or timeout-, oom-,
# leak-): replay it with `FUZZER FILE`, and once fixed, copy it to
# tests/fuzz/regressions/T/ so every test run replays it. docs/testing.md says more.
# Exit code 77: the target is not built (the fuzz build is missing), so ctest skips.
set -u

here=$(cd "$(dirname "$0")" && pwd)
timeout_s=${FUZZ_TIMEOUT:-2}
rss_mb=${FUZZ_RSS_MB:-2048}
max_len=${FUZZ_MAX_LEN:-16384}

# The target's name without fuzz_: its corpus, regressions and dictionary are named so.
target_name() { basename "$1" | sed 's/^fuzz_//'; }

dict_of() {
    case $1 in
    jobs | job_body | cluster | mix | yaml_guard) echo "$here/dict/yaml.dict" ;;
    heartbeat | placement | kube_objects) echo "$here/dict/json.dict" ;;
    esac
}

# The files of the given directories, one per line (none: nothing).
inputs() {
    for d in "$@"; do
        [ -d "$d" ] && find "$d" -type f ! -name '.*' ! -name README.md
    done
}

# A failed run's report: from the first line that says what went wrong, else the end.
report() {
    pat='^==[0-9]+==|runtime error:|fuzz check failed|^ALARM|out-of-memory|^MS:|Test unit written'
    if grep -q -E "$pat" "$1"; then
        awk -v pat="$pat" '$0 ~ pat && !on { on = 1 } on && n++ < 60' "$1"
    else
        tail -n 60 "$1"
    fi
}

# The libFuzzer options every run takes.
common_opts() {
    echo "-timeout=$timeout_s -rss_limit_mb=$rss_mb -malloc_limit_mb=$rss_mb"
}

# "exec/s cov ft" from a libFuzzer log: the last status line, and the final stats.
stats_of() {
    awk '/^#[0-9]+/ { for (i = 1; i <= NF; i++) { if ($i == "cov:") c = $(i+1); if ($i == "ft:") f = $(i+1)
                                                 if ($i == "exec/s:" || $i == "exec/s") e = $(i+1) } }
         /stat::average_exec_per_sec:/ { e = $2 }
         END { printf "exec/s %s cov %s ft %s", e ? e : "?", c ? c : "?", f ? f : "?" }' "$1"
}

check() {
    fuzzer=$1 seconds=$2
    t=$(target_name "$fuzzer")
    if [ ! -x "$fuzzer" ]; then
        echo "SKIP: $fuzzer is not built (make fuzz-build)"
        exit 77
    fi
    crashes=$(cd "$(dirname "$fuzzer")/.." && pwd)/crashes/$t
    mkdir -p "$crashes"
    work=$(mktemp -d "${TMPDIR:-/tmp}/gpuorch-fuzz-$t.XXXXXX")
    trap 'rm -rf "$work"' EXIT
    log=$work/log

    # replay: each file once; a file libFuzzer cannot run fails the test too
    inputs "$here/corpus/$t" "$here/regressions/$t" >"$work/files"
    n=$(wc -l <"$work/files")
    if [ "$n" -eq 0 ]; then
        echo "FAIL: no corpus for $t in $here/corpus/$t"
        exit 1
    fi
    # shellcheck disable=SC2046
    if ! xargs "$fuzzer" $(common_opts) <"$work/files" >"$log" 2>&1; then
        report "$log"
        echo "FAIL: $t: an input of the corpus or the regressions fails (above)"
        exit 1
    fi
    echo "replayed $n inputs of $t"

    mkdir "$work/new"
    dict=$(dict_of "$t")
    # shellcheck disable=SC2046
    if ! "$fuzzer" $(common_opts) -seed="${FUZZ_SEED:-1}" -max_len="$max_len" \
        -max_total_time="$seconds" -print_final_stats=1 -artifact_prefix="$crashes/" ${dict:+-dict="$dict"} \
        "$work/new" "$here/corpus/$t" >"$log" 2>&1; then
        report "$log"
        grep -E '^(Test unit written|artifact_prefix)' "$log"
        if [ "${FUZZ_STRICT:-0}" = 1 ]; then
            echo "FAIL: $t: fuzzing found the input above, saved in $crashes/"
            exit 1
        fi
        echo "NEW FINDING (reported as skipped; FUZZ_STRICT=1 fails): $t: fuzzing found" \
            "the input above, saved in $crashes/: fix it and add it to" \
            "tests/fuzz/regressions/$t/"
        exit 77
    fi
    echo "fuzzed $t for ${seconds}s: $(stats_of "$log")"
}

fuzz() {
    dir=$1 seconds=$2
    shift 2
    if [ $# -eq 0 ]; then
        set -- $(cd "$dir" && ls fuzz_* | sed 's/^fuzz_//')
    fi
    top=$(cd "$dir/.." && pwd)
    summary=""
    failed=0
    for t in "$@"; do
        fuzzer=$dir/fuzz_$t
        [ -x "$fuzzer" ] || { echo "no target $fuzzer" >&2; exit 2; }
        corpus=$top/corpus/$t crashes=$top/crashes/$t
        mkdir -p "$corpus" "$crashes"
        before=$(ls "$crashes" | wc -l)
        dict=$(dict_of "$t")
        log=$top/fuzz-$t.log
        echo "fuzzing $t for ${seconds}s (log: $log)"
        # shellcheck disable=SC2046
        "$fuzzer" $(common_opts) -max_len="$max_len" -max_total_time="$seconds" \
            -fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
            -print_final_stats=1 -artifact_prefix="$crashes/" ${dict:+-dict="$dict"} \
            "$corpus" "$here/corpus/$t" >"$log" 2>&1
        rc=$?
        after=$(ls "$crashes" | wc -l)
        line="$t: $(stats_of "$log"), corpus $(ls "$corpus" | wc -l)"
        if [ $rc -ne 0 ] || [ "$after" -ne "$before" ]; then
            failed=1
            grep -m1 -E '^==[0-9]+==ERROR|^SUMMARY|ALARM|out-of-memory|fuzz check failed' "$log"
            line="$line, FOUND $((after - before)) new in $crashes/"
        fi
        summary="$summary$line
"
    done
    printf '\n%s' "$summary"
    exit $failed
}

case ${1:-} in
check) [ $# -eq 3 ] || { echo "usage: $0 check FUZZER SECONDS" >&2; exit 2; }; check "$2" "$3" ;;
fuzz) [ $# -ge 3 ] || { echo "usage: $0 fuzz DIR SECONDS [TARGET...]" >&2; exit 2; }; shift; fuzz "$@" ;;
*) echo "usage: $0 check FUZZER SECONDS | fuzz DIR SECONDS [TARGET...]" >&2; exit 2 ;;
esac
