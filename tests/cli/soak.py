#!/usr/bin/env python3
# soak.py: the driver of test_soak.sh (Python 3 standard library only), one command each:
#   plan SEED      the seeded schedule of server SIGKILLs and agent restarts, one line
#                  per action, which the shell script carries out with sys.sh's helpers;
#   clients ...    concurrent clients submitting, cancelling and changing priorities
#                  against the server as it is killed and restarted, writing every
#                  request and what came of it (acknowledged, refused, or unknown: the
#                  server died under it) to a journal;
#   events ...     every job's events, for the verdict on a failed job and the figures;
#   check ...      the verdict: every acknowledged change is in the server's view once,
#                  as acknowledged; every job whose command exits 0 succeeded unless an
#                  acknowledged cancel stopped it; the view after one more SIGKILL and
#                  the database itself agree with the view before it;
#   tamper ...     copies of the views with faults planted, on which check must fail.
# Not a test itself (no test_ prefix).
import glob
import json
import os
import re
import random
import sqlite3
import sys
import threading
import time
import urllib.error
import urllib.request

STATES = ["pending", "starting", "running", "stopping", "succeeded", "failed", "cancelled"]
PRIORITIES = ["production", "high", "normal", "low"]  # src/core/job.h's order
ENDED = ("succeeded", "failed", "cancelled")


def env_int(name, default):
    v = os.environ.get(name, "")
    return int(v) if v else default


def env_float(name, default):
    v = os.environ.get(name, "")
    return float(v) if v else default


# ---- plan ---------------------------------------------------------------------------


def plan(seed):
    """Lines 'server UPTIME_S' (let the server run that long, then SIGKILL it and start
    it again) and 'agent NODE SIGNAL DOWN_S' (stop that agent with SIGNAL, and start it
    again DOWN_S after it has gone). The agent restarts fall between server kills, spread
    over the run. The mean uptime is SOAK_SECONDS / SOAK_KILLS: the whole run lasts
    SOAK_SECONDS plus what the restarts themselves take."""
    rng = random.Random(seed)
    kills = env_int("SOAK_KILLS", 100)
    agents = env_int("SOAK_AGENT_RESTARTS", 20)
    seconds = env_float("SOAK_SECONDS", 60.0)
    nodes = ["h100-0", "h100-1"]  # the agents test_soak.sh starts
    signals = os.environ.get("SOAK_AGENT_SIGNALS", "TERM KILL").split()
    mean = seconds / max(kills, 1)
    steps = ["server"] * kills + ["agent"] * agents
    # the first step is a server uptime, so that clients are under way before anything dies
    rest = steps[1:] if steps and steps[0] == "server" else steps
    rng.shuffle(rest)
    steps = (steps[:1] if steps and steps[0] == "server" else []) + rest
    for s in steps:
        if s == "server":
            print("server %.3f" % rng.uniform(0.1 * mean, 1.9 * mean))
        else:
            # down for less than the server's --lost-after-ms (3 s in sys.sh): a restart,
            # not a lost node
            print("agent %s %s %.3f" % (rng.choice(nodes), rng.choice(signals),
                                        rng.uniform(0.0, 1.5)))


# ---- clients ------------------------------------------------------------------------


class Api:
    def __init__(self, url, token_file):
        self.url = url
        self.token_file = token_file

    def call(self, method, path, body=None, timeout=10):
        """(status, reply) for a reply, (None, why) when none came (the server died, or
        was not up): then what was asked may or may not have been done."""
        token = open(self.token_file).read().strip()
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Authorization": "Bearer " + token,
                                              "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, json.load(r)
        except urllib.error.HTTPError as e:
            try:
                return e.code, json.load(e)
            except Exception:
                return e.code, None
        except Exception as e:  # refused, reset, timed out, cut short
            return None, repr(e)


def client(k, api, seed, stop, journal, lock, tmp):
    rng = random.Random("%s-%d" % (seed, k))
    pause = env_float("SOAK_PAUSE_S", 0.4)
    mine = []  # ids this client was acknowledged; only it acts on them, so in order
    n = 0

    def note(rec):
        rec["client"] = k
        rec["t"] = time.time()
        with lock:
            journal.write(json.dumps(rec) + "\n")
            journal.flush()

    while not stop.is_set():
        r = rng.random()
        if r < 0.6 or not mine:
            name = "soak-%d-%d" % (k, n)
            n += 1
            # $T in the command: sys.sh's cleanup finds workers an agent left behind
            job = {"name": name, "team": rng.choice(["search", "research"]),
                   "gpus": rng.choice([1, 1, 1, 2]),
                   "priority": rng.choice(["normal", "normal", "low"]),
                   "preemptible": rng.random() < 0.3,
                   "command": ["sh", "-c", "sleep %.2f; : %s/" % (rng.uniform(0.2, 2.0), tmp)]}
            status, reply = api.call("POST", "/api/v1/jobs", job)
            rec = {"op": "submit", "name": name, "status": status, "priority": job["priority"]}
            if status == 201:
                rec["id"] = reply["id"]
                mine.append(reply["id"])
            elif status is not None:
                rec["error"] = reply
            note(rec)
        elif r < 0.8:
            id = rng.choice(mine[-8:])  # recent ones: most older ones have ended
            status, reply = api.call("DELETE", "/api/v1/jobs/%d" % id)
            note({"op": "cancel", "id": id, "status": status,
                  "state": reply.get("state") if status == 200 else None})
        else:
            id = rng.choice(mine[-8:])
            p = rng.choice(["high", "normal", "low"])
            status, reply = api.call("PATCH", "/api/v1/jobs/%d" % id, {"priority": p})
            note({"op": "priority", "id": id, "priority": p, "status": status})
        if status is None:
            time.sleep(0.1)  # the server is away: give it a moment
        else:
            time.sleep(rng.uniform(0.0, 2 * pause))


def clients(url, token_file, journal_path, seed, stop_file, tmp):
    """Runs the clients until stop_file exists; exits 1 when one of them broke (its
    requests would be missing from the soak unnoticed otherwise)."""
    api = Api(url, token_file)
    stop = threading.Event()
    lock = threading.Lock()
    broke = []

    def run(k):
        try:
            client(k, api, seed, stop, journal, lock, tmp)
        except Exception as e:
            broke.append(k)
            print("soak: client %d broke: %r" % (k, e), file=sys.stderr)
            stop.set()

    with open(journal_path, "a") as journal:
        ts = [threading.Thread(target=run, args=(k,)) for k in range(env_int("SOAK_CLIENTS", 4))]
        for t in ts:
            t.start()
        while not os.path.exists(stop_file) and not stop.is_set():
            time.sleep(0.1)
        stop.set()
        for t in ts:
            t.join()
    if broke:
        sys.exit(1)


# ---- check --------------------------------------------------------------------------


def load_jobs(path):
    return json.load(open(path))["jobs"]


def store_jobs(db):
    con = sqlite3.connect("file:%s?mode=ro" % db, uri=True, timeout=10)
    rows = con.execute("SELECT id, name, state, priority, run, exit_code FROM jobs").fetchall()
    con.close()
    # an exit code is shown once the job ended, and -1 is the store's "none" (as the API)
    return [{"id": r[0], "name": r[1], "state": STATES[r[2]], "priority": PRIORITIES[r[3]],
             "run": r[4], "exit_code": r[5] if STATES[r[2]] in ENDED and r[5] >= 0 else None}
            for r in rows]


def worker_ends(logs_dir):
    """What the agents logged of each worker's end, by (job, run): a failed job's
    verdict names its cause (an unknown exit status after an agent restart, say)."""
    ends = {}
    pat = re.compile(r"event=(worker_exit|worker_lost) (.*) job=(\d+) run=(\d+) rank=(\d+)")
    for path in sorted(glob.glob(os.path.join(logs_dir, "agent-*.log"))):
        node = os.path.basename(path)[len("agent-"):-len(".log")]
        for line in open(path, errors="replace"):
            m = pat.search(line)
            if m:
                ends.setdefault((int(m.group(3)), int(m.group(4))), []).append(
                    "%s rank %s %s %s" % (node, m.group(5), m.group(1), m.group(2)))
    return ends


def check(journal_path, before_path, after_path, db, events_path, figures_path, logs_dir):
    """Prints every problem found and the figures; exits 1 on any problem."""
    problems = []
    ends = worker_ends(logs_dir)
    ops = [json.loads(l) for l in open(journal_path)]
    before = load_jobs(before_path)
    after = load_jobs(after_path)
    stored = store_jobs(db)
    events = json.load(open(events_path)) if os.path.exists(events_path) else {}

    by_id = {}
    for j in before:
        if j["id"] in by_id:
            problems.append("job %d listed twice" % j["id"])
        by_id[j["id"]] = j
    names = {}
    for j in before:
        names.setdefault(j["name"], []).append(j["id"])

    # submissions: acknowledged ones exist once, under their id; unknown ones at most once
    acked = [o for o in ops if o["op"] == "submit" and o["status"] == 201]
    unknown = [o for o in ops if o["op"] == "submit" and o["status"] is None]
    refused = [o for o in ops if o["op"] == "submit" and o["status"] not in (201, None)]
    lost = [o for o in acked if o["id"] not in by_id]
    for o in lost:
        problems.append("lost: job %d (%s) was acknowledged and is not there" % (o["id"], o["name"]))
    for o in acked:
        j = by_id.get(o["id"])
        if j and j["name"] != o["name"]:
            problems.append("job %d is %s, but was acknowledged as %s" % (o["id"], j["name"], o["name"]))
    dup = {n: ids for n, ids in names.items() if len(ids) > 1}
    for n, ids in sorted(dup.items()):
        problems.append("duplicated: %s stored as jobs %s" % (n, ids))
    ours = {o["name"] for o in acked} | {o["name"] for o in unknown}
    for j in before:
        if j["name"] not in ours:
            problems.append("job %d (%s) was never submitted" % (j["id"], j["name"]))
    for o in refused:
        problems.append("a valid submission (%s) was refused: %s %s" % (o["name"], o["status"], o.get("error")))
    unknown_stored = sum(1 for o in unknown if o["name"] in names)

    # per job, in the order its client sent them: cancels and priority changes
    cancel_acked, cancel_maybe, prio = set(), set(), {}
    for o in acked:
        prio[o["id"]] = [(o["priority"], True)]
    for o in ops:
        if o["op"] == "cancel":
            if o["status"] == 200:
                cancel_acked.add(o["id"])
            elif o["status"] is None:
                cancel_maybe.add(o["id"])
            elif o["status"] != 409:
                problems.append("cancel of job %d answered %s" % (o["id"], o["status"]))
        elif o["op"] == "priority":
            if o["status"] == 200:
                prio[o["id"]].append((o["priority"], True))
            elif o["status"] is None:
                prio[o["id"]].append((o["priority"], False))
            elif o["status"] != 409:
                problems.append("priority change of job %d answered %s" % (o["id"], o["status"]))
    # 409 for a cancel: the job had ended; for a priority change: likewise. Both leave it be.

    failed, stuck, lost_cancel, lost_prio, wrongly_cancelled = [], [], 0, 0, 0
    # every job, those of unanswered submissions too (nobody cancelled them: no id came)
    submitted = {o["name"]: o for o in acked + unknown}
    for j in before:
        id = j["id"]
        if id not in prio and j["name"] in submitted:
            prio[id] = [(submitted[j["name"]]["priority"], True)]
        if j["state"] not in ENDED:
            stuck.append(j)
        if id in cancel_acked and j["state"] != "cancelled":
            lost_cancel += 1
            problems.append("job %d: cancel acknowledged, but it is %s" % (id, j["state"]))
        if j["state"] == "cancelled" and id not in cancel_acked and id not in cancel_maybe:
            wrongly_cancelled += 1
            problems.append("job %d: cancelled, but no cancel was sent" % id)
        if j["state"] == "failed":
            failed.append(j)
        # the last acknowledged priority, or one sent after it whose reply was lost
        seq = prio.get(id)
        if not seq:
            continue  # never submitted: said above
        last = max(i for i, (_, ack) in enumerate(seq) if ack)
        allowed = {p for p, _ in seq[last:]}
        if j["priority"] not in allowed:
            lost_prio += 1
            problems.append("job %d: priority %s, but %s was acknowledged last%s" % (
                id, j["priority"], seq[last][0],
                " (then %s sent, unanswered)" % sorted(allowed - {seq[last][0]}) if len(allowed) > 1 else ""))
    for j in failed:
        ev = [e for e in events.get(str(j["id"]), []) if e["type"] not in ("submit", "priority")]
        problems.append("failed: job %d (%s) state %s exit_code %s run %s; events: %s; agent: %s" % (
            j["id"], j["name"], j["state"], j.get("exit_code"), j.get("run"),
            "; ".join("%s: %s" % (e["type"], e.get("detail") or "") for e in ev),
            "; ".join(ends.get((j["id"], j["run"]), ["no worker end logged"]))))
    for j in stuck:
        problems.append("stuck: job %d (%s) is still %s (reason: %s)" % (
            j["id"], j["name"], j["state"], j.get("reason")))

    # the server's view, the view after one more SIGKILL and restart, and the database
    def key(j):
        return (j["name"], j["state"], j["priority"], j["run"], j["exit_code"])
    after_by = {j["id"]: key(j) for j in after}
    store_by = {j["id"]: key(j) for j in stored}
    disagree = 0
    for id, j in sorted(by_id.items()):
        for what, view in (("after a restart", after_by), ("in the database", store_by)):
            if view.get(id) != key(j):
                disagree += 1
                problems.append("job %d: the server said %s, %s it is %s" % (id, key(j), what, view.get(id)))
    for what, view in (("after a restart", after_by), ("in the database", store_by)):
        for id in sorted(set(view) - set(by_id)):
            disagree += 1
            problems.append("job %d is there %s but was not listed before" % (id, what))

    counts = {}
    for evs in events.values():
        for e in evs:
            counts[e["type"]] = counts.get(e["type"], 0) + 1
    fig = {
        "submissions_acknowledged": len(acked),
        "submissions_unanswered": len(unknown),
        "submissions_unanswered_stored": unknown_stored,
        "cancels_acknowledged": len(cancel_acked),
        "priority_changes_acknowledged": sum(1 for o in ops if o["op"] == "priority" and o["status"] == 200),
        "requests": len(ops),
        "requests_unanswered": sum(1 for o in ops if o["status"] is None),
        "lost": len(lost),
        "duplicated": sum(len(ids) - 1 for ids in dup.values()),
        "lost_cancels": lost_cancel,
        "lost_priority_changes": lost_prio,
        "cancelled_uncalled": wrongly_cancelled,
        "failed": len(failed),
        "stuck": len(stuck),
        "views_disagree": disagree,
        "succeeded": sum(1 for j in before if j["state"] == "succeeded"),
        "cancelled": sum(1 for j in before if j["state"] == "cancelled"),
        "events": dict(sorted(counts.items())),
    }
    with open(figures_path, "w") as f:
        json.dump(fig, f, indent=1)
    for p in problems[:200]:
        print("PROBLEM: " + p, file=sys.stderr)
    if len(problems) > 200:
        print("... and %d more problems" % (len(problems) - 200), file=sys.stderr)
    print("soak: " + " ".join("%s=%s" % (k, v) for k, v in fig.items() if k != "events"), file=sys.stderr)
    print("soak: events " + json.dumps(fig["events"]), file=sys.stderr)
    return 1 if problems else 0


# ---- events of every job, for the verdict on failed ones and the figures --------------


def events(url, token_file, jobs_path, out):
    api = Api(url, token_file)
    res = {}
    for j in load_jobs(jobs_path):
        status, reply = api.call("GET", "/api/v1/jobs/%d" % j["id"])
        if status != 200:
            sys.exit("GET /api/v1/jobs/%d answered %s" % (j["id"], status))
        res[str(j["id"])] = reply.get("events", [])
    json.dump(res, open(out, "w"))


# ---- the verdict can fail ---------------------------------------------------------


def tamper(journal_path, before_path, after_path, db, out_dir):
    """Copies of the views and the database with the faults the verdict must name: an
    acknowledged job gone, a job stored twice, an acknowledged cancel undone, and a
    priority the database alone holds. Prints the sentences check must print for them."""
    ops = [json.loads(l) for l in open(journal_path)]
    acked = [o for o in ops if o["op"] == "submit" and o["status"] == 201]
    cancelled = {o["id"] for o in ops if o["op"] == "cancel" and o["status"] == 200}
    gone, twice, other = acked[0], acked[1], acked[2]
    undone = next((o["id"] for o in acked[3:] if o["id"] in cancelled), None)
    new_id = max(o["id"] for o in acked) + 1000
    con = sqlite3.connect(os.path.join(out_dir, "gpuorch.db"))
    src = sqlite3.connect("file:%s?mode=ro" % db, uri=True, timeout=10)
    src.backup(con)  # with what is still in the write-ahead log
    src.close()
    con.execute("DELETE FROM events WHERE job = ?", (gone["id"],))
    con.execute("DELETE FROM jobs WHERE id = ?", (gone["id"],))
    con.execute("UPDATE jobs SET state = ? WHERE id = ?", (STATES.index("succeeded"), undone))
    con.execute("UPDATE jobs SET priority = ? WHERE id = ?", (PRIORITIES.index("production"), other["id"]))
    cols = [r[1] for r in con.execute("PRAGMA table_info(jobs)") if r[1] != "id"]
    con.execute("INSERT INTO jobs (id, %s) SELECT ?, %s FROM jobs WHERE id = ?" % (
        ", ".join(cols), ", ".join(cols)), (new_id, twice["id"]))
    con.commit()
    con.close()
    for path in (before_path, after_path):
        jobs = [j for j in load_jobs(path) if j["id"] != gone["id"]]
        for j in jobs:
            if j["id"] == undone:
                j["state"] = "succeeded"
        jobs.append(dict(next(j for j in jobs if j["id"] == twice["id"]), id=new_id))
        json.dump({"jobs": jobs}, open(os.path.join(out_dir, os.path.basename(path)), "w"))
    print("lost: job %d (%s)" % (gone["id"], gone["name"]))
    print("duplicated: %s stored as jobs [%d, %d]" % (twice["name"], twice["id"], new_id))
    print("job %d: the server said" % other["id"])
    if undone is not None:
        print("job %d: cancel acknowledged, but it is succeeded" % undone)


def main():
    cmd = sys.argv[1]
    if cmd == "plan":
        plan(sys.argv[2])
    elif cmd == "clients":
        clients(*sys.argv[2:8])
    elif cmd == "events":
        events(*sys.argv[2:6])
    elif cmd == "tamper":
        tamper(*sys.argv[2:7])
    elif cmd == "check":
        sys.exit(check(*sys.argv[2:9]))
    else:
        sys.exit("usage: soak.py plan|clients|events|check|tamper ...")


if __name__ == "__main__":
    main()
