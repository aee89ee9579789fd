#!/bin/sh
# test_sys_jobs.sh: the running system end to end, as users drive it: a server and
# three agents with simulated GPUs on loopback. Jobs run as real processes and finish
# with their exit codes; a two-node gang gets consistent rank variables; a MIG job gets
# a MIG UUID; cancel stops a running worker; the CLI shows queue, nodes and logs.
# Usage: test_sys_jobs.sh PATH/TO/gpuorch (run from the repository root).
set -eu

GPUORCH=${1:?usage: $0 PATH/TO/gpuorch}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sys.sh"

start_server
start_agent h100-0 sim:H100-80GB-SXM5:8
start_agent h100-1 sim:H100-80GB-SXM5:8
start_agent a100-0 sim:A100-80GB:8
wait_nodes 3

# A job that succeeds, one that fails with its code.
submit '{"name": "ok", "team": "search", "gpus": 1, "command": ["sh", "-c", "echo hello from rank $RANK"]}'
OK=$ID
submit '{"name": "bad", "team": "search", "gpus": 1, "command": ["sh", "-c", "exit 3"]}'
BAD=$ID
wait_for "$OK" 'd["state"] == "succeeded" and d["exit_code"] == 0'
wait_for "$BAD" 'd["state"] == "failed" and d["exit_code"] == 3'
# a command that does not exist fails the job with a reason
submit '{"name": "typo", "team": "search", "gpus": 1, "command": ["/nonexistent/program"]}'
wait_for "$ID" 'd["state"] == "failed" and any(e["type"] == "fail" for e in d["events"])'

# Logs come back through the server.
i=0
until "$GPUORCH" logs "$OK" >"$T/log" 2>/dev/null && grep -q "hello from rank 0" "$T/log"; do
    i=$((i + 1)); [ $i -lt 50 ] || fail "the log of job $OK never showed its output"; sleep 0.1
done

# ... and are the server's alone on its disk
[ "$(stat -c %a "$T/var/logs")" = 700 ] || fail "the log directory is $(stat -c %a "$T/var/logs"), not 700"
for f in "$T"/var/logs/*.log; do
    [ "$(stat -c %a "$f")" = 600 ] || fail "$f is $(stat -c %a "$f"), not 600"
done

# A gang of two workers of eight H100s: one per node, the same rendezvous, ranks 0 and 1.
cat >"$T/gang.sh" <<'SH'
#!/bin/sh
echo "RANK=$RANK LOCAL_RANK=$LOCAL_RANK WORLD_SIZE=$WORLD_SIZE MASTER=$MASTER_ADDR:$MASTER_PORT JOB=$GPUORCH_JOB_ID"
echo "CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES"
sleep 1
SH
chmod +x "$T/gang.sh"
submit "{\"name\": \"gang\", \"team\": \"research\", \"workers\": 2, \"gpus\": 8, \"gpu_models\": [\"H100-80GB-SXM5\"], \"command\": [\"$T/gang.sh\"]}"
GANG=$ID
wait_for "$GANG" 'd["state"] == "succeeded"' 60
json_ok "$T/out" 'any(e["type"] == "start" and "h100-0" in e["detail"] and "h100-1" in e["detail"] for e in d["events"])'
for r in 0 1; do
    i=0
    until "$GPUORCH" logs "$GANG" --rank $r >"$T/rank$r" 2>/dev/null && grep -q "WORLD_SIZE" "$T/rank$r"; do
        i=$((i + 1)); [ $i -lt 50 ] || fail "no log for rank $r of the gang"; sleep 0.1
    done
    grep -q "RANK=$r LOCAL_RANK=0 WORLD_SIZE=2 " "$T/rank$r" || fail "rank $r: $(cat "$T/rank$r")"
    grep -q "JOB=$GANG" "$T/rank$r" || fail "rank $r lacks GPUORCH_JOB_ID"
    [ "$(grep -o 'CUDA_VISIBLE_DEVICES=.*' "$T/rank$r" | tr ',' '\n' | grep -c 'GPU-')" = 8 ] ||
        fail "rank $r did not get 8 GPU UUIDs: $(cat "$T/rank$r")"
done
[ "$(grep -o 'MASTER=[^ ]*' "$T/rank0")" = "$(grep -o 'MASTER=[^ ]*' "$T/rank1")" ] ||
    fail "the ranks disagree on the rendezvous"

# A MIG slice: the worker sees one MIG instance; the node shows the A100 partitioned.
cat >"$T/mig.sh" <<'SH'
#!/bin/sh
echo "CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES"
sleep 300
SH
chmod +x "$T/mig.sh"
submit "{\"name\": \"mig\", \"team\": \"search\", \"kind\": \"inference\", \"mig\": \"1g.10gb\", \"command\": [\"$T/mig.sh\"]}"
MIG=$ID
wait_for "$MIG" 'd["state"] == "running"'
i=0
until "$GPUORCH" logs "$MIG" >"$T/miglog" 2>/dev/null && grep -q "CUDA_VISIBLE_DEVICES=MIG-" "$T/miglog"; do
    i=$((i + 1)); [ $i -lt 50 ] || fail "the MIG worker did not get a MIG UUID: $(cat "$T/miglog")"; sleep 0.1
done
api GET /api/v1/nodes
json_ok "$T/out" 'any(g["mode"] == "mig" and any(m.get("job") == '"$MIG"' for m in g.get("mig", [])) for n in d["nodes"] if n["name"] == "a100-0" for g in n["gpus"])'
run 0 "$GPUORCH" nodes
out_has "a100-0"
run 0 "$GPUORCH" queue
out_has "mig"

# Cancel stops the running worker.
run 0 "$GPUORCH" cancel "$MIG"
wait_for "$MIG" 'd["state"] == "cancelled"'
i=0
while pgrep -f "$T/mig.sh" >/dev/null; do
    i=$((i + 1)); [ $i -lt 100 ] || fail "the cancelled worker still runs"; sleep 0.1
done
# and a second cancel is refused: the job already ended
api DELETE "/api/v1/jobs/$MIG"
[ "$STATUS" = 409 ] || fail "cancelling an ended job answered $STATUS"
echo "ok"
