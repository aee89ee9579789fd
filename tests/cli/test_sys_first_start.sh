#!/bin/sh
# test_sys_first_start.sh: the very first start survives SIGKILL at any point. One
# undisturbed first start measures when admin.token appears (T); then a server on a
# fresh data directory is killed KILLS times, a third the moment admin.token appears
# (before the store has its hash: the crash that locked the server out), the others
# at delays spread from 0 to 2T, most near T, and started again:
# every time it must come up, and the admin.token it leaves must be the token it
# accepts, mode 0600, with no temporary file left behind.
# Usage: test_sys_first_start.sh PATH/TO/gpuorch [KILLS] (run from the repository root).
set -eu

GPUORCH=${1:?usage: $0 PATH/TO/gpuorch [KILLS]}
KILLS=${2:-32}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sys.sh"

PORT=$(free_port)
python3 - "$GPUORCH" "$T" "$PORT" "$KILLS" <<'PY' || fail "a first start killed by SIGKILL left a server that does not start"
import os, shutil, subprocess, sys, time, urllib.request

gpuorch, tmp, port, kills = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
url = "http://127.0.0.1:" + port

def start(d):
    return subprocess.Popen([gpuorch, "server", "--config", "examples/cluster-demo.yaml",
                             "--db", "sqlite:%s/gpuorch.db" % d, "--listen", "127.0.0.1:" + port],
                            stdout=open(d + "/server.out", "ab"), stderr=open(d + "/server.log", "ab"))

def up(p, d):
    for _ in range(200):
        if p.poll() is not None:
            return False
        try:
            urllib.request.urlopen(url + "/healthz", timeout=1).read()
            return True
        except Exception:
            time.sleep(0.02)
    return False

def whoami(d):
    tok = open(d + "/admin.token").read().strip()
    rq = urllib.request.Request(url + "/api/v1/whoami", headers={"Authorization": "Bearer " + tok})
    try:
        return urllib.request.urlopen(rq, timeout=5).status
    except urllib.error.HTTPError as e:
        return e.code

def stop(p):
    p.terminate()
    try:
        p.wait(10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()

# the undisturbed first start: when does the token file appear?
d = tmp + "/measure"
os.mkdir(d)
t0 = time.monotonic()
p = start(d)
while not os.path.exists(d + "/admin.token") and time.monotonic() - t0 < 20:
    time.sleep(0.0002)
t_file = time.monotonic() - t0
assert up(p, d), "the undisturbed first start did not come up"
stop(p)
shutil.rmtree(d)

taken_up = 0  # kills that fell between the file and the store: the next start took the file up
for k in range(kills):
    # three in four near the file's time (0.8T to 1.2T), the rest anywhere in 0 to 2T
    f = 0.8 + 0.4 * ((k * 37) % kills) / kills if k % 4 else 2.0 * ((k * 53) % kills) / kills
    delay = t_file * f
    d = "%s/run%d" % (tmp, k)
    os.mkdir(d)
    p = start(d)
    if k % 3 == 0:
        # the moment the file appears: the store's hash is still to be written
        t0 = time.monotonic()
        while not os.path.exists(d + "/admin.token") and time.monotonic() - t0 < 2 * t_file + 5:
            pass
        delay = time.monotonic() - t0
    else:
        time.sleep(delay)
    p.kill()
    p.wait()
    p = start(d)
    ok = up(p, d)
    st = whoami(d) if ok else None
    stop(p)
    log = open(d + "/server.log").read()
    assert ok, "kill %d after %.1f ms: the next start did not come up:\n%s" % (k, delay * 1e3, log[-600:])
    assert st == 200, "kill %d after %.1f ms: admin.token is refused (%s)" % (k, delay * 1e3, st)
    mode = os.stat(d + "/admin.token").st_mode & 0o777
    assert mode == 0o600, "kill %d: admin.token has mode %o" % (k, mode)
    left = [f for f in os.listdir(d) if f.startswith("admin.token") and f != "admin.token"]
    assert not left, "kill %d: left %s" % (k, left)
    taken_up += "taken up" in open(d + "/server.out").read()
    shutil.rmtree(d)
print("ok: %d first starts killed between 0 and %.0f ms, each started again with its token "
      "(%d between the file and the store, taken up)" % (kills, 2e3 * t_file, taken_up))
PY
