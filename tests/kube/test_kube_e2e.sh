#!/bin/sh
# gpuorch as the scheduler of GPU pods, end to end as a platform team runs it, on a
# real kube-apiserver, etcd and kube-controller-manager (only the node side is a test
# double: tests/kube/fake_node.py plays the kubelets and the MIG manager):
# deploy/kubernetes/ applied with kubectl, GPU nodes labelled as the GPU Operator does,
# a two-pod PodGroup gang of 8 GPUs each, inference pods by MIG profile and by GPU
# memory (the node re-carved through nvidia.com/mig.config), a production pod that
# preempts the gang, the gang's Job recreating its pods and gpuorch resuming them from
# their checkpoint, usage per team, and pods that can never run carrying the reason.
set -eu
GPUORCH=$(realpath "$1")
. "$(dirname "$0")/lib.sh"

kube_up "$T/kube"

# --- the platform team's steps ---
kube_deploy
for ns in research search; do kctl create namespace $ns >/dev/null; done
cat >"$T/teams.yaml" <<'EOF'
name: e2e
pools: []
teams:
  - {name: research, guaranteed_gpus: 8, burst_gpus: 24, projects: [llm]}
  - {name: search, guaranteed_gpus: 8, burst_gpus: 16, projects: [ranking]}
EOF

# two H100 NVSwitch nodes on one leaf, and an A100 the MIG manager may carve
fake_node create --nodes 2 --prefix h100 --gpus 8 --product NVIDIA-H100-80GB-HBM3 \
    --memory-mib 81559 --leaf-label leaf-0 --label gpuorch.io/tier=reserved \
    --label gpuorch.io/price-per-gpu-hour=2.50 >/dev/null 2>&1 || fail "fake_node create h100"
fake_node create --nodes 1 --prefix a100 --gpus 8 --product NVIDIA-A100-SXM4-80GB \
    --memory-mib 81920 --mig-capable --mig-strategy mixed --leaf-label leaf-1 >/dev/null 2>&1 ||
    fail "fake_node create a100"
mkdir -p "$T/ckpt"
fake_node_start "$T/fake_node.log" --prefix h100 --prefix a100 \
    --mig-configmap gpu-operator/gpuorch-mig-parted-config --max-grace 2

PORT=$(kube_free_port)
mkdir -p "$T/var"
URL=http://127.0.0.1:$PORT
"$GPUORCH" server --kubernetes --kubeconfig "$KUBE_GPUORCH" --config "$T/teams.yaml" \
    --db "sqlite:$T/var/gpuorch.db" --listen "127.0.0.1:$PORT" --min-runtime-s 0 \
    --leader-elect --lease default/gpuorch-e2e >"$T/server.out" 2>"$T/server.log" &
SERVER_PID=$!
kube_wait 30 "gpuorch serves on $URL" curl -fsS "$URL/healthz"
export GPUORCH_SERVER="$URL" GPUORCH_TOKEN="$(cat "$T/var/admin.token")"
kube_wait 30 "the server says it schedules the pods" grep -q "scheduling the pods of" "$T/server.out"

phase() { kctl get pod -n "$1" "$2" -o jsonpath='{.status.phase}' 2>/dev/null; }
node_of() { kctl get pod -n "$1" "$2" -o jsonpath='{.spec.nodeName}' 2>/dev/null; }
running() { [ "$(phase "$1" "$2")" = Running ]; }
# the pods of a label selector that run, as "name node" lines
pods_of() {
    kctl get pods -n "$1" -l "$2" -o jsonpath='{range .items[*]}{.metadata.name} {.spec.nodeName} {.status.phase}{"\n"}{end}'
}

# --- another scheduler's pod holds two of the A100's GPUs: gpuorch counts them as used ---
cat >"$T/other.yaml" <<'EOF'
apiVersion: v1
kind: Pod
metadata: {name: other, namespace: search}
spec:
  containers: [{name: c, image: c:1, resources: {limits: {nvidia.com/gpu: 2}}}]
EOF
kctl apply -f "$T/other.yaml" >/dev/null
kube_bind "$KUBE_ADMIN_TOKEN" search other a100-0
[ "$KSTATUS" = 201 ] || fail "binding the other scheduler's pod: HTTP $KSTATUS"
kube_wait 20 "gpuorch counts the other scheduler's GPUs on a100-0" \
    grep -q "event=foreign_gpus pod=search/other node=a100-0 gpus=2" "$T/server.log"

# --- a gang: a PodGroup of two 8-GPU workers, run by a Job ---
cat >"$T/train.yaml" <<'EOF'
apiVersion: scheduling.x-k8s.io/v1alpha1
kind: PodGroup
metadata: {name: train, namespace: research}
spec: {minMember: 2}
---
apiVersion: batch/v1
kind: Job
metadata: {name: train, namespace: research}
spec:
  parallelism: 2
  completions: 2
  backoffLimit: 10
  template:
    metadata:
      labels: {scheduling.x-k8s.io/pod-group: train, app: train}
      annotations:
        gpuorch.io/preemptible: "true"
        gpuorch.io/checkpoint-interval: 30m
        gpuorch.io/project: llm
    spec:
      schedulerName: gpuorch
      priorityClassName: gpuorch-low
      restartPolicy: Never
      terminationGracePeriodSeconds: 2
      containers:
        - name: trainer
          image: trainer:1
          resources: {limits: {nvidia.com/gpu: 8}}
EOF
kctl apply -f "$T/train.yaml" >/dev/null
gang_runs() { [ "$(pods_of research app=train | grep -c ' Running$')" -eq 2 ]; }
kube_wait 60 "both workers of the gang run" gang_runs
pods_of research app=train >"$T/gang"
[ "$(awk '{print $2}' "$T/gang" | sort -u | wc -l)" -eq 2 ] || fail "the gang's workers share a node: $(cat "$T/gang")"

# --- inference by MIG profile and by GPU memory: the A100 is carved through its label ---
cat >"$T/infer.yaml" <<'EOF'
apiVersion: v1
kind: Pod
metadata: {name: infer-mig, namespace: search, annotations: {gpuorch.io/project: ranking}}
spec:
  schedulerName: gpuorch
  containers:
    - {name: server, image: server:1, resources: {limits: {nvidia.com/mig-3g.40gb: 1}}}
---
apiVersion: v1
kind: Pod
metadata:
  name: infer-mem
  namespace: search
  annotations: {gpuorch.io/gpu-memory: 9Gi, gpuorch.io/project: ranking}
spec:
  schedulerName: gpuorch
  containers:
    - {name: server, image: server:1}
EOF
kctl apply -f "$T/infer.yaml" >/dev/null
kube_wait 60 "the MIG pod runs" running search infer-mig
kube_wait 60 "the GPU-memory pod runs" running search infer-mem
[ "$(node_of search infer-mig)" = a100-0 ] || fail "infer-mig is on $(node_of search infer-mig), not the A100"
[ "$(node_of search infer-mem)" = a100-0 ] || fail "infer-mem is on $(node_of search infer-mem), not the A100"
label=$(kctl get node a100-0 -o jsonpath='{.metadata.labels.nvidia\.com/mig\.config}')
case $label in gpuorch-*) ;; *) fail "the A100's nvidia.com/mig.config is '$label', not a gpuorch layout" ;; esac
state=$(kctl get node a100-0 -o jsonpath='{.metadata.labels.nvidia\.com/mig\.config\.state}')
[ "$state" = success ] || fail "the A100's mig.config.state is '$state'"
kctl get configmap -n gpu-operator gpuorch-mig-parted-config -o jsonpath='{.data.config\.yaml}' >"$T/migcfg"
grep -q "$label:" "$T/migcfg" || fail "the mig-parted config has no entry $label"
grep -q '"3g.40gb": 1' "$T/migcfg" || fail "the layout lacks the 3g.40gb instance: $(cat "$T/migcfg")"

# --- the workload saved a checkpoint (it annotates its own pod) ---
for p in $(awk '{print $1}' "$T/gang"); do
    kctl annotate pod -n research "$p" gpuorch.io/checkpoint=s3://ckpt/train/step-100 --overwrite >/dev/null
done
kube_wait 20 "gpuorch records the gang's checkpoint" sh -c \
    "'$GPUORCH' queue --all -o json 2>/dev/null | grep -q 'step-100'"

# --- production needs a whole H100 node: the gang is preempted ---
cat >"$T/prod.yaml" <<'EOF'
apiVersion: v1
kind: Pod
metadata: {name: prod, namespace: search}
spec:
  schedulerName: gpuorch
  priorityClassName: gpuorch-production
  containers:
    - {name: server, image: server:1, resources: {limits: {nvidia.com/gpu: 8}}}
EOF
kctl apply -f "$T/prod.yaml" >/dev/null
kube_wait 60 "the production pod runs" running search prod
case $(node_of search prod) in h100-*) ;; *) fail "prod landed on $(node_of search prod)" ;; esac
# the evicted workers are recreated by the Job and wait: one H100 cannot hold the gang
recreated() {
    pods_of research app=train >"$T/gang2"
    [ "$(grep -c ' Pending$' "$T/gang2")" -eq 2 ] && ! grep -q -f "$T/gang" "$T/gang2"
}
kube_wait 60 "the Job recreates the gang's two pods, pending" recreated
gang_waits() {
    for p in $(awk '{print $1}' "$T/gang2"); do
        kctl get pod -n research "$p" -o jsonpath='{.status.conditions[?(@.type=="PodScheduled")].reason}' |
            grep -q Unschedulable || return 1
    done
}
kube_wait 30 "the waiting gang's pods say why (PodScheduled=False)" gang_waits
kctl get events -n research --field-selector reason=FailedScheduling -o name | grep -q . ||
    fail "no FailedScheduling event for the waiting gang"

# --- production goes away: the gang resumes from its checkpoint ---
kctl delete pod -n search prod --wait=false >/dev/null
kube_wait 60 "the recreated gang runs" gang_runs
for p in $(pods_of research app=train | awk '$3 == "Running" {print $1}'); do
    r=$(kctl get pod -n research "$p" -o jsonpath='{.metadata.annotations.gpuorch\.io/resume-from}')
    [ "$r" = s3://ckpt/train/step-100 ] || fail "pod $p resumes from '$r', not the checkpoint"
done

# --- no node holds more GPUs than it has ---
kctl get pods -A -o json >"$T/all.json"
python3 - "$T/all.json" <<'EOF' || fail "a node is over-committed"
import json, sys, collections
used = collections.Counter()
for p in json.load(open(sys.argv[1]))["items"]:
    if p["status"].get("phase") in ("Succeeded", "Failed") or not p["spec"].get("nodeName"):
        continue
    for c in p["spec"]["containers"]:
        used[p["spec"]["nodeName"]] += int(c.get("resources", {}).get("limits", {}).get("nvidia.com/gpu", 0))
bad = {n: u for n, u in used.items() if u > 8}
sys.exit("over-committed: %s" % bad if bad else 0)
EOF

# --- what can never run says so on the pod ---
cat >"$T/bad.yaml" <<'EOF'
apiVersion: v1
kind: Pod
metadata: {name: too-big, namespace: research}
spec:
  schedulerName: gpuorch
  containers: [{name: c, image: c:1, resources: {limits: {nvidia.com/gpu: 16}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: bad-note, namespace: research, annotations: {gpuorch.io/gpu-memory: lots}}
spec:
  schedulerName: gpuorch
  containers: [{name: c, image: c:1}]
EOF
kctl apply -f "$T/bad.yaml" >/dev/null
says() {
    kctl get pod -n research "$1" -o jsonpath='{.status.conditions[?(@.type=="PodScheduled")].message}' |
        grep -q -- "$2"
}
kube_wait 30 "the 16-GPU pod says no node has 16 GPUs" says too-big "16"
kube_wait 30 "the malformed annotation is named" says bad-note "gpuorch.io/gpu-memory"

# --- gpuorch's own view: queue, nodes, usage per team ---
"$GPUORCH" nodes >"$T/nodes.txt" || fail "gpuorch nodes"
grep -q h100-0 "$T/nodes.txt" && grep -q a100-0 "$T/nodes.txt" || fail "gpuorch nodes: $(cat "$T/nodes.txt")"
"$GPUORCH" queue --all --wide >"$T/queue.txt" || fail "gpuorch queue"
grep -q "research/pg/train" "$T/queue.txt" || fail "gpuorch queue lacks the gang: $(cat "$T/queue.txt")"
"$GPUORCH" usage -o json >"$T/usage.json" || fail "gpuorch usage"
json_ok "$T/usage.json" 'any(r.get("team") == "research" and r.get("gpu_hours", 0) > 0 for r in (d if isinstance(d, list) else d.get("rows", d.get("teams", []))))'

# --- gpuorch submit is refused: on Kubernetes a job is pods ---
printf 'name: x\nteam: research\ngpus: 1\ncommand: [true]\n' >"$T/job.yaml"
run 1 "$GPUORCH" submit "$T/job.yaml"
grep -q "schedulerName" "$T/err" || fail "gpuorch submit's refusal does not say what to do: $(cat "$T/err")"

kill -TERM "$SERVER_PID"
wait "$SERVER_PID" || fail "the server did not stop cleanly"
grep -q "event=engine_stopped" "$T/server.log" || fail "the engine did not say it stopped"
echo "ok"
