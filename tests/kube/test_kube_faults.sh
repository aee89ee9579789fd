#!/bin/sh
# gpuorch on Kubernetes when something goes wrong, on a real kube-apiserver, etcd and
# kube-controller-manager (tests/kube/lib.sh), fake_node.py playing the kubelets and
# the MIG manager of two 8-GPU H100 nodes and a 4-GPU A100:
#   1. RBAC without `create pods/binding`: gpuorch refuses to start, naming the verb;
#   2. pods asking for what no node has, from a namespace of no team, and a PodGroup
#      whose minMember can never fit: each pod says why, no member of the gang is bound;
#   3. the API server killed under a running gpuorch: its watches fail and resume, and
#      a pod created after the restart is bound;
#   4. gpuorch restarted (SIGTERM) on its store: its running jobs stay running with
#      their pods, and a pod created while it was down is bound;
#   5. a MIG change the MIG manager fails: the node is closed, the job requeued and its
#      pod says why, and whole-GPU work still runs;
#   6. two replicas with leader election: one leads, the other waits; the leader killed
#      with SIGKILL, the other takes over within the lease, leaves the pods bound where
#      they are and binds new ones, on GPUs the first one's pods do not hold.
# The API server's audit log records every binding request: no pod is bound twice, and
# none is refused.
set -eu
GPUORCH=$(realpath "$1")
. "$(dirname "$0")/lib.sh"

# only the bindings, as metadata (which pod, which user, the answer's code)
cat >"$T/audit-policy.yaml" <<'EOF'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    verbs: [create]
    resources: [{group: "", resources: [pods/binding]}]
  - level: None
EOF
KUBE_APISERVER_ARGS="--audit-policy-file=$T/audit-policy.yaml --audit-log-path=$T/audit.jsonl"
kube_up "$T/kube"
t_start=$(date +%s)

kube_deploy
for ns in research nowhere; do kctl create namespace $ns >/dev/null; done
cat >"$T/teams.yaml" <<'EOF'
name: faults
pools: []
teams:
  - {name: research, guaranteed_gpus: 8, burst_gpus: 20}
EOF
fake_node create --nodes 2 --prefix h100 --gpus 8 --product NVIDIA-H100-80GB-HBM3 \
    --memory-mib 81559 >/dev/null 2>&1 || fail "fake_node create h100"
fake_node create --nodes 1 --prefix a100 --gpus 4 --product NVIDIA-A100-SXM4-80GB \
    --memory-mib 81920 --mig-capable --mig-strategy mixed >/dev/null 2>&1 ||
    fail "fake_node create a100"
fake_node_start "$T/fake_h100.log" --prefix h100 --max-grace 1
# the A100's MIG manager fails every layout gpuorch asks for
fake_node_start "$T/fake_a100.log" --prefix a100 --max-grace 1 \
    --mig-configmap gpu-operator/gpuorch-mig-parted-config --fail-mig-prefix gpuorch-

phase() { kctl get pod -n "$1" "$2" -o jsonpath='{.status.phase}' 2>/dev/null; }
node_of() { kctl get pod -n "$1" "$2" -o jsonpath='{.spec.nodeName}' 2>/dev/null; }
running() { [ "$(phase "$1" "$2")" = Running ]; }
# the message of the pod's PodScheduled condition
why() {
    kctl get pod -n "$1" "$2" -o jsonpath='{.status.conditions[?(@.type=="PodScheduled")].message}' 2>/dev/null
}
says() { why "$1" "$2" | grep -q -- "$3"; }
# gpu_pod NS NAME GPUS [RESOURCE]: a bare pod for gpuorch asking GPUS of RESOURCE
gpu_pod() {
    kctl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $2, namespace: $1}
spec:
  schedulerName: gpuorch
  terminationGracePeriodSeconds: 1
  containers: [{name: c, image: c:1, resources: {limits: {${4:-nvidia.com/gpu}: $3}}}]
EOF
}

# start_gpuorch NAME ARGS...: gpuorch server --kubernetes with its store in $T/NAME,
# stdout in $T/NAME.out, the log in $T/NAME.log; its PID in GPID, its URL in GURL
start_gpuorch() {
    sg_name=$1
    shift
    mkdir -p "$T/$sg_name"
    sg_port=$(kube_free_port)
    "$GPUORCH" server --kubernetes --kubeconfig "$KUBE_GPUORCH" --config "$T/teams.yaml" \
        --db "sqlite:$T/$sg_name/gpuorch.db" --listen "127.0.0.1:$sg_port" --min-runtime-s 0 \
        "$@" >>"$T/$sg_name.out" 2>>"$T/$sg_name.log" &
    GPID=$!
    kube_own "$GPID"
    GURL=http://127.0.0.1:$sg_port
}
# serving NAME: the server of $T/NAME answers and schedules; the CLI is pointed at it
serving() {
    kube_wait 60 "gpuorch $1 serves on $GURL" curl -fsS "$GURL/healthz"
    kube_wait 30 "gpuorch $1 schedules the pods" grep -q "event=engine_started" "$T/$1.log"
    GPUORCH_SERVER=$GURL
    GPUORCH_TOKEN=$(cat "$T/$1/admin.token")
    export GPUORCH_SERVER GPUORCH_TOKEN
}
# stop_gpuorch NAME PID: SIGTERM; it stops cleanly, sanitizers silent
stop_gpuorch() {
    kill -TERM "$2"
    sp_rc=0
    wait "$2" || sp_rc=$?
    [ "$sp_rc" -eq 0 ] || kube_log_fail "$T/$1.log" "gpuorch $1 exited $sp_rc on SIGTERM"
    grep -q "event=engine_stopped" "$T/$1.log" || kube_log_fail "$T/$1.log" "gpuorch $1: no engine_stopped"
}
# the server's job of that name, not over, as a Python expression over it in `j`
job_holds() {
    "$GPUORCH" queue --all -o json >"$T/queue.json" 2>/dev/null &&
        python3 - "$T/queue.json" "$1" "$2" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
jobs = [j for j in (d if isinstance(d, list) else d.get("jobs", [])) if j["name"] == sys.argv[2]]
live = [j for j in jobs if j["state"] not in ("succeeded", "failed", "cancelled")]
sys.exit(0 if len(live) == 1 and eval(sys.argv[3], {"j": live[0]}) else 1)
EOF
}
# a job runs where its pod is: one worker, on the pod's node
job_on_pod_node() {
    job_holds "research/pod/$1" \
        "j['state'] == 'running' and [w['node'] for w in j.get('placement', [])] == ['$(node_of research "$1")']"
}

# --- 1. RBAC lacking a verb: the ClusterRole of rbac.yaml without pods/binding ---
kctl get clusterrole gpuorch -o json | python3 -c '
import json, sys
r = json.load(sys.stdin)
r["metadata"] = {"name": "gpuorch-nobind"}
r["rules"] = [x for x in r["rules"] if x["resources"] != ["pods/binding"]]
assert len(r["rules"]) == 8, r["rules"]
b = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
     "metadata": {"name": "gpuorch-nobind"},
     "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "gpuorch-nobind"},
     "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "gpuorch-nobind"}]}
print(json.dumps({"apiVersion": "v1", "kind": "List", "items": [r, b]}))' >"$T/nobind.json" ||
    fail "the ClusterRole without pods/binding"
kctl apply -f "$T/nobind.json" >/dev/null
# RBAC takes effect when the API server's informer has the binding
kube_wait 10 "the RBAC of gpuorch-nobind applies" sh -c \
    "kubectl --kubeconfig '$KUBE_NOBIND' auth can-i list pods 2>/dev/null | grep -q yes"
mkdir -p "$T/nobind"
t0=$(date +%s)
rc=0
timeout 30 "$GPUORCH" server --kubernetes --kubeconfig "$KUBE_NOBIND" --config "$T/teams.yaml" \
    --db "sqlite:$T/nobind/gpuorch.db" --listen "127.0.0.1:$(kube_free_port)" \
    >"$T/nobind.out" 2>"$T/nobind.log" || rc=$?
dt=$(($(date +%s) - t0))
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || kube_log_fail "$T/nobind.log" "gpuorch without pods/binding exited $rc"
[ "$dt" -le 10 ] || fail "gpuorch without pods/binding took $dt s to exit"
said=$(grep -o 'RBAC does not let gpuorch [^(]*(' "$T/nobind.log" || true)
[ "$said" = "RBAC does not let gpuorch create pods/binding (" ] ||
    kube_log_fail "$T/nobind.log" "the refusal does not name exactly the missing verb: '$said'"
grep -q 'AddressSanitizer\|LeakSanitizer\|runtime error' "$T/nobind.log" &&
    kube_log_fail "$T/nobind.log" "a sanitizer report from the refused start"

# --- gpuorch, one replica ---
start_gpuorch a
A=$GPID
serving a

# --- 2. what can never run says so; the gang that cannot fit is not bound in part ---
gpu_pod research too-big 16
gpu_pod research no-such-mig 1 nvidia.com/mig-1g.5gb
gpu_pod nowhere no-team 1
kctl apply -f - >/dev/null <<'EOF'
apiVersion: scheduling.x-k8s.io/v1alpha1
kind: PodGroup
metadata: {name: huge, namespace: research}
spec: {minMember: 3}
EOF
for i in 0 1 2; do
    kctl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: huge-$i, namespace: research, labels: {scheduling.x-k8s.io/pod-group: huge}}
spec:
  schedulerName: gpuorch
  containers: [{name: c, image: c:1, resources: {limits: {nvidia.com/gpu: 8}}}]
EOF
done
kube_wait 30 "the 16-GPU pod says no node has 16 GPUs" says research too-big "16 GPUs"
kube_wait 30 "the pod of a MIG profile no GPU has names it" says research no-such-mig "1g.5gb"
kube_wait 30 "the pod of a namespace of no team says so" says nowhere no-team "namespace nowhere is no team's"
for i in 0 1 2; do
    kube_wait 30 "gang pod huge-$i says it can never fit" \
        says research huge-$i "its 3 workers could never all run at once"
    st=$(kctl get pod -n research huge-$i -o jsonpath='{.status.conditions[?(@.type=="PodScheduled")].status}')
    [ "$st" = False ] || fail "gang pod huge-$i: PodScheduled is '$st', not False"
done
# a refusal is offered again every second; the log says it once
n=$(grep -c 'event=pod_group_refused group=research/pod/too-big ' "$T/a.log" || true)
[ "$n" -eq 1 ] || kube_log_fail "$T/a.log" "the too-big pod's refusal is logged $n times, not once"

# --- 3. the API server crashes under gpuorch ---
gpu_pod research before 1
kube_wait 30 "pod before runs" running research before
kube_restart_apiserver
gpu_pod research after 1
kube_wait 60 "pod after (created after the API server restarted) runs" running research after
grep -q "event=watch_failed what=pods" "$T/a.log" || kube_log_fail "$T/a.log" "no watch_failed for the pods' watch"
grep -q "event=watch_resumed what=pods" "$T/a.log" || kube_log_fail "$T/a.log" "no watch_resumed for the pods' watch"
kube_wait 20 "gpuorch runs pod before where it is" job_on_pod_node before
kube_wait 20 "gpuorch runs pod after where it is" job_on_pod_node after
# the gang is still not bound in part: nothing of it has a node
for i in 0 1 2; do
    [ -z "$(node_of research huge-$i)" ] || fail "gang pod huge-$i was bound to $(node_of research huge-$i)"
done
kctl delete pod -n research too-big no-such-mig huge-0 huge-1 huge-2 --wait=false >/dev/null
kctl delete pod -n nowhere no-team --wait=false >/dev/null

# --- 4. gpuorch restarts on its store ---
stop_gpuorch a "$A"
gpu_pod research while-down 1
start_gpuorch a
A=$GPID
serving a
kube_wait 30 "the pod created while gpuorch was down runs" running research while-down
for p in before after; do running research $p || fail "pod $p stopped while gpuorch restarted"; done
kube_wait 20 "after the restart, pod before's job runs where it did" job_on_pod_node before
kube_wait 20 "after the restart, pod after's job runs where it did" job_on_pod_node after
job_on_pod_node while-down || fail "pod while-down's job is not running on its node"

# --- 5. a MIG change that fails ---
gpu_pod research mig 1 nvidia.com/mig-3g.40gb
kube_wait 30 "gpuorch sees the A100's MIG change fail" grep -q "event=mig_failed node=a100-0" "$T/a.log"
kube_wait 30 "the MIG pod says the A100 failed its MIG change" says research mig "failed its last MIG layout change"
kube_wait 10 "the MIG pod's job is requeued, not lost" job_holds research/pod/mig "j['state'] == 'pending'"
[ -z "$(node_of research mig)" ] || fail "the MIG pod was bound to $(node_of research mig)"
"$GPUORCH" nodes -o json >"$T/nodes.json" || fail "gpuorch nodes"
json_ok "$T/nodes.json" '{n["name"]: n["state"] for n in d["nodes"]} == {"a100-0": "down", "h100-0": "ready", "h100-1": "ready"}'
gpu_pod research whole 4
kube_wait 30 "a whole-GPU pod still runs" running research whole
case $(node_of research whole) in h100-*) ;; *) fail "pod whole is on $(node_of research whole)" ;; esac
stop_gpuorch a "$A"

# --- 6. leader election: two replicas, the leader killed ---
kctl delete pod -n research --all --wait=false >/dev/null
kube_wait 30 "the earlier pods are gone" sh -c \
    "[ -z \"\$(kubectl --kubeconfig '$KUBE_ADMIN' get pods -n research -o name 2>/dev/null)\" ]"
start_gpuorch l1 --leader-elect --lease default/gpuorch-faults
L1=$GPID
serving l1
grep -q "event=leading lease=default/gpuorch-faults" "$T/l1.log" || fail "the first replica does not say it leads"
start_gpuorch l2 --leader-elect --lease default/gpuorch-faults
L2=$GPID
L2_URL=$GURL
kube_wait 20 "the second replica waits for the lease" grep -q "event=lease_waiting" "$T/l2.log"
gpu_pod research led-1 8
kube_wait 30 "the leader binds led-1" running research led-1
n1=$(node_of research led-1)
grep -q "event=engine_started" "$T/l2.log" && fail "the waiting replica started its engine"
kill -KILL "$L1"
wait "$L1" 2>/dev/null || true
t_kill=$(date +%s)
kube_wait 30 "the second replica leads" grep -q "event=leading" "$T/l2.log"
took=$(($(date +%s) - t_kill))
[ "$took" -le 22 ] || fail "the second replica took $took s to lead (the lease is 15 s)"
echo "the second replica leads $took s after the leader was killed" >&2
GURL=$L2_URL
serving l2
gpu_pod research led-2 8
kube_wait 30 "the new leader binds led-2" running research led-2
n2=$(node_of research led-2)
[ "$n2" != "$n1" ] || fail "the new leader bound led-2 onto $n2, whose GPUs led-1 holds"
[ "$(node_of research led-1)" = "$n1" ] && running research led-1 || fail "led-1 moved or stopped"
kube_wait 20 "the new leader runs led-2 where it is" job_on_pod_node led-2
# what led-1 held is given back when it goes
kctl delete pod -n research led-1 --wait=false >/dev/null
gpu_pod research led-3 8
kube_wait 30 "led-3 runs where led-1 was" running research led-3
[ "$(node_of research led-3)" = "$n1" ] || fail "led-3 is on $(node_of research led-3), not $n1"
stop_gpuorch l2 "$L2"

# --- every binding the API server saw: one per pod, and each taken ---
python3 - "$T/audit.jsonl" <<'EOF' || fail "the bindings are not one per pod"
import json, sys, collections
binds = collections.defaultdict(list)
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e.get("stage") != "ResponseComplete":
        continue
    o = e["objectRef"]
    binds["%s/%s" % (o["namespace"], o["name"])].append(e["responseStatus"]["code"])
want = {"research/" + p for p in ("before", "after", "while-down", "whole", "led-1", "led-2", "led-3")}
bad = {p: c for p, c in binds.items() if c != [201]}
if bad or set(binds) != want:
    sys.exit("bindings %s, expected one (201) for each of %s" % (dict(binds), sorted(want)))
EOF
for f in a l1 l2; do
    if grep -q "event=bind_failed" "$T/$f.log"; then kube_log_fail "$T/$f.log" "gpuorch $f failed a bind"; fi
    if grep -q 'AddressSanitizer\|LeakSanitizer\|runtime error' "$T/$f.log"; then
        kube_log_fail "$T/$f.log" "a sanitizer report from gpuorch $f"
    fi
done
echo "kube_faults: the cases ran in $(($(date +%s) - t_start)) s after kube_up" >&2
echo "ok"
