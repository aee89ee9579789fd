#!/bin/sh
# test_sys_runas.sh: workers are not root. The cluster spec maps team search to uid 2001,
# gid 2001 and groups 2100 and 2101 (run_as); its job, asking 2 CPUs and 1 GiB, logs what
# it runs as (id, /proc/self/status), its limits (/proc/self/limits) and its cgroup, and
# writes into its checkpoint directory. The test checks each value against the mapping
# and the agent's defaults: no core dumps, the open-file and process limits, and the
# memory asked either as the cgroup's memory.max (where cgroup v2 is delegated, with
# cpu.max 200000 100000) or as RLIMIT_DATA (where it is not; the agent says why). A team
# without run_as runs as nobody/nogroup; a team mapped to uid 0 is refused by an agent
# not allowed root workers, and its job fails saying so. Needs root (it switches
# users); skipped (77) otherwise.
# Usage: test_sys_runas.sh PATH/TO/gpuorch (run from the repository root).
set -eu

GPUORCH=${1:?usage: $0 PATH/TO/gpuorch}
if [ "$(id -u)" != 0 ]; then
    echo "SKIP: needs root to run workers as other users (running as uid $(id -u))"
    exit 77
fi
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sys.sh"

cat >"$T/cluster.yaml" <<'EOF'
name: runas
pools:
  - {name: h100, tier: owned, nodes: 1, node: {gpu_model: H100-80GB-SXM5, gpus: 8, cpus: 16, memory_gib: 64}}
teams:
  - {name: search, guaranteed_gpus: 8, run_as: {uid: 2001, gid: 2001, groups: [2100, 2101]}}
  - {name: research, guaranteed_gpus: 8}
  - {name: lab, guaranteed_gpus: 8, run_as: {uid: 0, gid: 0}}
EOF
CLUSTER=$T/cluster.yaml start_server
# the agent's own defaults, whoever can read the checkout: these jobs need only $T
WORKER_ARGS="" start_agent h100-0 sim:H100-80GB-SXM5:8
wait_nodes 1

# what a worker runs as, one "key value" line each
PROBE='echo uid $(id -u); echo gid $(id -g); echo groups $(id -G); grep -E "^(Uid|Gid|Groups|NoNewPrivs):" /proc/self/status; tr -s " " </proc/self/limits | grep -E "^Max (open files|processes|core file size|data size) "; cg=$(sed -n "s/^0:://p" /proc/self/cgroup); echo cgroup $cg; if [ -f /sys/fs/cgroup$cg/memory.max ]; then echo memory.max $(cat /sys/fs/cgroup$cg/memory.max); echo cpu.max $(cat /sys/fs/cgroup$cg/cpu.max); fi; touch $GPUORCH_CHECKPOINT_DIR/mine && echo checkpoint-dir writable'
probe_job() { # NAME TEAM
    printf '{"name": "%s", "team": "%s", "gpus": 1, "cpus": 2, "memory": "1GiB", "command": ["sh", "-c", %s]}' \
        "$1" "$2" "$(python3 -c 'import json,sys; print(json.dumps(sys.argv[1] + "; : " + sys.argv[2] + "/"))' "$PROBE" "$T")"
}
job_log() {
    api GET "/api/v1/jobs/$1/logs"
    [ "$STATUS" = 200 ] || fail "logs of job $1: $STATUS"
    cp "$T/out" "$T/log-$1"
}
has() { # ID LINE: the job's log has exactly that line
    grep -qxF "$2" "$T/log-$1" || fail "job $1's log lacks '$2'; it is: $(cat "$T/log-$1")"
}

submit "$(probe_job mapped search)"
MAPPED=$ID
submit "$(probe_job unmapped research)"
UNMAPPED=$ID
submit "$(probe_job root lab)"
ROOT=$ID
wait_for "$MAPPED" 'd["state"] in ("succeeded", "failed")'
wait_for "$UNMAPPED" 'd["state"] in ("succeeded", "failed")'
wait_for "$ROOT" 'd["state"] in ("succeeded", "failed")'
[ "$(field "$MAPPED" 'd["state"]')" = succeeded ] || fail "the mapped job did not succeed"
[ "$(field "$UNMAPPED" 'd["state"]')" = succeeded ] || fail "the unmapped job did not succeed"

# the mapping: uid, gid and exactly the groups of run_as (none of root's)
job_log "$MAPPED"
has "$MAPPED" "uid 2001"
has "$MAPPED" "gid 2001"
has "$MAPPED" "groups 2001 2100 2101"
has "$MAPPED" "$(printf 'Uid:\t2001\t2001\t2001\t2001')"
has "$MAPPED" "$(printf 'Gid:\t2001\t2001\t2001\t2001')"
has "$MAPPED" "$(printf 'Groups:\t2100 2101 ')"
has "$MAPPED" "$(printf 'NoNewPrivs:\t1')" # no setuid binary takes it back up
has "$MAPPED" "checkpoint-dir writable"
# the limits: no core dumps, LAUNCH_NOFILE (65536) and LAUNCH_NPROC (16384) at most the
# agent's hard limits (the agent inherits this shell's)
hard() { tr -s ' ' </proc/self/limits | grep "^Max $1 " | cut -d' ' -f$2; }
at_most() { if [ "$2" = unlimited ] || [ "$1" -le "$2" ]; then echo "$1"; else echo "$2"; fi; }
NOFILE=$(at_most 65536 "$(hard 'open files' 5)")
NPROC=$(at_most 16384 "$(hard processes 4)")
has "$MAPPED" "Max core file size 0 0 bytes "
has "$MAPPED" "Max open files $NOFILE $NOFILE files "
has "$MAPPED" "Max processes $NPROC $NPROC processes "
# the memory asked: the cgroup's bound where the agent has cgroups, RLIMIT_DATA where not
if grep -q 'event=cgroups state=on' "$T/agent-h100-0.log"; then
    grep -q "^cgroup .*/gpuorch/$MAPPED\.1\.0$" "$T/log-$MAPPED" || fail "not in its cgroup: $(cat "$T/log-$MAPPED")"
    has "$MAPPED" "memory.max 1073741824"
    has "$MAPPED" "cpu.max 200000 100000"
    has "$MAPPED" "Max data size unlimited unlimited bytes "
    echo "cgroup v2: per-worker cgroups checked"
else
    grep 'event=cgroups state=off reason=' "$T/agent-h100-0.log" >/dev/null ||
        fail "the agent did not say why it has no cgroups"
    has "$MAPPED" "Max data size 1073741824 1073741824 bytes "
    echo "cgroup v2 not delegated here ($(sed -n 's/.*event=cgroups state=off reason="\([^"]*\)".*/\1/p' "$T/agent-h100-0.log")): RLIMIT_DATA checked instead"
fi

# no mapping: the agent's default, nobody and nogroup
job_log "$UNMAPPED"
has "$UNMAPPED" "uid $(id -u nobody)"
has "$UNMAPPED" "gid $(getent group nogroup | cut -d: -f3)"
has "$UNMAPPED" "groups $(getent group nogroup | cut -d: -f3)"
has "$UNMAPPED" "checkpoint-dir writable"
# one job's checkpoint directory is its own: 0700, owned by its user
[ "$(stat -c '%u %g %a' "$T/ckpt/$MAPPED")" = "2001 2001 700" ] || fail "checkpoint dir: $(stat -c '%u %g %a' "$T/ckpt/$MAPPED")"

# uid 0: refused, the job fails with the reason, nothing ran
[ "$(field "$ROOT" 'd["state"]')" = failed ] || fail "the root job was not refused"
api GET "/api/v1/jobs/$ROOT"
grep -q 'refusing to run a worker as root (uid 0)' "$T/out" || fail "no reason given: $(cat "$T/out")"
grep -q "worker_failed error=\"refusing to run a worker as root" "$T/agent-h100-0.log" || fail "the agent did not log the refusal"
echo "ok: workers run as their team's user, with limits; root refused"
