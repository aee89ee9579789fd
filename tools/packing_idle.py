#!/usr/bin/env python3
"""packing_idle.py: where a packing run leaves GPU capacity idle.

    gpuorch sim --cluster NODES.csv --trace PODS.csv --mode packing --policy P \\
        --seed 42 --events ev.jsonl
    tools/packing_idle.py NODES.csv PODS.csv ev.jsonl

Replays the run's "start" and "fail" events (Alibaba node and pod lists, the FGD
protocol of docs/simulator.md) and prints the idle GPUs of its final state: whole or
partly used, by the CPU left on their node, partly used GPUs by what they hold, and the
pods that found no room. It reads only what the simulator wrote, so it rechecks the
allocation figure as well as explaining it."""
import collections
import csv
import json
import sys


def main(argv):
    if len(argv) != 4:
        sys.exit("usage: packing_idle.py NODES.csv PODS.csv EVENTS.jsonl")
    try:
        with open(argv[1]) as f:
            nodes = {r["sn"]: {"cpu": int(r["cpu_milli"]), "used_cpu": 0,
                               "free": [1000] * int(r["gpu"])} for r in csv.DictReader(f)}
        with open(argv[2]) as f:
            pods = {r["name"]: r for r in csv.DictReader(f)}
        events = open(argv[3])
    except (OSError, KeyError, ValueError) as e:
        sys.exit(f"packing_idle.py: {e}")
    on_gpu = collections.defaultdict(list)  # (node, index) -> milli of each pod
    failed = collections.Counter()
    with events:
        for lineno, line in enumerate(events, 1):
            try:
                e = json.loads(line)
                if e["type"] == "fail":
                    p = pods[e["job"]]
                    failed[(int(p["num_gpu"]), int(p["gpu_milli"]))] += 1
                if e["type"] != "start":
                    continue
                n, p = nodes[e["node"]], pods[e["job"]]
                n["used_cpu"] += int(p["cpu_milli"])
                for g in e["gpus"]:
                    f = g.get("fraction")
                    milli = round(f * 1000) if f is not None else 1000
                    n["free"][g["index"]] -= milli
                    on_gpu[(e["node"], g["index"])].append(milli)
            except (ValueError, KeyError, IndexError, TypeError) as err:
                sys.exit(f"packing_idle.py: {argv[3]}:{lineno}: bad event: {err}")
    total = sum(len(n["free"]) for n in nodes.values())
    idle = sum(sum(n["free"]) for n in nodes.values()) / 1000
    print(f"GPUs {total}, idle {idle:.1f} ({100 * idle / total:.2f}%), "
          f"allocated {100 - 100 * idle / total:.2f}%")

    by_host = collections.Counter()
    by_left = collections.Counter()
    for n in nodes.values():
        cores = (n["cpu"] - n["used_cpu"]) // 1000
        host = "<1" if cores < 1 else "1-3" if cores < 4 else "4-7" if cores < 8 else ">=8"
        for free in n["free"]:
            if free:
                by_host[("whole" if free == 1000 else "partly used", host)] += free / 1000
                if free < 1000:
                    by_left[min(free // 50 * 50, 900)] += free / 1000
    print("\nidle GPUs by kind and cores left on the node:")
    for (kind, host), v in sorted(by_host.items()):
        print(f"  {kind:12s} cores {host:4s} {v:8.1f}")
    print("\nidle on partly used GPUs by the milli-GPU left (bins of 50):")
    for left, v in sorted(by_left.items()):
        print(f"  {left:4d}-{left + 49:<4d} {v:8.1f}")

    combos = collections.Counter(tuple(sorted(v, reverse=True)) for v in on_gpu.values()
                                 if sum(v) < 1000)
    print("\npartly used GPUs by what they hold (most idle first): GPUs, idle GPUs")
    ranked = sorted(combos.items(), key=lambda kv: -kv[1] * (1000 - sum(kv[0])))
    for pods_on, count in ranked[:15]:
        idle_here = count * (1000 - sum(pods_on)) / 1000
        print(f"  {'+'.join(map(str, pods_on)):16s} {count:6d} {idle_here:8.1f}")

    print(f"\npods that found no room: {sum(failed.values())}")
    for (gpus, milli), count in sorted(failed.items(), key=lambda kv: -kv[1])[:12]:
        if gpus > 1 or milli == 1000:
            shape = f"{gpus} GPU" + ("s" if gpus > 1 else "")
        else:
            shape = f"{milli} milli" if gpus else "no GPU"
        print(f"  {shape:12s} {count:6d}")


if __name__ == "__main__":
    main(sys.argv)
