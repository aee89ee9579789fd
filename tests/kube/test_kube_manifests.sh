#!/bin/sh
# test_kube_manifests.sh: deploy/kubernetes/ on a real API server, and the test harness
# end to end. A control plane (tests/kube/lib.sh) takes the manifests with
# `kubectl apply -k`; the PodGroup CRD is established and validates PodGroups; the
# ClusterRole grants the service account gpuorch each verb gpuorch needs and nothing
# it does not (`kubectl auth can-i`), and the same binding given to the test user
# gpuorch lets its token bind, evict, write pod status, events, leases, PodGroup status,
# the MIG config map and the node's MIG label. The Deployment is applied too: its
# ReplicaSet makes two pods, which stay Pending (no scheduler for them and no kubelet
# can run here). Then fake_node.py: four fake H100 nodes and a MIG-capable A100 node;
# pods bound through the binding API run, finish (Succeeded, Failed with the exit code
# given), are deleted and evicted after their grace with a checkpoint marker; a
# batch/v1 Job's pod runs to completion; MIG layouts from the mig-parted ConfigMap are
# applied, an unknown one fails; the fake kubelet carries on across an API server
# restart and stops cleanly on SIGTERM.
# Usage: test_kube_manifests.sh [PATH/TO/gpuorch] (run from the repository root; with
# gpuorch, the config's cluster spec is validated too).
set -eu

GPUORCH=${1:-}
. "$(dirname "$0")/lib.sh"

kube_up "$T/kube"
echo "kube_up took ${KUBE_UP_S} s"
D=$KUBE_ROOT/deploy/kubernetes

# --- the manifests
kctl apply -k "$D" >"$T/apply.out" || fail "kubectl apply -k deploy/kubernetes: $(cat "$T/apply.out")"
kctl apply -f "$KUBE_TESTS/rbac-test-user.yaml" >/dev/null
kctl wait --for condition=established --timeout=30s crd/podgroups.scheduling.x-k8s.io >/dev/null ||
    fail "the PodGroup CRD is not established"

for pc in gpuorch-production:1000000 gpuorch-high:100000 gpuorch-normal:1000 gpuorch-low:10; do
    kube_holds "/apis/scheduling.k8s.io/v1/priorityclasses/${pc%%:*}" \
        "d['value'] == ${pc##*:} and not d.get('globalDefault')" || fail "priority class $pc"
done

kctl get configmap -n gpuorch-system gpuorch-config -o jsonpath='{.data.cluster\.yaml}' >"$T/cluster.yaml"
grep -q 'name: search' "$T/cluster.yaml" || fail "gpuorch-config has no team search"
if [ -n "$GPUORCH" ]; then
    run 0 "$GPUORCH" validate "$T/cluster.yaml"
    out_has "3 teams"
fi

# The Deployment: the controller manager makes its two pods; nothing binds them.
kube_wait 30 "the Deployment's two pods" kube_holds "/api/v1/namespaces/gpuorch-system/pods" \
    "len(d['items']) == 2 and all(p['spec']['serviceAccountName'] == 'gpuorch' and not p['spec'].get('nodeName') for p in d['items'])"

# --- the PodGroup CRD
kctl create namespace search >/dev/null
kctl apply -f - >/dev/null <<'EOF'
apiVersion: scheduling.x-k8s.io/v1alpha1
kind: PodGroup
metadata: {name: train, namespace: search}
spec: {minMember: 4, scheduleTimeoutSeconds: 120, minResources: {nvidia.com/gpu: 32}}
EOF
kube_holds /apis/scheduling.x-k8s.io/v1alpha1/namespaces/search/podgroups/train \
    "d['spec']['minMember'] == 4 and d['spec']['scheduleTimeoutSeconds'] == 120" || fail "PodGroup train"
if kctl apply -f - >/dev/null 2>"$T/err" <<'EOF'
apiVersion: scheduling.x-k8s.io/v1alpha1
kind: PodGroup
metadata: {name: bad, namespace: search}
spec: {minMember: "four"}
EOF
then fail "a PodGroup with minMember \"four\" was accepted"; fi
# the PodGroup is the user's: gpuorch reads it and may not change it
kube_api "$KUBE_GPUORCH_TOKEN" PATCH /apis/scheduling.x-k8s.io/v1alpha1/namespaces/search/podgroups/train \
    '{"spec":{"minMember":1}}' application/merge-patch+json
[ "$KSTATUS" = 403 ] || fail "PodGroup spec patch as gpuorch: HTTP $KSTATUS, expected 403"

# --- RBAC: what the service account may and may not do
SA=system:serviceaccount:gpuorch-system:gpuorch
set -f # the checks below hold '*'; no file names
can() { # NAMESPACE VERB RESOURCE [SUBRESOURCE]
    kctl auth can-i --as="$SA" -n "$1" "$2" "$3" ${4:+--subresource=$4} >/dev/null 2>&1
}
allowed=0
for check in \
    "- list nodes" "- watch nodes" "- patch nodes" \
    "search list pods" "search watch pods" "- list pods" "search patch pods" "search delete pods" \
    "search create pods binding" "search patch pods status" "search create pods eviction" \
    "search create events" \
    "- list podgroups.scheduling.x-k8s.io" "- watch podgroups.scheduling.x-k8s.io" \
    "gpu-operator get configmaps" "gpu-operator create configmaps" "gpu-operator update configmaps" \
    "gpuorch-system get leases.coordination.k8s.io" "gpuorch-system create leases.coordination.k8s.io" \
    "gpuorch-system update leases.coordination.k8s.io"; do
    # shellcheck disable=SC2086 # the check is words
    set -- $check
    ns=$1
    [ "$ns" = - ] && ns=default
    can "$ns" "$2" "$3" "${4:-}" || fail "the service account may not: $check"
    allowed=$((allowed + 1))
done
denied=0
for check in \
    "- create nodes" "- delete nodes" "- update nodes" "- patch nodes status" "- get nodes" \
    "search create pods" "search update pods" "search get pods" \
    "search update pods status" "search create pods exec" \
    "search get secrets" "- list secrets" \
    "gpu-operator delete configmaps" "gpu-operator list configmaps" "gpu-operator patch configmaps" \
    "gpuorch-system delete leases.coordination.k8s.io" "gpuorch-system patch leases.coordination.k8s.io" \
    "search create podgroups.scheduling.x-k8s.io" "search patch podgroups.scheduling.x-k8s.io" \
    "search patch podgroups.scheduling.x-k8s.io status" "search delete podgroups.scheduling.x-k8s.io" \
    "search create jobs.batch" "search get jobs.batch" "- list namespaces" \
    "- create priorityclasses.scheduling.k8s.io" "- create clusterrolebindings.rbac.authorization.k8s.io" \
    "search patch events" "search delete events" "- * *"; do
    # shellcheck disable=SC2086
    set -- $check
    ns=$1
    [ "$ns" = - ] && ns=default
    if can "$ns" "$2" "$3" "${4:-}"; then fail "the service account may: $check"; fi
    denied=$((denied + 1))
done
set +f
echo "rbac: $allowed verbs allowed, $denied denied, as they should be"
# the test user has the same binding
kctl_as "$KUBE_GPUORCH" auth can-i create pods --subresource=binding -n search >/dev/null 2>&1 ||
    fail "the test user gpuorch may not bind pods (tests/kube/rbac-test-user.yaml)"
if kctl_as "$KUBE_GPUORCH" auth can-i delete nodes >/dev/null 2>&1; then fail "the test user may delete nodes"; fi

# Leader election: a Lease, and optimistic concurrency on it.
kube_api "$KUBE_GPUORCH_TOKEN" POST /apis/coordination.k8s.io/v1/namespaces/gpuorch-system/leases \
    '{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"gpuorch"},"spec":{"holderIdentity":"a","leaseDurationSeconds":15}}'
[ "$KSTATUS" = 201 ] || fail "lease create as gpuorch: HTTP $KSTATUS $(cat "$T/out")"
rv=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["metadata"]["resourceVersion"])' "$T/out")
lease() { # RESOURCEVERSION HOLDER
    kube_api "$KUBE_GPUORCH_TOKEN" PUT /apis/coordination.k8s.io/v1/namespaces/gpuorch-system/leases/gpuorch \
        "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\",\"metadata\":{\"name\":\"gpuorch\",\"resourceVersion\":\"$1\"},\"spec\":{\"holderIdentity\":\"$2\",\"leaseDurationSeconds\":15}}"
}
lease "$rv" b
[ "$KSTATUS" = 200 ] || fail "lease update: HTTP $KSTATUS $(cat "$T/out")"
lease "$rv" c
[ "$KSTATUS" = 409 ] || fail "lease update with a stale resourceVersion: HTTP $KSTATUS, expected 409"

# --- fake nodes
t0=$(date +%s.%N)
fake_node create --nodes 4 --prefix h100 --leaf-label 'leaf-{i//2}' --label gpuorch.io/tier=reserved 2>>"$T/fake.log" ||
    fail "fake_node.py create h100"
fake_node create --nodes 1 --prefix a100 --product NVIDIA-A100-SXM4-80GB --memory-mib 81920 --mig-capable \
    2>>"$T/fake.log" || fail "fake_node.py create a100"
echo "fake nodes created in $(echo "$t0 $(date +%s.%N)" | awk '{printf "%.1f", $2 - $1}') s"
kube_holds /api/v1/nodes "sorted(n['metadata']['name'] for n in d['items']) == ['a100-0', 'h100-0', 'h100-1', 'h100-2', 'h100-3']" ||
    fail "the fake nodes: $(kctl get nodes 2>&1)"
kube_holds /api/v1/nodes/h100-3 "d['metadata']['labels']['nvidia.com/gpu.product'] == 'NVIDIA-H100-80GB-HBM3' and \
d['metadata']['labels']['nvidia.com/gpu.count'] == '8' and d['metadata']['labels']['nvidia.com/gpu.memory'] == '81559' and \
d['metadata']['labels']['nvidia.com/gpu.family'] == 'hopper' and d['metadata']['labels']['nvidia.com/mig.capable'] == 'false' and \
d['metadata']['labels']['gpuorch.io/leaf'] == 'leaf-1' and d['metadata']['labels']['gpuorch.io/tier'] == 'reserved' and \
d['status']['allocatable']['nvidia.com/gpu'] == '8' and d['status']['allocatable']['pods'] == '110' and \
d['status']['capacity']['cpu'] == '64' and \
[c['status'] for c in d['status']['conditions'] if c['type'] == 'Ready'] == ['True']" ||
    fail "node h100-3: $(kctl get node h100-3 -o json 2>&1 | head -c 3000)"
kube_holds /api/v1/nodes/a100-0 "d['metadata']['labels']['nvidia.com/mig.capable'] == 'true' and \
d['metadata']['labels']['nvidia.com/mig.strategy'] == 'mixed' and d['metadata']['labels']['nvidia.com/mig.config'] == 'all-disabled' and \
d['metadata']['labels']['nvidia.com/mig.config.state'] == 'success'" || fail "node a100-0's MIG labels"

fake_node_start "$T/fake.log" --prefix h100 --prefix a100 --max-grace 2 --mig-delay 0.5

# pod NAME [ANNOTATION LINES]: a one-GPU pod for gpuorch, 2 s of grace, checkpoints
# into $T/ckpt.
pod() {
    kctl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: $1
  namespace: search
  annotations:
    fake.gpuorch.io/checkpoint-dir: $T/ckpt
${2:-}
spec:
  schedulerName: gpuorch
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: registry.example/train:1
    resources:
      limits: {nvidia.com/gpu: 1}
EOF
}
phase_is() { # POD PHASE
    kube_holds "/api/v1/namespaces/search/pods/$1" "d['status']['phase'] == '$2'"
}
gone() { # POD
    [ "$(curl -sk -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $KUBE_ADMIN_TOKEN" \
        "$KUBE_API/api/v1/namespaces/search/pods/$1")" = 404 ]
}

# --- the fake kubelet
pod p1
pod p2 '    fake.gpuorch.io/run-seconds: "1"'
pod p3 '    fake.gpuorch.io/run-seconds: "1"
    fake.gpuorch.io/exit-code: "3"'
pod p4
pod p5
sleep 1
phase_is p1 Pending || fail "p1 left Pending before it was bound"
for p in p1 p2 p3 p4; do
    kube_bind "$KUBE_GPUORCH_TOKEN" search $p h100-0
    [ "$KSTATUS" = 201 ] || fail "binding $p as gpuorch: HTTP $KSTATUS $(cat "$T/out")"
done
kube_bind "$KUBE_GPUORCH_TOKEN" search p1 h100-1
[ "$KSTATUS" = 409 ] || fail "binding p1 again: HTTP $KSTATUS, expected 409"
kube_wait 15 "p1 Running" kube_holds /api/v1/namespaces/search/pods/p1 \
    "d['status']['phase'] == 'Running' and d['status']['startTime'] and d['status']['containerStatuses'][0]['state']['running']"
kube_wait 15 "p2 Succeeded" kube_holds /api/v1/namespaces/search/pods/p2 \
    "d['status']['phase'] == 'Succeeded' and d['status']['containerStatuses'][0]['state']['terminated']['exitCode'] == 0"
kube_wait 15 "p3 Failed with exit code 3" kube_holds /api/v1/namespaces/search/pods/p3 \
    "d['status']['phase'] == 'Failed' and d['status']['containerStatuses'][0]['state']['terminated']['exitCode'] == 3"
phase_is p1 Running || fail "p1 (no run-seconds) did not keep running"
phase_is p5 Pending || fail "p5 (not bound) left Pending"

# What a scheduler writes on an unbound pod: the Unschedulable condition and an event.
kube_api "$KUBE_GPUORCH_TOKEN" PATCH /api/v1/namespaces/search/pods/p5/status \
    '{"status":{"conditions":[{"type":"PodScheduled","status":"False","reason":"Unschedulable","message":"0/5 nodes: no room"}]}}' \
    application/merge-patch+json
[ "$KSTATUS" = 200 ] || fail "pod status patch as gpuorch: HTTP $KSTATUS $(cat "$T/out")"
kube_api "$KUBE_GPUORCH_TOKEN" POST /api/v1/namespaces/search/events \
    '{"apiVersion":"v1","kind":"Event","metadata":{"name":"p5.1"},"involvedObject":{"kind":"Pod","namespace":"search","name":"p5"},"reason":"FailedScheduling","message":"0/5 nodes: no room","type":"Warning","source":{"component":"gpuorch"}}'
[ "$KSTATUS" = 201 ] || fail "event create as gpuorch: HTTP $KSTATUS $(cat "$T/out")"

# A delete plays the grace (2 s), writes the checkpoint marker, then removes the pod.
t0=$(date +%s)
kctl delete pod -n search p1 --wait=false >/dev/null
kube_holds /api/v1/namespaces/search/pods/p1 "d['metadata'].get('deletionTimestamp')" ||
    fail "p1 is not terminating after the delete"
kube_wait 15 "p1 gone after its grace" gone p1
dt=$(($(date +%s) - t0))
[ "$dt" -ge 1 ] || fail "p1 went in ${dt} s, before its 2 s grace"
grep -q '^p1 [0-9]*$' "$T/ckpt/checkpoints" || fail "no checkpoint marker for p1 ($(cat "$T/ckpt/checkpoints" 2>&1))"
echo "deleted pod went after its grace in ~${dt} s"
# An eviction (what gpuorch posts to preempt) does the same.
kube_api "$KUBE_GPUORCH_TOKEN" POST /api/v1/namespaces/search/pods/p4/eviction \
    '{"apiVersion":"policy/v1beta1","kind":"Eviction","metadata":{"name":"p4","namespace":"search"}}'
[ "$KSTATUS" = 201 ] || fail "eviction of p4 as gpuorch: HTTP $KSTATUS $(cat "$T/out")"
kube_wait 15 "p4 gone after its eviction" gone p4
grep -q '^p4 ' "$T/ckpt/checkpoints" || fail "no checkpoint marker for p4"
# a finished pod is removed at once, with no marker
kctl delete pod -n search p2 --wait=false >/dev/null
kube_wait 5 "p2 (Succeeded) gone" gone p2
if grep -q '^p2 ' "$T/ckpt/checkpoints"; then fail "a checkpoint marker for the finished p2"; fi

# A batch/v1 Job: the controller manager makes its pod; bound, it runs and succeeds.
kctl apply -f - >/dev/null <<'EOF'
apiVersion: batch/v1
kind: Job
metadata: {name: j1, namespace: search}
spec:
  backoffLimit: 0
  template:
    metadata:
      annotations: {fake.gpuorch.io/run-seconds: "1"}
    spec:
      schedulerName: gpuorch
      restartPolicy: Never
      containers:
      - name: main
        image: registry.example/batch:1
        resources:
          limits: {nvidia.com/gpu: 2}
EOF
kube_wait 20 "the Job's pod" kube_holds "/api/v1/namespaces/search/pods?labelSelector=job-name%3Dj1" "len(d['items']) == 1"
jpod=$(kube_json "/api/v1/namespaces/search/pods?labelSelector=job-name%3Dj1" "d['items'][0]['metadata']['name']")
kube_bind "$KUBE_GPUORCH_TOKEN" search "$jpod" h100-2
[ "$KSTATUS" = 201 ] || fail "binding the Job's pod: HTTP $KSTATUS"
kube_wait 30 "Job j1 complete" kube_holds /apis/batch/v1/namespaces/search/jobs/j1 "d['status'].get('succeeded') == 1"

# --- the fake MIG manager: gpuorch writes the layout and the label (its RBAC)
cat >"$T/mig.yaml" <<'EOF'
version: v1
mig-configs:
  all-disabled:
    - devices: all
      mig-enabled: false
  gpuorch-test-a:
    - devices: [0, 1]
      mig-enabled: true
      mig-devices: {"1g.10gb": 7}
    - devices: [2]
      mig-enabled: true
      mig-devices: {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}
    - devices: [3, 4, 5, 6, 7]
      mig-enabled: false
EOF
kctl create namespace gpu-operator >/dev/null
kctl_as "$KUBE_GPUORCH" create configmap -n gpu-operator default-mig-parted-config \
    --from-file=config.yaml="$T/mig.yaml" >/dev/null || fail "configmap create as gpuorch"
mig_label() { # CONFIG
    kube_api "$KUBE_GPUORCH_TOKEN" PATCH /api/v1/nodes/a100-0 \
        "{\"metadata\":{\"labels\":{\"nvidia.com/mig.config\":\"$1\"}}}" application/merge-patch+json
    [ "$KSTATUS" = 200 ] || fail "labelling a100-0 as gpuorch: HTTP $KSTATUS $(cat "$T/out")"
}
t0=$(date +%s.%N)
mig_label gpuorch-test-a
kube_wait 5 "MIG state pending" kube_holds /api/v1/nodes/a100-0 "d['metadata']['labels']['nvidia.com/mig.config.state'] == 'pending'"
kube_wait 15 "MIG layout gpuorch-test-a" kube_holds /api/v1/nodes/a100-0 "d['metadata']['labels']['nvidia.com/mig.config.state'] == 'success'"
echo "MIG change took $(echo "$t0 $(date +%s.%N)" | awk '{printf "%.1f", $2 - $1}') s (--mig-delay 0.5)"
kube_holds /api/v1/nodes/a100-0 "[d['status']['allocatable'].get(r) for r in ('nvidia.com/gpu', \
'nvidia.com/mig-1g.10gb', 'nvidia.com/mig-2g.20gb', 'nvidia.com/mig-3g.40gb')] == ['5', '16', '1', '1'] and \
d['status']['capacity']['nvidia.com/mig-1g.10gb'] == '16' and \
d['metadata']['labels']['nvidia.com/mig-1g.10gb.count'] == '16' and d['metadata']['labels']['nvidia.com/mig-3g.40gb.count'] == '1'" ||
    fail "a100-0 after gpuorch-test-a: $(kctl get node a100-0 -o json 2>&1 | head -c 3000)"
mig_label gpuorch-no-such-layout
kube_wait 15 "MIG state failed" kube_holds /api/v1/nodes/a100-0 "d['metadata']['labels']['nvidia.com/mig.config.state'] == 'failed'"
kube_holds /api/v1/nodes/a100-0 "d['status']['allocatable']['nvidia.com/gpu'] == '5'" || fail "a failed change changed allocatable"
mig_label all-disabled
kube_wait 15 "MIG all-disabled" kube_holds /api/v1/nodes/a100-0 "d['metadata']['labels']['nvidia.com/mig.config.state'] == 'success'"
kube_holds /api/v1/nodes/a100-0 "d['status']['allocatable']['nvidia.com/gpu'] == '8' and \
not [k for k in list(d['status']['allocatable']) + list(d['status']['capacity']) + list(d['metadata']['labels']) if k.startswith('nvidia.com/mig-')]" ||
    fail "a100-0 after all-disabled: $(kctl get node a100-0 -o json 2>&1 | head -c 3000)"

# --- an API server restart: the fake kubelet watches again and carries on
t0=$(date +%s.%N)
kube_restart_apiserver
echo "API server restarted in $(echo "$t0 $(date +%s.%N)" | awk '{printf "%.1f", $2 - $1}') s"
pod p6
kube_bind "$KUBE_GPUORCH_TOKEN" search p6 h100-3
[ "$KSTATUS" = 201 ] || fail "binding p6 after the restart: HTTP $KSTATUS"
kube_wait 30 "p6 Running after the API server restart" phase_is p6 Running

# --- SIGTERM stops the fake node cleanly
fake_node_stop || fail "fake_node.py run did not exit 0 on SIGTERM"
grep -q 'fake_node: stopped' "$T/fake.log" || fail "fake_node.py did not say it stopped"
echo "ok: manifests, RBAC, PodGroup CRD and the fake node harness"
