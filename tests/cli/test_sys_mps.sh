#!/bin/sh
# test_sys_mps.sh: MPS shares under an MPS control daemon (docs/agent.md, "MPS shares").
# A stand-in for nvidia-cuda-mps-control (no GPU here) records what it is asked: the
# agent starts it in the foreground for the shared GPU only, with that GPU's own pipe and
# log directories, before the share's worker, which gets the same directories beside its
# limits; two shares of one GPU use one daemon; the daemon is told `quit` once no worker
# shares the GPU. A daemon that dies under a running share is a fault of its GPU: the
# agent reports it, the server fences the node and requeues the share's job.
# Usage: test_sys_mps.sh PATH/TO/gpuorch (run from the repository root).
set -eu

GPUORCH=${1:?usage: $0 PATH/TO/gpuorch}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sys.sh"

# the stand-in: `-f` runs as the daemon until `quit` arrives through the client
cat >"$T/mps-control" <<'SH'
#!/bin/sh
log=$(dirname "$0")/mps.log
if [ "${1:-}" = -f ]; then
    echo "daemon $$ gpu=$CUDA_VISIBLE_DEVICES pipe=$CUDA_MPS_PIPE_DIRECTORY log=$CUDA_MPS_LOG_DIRECTORY" >>"$log"
    while [ ! -e "$CUDA_MPS_PIPE_DIRECTORY/quit" ]; do sleep 0.05; done
    rm -f "$CUDA_MPS_PIPE_DIRECTORY/quit"
    echo "daemon $$ quit" >>"$log"
    exit 0
fi
read -r cmd
echo "client $cmd pipe=$CUDA_MPS_PIPE_DIRECTORY" >>"$log"
[ "$cmd" = quit ] && : >"$CUDA_MPS_PIPE_DIRECTORY/quit"
exit 0
SH
chmod 0755 "$T/mps-control"
export GPUORCH_MPS_CONTROL="$T/mps-control"

start_server
start_agent h100-0 sim:H100-80GB-SXM5:8
wait_nodes 1

cat >"$T/share.sh" <<'SH'
#!/bin/sh
env | grep -E '^CUDA_(MPS|VISIBLE)' | sort >"$OUT.$GPUORCH_JOB_ID"
while [ ! -e "$OUT.stop" ]; do sleep 0.05; done
SH
chmod 0755 "$T/share.sh"
share() {
    submit "{\"name\": \"$1\", \"team\": \"research\", \"gpu_fraction\": 0.25, \"gpu_models\": [\"H100-80GB-SXM5\"], \"env\": {\"OUT\": \"$T/env\"}, \"command\": [\"$T/share.sh\"]}"
}
share s1
S1=$ID
share s2
S2=$ID
wait_for "$S1" 'd["state"] == "running"'
wait_for "$S2" 'd["state"] == "running"'
i=0
until [ -s "$T/env.$S1" ] && [ -s "$T/env.$S2" ]; do
    i=$((i + 1)); [ $i -lt 100 ] || fail "the shares did not write their environment"; sleep 0.1
done
[ "$(grep -c '^daemon .* gpu=' "$T/mps.log")" = 1 ] || fail "not one daemon for two shares of a GPU: $(cat "$T/mps.log")"
line=$(grep '^daemon .* gpu=' "$T/mps.log")
pipe=$(echo "$line" | sed 's/.* pipe=\([^ ]*\) .*/\1/')
case "$pipe" in "$T/agent-h100-0/mps/gpu"*/pipe) ;; *) fail "the daemon's pipe directory: $line" ;; esac
echo "$line" | grep -q ' gpu=GPU-' || fail "the daemon does not see its GPU alone: $line"
for id in "$S1" "$S2"; do
    grep -qx "CUDA_MPS_PIPE_DIRECTORY=$pipe" "$T/env.$id" || fail "job $id lacks the daemon's pipe: $(cat "$T/env.$id")"
    grep -q "^CUDA_MPS_LOG_DIRECTORY=$T/agent-h100-0/mps/gpu" "$T/env.$id" || fail "job $id log directory"
    grep -q '^CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25$' "$T/env.$id" || fail "job $id limits: $(cat "$T/env.$id")"
done

# both shares end: the daemon is told to quit
: >"$T/env.stop"
wait_for "$S1" 'd["state"] == "succeeded"'
wait_for "$S2" 'd["state"] == "succeeded"'
i=0
until grep -q '^daemon .* quit$' "$T/mps.log"; do
    i=$((i + 1)); [ $i -lt 100 ] || fail "the daemon was not stopped: $(cat "$T/mps.log")"; sleep 0.1
done
grep -q "^client quit pipe=$pipe" "$T/mps.log" || fail "quit not sent on the daemon's pipe"
rm -f "$T/env.stop"

# a daemon that dies under a running share: the GPU's fault, the job requeued
share s3
S3=$ID
wait_for "$S3" 'd["state"] == "running"'
pid=$(grep '^daemon [0-9]* gpu=' "$T/mps.log" | tail -1 | cut -d' ' -f2)
kill -KILL "$pid"
wait_node h100-0 'len(n["sick_gpus"]) == 1 and "MPS control daemon exited" in n["sick_gpus"][0]["reason"]'
wait_for "$S3" 'any(e["type"] == "gpu_fenced" for e in d["events"])'
echo "ok: MPS daemons"
