#!/bin/sh
# test_sys_class_teams.sh: a workload class belongs to its team, and an admin (or the
# team's lead) can see and reset what it learned, for good.
#
# The attack (issue 19): a member of team search submits a job that fakes an
# out-of-memory failure on a whole A100-80GB with `class: research/llama`. Before classes
# belonged to teams that taught research's class llama to ask 98,304 MiB (a fifth above
# 81,920), more than any GPU here has: research's waiting job of that class failed and its
# new ones were refused with 422, across restarts, with no way back. Now the job teaches
# search/research/llama (search's own class), research's waiting job is untouched and
# research's next one is accepted; only search's jobs of that class are refused, with a
# message that says how to reset it. search's class "llama 70b" learns too, sizes up
# search's waiting job of it and no job of research's.
#
# The reset: GET /learned lists every class with its team and whether any GPU here holds
# it (?team= one team's); DELETE /learned/TEAM/NAME is refused (403) to a member, a
# viewer, another team's lead and an agent, and done by the team's lead or an admin
# (`gpuorch learned reset`, the name percent-encoded); the class's waiting job is sized
# back to what it asks (a "resized" event); the server logs who reset what; the resets
# survive a SIGKILL and restart, and search's job of the class is accepted again. A class
# learns per GPU: a job of four L4s that runs out of memory asks a fifth above one L4's
# memory, not above all four's.
# Usage: test_sys_class_teams.sh PATH/TO/gpuorch (run from the repository root).
set -eu

GPUORCH=${1:?usage: $0 PATH/TO/gpuorch}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sys.sh"

# job TEAM NAME CLASS MIB MODEL LIMIT: a job of TEAM (of no explicit class when CLASS is
# "") asking MIB of GPU memory (or a whole GPU when MIB is "gpus") on MODEL; it prints
# PyTorch's out-of-memory error and exits 1 while it has under LIMIT MiB, else exits 0.
# $T/ in its command lets the cleanup find it.
job() {
    if [ "$4" = gpus ]; then ask='"gpus": 1'; else ask="\"gpu_memory\": \"$4\""; fi
    cls=${3:+"\"class\": \"$3\", "}
    printf '{"name": "%s", "team": "%s", %s%s, "gpu_models": ["%s"], "command": ["sh", "-c", "if [ $GPUORCH_GPU_MEMORY_MIB -lt %s ]; then echo \\"torch.OutOfMemoryError: CUDA out of memory.\\" >&2; exit 1; fi; sleep 0.2; : %s/"]}' \
        "$2" "$1" "$cls" "$ask" "$5" "$6" "$T"
}
events() {
    api GET "/api/v1/jobs/$1"
    python3 -c 'import json,sys; print(" ".join(e["type"] for e in json.load(open(sys.argv[1]))["events"]))' "$T/out"
}
event_detail() { # ID TYPE N: the detail of the Nth (from 0) event of that type
    api GET "/api/v1/jobs/$1"
    python3 -c 'import json,sys; print([e.get("detail") for e in json.load(open(sys.argv[1]))["events"] if e["type"] == sys.argv[2]][int(sys.argv[3])])' "$T/out" "$2" "${3:-0}"
}
token() { # ROLE [TEAM]: a new token of that role
    "$GPUORCH" token create --role "$1" ${2:+--team "$2"} --name "t-$1-${2:-all}" || fail "token create $1"
}
# as TOKEN METHOD PATH [BODY]: api with another token
as() {
    tok=$1
    shift
    TOKEN=$tok api "$@"
}
classes() { # the classes GET /learned lists, "KEY TEAM PEAK OOMS FITS" each
    api GET "/api/v1/learned${1:-}"
    [ "$STATUS" = 200 ] || fail "GET /learned answered $STATUS"
    python3 -c 'import json,sys; print("; ".join("%s %s %d %d %s" % (c["class"], c["team"], c["peak_memory_mib"], c["ooms"], c["fits"]) for c in json.load(open(sys.argv[1]))["classes"]))' "$T/out"
}

start_server
start_agent a100-0 sim:A100-80GB:8
wait_nodes 1
SEARCH=$(token member search)
SEARCH_LEAD=$(token lead search)
RESEARCH=$(token member research)
RESEARCH_LEAD=$(token lead research)
VIEWER=$(token viewer)

# research's llama job (class research/llama, from its name) waits for an H100 (none
# here yet)
as "$RESEARCH" POST /api/v1/jobs "$(job research llama-1 "" 9GiB H100-80GB-SXM5 1)"
[ "$STATUS" = 201 ] || fail "research's llama-1 answered $STATUS: $(cat "$T/out")"
WAITING=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$T/out")

# search fakes an out-of-memory failure on a whole A100-80GB, naming research's class
as "$SEARCH" POST /api/v1/jobs "$(job search fake-1 research/llama gpus A100-80GB 999999)"
[ "$STATUS" = 201 ] || fail "search's fake-1 answered $STATUS: $(cat "$T/out")"
FAKE=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$T/out")
wait_for "$FAKE" 'd["state"] in ("succeeded", "failed")' 60
[ "$(events "$FAKE")" = "submit start oom fail" ] || fail "fake-1's events: $(events "$FAKE")"
case "$(event_detail "$FAKE" oom)" in
*"workload class search/research/llama now asks 98304 MiB") ;;
*) fail "fake-1's oom event says: $(event_detail "$FAKE" oom)" ;;
esac

# research is untouched: its waiting job did not fail, its next ones are accepted,
# whichever way they name the class
[ "$(events "$WAITING")" = "submit" ] || fail "research's waiting llama-1: $(events "$WAITING")"
[ "$(field "$WAITING" 'd["state"]')" = pending ] || fail "research's llama-1 is not pending"
as "$RESEARCH" POST /api/v1/jobs "$(job research llama-2 llama 9GiB H100-80GB-SXM5 1)"
[ "$STATUS" = 201 ] || fail "research's llama-2 answered $STATUS: $(cat "$T/out")"
as "$RESEARCH" POST /api/v1/jobs "$(job research llama-3 research/llama 9GiB H100-80GB-SXM5 1)"
[ "$STATUS" = 201 ] || fail "research's llama-3 (class research/llama) answered $STATUS: $(cat "$T/out")"

# search's own class is what it taught: its next job of it is refused, saying how to reset
as "$SEARCH" POST /api/v1/jobs "$(job search fake-2 research/llama gpus A100-80GB 999999)"
[ "$STATUS" = 422 ] || fail "search's fake-2 answered $STATUS: $(cat "$T/out")"
grep -q "its workload class search/research/llama ran out of GPU memory and needs 98304 MiB, more than any GPU here has (an admin or the team's lead can reset the class: gpuorch learned reset search/research/llama)" "$T/out" ||
    fail "fake-2's refusal: $(cat "$T/out")"

# search's class "llama 70b" learns in 1g.10gb and runs again in 1g.20gb; its job
# waiting for an H100 is sized up with it; research's llama jobs are not
as "$SEARCH" POST /api/v1/jobs "$(job search wait-1 "llama 70b" 9GiB H100-80GB-SXM5 1)"
[ "$STATUS" = 201 ] || fail "search's wait-1 answered $STATUS: $(cat "$T/out")"
SWAIT=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$T/out")
as "$SEARCH" POST /api/v1/jobs "$(job search small-1 "llama 70b" 9GiB A100-80GB 11000)"
[ "$STATUS" = 201 ] || fail "search's small-1 answered $STATUS: $(cat "$T/out")"
SMALL=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$T/out")
wait_for "$SMALL" 'd["state"] in ("succeeded", "failed")' 60
[ "$(events "$SMALL")" = "submit start oom requeue start finish" ] || fail "small-1's events: $(events "$SMALL")"
[ "$(events "$SWAIT")" = "submit resized" ] || fail "search's wait-1: $(events "$SWAIT")"
[ "$(events "$WAITING")" = "submit" ] || fail "research's llama-1 after search/llama 70b learned: $(events "$WAITING")"

[ "$(classes)" = "search/llama 70b search 11674 1 True; search/research/llama search 98304 1 False" ] ||
    fail "GET /learned: $(classes)"
[ "$(classes '?team=research')" = "" ] || fail "GET /learned?team=research: $(classes '?team=research')"
[ "$(TOKEN=$VIEWER classes '?team=search')" = "search/llama 70b search 11674 1 True; search/research/llama search 98304 1 False" ] ||
    fail "a viewer's GET /learned?team=search: $(TOKEN=$VIEWER classes '?team=search')"
"$GPUORCH" learned --team search >"$T/learned.txt" 2>&1 || fail "gpuorch learned --team search: $(cat "$T/learned.txt")"
cat >"$T/learned.want" <<'TABLE'
CLASS                  ASKS AT LEAST  OOMS  FITS
search/llama 70b            11.4 GiB     1  yes
search/research/llama       96.0 GiB     1  no
TABLE
diff -u "$T/learned.want" "$T/learned.txt" >&2 || fail "gpuorch learned --team search shows something else"

# who may reset: not a member of the team, a viewer or another team's lead
refused() { # WHO TOKEN
    as "$2" DELETE /api/v1/learned/search/research/llama
    [ "$STATUS" = 403 ] || fail "$1 resetting search/research/llama answered $STATUS: $(cat "$T/out")"
    grep -q "only an admin or the lead of team 'search' may reset what its workload class search/research/llama learned" "$T/out" ||
        fail "$1's refusal: $(cat "$T/out")"
}
refused "search's member" "$SEARCH"
refused "a viewer" "$VIEWER"
refused "research's lead" "$RESEARCH_LEAD"
as "$AGENT_TOKEN" DELETE "/api/v1/learned/search/llama%2070b"
[ "$STATUS" = 403 ] || fail "an agent resetting answered $STATUS"
as "$SEARCH_LEAD" DELETE /api/v1/learned/search/nosuch
[ "$STATUS" = 404 ] || fail "resetting an unknown class answered $STATUS: $(cat "$T/out")"
as "$SEARCH_LEAD" DELETE /api/v1/learned/search
[ "$STATUS" = 404 ] || fail "resetting a key without a name answered $STATUS: $(cat "$T/out")"
[ "$(classes)" = "search/llama 70b search 11674 1 True; search/research/llama search 98304 1 False" ] ||
    fail "GET /learned after the refused resets: $(classes)"

# the team's lead resets one class; an admin resets the other (through the CLI, which
# percent-encodes the name)
as "$SEARCH_LEAD" DELETE /api/v1/learned/search/research/llama
[ "$STATUS" = 200 ] || fail "search's lead resetting search/research/llama answered $STATUS: $(cat "$T/out")"
json_ok "$T/out" 'd["class"] == "search/research/llama" and d["team"] == "search" and d["peak_memory_mib"] == 98304 and d["resized_jobs"] == 0'
"$GPUORCH" learned reset "search/llama 70b" >"$T/reset.txt" 2>&1 ||
    fail "gpuorch learned reset as an admin: $(cat "$T/reset.txt")"
[ "$(cat "$T/reset.txt")" = "reset search/llama 70b: it asked at least 11.4 GiB after 1 out-of-memory failure; 1 waiting job resized" ] ||
    fail "gpuorch learned reset says: $(cat "$T/reset.txt")"
# search's waiting job asks what it wrote again
[ "$(events "$SWAIT")" = "submit resized resized" ] || fail "search's wait-1 after the reset: $(events "$SWAIT")"
case "$(event_detail "$SWAIT" resized 1)" in
"workload class search/llama 70b was reset by admin token "*": the job asks what it writes") ;;
*) fail "wait-1's second resized event says: $(event_detail "$SWAIT" resized 1)" ;;
esac
[ "$(classes)" = "" ] || fail "GET /learned after the resets: $(classes)"
grep -q 'event=learned_reset class="search/llama 70b" by="admin token' "$T/server.log" || fail "the server did not log the reset"
grep -q 'event=learned_reset class="search/research/llama" by="lead token' "$T/server.log" || fail "the server did not log the lead's reset"
# the audit log has every reset asked for, the refused ones too
grep "DELETE" "$T/var/audit.log" | grep -q "/api/v1/learned/search/research/llama" ||
    fail "the audit log lacks the resets: $(tail -5 "$T/var/audit.log")"

# the resets are durable: after a SIGKILL and a restart nothing is learned, and search's
# job of the class it had poisoned for itself is accepted again
kill -KILL "$SERVER_PID"
wait "$SERVER_PID" 2>/dev/null || true
start_server
wait_nodes 1
[ "$(classes)" = "" ] || fail "GET /learned after a restart: $(classes)"
as "$SEARCH" POST /api/v1/jobs "$(job search fake-3 research/llama gpus A100-80GB 1)"
[ "$STATUS" = 201 ] || fail "search's fake-3 after the reset and a restart answered $STATUS: $(cat "$T/out")"
[ "$(events "$WAITING")" = "submit" ] || fail "research's llama-1 after the restart: $(events "$WAITING")"

# a class learns per GPU: a worker of four L4s (4 x 24,576 MiB) that runs out of memory
# needs a fifth above 24,576 per GPU, 29,492, which an H100 holds (it waits for one),
# not a fifth above the 98,304 of all four, which no GPU here has
start_agent l4-0 sim:L4:4
wait_nodes 2
as "$RESEARCH" POST /api/v1/jobs "$(job research wide-1 "" gpus L4 999999 | sed 's/"gpus": 1/"gpus": 4/; s/\["L4"\]/["L4", "H100-80GB-SXM5"]/')"
[ "$STATUS" = 201 ] || fail "research's wide-1 answered $STATUS: $(cat "$T/out")"
WIDE=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$T/out")
wait_for "$WIDE" '[e["type"] for e in d["events"]][-1:] == ["requeue"] or d["state"] == "failed"' 60
[ "$(events "$WIDE")" = "submit start oom requeue" ] || fail "wide-1's events: $(events "$WIDE")"
case "$(event_detail "$WIDE" oom)" in
"rank 0 ran out of GPU memory in the 98304 MiB it was given"*"; workload class research/wide now asks 29492 MiB") ;;
*) fail "wide-1's oom event says: $(event_detail "$WIDE" oom)" ;;
esac
[ "$(classes '?team=research')" = "research/wide research 29492 1 True" ] || fail "research's classes: $(classes '?team=research')"
echo "ok: test_sys_class_teams"
