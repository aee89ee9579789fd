#!/bin/sh
# gpuorch on a cluster without the PodGroup CRD (deploy/kubernetes/podgroup-crd.yaml not
# applied): it says so at start, schedules pods that are not gangs, and a pod that names
# a PodGroup waits with the reason; a GPU node that joins later is taken in (gpuorch
# starts again, keeping the pods it bound). Real kube-apiserver, etcd and controller manager;
# tests/kube/fake_node.py plays the kubelet.
set -eu
GPUORCH=$(realpath "$1")
. "$(dirname "$0")/lib.sh"

kube_up "$T/kube"
kctl apply -f deploy/kubernetes/namespace.yaml -f deploy/kubernetes/rbac.yaml \
    -f tests/kube/rbac-test-user.yaml >"$T/apply.log" || fail "kubectl apply rbac"
kctl create namespace research >/dev/null
printf 'name: nocrd\npools: []\nteams:\n  - {name: research, guaranteed_gpus: 8, burst_gpus: 16}\n' \
    >"$T/teams.yaml"
fake_node create --nodes 1 --prefix h100 --gpus 8 --product NVIDIA-H100-80GB-HBM3 >/dev/null 2>&1 ||
    fail "fake_node create"
fake_node_start "$T/fake_node.log" --prefix h100

PORT=$(kube_free_port)
mkdir -p "$T/var"
"$GPUORCH" server --kubernetes --kubeconfig "$KUBE_GPUORCH" --config "$T/teams.yaml" \
    --db "sqlite:$T/var/gpuorch.db" --listen "127.0.0.1:$PORT" >"$T/server.out" 2>"$T/server.log" &
SERVER_PID=$!
kube_own "$SERVER_PID"
kube_wait 30 "gpuorch starts without the CRD" grep -q "scheduling the pods of" "$T/server.out"
grep -q "event=podgroups_missing" "$T/server.log" || fail "gpuorch does not say the CRD is missing"

cat >"$T/pods.yaml" <<'EOF'
apiVersion: v1
kind: Pod
metadata: {name: solo, namespace: research}
spec:
  schedulerName: gpuorch
  containers: [{name: c, image: c:1, resources: {limits: {nvidia.com/gpu: 2}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: member, namespace: research, labels: {scheduling.x-k8s.io/pod-group: gang}}
spec:
  schedulerName: gpuorch
  containers: [{name: c, image: c:1, resources: {limits: {nvidia.com/gpu: 2}}}]
EOF
kctl apply -f "$T/pods.yaml" >/dev/null
runs() { [ "$(kctl get pod -n research solo -o jsonpath='{.status.phase}')" = Running ]; }
kube_wait 30 "the pod that is no gang runs" runs
waits() {
    kctl get pod -n research member \
        -o jsonpath='{.status.conditions[?(@.type=="PodScheduled")].message}' | grep -q "PodGroup research/gang"
}
kube_wait 30 "the gang member says it waits for its PodGroup" waits
[ -z "$(kctl get pod -n research member -o jsonpath='{.spec.nodeName}')" ] ||
    fail "the member of a PodGroup no one defined was bound"

# --- a GPU node joins: gpuorch starts again with it, and the running pod stays ---
fake_node create --nodes 1 --start 1 --prefix h100 --gpus 8 --product NVIDIA-H100-80GB-HBM3 \
    >/dev/null 2>&1 || fail "fake_node create h100-1"
cat >"$T/big.yaml" <<'EOF'
apiVersion: v1
kind: Pod
metadata: {name: big, namespace: research}
spec:
  schedulerName: gpuorch
  containers: [{name: c, image: c:1, resources: {limits: {nvidia.com/gpu: 8}}}]
EOF
kctl apply -f "$T/big.yaml" >/dev/null
kube_wait 30 "gpuorch sees the node join" grep -q "event=node_joined node=h100-1" "$T/server.log"
big_runs() { [ "$(kctl get pod -n research big -o jsonpath='{.status.phase}')" = Running ]; }
kube_wait 60 "the 8-GPU pod runs on the node that joined" big_runs
[ "$(kctl get pod -n research big -o jsonpath='{.spec.nodeName}')" = h100-1 ] ||
    fail "big is not on h100-1"
[ "$(kctl get pod -n research solo -o jsonpath='{.spec.nodeName}')" = h100-0 ] || fail "solo moved"
kill -0 "$SERVER_PID" || fail "the server is gone after taking the node in"
curl -fsS "http://127.0.0.1:$PORT/healthz" >/dev/null || fail "the restarted server does not answer"
export GPUORCH_SERVER="http://127.0.0.1:$PORT" GPUORCH_TOKEN="$(cat "$T/var/admin.token")"
"$GPUORCH" queue -o json >"$T/queue.json" || fail "gpuorch queue"
json_ok "$T/queue.json" 'any(j["name"] == "research/pod/solo" and j["state"] in ("starting", "running") for j in d["jobs"])'

kill -TERM "$SERVER_PID"
wait "$SERVER_PID" || fail "the server did not stop cleanly"
echo "ok"
