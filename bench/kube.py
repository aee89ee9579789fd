#!/usr/bin/env python3
"""bench/kube.py: the Python side of bench/kube.sh (the Kubernetes benchmark).

  pods     create the pending pods, from 16 threads: a deterministic list (the seed
           shuffles it) of 1/2/4/8-GPU pods naming one scheduler
  run      watch the binds, start the scheduler under test, sample the CPU of it, the
           API server and etcd, stop it when the binds stop, and judge the end state;
           one JSON result
  report   the markdown section from the JSON results

The API client is tests/kube/fake_node.py's (Python standard library only).
"""

import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "kube"))
import fake_node as fk  # noqa: E402

# The mix: 10,000 pods ask 17,330 GPUs (bench/RESULTS.md, the anchor's figures).
MIX = ((8, 0.04), (4, 0.08), (2, 0.213))


def pod_sizes(n, seed):
    counts = {g: int(round(n * w)) for g, w in MIX}
    counts[1] = n - sum(counts.values())
    sizes = [g for g in (1, 2, 4, 8) for _ in range(counts[g])]
    random.Random(seed).shuffle(sizes)
    return sizes


def pod_object(ns, name, gpus, scheduler):
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": "kbench"}},
        "spec": {
            "schedulerName": scheduler,
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "work",
                    "image": "registry.invalid/kbench:1",
                    "resources": {
                        "requests": {"cpu": str(4 * gpus), "memory": "%dGi" % (32 * gpus)},
                        "limits": {"nvidia.com/gpu": str(gpus)},
                    },
                }
            ],
        },
    }


def cmd_pods(api, args):
    sizes = pod_sizes(args.count, args.seed)
    t0 = time.time()
    errors = []

    def one(i):
        body = pod_object(args.ns, "p-%05d" % i, sizes[i], args.scheduler)
        code, obj = api.request("POST", "/api/v1/namespaces/%s/pods" % args.ns, body)
        return None if code == 201 else "pod %d: HTTP %d %s" % (i, code, fk.message(obj))

    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(args.threads) as ex:
        for err in ex.map(one, range(len(sizes))):
            if err:
                errors.append(err)
    dt = time.time() - t0
    for e in errors[:5]:
        print(e, file=sys.stderr)
    by = {g: sizes.count(g) for g in (1, 2, 4, 8)}
    res = {
        "pods": len(sizes) - len(errors),
        "errors": len(errors),
        "gpus": sum(sizes),
        "by_size": by,
        "seconds": round(dt, 2),
        "per_s": round(len(sizes) / dt, 1) if dt > 0 else 0,
    }
    print(json.dumps(res))
    return 1 if errors else 0


def cpu_ticks(pid):
    """utime + stime of a process (all its threads), in clock ticks; None when gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            s = f.read()
    except OSError:
        return None
    rest = s[s.rindex(")") + 2 :].split()
    return int(rest[11]) + int(rest[12])  # fields 14 and 15


def thread_ticks(pid):
    """[(tid, ticks)] of a process's threads, in the order they were made."""
    out = []
    try:
        tids = sorted(int(t) for t in os.listdir("/proc/%d/task" % pid))
    except OSError:
        return out
    for t in tids:
        try:
            with open("/proc/%d/task/%d/stat" % (pid, t)) as f:
                s = f.read()
        except OSError:
            continue
        rest = s[s.rindex(")") + 2 :].split()
        out.append((t, int(rest[11]) + int(rest[12])))
    return out


def gpu_of(pod):
    n = 0
    for c in (pod.get("spec") or {}).get("containers") or []:
        res = c.get("resources") or {}
        q = (res.get("limits") or {}).get("nvidia.com/gpu") or (res.get("requests") or {}).get("nvidia.com/gpu")
        if q:
            n += int(q)
    return n


class Binds:
    """The first time each pod of the namespace is seen with spec.nodeName set: a watch of
    the bound pods only (fieldSelector spec.nodeName!=), as an informer would do it."""

    def __init__(self, api, ns):
        self.api, self.ns = api, ns
        self.lock = threading.Lock()
        self.first = {}  # uid -> seconds (time.time())
        self.ready = threading.Event()
        self.error = None

    def count(self):
        with self.lock:
            return len(self.first)

    def _see(self, pod, now):
        uid = (pod.get("metadata") or {}).get("uid")
        if uid and (pod.get("spec") or {}).get("nodeName"):
            with self.lock:
                self.first.setdefault(uid, now)

    def main(self):
        path = "/api/v1/namespaces/%s/pods" % self.ns
        query = {"fieldSelector": "spec.nodeName!="}
        rv = None
        while not fk.STOP.is_set():
            try:
                if rv is None:
                    items, rv = self.api.list_all(path, query)
                    now = time.time()
                    for p in items:
                        self._see(p, now)
                    self.ready.set()
                for typ, obj in self.api.watch(path, query, rv, timeout_s=600):
                    now = time.time()
                    if typ == "ERROR":
                        rv = None if obj.get("code") == 410 else rv
                        break
                    nrv = (obj.get("metadata") or {}).get("resourceVersion")
                    if nrv:
                        rv = nrv
                    if typ in ("ADDED", "MODIFIED"):
                        self._see(obj, now)
            except (fk.ApiError, OSError, ValueError) as e:
                if fk.STOP.is_set():
                    return
                self.error = str(e)
                time.sleep(0.5)


def end_state(api, ns, node_prefix):
    """Per node the GPUs left, and the pending pods' sizes, from one list of each."""
    nodes, _ = api.list_all("/api/v1/nodes", {})
    free = {}
    for n in nodes:
        name = n["metadata"]["name"]
        if not name.startswith(node_prefix + "-"):
            continue
        alloc = ((n.get("status") or {}).get("allocatable") or {}).get("nvidia.com/gpu", "0")
        free[name] = int(alloc)
    pods, _ = api.list_all("/api/v1/namespaces/%s/pods" % ns, {})
    pending = []
    bound = bound_gpus = 0
    for p in pods:
        g = gpu_of(p)
        node = (p.get("spec") or {}).get("nodeName")
        if node:
            bound += 1
            bound_gpus += g
            if node in free:
                free[node] -= g
        else:
            pending.append(g)
    over = [n for n, f in free.items() if f < 0]
    biggest = max(free.values()) if free else 0
    fit_alone = sum(1 for g in pending if g <= biggest)
    # together: first fit, biggest pods first, on what is left
    left = sorted(free.values(), reverse=True)
    fit_together = 0
    for g in sorted(pending, reverse=True):
        for i, f in enumerate(left):
            if f >= g:
                left[i] -= g
                fit_together += 1
                break
    by = {}
    for g in pending:
        by[g] = by.get(g, 0) + 1
    return {
        "bound_listed": bound,
        "bound_gpus": bound_gpus,
        "pending": len(pending),
        "pending_by_size": {str(k): v for k, v in sorted(by.items())},
        "pending_fit_alone": fit_alone,
        "pending_fit_together": fit_together,
        "free_gpus": sum(max(0, f) for f in free.values()),
        "largest_free_on_a_node": biggest,
        "nodes_with_8_free": sum(1 for f in free.values() if f >= 8),
        "overcommitted_nodes": len(over),
    }


def cmd_run(api, args):
    stack = {k: int(v) for k, v in (kv.split("=", 1) for kv in args.pid)}
    hz = os.sysconf("SC_CLK_TCK")
    binds = Binds(api, args.ns)
    th = threading.Thread(target=binds.main, daemon=True)
    th.start()
    if not binds.ready.wait(120):
        print("kube.py run: the watch of the binds did not start", file=sys.stderr)
        return 1
    before = {k: cpu_ticks(p) for k, p in stack.items()}
    cmd = args.cmd[1:] if args.cmd and args.cmd[0] == "--" else args.cmd
    log = open(args.log, "wb")
    t0 = time.time()
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    stack["scheduler"] = proc.pid
    before["scheduler"] = 0
    samples = []  # (t, binds, {name: ticks})
    why = None
    while True:
        time.sleep(args.interval)
        now = time.time()
        n = binds.count()
        samples.append((now, n, {k: cpu_ticks(p) for k, p in stack.items()}, thread_ticks(proc.pid)))
        with binds.lock:
            last = max(binds.first.values()) if binds.first else None
        if n >= args.expect:
            why = "all pods bound"
        elif last is not None and now - last >= args.quiet:
            why = "no bind for %g s" % args.quiet
        elif last is None and now - t0 >= args.first_timeout:
            why = "no bind within %g s" % args.first_timeout
        elif now - t0 >= args.max_s:
            why = "the time limit of %g s" % args.max_s
        elif proc.poll() is not None:
            why = "the scheduler exited (%d)" % proc.returncode
        if why:
            break
    exited = proc.poll()
    stop_t = time.time()
    at_stop = {k: cpu_ticks(p) for k, p in stack.items()}
    metrics = {}
    if args.metrics and exited is None:
        # gpuorch's own account of its scheduling cycles (histogram of their seconds)
        import urllib.request

        try:
            with urllib.request.urlopen(args.metrics, timeout=5) as r:
                for line in r.read().decode().splitlines():
                    if line.startswith("gpuorch_schedule_cycle_seconds"):
                        k, _, v = line.rpartition(" ")
                        metrics[k] = float(v)
        except OSError as e:
            metrics["error"] = str(e)
    if exited is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    log.close()
    time.sleep(1)  # the last events of the watch
    fk.STOP.set()
    api.close_watches()
    with binds.lock:
        times = sorted(binds.first.values())
    n = len(times)
    res = {
        "scheduler": args.name,
        "nodes": args.nodes,
        "pods": args.expect,
        "command": " ".join(cmd),
        "stopped_because": why,
        "bound": n,
        "first_bind_s": round(times[0] - t0, 2) if n else None,
        "last_bind_s": round(times[-1] - t0, 2) if n else None,
        "watch_error": binds.error,
    }
    if n:
        span = times[-1] - t0
        res["pods_per_s"] = round(n / span, 1) if span > 0 else None
        res["pods_per_s_steady"] = round((n - 1) / (times[-1] - times[0]), 1) if n > 1 and times[-1] > times[0] else None
        # the CPU at the last bind: the first sample taken at or after it
        at = next((s for s in samples if s[0] >= times[-1]), samples[-1])
        cpu = {}
        for k in stack:
            b, a = before.get(k), at[2].get(k)
            if a is None:  # it exited: its last reading
                a = at_stop.get(k)
            cpu[k] = None if a is None or b is None else (a - b) * 1000.0 / hz
        res["cpu_ms_at_last_bind"] = {k: round(v, 1) if v is not None else None for k, v in cpu.items()}
        res["cpu_sample_after_last_bind_s"] = round(at[0] - times[-1], 2)
        # the scheduler's threads (in the order made) with CPU: where its own time went
        res["scheduler_threads_ms_at_last_bind"] = [[t, v * 1000 // hz] for t, v in at[3] if v]
        sched = cpu.get("scheduler")
        res["sched_ms_per_pod"] = round(sched / n, 2) if sched is not None else None
        if all(v is not None for v in cpu.values()):
            res["stack_ms_per_pod"] = round(sum(cpu.values()) / n, 2)
            res["apiserver_ms_per_pod"] = round(cpu["apiserver"] / n, 2)
            res["etcd_ms_per_pod"] = round(cpu["etcd"] / n, 2)
        # binds per second over time (for the text: is it steady?)
        res["binds_per_10s"] = [sum(1 for t in times if t0 + i * 10 <= t < t0 + (i + 1) * 10) for i in range(int((times[-1] - t0) // 10) + 1)]
    res["cpu_ms_at_stop"] = {
        k: round((at_stop[k] - before[k]) * 1000.0 / hz, 1) if at_stop.get(k) is not None and before.get(k) is not None else None
        for k in stack
    }
    res["stop_s"] = round(stop_t - t0, 2)
    if metrics:
        res["cycle_metrics"] = metrics
    res.update(end_state(api, args.ns, args.node_prefix))
    # gpuorch says what it did when it stops
    with open(args.log, errors="replace") as f:
        for line in f:
            if "event=engine_stopped" in line:
                for k in ("submitted", "binds", "bind_errors", "reasons", "passes", "pass_cpu_ms"):
                    m = re.search(r"\b%s=(\d+)" % k, line)
                    if m:
                        res["log_" + k] = int(m.group(1))
    res["bind_errors"] = res.get("log_bind_errors", 0)
    with open(args.out, "w") as f:
        json.dump(res, f, indent=1)
    print(json.dumps({k: res.get(k) for k in ("scheduler", "nodes", "bound", "pods_per_s", "sched_ms_per_pod", "stack_ms_per_pod", "first_bind_s", "pending_fit_alone", "free_gpus", "stopped_because")}))
    return 0


def fmt(v, spec="{:,.1f}"):
    return "-" if v is None else spec.format(v)


def cmd_report(args):
    runs = []
    for p in args.results:
        with open(p) as f:
            runs.append(json.load(f))
    with open(args.pods_json) as f:
        pods = json.load(f)
    out = []
    w = out.append
    w("## 7. Kubernetes: gpuorch beside kube-scheduler")
    w("")
    w("One control plane from the same build (kube-apiserver, etcd, kube-controller-manager; %s), fake 8-GPU" % args.k8s_version)
    w("nodes made by tests/kube/fake_node.py (no kubelet: a bound pod stays Pending, which is all a")
    w("scheduler's speed needs), and the same %s pending pods (seed %s) of 1/2/4/8 GPUs asking %s GPUs" % (f"{pods['pods']:,}", args.seed, f"{pods['gpus']:,}"))
    w("(%s), created from 16 threads at %s pods/s before the scheduler starts. Each scheduler runs" % (", ".join(f"{v:,} x {k}" for k, v in sorted(pods["by_size"].items(), key=lambda kv: int(kv[0]))), pods["per_s"]))
    w("on a FRESH control plane: kube-scheduler (default profile, client qps/burst %s/%s), then gpuorch" % (args.qps, args.burst))
    w("(`--kube-qps %s --kube-burst %s`); both with the admin's credentials. Both are measured from" % (args.qps, args.burst))
    w("the scheduler's start to its last bind (a watch of the bound pods notes when each was first")
    w("seen bound); the run ends when every pod is bound or no bind came for %s s. pods/s: bound pods" % args.quiet)
    w("over that time (start-up included); steady: from the first bind to the last. CPU: utime+stime")
    w("(/proc) of the scheduler, and of the scheduler + kube-apiserver + etcd, at the last bind, per")
    w("bound pod. \"Pending that fit\": pods left pending for which some node still has the GPUs")
    w("(alone; together, first fit biggest first, in brackets); free GPUs at the end. Pods bound and")
    w("pods/s count pods, not GPUs: where the pods ask more GPUs than the nodes have, which pods got")
    w("them decides the count (a scheduler that turns big pods away binds more small ones behind them);")
    w("GPUs bound shows what was given.")
    w("")
    w("```")
    w(args.command)
    w("```")
    w("")
    if args.machine:
        w("Machine: %s." % args.machine)
        w("")
    for nodes in sorted({r["nodes"] for r in runs}):
        rs = [r for r in runs if r["nodes"] == nodes]
        w("### %s nodes (%s GPUs)" % (f"{nodes:,}", f"{nodes * 8:,}"))
        w("")
        w("| scheduler | pods bound | GPUs bound | pods/s | steady pods/s | scheduler CPU ms/pod | stack CPU ms/pod (apiserver, etcd) | first bind s | pending | pending that fit | free GPUs |")
        w("|---|---|---|---|---|---|---|---|---|---|---|")
        for r in rs:
            w(
                "| %s | %s | %s | %s | %s | %s | %s (%s, %s) | %s | %s | %s (%s) | %s |"
                % (
                    r["scheduler"],
                    f"{r['bound']:,}",
                    fmt(r.get("bound_gpus"), "{:,}"),
                    fmt(r.get("pods_per_s")),
                    fmt(r.get("pods_per_s_steady")),
                    fmt(r.get("sched_ms_per_pod"), "{:.2f}"),
                    fmt(r.get("stack_ms_per_pod"), "{:.2f}"),
                    fmt(r.get("apiserver_ms_per_pod"), "{:.2f}"),
                    fmt(r.get("etcd_ms_per_pod"), "{:.2f}"),
                    fmt(r.get("first_bind_s"), "{:.1f}"),
                    f"{r['pending']:,}",
                    f"{r['pending_fit_alone']:,}",
                    f"{r['pending_fit_together']:,}",
                    f"{r['free_gpus']:,}",
                )
            )
        w("")
        k = next((r for r in rs if r["scheduler"] == "kube-scheduler"), None)
        g = next((r for r in rs if r["scheduler"] == "gpuorch"), None)
        if k and g and k.get("pods_per_s") and g.get("pods_per_s"):
            ratio = g["pods_per_s"] / k["pods_per_s"]
            w("- pods/s: gpuorch %.2fx kube-scheduler's (target at least 1.8x): %s." % (ratio, "met" if ratio >= 1.8 else "NOT met"))
            if k.get("sched_ms_per_pod") and g.get("sched_ms_per_pod") is not None:
                c = g["sched_ms_per_pod"] / k["sched_ms_per_pod"]
                w("- the scheduler's own CPU per bound pod: gpuorch %.3fx kube-scheduler's (target at most 0.1x): %s." % (c, "met" if c <= 0.1 else "NOT met"))
            if k.get("stack_ms_per_pod") and g.get("stack_ms_per_pod"):
                w("- the whole stack's CPU per bound pod: gpuorch %.2fx kube-scheduler's." % (g["stack_ms_per_pod"] / k["stack_ms_per_pod"]))
            w("- pods left pending that a placement could fit: gpuorch %s (target 0), kube-scheduler %s: %s." % (f"{g['pending_fit_alone']:,}", f"{k['pending_fit_alone']:,}", "met" if g["pending_fit_alone"] == 0 else "NOT met"))
        for r in rs:
            notes = []
            if r["stopped_because"] not in ("all pods bound",) and not r["stopped_because"].startswith("no bind for"):
                notes.append("stopped: " + r["stopped_because"])
            if r.get("overcommitted_nodes"):
                notes.append("%d nodes hold more GPUs than they have" % r["overcommitted_nodes"])
            if r.get("bound_listed") != r["bound"]:
                notes.append("the final list shows %d bound, the watch saw %d" % (r["bound_listed"], r["bound"]))
            if r.get("bind_errors"):
                notes.append("%d bind errors" % r["bind_errors"])
            m = r.get("cycle_metrics") or {}
            if m.get("gpuorch_schedule_cycle_seconds_count"):
                notes.append(
                    "%d scheduling cycles, %.2f s in all"
                    % (m["gpuorch_schedule_cycle_seconds_count"], m.get("gpuorch_schedule_cycle_seconds_sum", 0))
                )
            if notes:
                w("- %s: %s." % (r["scheduler"], "; ".join(notes)))
        w("")
    w("Commands run for each: `%s` and `%s` (the full lines are in the JSON results with `--keep DIR`)." % (args.kcmd, args.gcmd))
    w("")
    print("\n".join(out))
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kubeconfig")
    ap.add_argument("--threads", type=int, default=16)
    sub = ap.add_subparsers(dest="cmd_name", required=True)
    p = sub.add_parser("pods")
    p.add_argument("--ns", required=True)
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--scheduler", required=True)
    r = sub.add_parser("run")
    r.add_argument("--ns", required=True)
    r.add_argument("--name", required=True, help="the scheduler's name in the results")
    r.add_argument("--nodes", type=int, required=True)
    r.add_argument("--node-prefix", required=True)
    r.add_argument("--expect", type=int, required=True, help="pods in all")
    r.add_argument("--pid", action="append", default=[], help="NAME=PID of the stack (apiserver=, etcd=)")
    r.add_argument("--quiet", type=float, default=20)
    r.add_argument("--first-timeout", type=float, default=600)
    r.add_argument("--max-s", type=float, default=3600)
    r.add_argument("--interval", type=float, default=0.25)
    r.add_argument("--log", required=True)
    r.add_argument("--metrics", help="the scheduler's /metrics URL (gpuorch)")
    r.add_argument("--out", required=True)
    r.add_argument("cmd", nargs=argparse.REMAINDER)
    rp = sub.add_parser("report")
    rp.add_argument("--pods-json", required=True)
    rp.add_argument("--seed", default="42")
    rp.add_argument("--qps", required=True)
    rp.add_argument("--burst", required=True)
    rp.add_argument("--quiet", required=True)
    rp.add_argument("--command", required=True)
    rp.add_argument("--kcmd", required=True)
    rp.add_argument("--gcmd", required=True)
    rp.add_argument("--k8s-version", default="1.20")
    rp.add_argument("--machine", default="")
    rp.add_argument("results", nargs="+")
    args = ap.parse_args(argv)
    if args.cmd_name == "report":
        return cmd_report(args)
    api = fk.Api(fk.load_kubeconfig(args.kubeconfig))
    fk.QUIET = True
    if args.cmd_name == "pods":
        return cmd_pods(api, args)
    return cmd_run(api, args)


if __name__ == "__main__":
    sys.exit(main())
