#!/usr/bin/env python3
"""train.py: a stand-in for a training job under gpuorch (Python 3, standard library).

It does what gpuorch expects of a checkpointing job, without a GPU:

- resumes from GPUORCH_RESUME_FROM (a checkpoint file this script wrote) when set;
- takes a step every STEP_SECONDS (default 0.5) up to STEPS (default 120), printing
  its progress;
- on SIGUSR1 (the checkpoint signal) writes GPUORCH_CHECKPOINT_DIR/ckpt-<step> and then
  points GPUORCH_CHECKPOINT_DIR/LATEST at it, both atomically (a temporary file, then
  rename), so the agent never reads half a file;
- on SIGTERM checkpoints the same way and exits 143;
- exits 0 when all steps are done.

A real job saves model and optimiser state; this one saves its step and loss. With
several ranks on one node they share the checkpoint directory, so ranks other than 0
add their rank to the file name.
"""
import json
import math
import os
import signal
import sys
import time


def env_int(name, default):
    value = os.environ.get(name, "")
    try:
        return int(value) if value else default
    except ValueError:
        sys.exit("train.py: %s=%r is not a whole number" % (name, value))


def env_float(name, default):
    value = os.environ.get(name, "")
    try:
        return float(value) if value else default
    except ValueError:
        sys.exit("train.py: %s=%r is not a number" % (name, value))


RANK = env_int("RANK", 0)
WORLD = env_int("WORLD_SIZE", 1)
STEPS = env_int("STEPS", 120)
STEP_SECONDS = env_float("STEP_SECONDS", 0.5)
CKPT_DIR = os.environ.get("GPUORCH_CHECKPOINT_DIR") or "checkpoints"
RESUME = os.environ.get("GPUORCH_RESUME_FROM")

step = 0


def loss_at(n):
    return 2.5 * math.exp(-n / 40.0) + 0.1


def write_atomic(path, text):
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, path)


def checkpoint(reason):
    os.makedirs(CKPT_DIR, exist_ok=True)
    name = "ckpt-%d" % step if RANK == 0 else "ckpt-%d-rank%d" % (step, RANK)
    path = os.path.join(os.path.abspath(CKPT_DIR), name)
    write_atomic(path, json.dumps({"step": step, "loss": loss_at(step), "rank": RANK,
                                   "world_size": WORLD, "time": time.time()}) + "\n")
    write_atomic(os.path.join(CKPT_DIR, "LATEST"), path + "\n")
    print("rank %d: checkpoint at step %d (%s): %s" % (RANK, step, reason, path), flush=True)


def on_checkpoint(signum, frame):
    checkpoint("signal %s" % signal.Signals(signum).name)


def on_term(signum, frame):
    checkpoint("SIGTERM")
    print("rank %d: stopping at step %d" % (RANK, step), flush=True)
    sys.exit(143)


def resume():
    if not RESUME:
        return 0
    try:
        with open(RESUME) as f:
            saved = json.load(f)
        n = int(saved["step"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        # the checkpoint may live on another node's disk: say so and start over
        print("rank %d: cannot resume from %s (%s); starting at step 0" % (RANK, RESUME, e),
              flush=True)
        return 0
    print("rank %d: resuming from %s at step %d" % (RANK, RESUME, n), flush=True)
    return n


def main():
    global step
    signal.signal(signal.SIGUSR1, on_checkpoint)
    signal.signal(signal.SIGTERM, on_term)
    print("rank %d of %d: CUDA_VISIBLE_DEVICES=%s MASTER=%s:%s job=%s run=%s" %
          (RANK, WORLD, os.environ.get("CUDA_VISIBLE_DEVICES", ""),
           os.environ.get("MASTER_ADDR", ""), os.environ.get("MASTER_PORT", ""),
           os.environ.get("GPUORCH_JOB_ID", "-"), os.environ.get("GPUORCH_RUN", "-")),
          flush=True)
    step = resume()
    while step < STEPS:
        time.sleep(STEP_SECONDS)
        step += 1
        print("rank %d: step %d/%d loss %.4f" % (RANK, step, STEPS, loss_at(step)), flush=True)
    print("rank %d: done after %d steps" % (RANK, step), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
