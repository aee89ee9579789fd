#!/bin/sh
# serve.sh: a stand-in for an inference server under gpuorch. Prints what gpuorch gave
# it (the GPU, MIG or MPS variables and the rendezvous), then a line every INTERVAL
# seconds (default 5) until SIGTERM or SIGINT, on which it says so and exits 0, as a
# server that drains cleanly does.
INTERVAL=${INTERVAL:-5}
echo "serve: job ${GPUORCH_JOB_ID:-?} run ${GPUORCH_RUN:-?} rank ${RANK:-0} of ${WORLD_SIZE:-1}"
env | grep -E '^(CUDA_|GPUORCH_|RANK=|LOCAL_RANK=|WORLD_SIZE=|MASTER_)' | sort
n=0
trap 'echo "serve: shutting down after $n intervals"; exit 0' TERM INT
while :; do
    # sleep in the background and wait, so a signal is handled at once
    sleep "$INTERVAL" &
    wait $!
    n=$((n + 1))
    echo "serve: up, $n intervals, $(date -u +%H:%M:%S)"
done
