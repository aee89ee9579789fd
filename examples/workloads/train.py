#!/usr/bin/env python3
"""train.py: a stand-in for a training job under gpuorch (Python 3, standard library).

It follows the checkpoint contract of docs/agent.md, without a GPU:

- takes a step every STEP_SECONDS (default 0.5) up to STEPS (default 120), printing
  its progress, and exits 0 when all steps are done;
- on SIGUSR1 (the checkpoint signal) checkpoints once the step under way is done; on
  SIGTERM checkpoints the same way and exits 143;
- a checkpoint of step S is this rank's state, written into its own directory
  GPUORCH_CHECKPOINT_DIR/step-S/rank-R/, then, last, its marker
  GPUORCH_CHECKPOINT_DIR/LATEST.R, a line "S <that directory>" and a line "run N" (N is
  GPUORCH_RUN: a worker of an earlier run still running elsewhere writes into the same
  directory, and the run tells its markers apart); each file is written
  atomically (a temporary file, then rename), so the agent never reads half of one. It
  keeps its newest KEEP (3) steps;
- resumes from GPUORCH_RESUME_FROM when set: this rank's directory of the newest step
  that every rank of the gang wrote.

The ranks of a gang agree on when to checkpoint and when to stop, as a real job's ranks
do through a collective (an all_reduce of a flag in torch.distributed): rank 0 listens
on MASTER_ADDR:MASTER_PORT, the others connect, and after every step each rank says
what it wants (go on, checkpoint, checkpoint and stop) and all do the most any asked.
So every rank checkpoints the same steps, and they start from the same one. A real job
saves model and optimiser state; this one saves its step and loss.
"""
import json
import math
import os
import re
import shutil
import signal
import socket
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
KEEP = max(env_int("KEEP", 3), 2)
RENDEZVOUS_SECONDS = env_float("RENDEZVOUS_SECONDS", 120)
CKPT_DIR = os.path.abspath(os.environ.get("GPUORCH_CHECKPOINT_DIR") or "checkpoints")
RESUME = os.environ.get("GPUORCH_RESUME_FROM")

GO_ON, CHECKPOINT, STOP = 0, 1, 2

step = 0
wanted = GO_ON  # what the signals asked since the last checkpoint


def loss_at(n):
    return 2.5 * math.exp(-n / 40.0) + 0.1


def say(text):
    print("rank %d: %s" % (RANK, text), flush=True)


def write_atomic(path, text):
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, path)


def own_steps():
    """The steps this rank has a directory of, oldest first."""
    found = []
    for name in os.listdir(CKPT_DIR) if os.path.isdir(CKPT_DIR) else []:
        m = re.fullmatch(r"step-(\d+)", name)
        if m and os.path.isdir(os.path.join(CKPT_DIR, name, "rank-%d" % RANK)):
            found.append(int(m.group(1)))
    return sorted(found)


def drop_step(n):
    step_dir = os.path.join(CKPT_DIR, "step-%d" % n)
    shutil.rmtree(os.path.join(step_dir, "rank-%d" % RANK), ignore_errors=True)
    try:
        os.rmdir(step_dir)  # the last rank out removes the step
    except OSError:
        pass


def checkpoint(reason):
    rank_dir = os.path.join(CKPT_DIR, "step-%d" % step, "rank-%d" % RANK)
    os.makedirs(rank_dir, exist_ok=True)
    write_atomic(os.path.join(rank_dir, "state.json"),
                 json.dumps({"step": step, "loss": loss_at(step), "rank": RANK,
                             "world_size": WORLD, "time": time.time()}) + "\n")
    # the marker last: the step counts for this rank once its data is all there
    write_atomic(os.path.join(CKPT_DIR, "LATEST.%d" % RANK),
                 "%d %s\nrun %s\n" % (step, rank_dir, os.environ.get("GPUORCH_RUN", "1")))
    say("checkpoint at step %d (%s): %s" % (step, reason, rank_dir))
    # the others may be a step behind, so the server may pick this rank's step before
    # last: keep a few
    for old in own_steps()[:-KEEP]:
        drop_step(old)


def stop_if_asked():
    """SIGTERM before the gang has met: nothing to checkpoint yet."""
    if wanted == STOP:
        say("stopping before the first step")
        sys.exit(143)


def read_line(conn, deadline):
    """A line from conn, or None when it closed or the deadline passed; a SIGTERM
    meanwhile stops the rank."""
    data = b""
    while not data.endswith(b"\n"):
        stop_if_asked()
        if time.monotonic() > deadline:
            return None
        conn.settimeout(0.5)
        try:
            got = conn.recv(256)
        except socket.timeout:
            continue
        except OSError:
            return None
        if not got:
            return None
        data += got
    return data.decode(errors="replace").strip()


class Gang:
    """The ranks' agreement, over TCP at MASTER_ADDR:MASTER_PORT (a byte each way per
    step); a rank alone needs none."""

    def __init__(self):
        self.peers = {}  # rank 0: the socket of each other rank
        self.conn = None  # the others: the socket to rank 0
        self.addr = (os.environ.get("MASTER_ADDR") or "127.0.0.1", env_int("MASTER_PORT", 29500))
        self.job = "%s/%s" % (os.environ.get("GPUORCH_JOB_ID", "-"),
                              os.environ.get("GPUORCH_RUN", "-"))

    def start(self, resumed):
        """Meet the other ranks; returns the step they all start from: the one they all
        resumed, or 0 when they did not all resume the same one."""
        if WORLD == 1:
            return resumed
        deadline = time.monotonic() + RENDEZVOUS_SECONDS
        if RANK == 0:
            return self._lead(resumed, deadline)
        return self._join(resumed, deadline)

    def _lead(self, resumed, deadline):
        srv = socket.socket()
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            srv.bind(self.addr)
        except OSError:
            srv.bind(("", self.addr[1]))  # MASTER_ADDR is a name this host cannot bind
        srv.listen(WORLD)
        srv.settimeout(0.5)
        steps = {0: resumed}
        while len(self.peers) < WORLD - 1:
            stop_if_asked()
            if time.monotonic() > deadline:
                sys.exit("rank 0: %d of %d ranks came within %g s" %
                         (len(self.peers) + 1, WORLD, RENDEZVOUS_SECONDS))
            try:
                conn, _ = srv.accept()
            except socket.timeout:
                continue
            words = (read_line(conn, time.monotonic() + 5) or "").split()
            if len(words) != 3 or words[0] != self.job or not words[1].isdigit() or \
                    not 0 < int(words[1]) < WORLD or not words[2].isdigit():
                conn.close()  # not a rank of this run (another job once had the port)
                continue
            rank = int(words[1])
            if rank in self.peers:
                self.peers[rank].close()  # it came again: its first try gave up
            self.peers[rank] = conn
            steps[rank] = int(words[2])
        srv.close()
        start = resumed if len(set(steps.values())) == 1 else 0
        for conn in self.peers.values():
            conn.settimeout(None)
            conn.sendall(b"%d\n" % start)
        return start

    def _join(self, resumed, deadline):
        while True:
            stop_if_asked()
            try:
                conn = socket.create_connection(self.addr, timeout=2)
                conn.sendall(("%s %d %d\n" % (self.job, RANK, resumed)).encode())
                line = read_line(conn, deadline)
                if line and line.isdigit():
                    conn.settimeout(None)
                    self.conn = conn
                    return int(line)
                conn.close()
            except OSError:
                pass
            if time.monotonic() > deadline:
                sys.exit("rank %d: rank 0 at %s:%d did not answer within %g s" %
                         (RANK, self.addr[0], self.addr[1], RENDEZVOUS_SECONDS))
            time.sleep(0.2)

    def agree(self, want):
        """The most any rank wants."""
        if WORLD == 1:
            return want
        try:
            if RANK == 0:
                for conn in self.peers.values():
                    got = conn.recv(1)
                    if not got:
                        raise OSError("a rank went away")
                    want = max(want, got[0])
                for conn in self.peers.values():
                    conn.sendall(bytes([want]))
                return want
            self.conn.sendall(bytes([want]))
            got = self.conn.recv(1)
            if not got:
                raise OSError("rank 0 went away")
            return got[0]
        except OSError as e:
            # a real job's collective fails the same way when a rank dies
            sys.exit("rank %d: the gang broke up after step %d (%s)" % (RANK, step, e))


def on_checkpoint(signum, frame):
    global wanted
    wanted = max(wanted, CHECKPOINT)


def on_term(signum, frame):
    global wanted
    wanted = STOP


def resume():
    if not RESUME:
        return 0
    # an older train.py wrote one file per checkpoint: that is still read
    path = RESUME if os.path.isfile(RESUME) else os.path.join(RESUME, "state.json")
    try:
        with open(path) as f:
            saved = json.load(f)
        n = int(saved["step"])
        if int(saved.get("rank", RANK)) != RANK:
            raise ValueError("it is rank %s's state" % saved["rank"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        # the checkpoint may live on another node's disk: say so and start over
        say("cannot resume from %s (%s); starting at step 0" % (RESUME, e))
        return 0
    say("resuming from %s at step %d" % (RESUME, n))
    return n


def main():
    global step, wanted
    signal.signal(signal.SIGUSR1, on_checkpoint)
    signal.signal(signal.SIGTERM, on_term)
    print("rank %d of %d: CUDA_VISIBLE_DEVICES=%s MASTER=%s:%s job=%s run=%s" %
          (RANK, WORLD, os.environ.get("CUDA_VISIBLE_DEVICES", ""),
           os.environ.get("MASTER_ADDR", ""), os.environ.get("MASTER_PORT", ""),
           os.environ.get("GPUORCH_JOB_ID", "-"), os.environ.get("GPUORCH_RUN", "-")),
          flush=True)
    os.makedirs(CKPT_DIR, exist_ok=True)
    gang = Gang()
    resumed = resume()
    step = gang.start(resumed)
    if step != resumed:
        say("the ranks did not all resume the same step; all start over at step 0")
    # steps past the one resumed are of a run that is gone: nothing resumes from them
    for old in own_steps():
        if old > step:
            drop_step(old)
    while step < STEPS:
        time.sleep(STEP_SECONDS)
        step += 1
        print("rank %d: step %d/%d loss %.4f" % (RANK, step, STEPS, loss_at(step)), flush=True)
        want, wanted = wanted, GO_ON
        agreed = gang.agree(want)
        if agreed == GO_ON:
            continue
        checkpoint("SIGTERM" if agreed == STOP else "signal SIGUSR1")
        if agreed == STOP:
            say("stopping at step %d" % step)
            return 143
    say("done after %d steps" % step)
    return 0


if __name__ == "__main__":
    sys.exit(main())
