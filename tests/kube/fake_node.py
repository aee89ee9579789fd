#!/usr/bin/env python3
"""fake_node.py: the node side of a Kubernetes cluster, for gpuorch's tests.

No kubelet can run on the test machines (no container runtime, and no kubelet binary
is built), so nothing would move a bound pod out of Pending, finish it, or remove a pod
deleted with a grace period. This test double plays the node side instead, as kwok
does, through the API server only (Python 3 standard library, no other packages):

  create   make N fake GPU nodes: Node objects labelled as the NVIDIA GPU Operator
           labels them (gpu-feature-discovery), with capacity/allocatable and Ready=True
  run      the fake kubelet and the fake MIG manager for the nodes named PREFIX-*

Usage:
  fake_node.py --kubeconfig FILE create --nodes N --prefix NAME [shape options]
  fake_node.py --kubeconfig FILE run --prefix NAME [--prefix NAME2 ...] [run options]

Nodes are named PREFIX-0 .. PREFIX-(N-1) (from --start). Shape options (create):
  --gpus 8  --product NVIDIA-H100-80GB-HBM3  --memory-mib 81559  --family (derived from
  the product: hopper, ampere, ...)  --mig-capable  --mig-strategy none|single|mixed
  (default mixed when --mig-capable, else none)  --cpu (default 8 per GPU, at least 8)
  --mem-gib (default 64 per GPU, at least 64)  --pods 110  --label KEY=VALUE (repeated)
  --leaf-label PATTERN (sets gpuorch.io/leaf, or --leaf-key)  --taint KEY[=VALUE]:EFFECT
  --resource NAME=QTY (repeated: rdma/ib=1, ...)  --mps-replicas R (--mps-resource NAME)
  Label values and the leaf pattern may hold Python expressions over the node index i
  in braces: --leaf-label 'leaf-{i//4}' --label 'gpuorch.io/spine=spine-{i//16}'.

The fake kubelet (run) watches every bound pod (fieldSelector spec.nodeName!=) and acts
on those whose node is named PREFIX-*:
  - bound and Pending: status phase Running, containers running, startTime now;
  - annotation fake.gpuorch.io/run-seconds: S: S seconds after its start the pod
    Succeeds (exit code 0), or Fails with fake.gpuorch.io/exit-code: N (N != 0);
  - a deletionTimestamp on a running pod: the termination grace passes
    (metadata.deletionGracePeriodSeconds, at most --max-grace, default 3 s), a line
    "<pod name> <unix time>" is appended to the file "checkpoints" in the directory named
    by annotation fake.gpuorch.io/checkpoint-dir (the stand-in for a workload that saves
    on SIGTERM), then the pod is deleted with gracePeriodSeconds 0 (404 is fine). A pod
    that never started is deleted at once.

The fake MIG manager (run) watches the nodes named PREFIX-*. When a node's label
nvidia.com/mig.config differs from what it last applied there, it sets
nvidia.com/mig.config.state=pending, waits --mig-delay seconds (default 1), and applies
the named config: allocatable (and capacity) nvidia.com/gpu becomes the number of GPUs
not MIG-enabled, nvidia.com/mig-<profile> the number of instances of each profile,
the mixed-strategy labels nvidia.com/mig-<profile>.count follow, stale ones are
removed, and the state becomes success (the mixed strategy's resources whatever
nvidia.com/mig.strategy says). A config it cannot find or apply, one named by
--fail-mig, or one whose name starts with a --fail-mig-prefix (gpuorch's names are
`gpuorch-<hash>`, unknown in advance: --fail-mig-prefix gpuorch- fails all of them),
ends in state failed (allocatable unchanged). What it last applied to a
node (or failed to) it notes in the node's annotation fake.gpuorch.io/mig-applied
(create sets all-disabled), so a label changed while it was not running is applied
when it starts.

MIG layouts: the one place their encoding is defined. A MIG config is an entry of the
GPU Operator's mig-parted ConfigMap, by default `default-mig-parted-config` in
namespace `gpu-operator`, key `config.yaml` (--mig-configmap NS/NAME, --mig-config-key);
the format is mig-parted's own, which the real MIG manager reads:

    version: v1
    mig-configs:
      all-disabled:
        - devices: all
          mig-enabled: false
      gpuorch-3f9a0c12d4:            # one entry per layout gpuorch wants
        - devices: [0, 1]
          mig-enabled: true
          mig-devices: {"1g.10gb": 7}
        - devices: [2]
          mig-enabled: true
          mig-devices: {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}
        - devices: [3, 4, 5, 6, 7]
          mig-enabled: false

`devices` is `all` or a list of GPU indices (0 .. gpu.count-1); a GPU no entry names
stays as it is; `mig-devices` maps a profile to its count on EACH listed GPU;
`device-filter` is accepted and ignored. The node's label nvidia.com/mig.config names
the entry (a label value: at most 63 characters of [A-Za-z0-9._-]); gpuorch names its
layouts `gpuorch-<hash>` since a per-GPU list of eight GPUs does not fit in 63
characters. `all-disabled` works without an entry. The fake checks what mig-parted
would refuse outright: a MIG device on a node not MIG-capable, a profile not of the
form <g>g.<mem>gb[+me], and more than 7 compute slices on one GPU. With
--mig-require-idle a change also fails while a pod that asks for GPUs (nvidia.com/gpu
or nvidia.com/mig-*) is bound to the node and not finished (the real manager cannot
reconfigure GPUs in use).

One line per action goes to stderr (-q: errors only). SIGTERM or SIGINT stop it (exit 0).
"""

import argparse
import concurrent.futures
import heapq
import http.client
import json
import os
import re
import signal
import ssl
import sys
import threading
import time
import urllib.parse

ANN_RUN_SECONDS = "fake.gpuorch.io/run-seconds"
ANN_EXIT_CODE = "fake.gpuorch.io/exit-code"
ANN_CHECKPOINT_DIR = "fake.gpuorch.io/checkpoint-dir"
ANN_MIG_APPLIED = "fake.gpuorch.io/mig-applied"

L_MIG_CONFIG = "nvidia.com/mig.config"
L_MIG_STATE = "nvidia.com/mig.config.state"
L_GPU_COUNT = "nvidia.com/gpu.count"
L_MIG_CAPABLE = "nvidia.com/mig.capable"
MIG_PROFILE_RE = re.compile(r"^([1-7])g\.(\d+)gb(\+me)?$")

STOP = threading.Event()
QUIET = False
_log_lock = threading.Lock()


def log(msg, error=False):
    if QUIET and not error:
        return
    with _log_lock:
        sys.stderr.write("%s fake_node: %s\n" % (time.strftime("%H:%M:%S"), msg))
        sys.stderr.flush()


def now_rfc3339():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def parse_rfc3339(s):
    try:
        return time.mktime(time.strptime(s, "%Y-%m-%dT%H:%M:%SZ")) - time.timezone
    except (TypeError, ValueError):
        return None


# ---------------------------------------------------------------------------
# A small YAML reader: block mappings and sequences, flow [..] and {..}, quoted and
# plain scalars, comments. Enough for kubeconfigs and mig-parted configs (JSON too).


class YamlError(ValueError):
    pass


def _strip_comment(line):
    out, q = [], None
    for i, c in enumerate(line):
        if q:
            if c == q:
                q = None
        elif c in "\"'":
            q = c
        elif c == "#" and (i == 0 or line[i - 1] in " \t"):
            break
        out.append(c)
    return "".join(out).rstrip()


def _scalar(s):
    s = s.strip()
    if s == "" or s in ("~", "null", "Null", "NULL"):
        return None
    if s[0] in "[{":
        v, rest = _flow(s, 0)
        if s[rest:].strip():
            raise YamlError("text after a flow collection: %r" % s)
        return v
    if s[0] == '"':
        return json.loads(s)
    if s[0] == "'":
        return s[1:-1].replace("''", "'")
    if s in ("true", "True", "TRUE"):
        return True
    if s in ("false", "False", "FALSE"):
        return False
    if re.fullmatch(r"[-+]?\d+", s):
        return int(s)
    if re.fullmatch(r"[-+]?(\d+\.\d*|\.\d+)([eE][-+]?\d+)?", s):
        return float(s)
    return s


def _flow(s, i):
    """A flow value starting at s[i]: (value, index after it)."""
    while i < len(s) and s[i] in " \t":
        i += 1
    if i >= len(s):
        raise YamlError("unterminated flow collection")
    c = s[i]
    if c in "[{":
        close = "]" if c == "[" else "}"
        out = [] if c == "[" else {}
        i += 1
        while True:
            while i < len(s) and s[i] in " \t,":
                i += 1
            if i >= len(s):
                raise YamlError("unterminated flow collection")
            if s[i] == close:
                return out, i + 1
            if c == "[":
                v, i = _flow(s, i)
                out.append(v)
            else:
                k, i = _flow(s, i)
                while i < len(s) and s[i] in " \t":
                    i += 1
                if i < len(s) and s[i] == ":":
                    v, i = _flow(s, i + 1)
                else:
                    v = None
                out[k] = v
    if c in "\"'":
        j = i + 1
        while j < len(s):
            if c == '"' and s[j] == "\\":
                j += 2
                continue
            if s[j] == c:
                if c == "'" and j + 1 < len(s) and s[j + 1] == "'":
                    j += 2
                    continue
                break
            j += 1
        return _scalar(s[i : j + 1]), j + 1
    j = i
    while j < len(s) and s[j] not in ",]}" and not (s[j] == ":" and (j + 1 == len(s) or s[j + 1] in " ,]}")):
        j += 1
    return _scalar(s[i:j]), j


def _split_key(text):
    """'key: value' -> (key, value text); None when the line is not a mapping entry."""
    if text[0] in "\"'":
        k, j = _flow(text, 0)
        rest = text[j:]
        if not rest.startswith(":"):
            return None
        return str(k), rest[1:].strip()
    m = re.match(r"^([^:]*?):(\s+|$)(.*)$", text)
    if not m or m.group(1).startswith(("[", "{")):
        return None
    return m.group(1).strip(), m.group(3)


def yaml_load(text):
    s = text.strip()
    if s.startswith("{") or s.startswith("["):
        try:
            return json.loads(s)
        except ValueError:
            pass
    lines = []
    for raw in text.splitlines():
        if raw.strip() in ("---", "..."):
            continue
        line = _strip_comment(raw.replace("\t", "    "))
        if line.strip():
            lines.append([len(line) - len(line.lstrip(" ")), line.strip()])
    if not lines:
        return None
    v, i = _block(lines, 0, lines[0][0])
    if i != len(lines):
        raise YamlError("unexpected indentation at %r" % lines[i][1])
    return v


def _is_item(text):
    return text == "-" or text.startswith("- ")


def _block(lines, i, ind):
    if _is_item(lines[i][1]):
        out = []
        while i < len(lines) and lines[i][0] == ind and _is_item(lines[i][1]):
            rest = lines[i][1][1:]
            if not rest.strip():
                if i + 1 < len(lines) and lines[i + 1][0] > ind:
                    v, i = _block(lines, i + 1, lines[i + 1][0])
                else:
                    v, i = None, i + 1
                out.append(v)
                continue
            sub = ind + 1 + (len(rest) - len(rest.lstrip(" ")))
            rest = rest.strip()
            if _is_item(rest) or _split_key(rest) is not None:
                lines[i] = [sub, rest]  # "- key: v" opens a mapping at the text's column
                v, i = _block(lines, i, sub)
            else:
                v, i = _scalar(rest), i + 1
            out.append(v)
        return out, i
    out = {}
    while i < len(lines) and lines[i][0] == ind and not _is_item(lines[i][1]):
        kv = _split_key(lines[i][1])
        if kv is None:
            if not out and (i + 1 == len(lines) or lines[i + 1][0] < ind):
                return _scalar(lines[i][1]), i + 1
            raise YamlError("not a 'key: value' line: %r" % lines[i][1])
        k, vtext = kv
        if vtext in ("|", ">", "|-", ">-"):
            raise YamlError("block scalars are not supported (%s)" % k)
        i += 1
        if vtext:
            out[k] = _scalar(vtext)
        elif i < len(lines) and (lines[i][0] > ind or (lines[i][0] == ind and _is_item(lines[i][1]))):
            out[k], i = _block(lines, i, lines[i][0])
        else:
            out[k] = None
    return out, i


# ---------------------------------------------------------------------------
# The API server


def load_kubeconfig(path):
    with open(path) as f:
        doc = yaml_load(f.read())
    if not isinstance(doc, dict):
        raise SystemExit("%s: not a kubeconfig" % path)

    def named(section, name):
        for e in doc.get(section) or []:
            if e.get("name") == name:
                return e
        items = doc.get(section) or []
        return items[0] if items and not name else None

    ctx = named("contexts", doc.get("current-context")) or {}
    ctx = ctx.get("context") or {}
    cluster = (named("clusters", ctx.get("cluster")) or {}).get("cluster") or {}
    user = (named("users", ctx.get("user")) or {}).get("user") or {}
    if not cluster.get("server"):
        raise SystemExit("%s: no cluster server" % path)
    token = user.get("token")
    if not token and user.get("tokenFile"):
        with open(user["tokenFile"]) as f:
            token = f.read().strip()
    return {
        "server": cluster["server"],
        "token": token,
        "insecure": bool(cluster.get("insecure-skip-tls-verify")),
        "ca_file": cluster.get("certificate-authority"),
        "ca_data": cluster.get("certificate-authority-data"),
    }


class ApiError(Exception):
    pass


class Api:
    def __init__(self, cfg, timeout=30):
        u = urllib.parse.urlsplit(cfg["server"])
        self.https = u.scheme == "https"
        self.host = u.hostname
        self.port = u.port or (443 if self.https else 80)
        self.token = cfg["token"]
        self.timeout = timeout
        self.ctx = None
        if self.https:
            self.ctx = ssl.create_default_context()
            if cfg["insecure"]:
                self.ctx.check_hostname = False
                self.ctx.verify_mode = ssl.CERT_NONE
            elif cfg["ca_file"]:
                self.ctx.load_verify_locations(cafile=cfg["ca_file"])
            elif cfg["ca_data"]:
                import base64

                self.ctx.load_verify_locations(cadata=base64.b64decode(cfg["ca_data"]).decode())
        self.local = threading.local()
        self.watches = set()
        self.watch_lock = threading.Lock()

    def _new_conn(self, timeout):
        if self.https:
            return http.client.HTTPSConnection(self.host, self.port, timeout=timeout, context=self.ctx)
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def _headers(self, ctype=None):
        h = {"Accept": "application/json", "User-Agent": "gpuorch-fake-node"}
        if self.token:
            h["Authorization"] = "Bearer " + self.token
        if ctype:
            h["Content-Type"] = ctype
        return h

    def request(self, method, path, body=None, ctype="application/json", retry_s=60):
        """(status, parsed body or None). Retries a refused or broken connection (the API
        server restarting) for up to retry_s seconds; ApiError after that."""
        data = None if body is None else json.dumps(body).encode()
        deadline = time.time() + retry_s
        delay = 0.2
        while True:
            conn = getattr(self.local, "conn", None)
            if conn is None:
                conn = self.local.conn = self._new_conn(self.timeout)
            try:
                conn.request(method, path, body=data, headers=self._headers(ctype if data is not None else None))
                resp = conn.getresponse()
                raw = resp.read()
                try:
                    obj = json.loads(raw) if raw else None
                except ValueError:
                    obj = {"message": raw[:300].decode(errors="replace")}
                if resp.status in (429, 503) and time.time() < deadline and not STOP.is_set():
                    time.sleep(delay)
                    continue
                return resp.status, obj
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                self.local.conn = None
                if time.time() >= deadline or STOP.is_set():
                    raise ApiError("%s %s: %s" % (method, path, e))
                time.sleep(delay)
                delay = min(delay * 2, 2.0)

    def list_all(self, path, query):
        """Every item of a collection, paged; (items, resourceVersion)."""
        items, cont = [], None
        while True:
            q = dict(query, limit="500")
            if cont:
                q["continue"] = cont
            status, obj = self.request("GET", path + "?" + urllib.parse.urlencode(q))
            if status != 200:
                raise ApiError("list %s: HTTP %d %s" % (path, status, message(obj)))
            items.extend(obj.get("items") or [])
            meta = obj.get("metadata") or {}
            cont = meta.get("continue")
            if not cont:
                return items, meta.get("resourceVersion")

    def watch(self, path, query, rv, timeout_s=60):
        """Yield (type, object) from a watch from rv until the server ends the stream.
        An HTTP error yields ("ERROR", Status)."""
        q = dict(query, watch="1", resourceVersion=rv, allowWatchBookmarks="true", timeoutSeconds=str(timeout_s))
        conn = self._new_conn(timeout_s + 30)
        with self.watch_lock:
            self.watches.add(conn)
        try:
            conn.request("GET", path + "?" + urllib.parse.urlencode(q), headers=self._headers())
            resp = conn.getresponse()
            if resp.status != 200:
                raw = resp.read()
                try:
                    obj = json.loads(raw)
                except ValueError:
                    obj = {"code": resp.status, "message": raw[:300].decode(errors="replace")}
                obj.setdefault("code", resp.status)
                yield "ERROR", obj
                return
            while not STOP.is_set():
                line = resp.readline()
                if not line:
                    return
                line = line.strip()
                if not line:
                    continue
                ev = json.loads(line)
                yield ev.get("type"), ev.get("object") or {}
        finally:
            with self.watch_lock:
                self.watches.discard(conn)
            conn.close()

    def close_watches(self):
        with self.watch_lock:
            for c in list(self.watches):
                try:
                    if c.sock:
                        c.sock.shutdown(2)
                except OSError:
                    pass


def message(obj):
    if isinstance(obj, dict):
        return obj.get("message") or ""
    return ""


def list_watch(api, path, query, on_list, on_event, what):
    """List then watch path until STOP: on_list(items) after every (re)list, on_event(type,
    obj) for each change. Relists on 410 Gone; watches again when the stream ends."""
    rv = None
    while not STOP.is_set():
        try:
            if rv is None:
                items, rv = api.list_all(path, query)
                on_list(items)
            for typ, obj in api.watch(path, query, rv):
                if typ == "ERROR":
                    if obj.get("code") == 410:
                        log("%s: resource version %s expired, listing again" % (what, rv))
                    else:
                        log("%s: watch error: %s" % (what, message(obj) or obj), error=True)
                        time.sleep(1)
                    rv = None
                    break
                new_rv = (obj.get("metadata") or {}).get("resourceVersion")
                if new_rv:
                    rv = new_rv
                if typ in ("ADDED", "MODIFIED", "DELETED"):
                    on_event(typ, obj)
        except (ApiError, OSError, http.client.HTTPException, ValueError) as e:
            if STOP.is_set():
                return
            log("%s: %s; trying again" % (what, e), error=True)
            time.sleep(1)
        except Exception as e:  # a bug in a handler: keep the others running, say so
            log("%s: unexpected %s: %s" % (what, type(e).__name__, e), error=True)
            time.sleep(1)


# ---------------------------------------------------------------------------
# create


FAMILIES = [
    ("B200", "blackwell"),
    ("B100", "blackwell"),
    ("GB200", "blackwell"),
    ("H100", "hopper"),
    ("H200", "hopper"),
    ("H800", "hopper"),
    ("GH200", "hopper"),
    ("L40", "ada-lovelace"),
    ("L4", "ada-lovelace"),
    ("A100", "ampere"),
    ("A30", "ampere"),
    ("A10", "ampere"),
    ("A40", "ampere"),
    ("A800", "ampere"),
    ("V100", "volta"),
    ("T4", "turing"),
    ("P100", "pascal"),
]


def family_of(product):
    for key, fam in FAMILIES:
        if key in product:
            return fam
    return "unknown"


def expand(pattern, i):
    """'leaf-{i//4}' with i = 9 -> 'leaf-2'."""
    return re.sub(r"\{([^{}]*)\}", lambda m: str(eval(m.group(1), {"__builtins__": {}}, {"i": i})), pattern)


def node_object(args, i):
    name = "%s-%d" % (args.prefix, i)
    gpus = args.gpus
    cpu = args.cpu if args.cpu is not None else max(8, 8 * gpus)
    mem_gib = args.mem_gib if args.mem_gib is not None else max(64, 64 * gpus)
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
    }
    resources = {
        "cpu": ("%g" % cpu) if float(cpu) == int(cpu) else "%dm" % int(float(cpu) * 1000),
        "memory": "%dMi" % int(mem_gib * 1024),
        "pods": str(args.pods),
        "ephemeral-storage": "1Ti",
    }
    if gpus > 0:
        strategy = args.mig_strategy or ("mixed" if args.mig_capable else "none")
        labels.update(
            {
                "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.product": args.product,
                L_GPU_COUNT: str(gpus),
                "nvidia.com/gpu.memory": str(args.memory_mib),
                "nvidia.com/gpu.family": args.family or family_of(args.product),
                L_MIG_CAPABLE: "true" if args.mig_capable else "false",
                "nvidia.com/mig.strategy": strategy,
            }
        )
        if args.mig_capable:
            # the GPU Operator labels MIG-capable nodes with their default config
            labels[L_MIG_CONFIG] = "all-disabled"
            labels[L_MIG_STATE] = "success"
        if args.mps_replicas:
            labels["nvidia.com/gpu.replicas"] = str(args.mps_replicas)
            labels["nvidia.com/gpu.sharing-strategy"] = "mps"
            resources[args.mps_resource] = str(gpus * args.mps_replicas)
            if args.mps_resource != "nvidia.com/gpu":
                resources["nvidia.com/gpu"] = "0"
        else:
            resources["nvidia.com/gpu"] = str(gpus)
    for kv in args.label:
        k, _, v = kv.partition("=")
        labels[k] = expand(v, i)
    if args.leaf_label:
        labels[args.leaf_key] = expand(args.leaf_label, i)
    for kv in args.resource:
        k, _, v = kv.partition("=")
        resources[k] = v
    annotations = {}
    if gpus > 0 and args.mig_capable:
        annotations[ANN_MIG_APPLIED] = "all-disabled"
    spec = {}
    if args.taint:
        spec["taints"] = []
        for t in args.taint:
            kv, _, effect = t.rpartition(":")
            k, _, v = kv.partition("=")
            taint = {"key": k, "effect": effect}
            if v:
                taint["value"] = v
            spec["taints"].append(taint)
    now = now_rfc3339()
    conditions = [
        {
            "type": t,
            "status": "False",
            "reason": "Kubelet" + r,
            "message": "fake node",
            "lastHeartbeatTime": now,
            "lastTransitionTime": now,
        }
        for t, r in (("MemoryPressure", "HasSufficientMemory"), ("DiskPressure", "HasNoDiskPressure"), ("PIDPressure", "HasSufficientPID"))
    ]
    conditions.append(
        {
            "type": "Ready",
            "status": "True",
            "reason": "KubeletReady",
            "message": "fake_node.py is posting ready status",
            "lastHeartbeatTime": now,
            "lastTransitionTime": now,
        }
    )
    status = {
        "capacity": dict(resources),
        "allocatable": dict(resources),
        "conditions": conditions,
        "addresses": [
            {"type": "InternalIP", "address": "10.%d.%d.%d" % (200 + (i >> 16) % 50, (i >> 8) & 255, i & 255)},
            {"type": "Hostname", "address": name},
        ],
        "nodeInfo": {
            "kubeletVersion": "v1.20.2-fake",
            "kubeProxyVersion": "v1.20.2-fake",
            "operatingSystem": "linux",
            "architecture": "amd64",
            "containerRuntimeVersion": "fake://0",
            "osImage": "fake_node.py",
            "kernelVersion": "0",
            "machineID": "",
            "systemUUID": "",
            "bootID": "",
        },
    }
    meta = {"name": name, "labels": labels}
    if annotations:
        meta["annotations"] = annotations
    return name, {"apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": spec}, status


def cmd_create(api, args):
    t0 = time.time()
    errors = []

    def one(i):
        name, node, status = node_object(args, i)
        code, obj = api.request("POST", "/api/v1/nodes", node)
        if code == 409:  # there already: take the labels and spec given now
            code, obj = api.request(
                "PATCH", "/api/v1/nodes/" + name, {"metadata": node["metadata"], "spec": node["spec"]}, "application/merge-patch+json"
            )
        if code not in (200, 201):
            return "create %s: HTTP %d %s" % (name, code, message(obj))
        code, obj = api.request("PATCH", "/api/v1/nodes/%s/status" % name, {"status": status}, "application/merge-patch+json")
        if code != 200:
            return "status of %s: HTTP %d %s" % (name, code, message(obj))
        return None

    with concurrent.futures.ThreadPoolExecutor(args.threads) as ex:
        for err in ex.map(one, range(args.start, args.start + args.nodes)):
            if err:
                errors.append(err)
                log(err, error=True)
    dt = time.time() - t0
    log("created %d nodes %s-%d..%d in %.1f s" % (args.nodes - len(errors), args.prefix, args.start, args.start + args.nodes - 1, dt))
    return 1 if errors else 0


# ---------------------------------------------------------------------------
# run: timers and the fake kubelet


class Timers:
    """Calls fn() (in the worker pool) at a time; cancel by the returned handle."""

    def __init__(self, pool):
        self.pool = pool
        self.heap = []
        self.cv = threading.Condition()
        self.seq = 0
        self.cancelled = set()
        threading.Thread(target=self._loop, daemon=True, name="timers").start()

    def at(self, when, fn):
        with self.cv:
            self.seq += 1
            heapq.heappush(self.heap, (when, self.seq, fn))
            self.cv.notify()
            return self.seq

    def cancel(self, handle):
        if handle is not None:
            with self.cv:
                self.cancelled.add(handle)

    def _loop(self):
        while not STOP.is_set():
            with self.cv:
                while not self.heap or self.heap[0][0] > time.time():
                    wait = 1.0 if not self.heap else min(1.0, self.heap[0][0] - time.time())
                    self.cv.wait(max(wait, 0.001))
                    if STOP.is_set():
                        return
                _, seq, fn = heapq.heappop(self.heap)
                if seq in self.cancelled:
                    self.cancelled.discard(seq)
                    continue
            try:
                self.pool.submit(fn)
            except RuntimeError:
                return


def gpu_request(pod):
    for c in (pod.get("spec") or {}).get("containers") or []:
        res = c.get("resources") or {}
        for part in ("limits", "requests"):
            for k, v in (res.get(part) or {}).items():
                if (k == "nvidia.com/gpu" or k.startswith("nvidia.com/mig-") or k.startswith("nvidia.com/gpu.")) and str(v) not in ("0", ""):
                    return True
    return False


class PodState:
    __slots__ = ("ns", "name", "node", "started", "finish", "deleting", "done")

    def __init__(self, ns, name, node):
        self.ns, self.name, self.node = ns, name, node
        self.started = False  # we set (or found) it Running
        self.finish = None  # the timer that ends it
        self.deleting = False
        self.done = False  # Succeeded or Failed


class Kubelet:
    def __init__(self, api, args, pool, timers):
        self.api, self.args, self.pool, self.timers = api, args, pool, timers
        self.lock = threading.Lock()
        self.pods = {}  # uid -> PodState
        self.busy_nodes = {}  # node -> set of uids of unfinished GPU pods

    def mine(self, node):
        return node and any(node.startswith(p + "-") for p in self.args.prefix)

    def on_list(self, items):
        seen = set()
        for p in items:
            seen.add(p["metadata"]["uid"])
            self.on_event("ADDED", p)
        with self.lock:
            for uid in list(self.pods):
                if uid not in seen:
                    self._forget(uid)

    def _forget(self, uid):
        st = self.pods.pop(uid, None)
        if st:
            self.timers.cancel(st.finish)
            busy = self.busy_nodes.get(st.node)
            if busy:
                busy.discard(uid)

    def gpu_pods_on(self, node):
        with self.lock:
            return len(self.busy_nodes.get(node) or ())

    def on_event(self, typ, pod):
        meta = pod.get("metadata") or {}
        spec = pod.get("spec") or {}
        node = spec.get("nodeName")
        if not self.mine(node):
            return
        uid = meta.get("uid")
        phase = (pod.get("status") or {}).get("phase") or "Pending"
        with self.lock:
            if typ == "DELETED":
                self._forget(uid)
                return
            st = self.pods.get(uid)
            if st is None:
                st = self.pods[uid] = PodState(meta.get("namespace"), meta.get("name"), node)
            if phase in ("Succeeded", "Failed"):
                st.done = True
            busy = self.busy_nodes.setdefault(node, set())
            if not st.done and gpu_request(pod):
                busy.add(uid)
            else:
                busy.discard(uid)
            if meta.get("deletionTimestamp"):
                if st.deleting:
                    return
                st.deleting = True
                self.timers.cancel(st.finish)
                if st.done or phase != "Running":
                    grace = 0  # nothing runs: the kubelet removes it at once
                else:
                    grace = meta.get("deletionGracePeriodSeconds")
                    if grace is None:
                        grace = spec.get("terminationGracePeriodSeconds", 30)
                    grace = max(0, min(float(grace), self.args.max_grace))
                ckpt = (meta.get("annotations") or {}).get(ANN_CHECKPOINT_DIR) if phase == "Running" and not st.done else None
                self.timers.at(time.time() + grace, lambda: self.terminate(uid, st, ckpt, grace))
                return
            if st.done or st.deleting:
                return
            if phase == "Pending" and not st.started:
                st.started = True
                self.pool.submit(self.start, uid, st, pod)
            elif phase == "Running" and not st.started:
                # running before we came (a restart of this process): finish on time
                st.started = True
                start = parse_rfc3339((pod.get("status") or {}).get("startTime")) or time.time()
                self._schedule_finish(uid, st, pod, start)

    def _schedule_finish(self, uid, st, pod, start):
        ann = (pod.get("metadata") or {}).get("annotations") or {}
        if ANN_RUN_SECONDS not in ann:
            return
        try:
            secs = float(ann[ANN_RUN_SECONDS])
            code = int(ann.get(ANN_EXIT_CODE, "0"))
        except ValueError:
            log("pod %s/%s: bad %s or %s annotation" % (st.ns, st.name, ANN_RUN_SECONDS, ANN_EXIT_CODE), error=True)
            return
        containers = [c.get("name") for c in (pod.get("spec") or {}).get("containers") or []]
        images = [c.get("image") for c in (pod.get("spec") or {}).get("containers") or []]
        started_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(start))
        st.finish = self.timers.at(start + secs, lambda: self.finish(uid, st, code, containers, images, started_at))

    def _status_path(self, st):
        return "/api/v1/namespaces/%s/pods/%s/status" % (st.ns, st.name)

    def start(self, uid, st, pod):
        now = now_rfc3339()
        cs = []
        for c in (pod.get("spec") or {}).get("containers") or []:
            cs.append(
                {
                    "name": c.get("name"),
                    "image": c.get("image") or "",
                    "imageID": "",
                    "containerID": "fake://%s/%s" % (uid, c.get("name")),
                    "ready": True,
                    "started": True,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": now}},
                }
            )
        body = {
            "metadata": {"uid": uid},
            "status": {
                "phase": "Running",
                "startTime": now,
                "hostIP": "127.0.0.1",
                "conditions": [
                    {"type": t, "status": "True", "lastTransitionTime": now}
                    for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
                ],
                "containerStatuses": cs,
            },
        }
        try:
            code, obj = self.api.request("PATCH", self._status_path(st), body, "application/merge-patch+json")
        except ApiError as e:
            log("pod %s/%s: %s" % (st.ns, st.name, e), error=True)
            return
        if code == 200:
            log("pod %s/%s on %s: Running" % (st.ns, st.name, st.node))
            with self.lock:
                if st.deleting or uid not in self.pods:
                    return
                self._schedule_finish(uid, st, pod, time.time())
        elif code not in (404, 409):
            log("pod %s/%s: status Running: HTTP %d %s" % (st.ns, st.name, code, message(obj)), error=True)

    def finish(self, uid, st, exit_code, containers, images, started_at):
        with self.lock:
            if st.deleting or uid not in self.pods:
                return
        now = now_rfc3339()
        phase = "Succeeded" if exit_code == 0 else "Failed"
        reason = "Completed" if exit_code == 0 else "Error"
        cs = [
            {
                "name": n,
                "image": img or "",
                "imageID": "",
                "containerID": "fake://%s/%s" % (uid, n),
                "ready": False,
                "started": False,
                "restartCount": 0,
                "state": {"terminated": {"exitCode": exit_code, "reason": reason, "startedAt": started_at, "finishedAt": now}},
            }
            for n, img in zip(containers, images)
        ]
        body = {
            "metadata": {"uid": uid},
            "status": {
                "phase": phase,
                "conditions": [
                    {"type": "Initialized", "status": "True", "lastTransitionTime": now},
                    {"type": "Ready", "status": "False", "reason": "PodCompleted", "lastTransitionTime": now},
                    {"type": "ContainersReady", "status": "False", "reason": "PodCompleted", "lastTransitionTime": now},
                    {"type": "PodScheduled", "status": "True", "lastTransitionTime": now},
                ],
                "containerStatuses": cs,
            },
        }
        try:
            code, obj = self.api.request("PATCH", self._status_path(st), body, "application/merge-patch+json")
        except ApiError as e:
            log("pod %s/%s: %s" % (st.ns, st.name, e), error=True)
            return
        if code == 200:
            log("pod %s/%s on %s: %s (exit code %d)" % (st.ns, st.name, st.node, phase, exit_code))
        elif code not in (404, 409):
            log("pod %s/%s: status %s: HTTP %d %s" % (st.ns, st.name, phase, code, message(obj)), error=True)

    def terminate(self, uid, st, ckpt_dir, grace):
        if ckpt_dir:
            try:
                os.makedirs(ckpt_dir, exist_ok=True)
                with open(os.path.join(ckpt_dir, "checkpoints"), "a") as f:
                    f.write("%s %d\n" % (st.name, int(time.time())))
                log("pod %s/%s: checkpoint marker in %s" % (st.ns, st.name, ckpt_dir))
            except OSError as e:
                log("pod %s/%s: checkpoint marker in %s: %s" % (st.ns, st.name, ckpt_dir, e), error=True)
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0, "preconditions": {"uid": uid}}
        try:
            code, obj = self.api.request("DELETE", "/api/v1/namespaces/%s/pods/%s" % (st.ns, st.name), body)
        except ApiError as e:
            log("pod %s/%s: %s" % (st.ns, st.name, e), error=True)
            return
        if code in (200, 202):
            log("pod %s/%s on %s: terminated after %gs, deleted" % (st.ns, st.name, st.node, grace))
        elif code in (404, 409):  # gone already, or a new pod of the same name
            log("pod %s/%s: already gone" % (st.ns, st.name))
        else:
            log("pod %s/%s: delete: HTTP %d %s" % (st.ns, st.name, code, message(obj)), error=True)


# ---------------------------------------------------------------------------
# run: the fake MIG manager


def parse_mig_config(text, name):
    """The device list of mig-configs[name] in a mig-parted config; None: no such entry."""
    doc = yaml_load(text)
    if not isinstance(doc, dict) or not isinstance(doc.get("mig-configs"), dict):
        raise YamlError("no mig-configs mapping")
    entry = doc["mig-configs"].get(name)
    if entry is None:
        return None
    if not isinstance(entry, list):
        raise YamlError("mig-configs.%s is not a list" % name)
    return entry


def apply_layout(entry, gpus, mig_capable):
    """(per-GPU list: None = MIG disabled, else {profile: count}) from a mig-parted
    entry; raises ValueError with what is wrong."""
    layout = [None] * gpus
    for spec in entry:
        if not isinstance(spec, dict):
            raise ValueError("an entry that is not a mapping: %r" % (spec,))
        devs = spec.get("devices", "all")
        if devs == "all":
            devs = list(range(gpus))
        elif isinstance(devs, int):
            devs = [devs]
        if not isinstance(devs, list) or not all(isinstance(d, int) for d in devs):
            raise ValueError("devices must be 'all' or a list of indices, not %r" % (devs,))
        enabled = bool(spec.get("mig-enabled", False))
        profiles = spec.get("mig-devices") or {}
        if not isinstance(profiles, dict):
            raise ValueError("mig-devices must be a mapping")
        if enabled and not mig_capable:
            raise ValueError("MIG enabled on a node that is not MIG-capable")
        slices = 0
        for p, n in profiles.items():
            m = MIG_PROFILE_RE.match(str(p))
            if not m or not isinstance(n, int) or n < 0:
                raise ValueError("bad MIG device %r: %r" % (p, n))
            slices += int(m.group(1)) * n
        if slices > 7:
            raise ValueError("%d compute slices on one GPU (at most 7): %r" % (slices, profiles))
        for d in devs:
            if d < 0 or d >= gpus:
                raise ValueError("device %d: the node has %d GPUs" % (d, gpus))
            layout[d] = {str(p): n for p, n in profiles.items() if n} if enabled else None
    return layout


class MigManager:
    def __init__(self, api, args, kubelet):
        self.api, self.args, self.kubelet = api, args, kubelet
        self.lock = threading.Lock()
        self.applied = {}  # node -> the config last applied (or failed)
        self.wanted = {}  # node -> the config its label names now
        self.busy = set()
        self.ns, _, self.cm = args.mig_configmap.partition("/")

    def mine(self, name):
        return any(name.startswith(p + "-") for p in self.args.prefix)

    def on_list(self, items):
        for n in items:
            self.on_event("ADDED", n)

    def on_event(self, typ, node):
        meta = node.get("metadata") or {}
        name = meta.get("name") or ""
        if not self.mine(name):
            return
        with self.lock:
            if typ == "DELETED":
                self.applied.pop(name, None)
                self.wanted.pop(name, None)
                return
            labels = meta.get("labels") or {}
            cfg = labels.get(L_MIG_CONFIG)
            if cfg is None:
                return
            if name not in self.applied and name not in self.busy:
                # first sight: what we applied before (the annotation), else a finished
                # change stands; a pending one is taken up again
                done = (meta.get("annotations") or {}).get(ANN_MIG_APPLIED)
                if done is None and labels.get(L_MIG_STATE) in ("success", "failed"):
                    done = cfg
                if done is not None:
                    self.applied[name] = done
            self.wanted[name] = cfg
            if cfg == self.applied.get(name) or name in self.busy:
                return
            self.busy.add(name)
        threading.Thread(target=self._work, args=(name,), daemon=True, name="mig-" + name).start()

    def _work(self, name):
        while not STOP.is_set():
            with self.lock:
                cfg = self.wanted.get(name)
                if cfg is None or cfg == self.applied.get(name):
                    self.busy.discard(name)
                    return
            try:
                self.apply(name, cfg)
            except ApiError as e:
                log("mig %s: %s" % (name, e), error=True)
                time.sleep(1)
                continue
            with self.lock:
                self.applied[name] = cfg
        with self.lock:
            self.busy.discard(name)

    def _patch_labels(self, name, labels, applied=None):
        meta = {"labels": labels}
        if applied is not None:
            meta["annotations"] = {ANN_MIG_APPLIED: applied}
        code, obj = self.api.request("PATCH", "/api/v1/nodes/" + name, {"metadata": meta}, "application/merge-patch+json")
        if code != 200:
            raise ApiError("labels of node %s: HTTP %d %s" % (name, code, message(obj)))
        return obj

    def _fail(self, name, cfg, why):
        log("mig %s: config %s failed: %s" % (name, cfg, why))
        self._patch_labels(name, {L_MIG_STATE: "failed"}, applied=cfg)

    def apply(self, name, cfg):
        log("mig %s: applying config %s" % (name, cfg))
        self._patch_labels(name, {L_MIG_STATE: "pending"})
        if STOP.wait(self.args.mig_delay):
            return
        code, node = self.api.request("GET", "/api/v1/nodes/" + name)
        if code != 200:
            raise ApiError("get node %s: HTTP %d %s" % (name, code, message(node)))
        labels = node["metadata"].get("labels") or {}
        if labels.get(L_MIG_CONFIG) != cfg:
            return  # changed again meanwhile: the worker takes the newer one
        if cfg in self.args.fail_mig:
            return self._fail(name, cfg, "--fail-mig")
        if any(cfg.startswith(p) for p in self.args.fail_mig_prefix):
            return self._fail(name, cfg, "--fail-mig-prefix")
        if self.args.mig_require_idle:
            n = self.kubelet.gpu_pods_on(name)
            if n:
                return self._fail(name, cfg, "%d GPU pod(s) still on the node" % n)
        try:
            gpus = int(labels.get(L_GPU_COUNT, "0"))
        except ValueError:
            return self._fail(name, cfg, "bad %s label" % L_GPU_COUNT)
        mig_capable = labels.get(L_MIG_CAPABLE) == "true"
        entry = None
        code, cm = self.api.request("GET", "/api/v1/namespaces/%s/configmaps/%s" % (self.ns, self.cm))
        if code == 200:
            data = cm.get("data") or {}
            text = data.get(self.args.mig_config_key)
            if text is None and len(data) == 1:
                text = next(iter(data.values()))
            if text is not None:
                try:
                    entry = parse_mig_config(text, cfg)
                except (YamlError, ValueError) as e:
                    return self._fail(name, cfg, "configmap %s/%s: %s" % (self.ns, self.cm, e))
        elif code != 404:
            raise ApiError("configmap %s/%s: HTTP %d %s" % (self.ns, self.cm, code, message(cm)))
        if entry is None and cfg == "all-disabled":
            entry = [{"devices": "all", "mig-enabled": False}]
        if entry is None:
            return self._fail(name, cfg, "no such config in configmap %s/%s" % (self.ns, self.cm))
        try:
            layout = apply_layout(entry, gpus, mig_capable)
        except ValueError as e:
            return self._fail(name, cfg, str(e))

        whole = sum(1 for g in layout if g is None)
        counts = {}
        for g in layout:
            for p, n in (g or {}).items():
                counts[p] = counts.get(p, 0) + n
        res = {"nvidia.com/gpu": str(whole)}
        for part in ("capacity", "allocatable"):
            for k in (node.get("status") or {}).get(part) or {}:
                if k.startswith("nvidia.com/mig-"):
                    res[k] = None
        for p, n in counts.items():
            res["nvidia.com/mig-" + p] = str(n)
        code, obj = self.api.request(
            "PATCH", "/api/v1/nodes/%s/status" % name, {"status": {"capacity": res, "allocatable": res}}, "application/merge-patch+json"
        )
        if code != 200:
            raise ApiError("status of node %s: HTTP %d %s" % (name, code, message(obj)))
        new_labels = {k: None for k in labels if re.match(r"^nvidia\.com/mig-.*\.count$", k)}
        for p, n in counts.items():
            new_labels["nvidia.com/mig-%s.count" % p] = str(n)
        new_labels[L_MIG_STATE] = "success"
        self._patch_labels(name, new_labels, applied=cfg)
        desc = ", ".join("%s x%d" % (p, n) for p, n in sorted(counts.items())) or "none"
        log("mig %s: config %s applied: %d whole GPUs, MIG %s" % (name, cfg, whole, desc))


def cmd_run(api, args):
    pool = concurrent.futures.ThreadPoolExecutor(args.threads, thread_name_prefix="act")
    timers = Timers(pool)
    kubelet = Kubelet(api, args, pool, timers)
    mig = MigManager(api, args, kubelet)
    pod_q = {"fieldSelector": "spec.nodeName!="}
    threads = [
        threading.Thread(target=list_watch, args=(api, "/api/v1/pods", pod_q, kubelet.on_list, kubelet.on_event, "pods"), daemon=True),
        threading.Thread(target=list_watch, args=(api, "/api/v1/nodes", {}, mig.on_list, mig.on_event, "nodes"), daemon=True),
    ]
    for t in threads:
        t.start()
    log("running for nodes %s" % ", ".join(p + "-*" for p in args.prefix))
    deadline = time.time() + args.duration if args.duration else None
    while not STOP.is_set():
        STOP.wait(0.5 if deadline is None else max(0.0, min(0.5, deadline - time.time())))
        if deadline is not None and time.time() >= deadline:
            STOP.set()
    api.close_watches()
    pool.shutdown(wait=False, cancel_futures=True)
    log("stopped")
    sys.stderr.flush()
    os._exit(0)


def main(argv=None):
    ap = argparse.ArgumentParser(description="Fake GPU nodes for gpuorch's Kubernetes tests (see the module's header).")
    ap.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"), help="kubeconfig (server, token) [$KUBECONFIG]")
    ap.add_argument("-q", "--quiet", action="store_true", help="log errors only")
    ap.add_argument("--threads", type=int, default=16, help="concurrent requests (default 16)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    common = argparse.ArgumentParser(add_help=False)  # the same after the subcommand
    common.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS, help="log errors only")
    common.add_argument("--threads", type=int, default=argparse.SUPPRESS, help="concurrent requests (default 16)")
    common.add_argument("--kubeconfig", default=argparse.SUPPRESS, help="kubeconfig (server, token)")

    c = sub.add_parser("create", parents=[common], help="create fake GPU nodes")
    c.add_argument("--nodes", type=int, required=True)
    c.add_argument("--prefix", required=True, help="nodes are PREFIX-0, PREFIX-1, ...")
    c.add_argument("--start", type=int, default=0, help="first index (default 0)")
    c.add_argument("--gpus", type=int, default=8)
    c.add_argument("--product", default="NVIDIA-H100-80GB-HBM3")
    c.add_argument("--memory-mib", type=int, default=81559, help="per GPU (nvidia.com/gpu.memory)")
    c.add_argument("--family", help="nvidia.com/gpu.family (default: from the product)")
    c.add_argument("--mig-capable", action="store_true")
    c.add_argument("--mig-strategy", choices=("none", "single", "mixed"))
    c.add_argument("--cpu", type=float, help="cores (default 8 per GPU, at least 8)")
    c.add_argument("--mem-gib", type=float, help="host memory (default 64 GiB per GPU, at least 64)")
    c.add_argument("--pods", type=int, default=110)
    c.add_argument("--label", action="append", default=[], help="KEY=VALUE, VALUE may hold {expr of i}")
    c.add_argument("--leaf-label", help="the leaf label's value pattern, e.g. 'leaf-{i//4}'")
    c.add_argument("--leaf-key", default="gpuorch.io/leaf", help="the leaf label's key (default gpuorch.io/leaf)")
    c.add_argument("--taint", action="append", default=[], help="KEY[=VALUE]:EFFECT")
    c.add_argument("--resource", action="append", default=[], help="NAME=QTY, an extra allocatable resource")
    c.add_argument("--mps-replicas", type=int, default=0, help="MPS sharing: replicas per GPU")
    c.add_argument("--mps-resource", default="nvidia.com/gpu.shared", help="the replicas' resource name")

    r = sub.add_parser("run", parents=[common], help="the fake kubelet and MIG manager")
    r.add_argument("--prefix", action="append", required=True, help="act for nodes PREFIX-* (repeatable)")
    r.add_argument("--max-grace", type=float, default=3.0, help="termination grace cap, s (default 3)")
    r.add_argument("--mig-delay", type=float, default=1.0, help="seconds a MIG change takes (default 1)")
    r.add_argument("--fail-mig", action="append", default=[], help="a config name whose change fails (repeatable)")
    r.add_argument("--fail-mig-prefix", action="append", default=[], help="fail every config whose name starts so (repeatable)")
    r.add_argument("--mig-require-idle", action="store_true", help="fail a MIG change while GPU pods are on the node")
    r.add_argument("--mig-configmap", default="gpu-operator/default-mig-parted-config", help="NS/NAME of the mig-parted config")
    r.add_argument("--mig-config-key", default="config.yaml", help="its key (default config.yaml)")
    r.add_argument("--duration", type=float, default=0, help="stop after this many seconds (default: on SIGTERM)")

    args = ap.parse_args(argv)
    global QUIET
    QUIET = args.quiet
    if not args.kubeconfig:
        ap.error("--kubeconfig (or $KUBECONFIG) is required")
    api = Api(load_kubeconfig(args.kubeconfig))

    def on_signal(signum, frame):
        STOP.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    if args.cmd == "create":
        return cmd_create(api, args)
    return cmd_run(api, args)


if __name__ == "__main__":
    sys.exit(main())
