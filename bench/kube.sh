#!/bin/sh
# bench/kube.sh [OPTIONS]: gpuorch beside the real kube-scheduler, on the same control
# plane (section 7 of bench/RESULTS.md). Builds nothing new: the control plane of
# tools/k8s-control-plane.sh (kube-apiserver, kube-controller-manager and kube-scheduler
# 1.20 from Debian's source package, cached) with the test harness tests/kube/lib.sh,
# the fake GPU nodes of tests/kube/fake_node.py, and BUILD/gpuorch.
#
# For each node count, and each scheduler (kube-scheduler first, then gpuorch), on a
# FRESH control plane: N fake 8-GPU nodes; the same pending pods (deterministic from the
# seed: 1/2/4/8 GPUs, 10,000 asking 17,330 GPUs) naming the scheduler under test,
# created from 16 threads before it starts; then the scheduler, with its client limits
# lifted to --qps/--burst; bench/kube.py watches the binds, samples the CPU of the
# scheduler, kube-apiserver and etcd, stops the scheduler when every pod is bound or no
# bind came for --quiet seconds, and judges what is left (pods pending that some node
# still has the GPUs for). The markdown section goes to --out (default stdout).
#
#   --nodes "N ..."   node counts (repeatable; default "1000 5000")
#   --pods N          pending pods (default 10000)
#   --qps N           both schedulers' client qps (default 1000); --burst N (default: qps)
#   --seed N          the pod list's shuffle (default 42)
#   --quiet S         seconds without a bind that end a run (default 20)
#   --schedulers "kube-scheduler gpuorch"   which to run (default both, in that order)
#   --gpuorch-args "..."   more `gpuorch server` options (e.g. --kube-writers 8)
#   --build DIR       where gpuorch is built (default build)
#   --out FILE        the markdown section (default stdout)
#   --keep DIR        keep each run's JSON result and scheduler log there
#
# Takes 1-2 minutes per run at 1,000 nodes and 10,000 pods (kube-scheduler binds
# under 100 pods/s). Validate at small size first: bench/kube.sh --nodes 100 --pods 500.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
NODES=""
PODS=10000
QPS=1000
BURST=""
SEED=42
QUIET=20
SCHEDS="kube-scheduler gpuorch"
GPUORCH_ARGS=""
BUILD=build
OUT=""
KEEP=""
ARGV="" # the options that shape the figures, for the section's command line
usage() {
    sed -n '2,/^set -eu/p' "$0" | sed -e '/^set -eu/d' -e 's/^# \{0,1\}//' >&2
    exit 2
}
while [ $# -gt 0 ]; do
    [ $# -ge 2 ] || usage
    case $1 in --out | --keep) ;; *) ARGV="$ARGV $1 '$2'" ;; esac
    case $1 in
    --nodes) NODES="$NODES $2" ;;
    --pods) PODS=$2 ;;
    --qps) QPS=$2 ;;
    --burst) BURST=$2 ;;
    --seed) SEED=$2 ;;
    --quiet) QUIET=$2 ;;
    --schedulers) SCHEDS=$2 ;;
    --gpuorch-args) GPUORCH_ARGS=$2 ;;
    --build) BUILD=$2 ;;
    --out) OUT=$2 ;;
    --keep) KEEP=$2 ;;
    *) usage ;;
    esac
    shift 2
done
# paths as the caller gave them, then everything from the repository's root
abs() { case $1 in /* | "") echo "$1" ;; *) echo "$(pwd)/$1" ;; esac; }
OUT=$(abs "$OUT")
KEEP=$(abs "$KEEP")
BUILD_SHOWN=$BUILD
case $BUILD in /*) ;; *) [ -x "$BUILD/gpuorch" ] && BUILD=$(abs "$BUILD") ;; esac
cd "$ROOT"
NODES=${NODES:-1000 5000}
BURST=${BURST:-$QPS}
NODES=$(echo "$NODES" | tr ',' ' ')
GPUORCH=$ROOT/$BUILD/gpuorch
case $BUILD in /*) GPUORCH=$BUILD/gpuorch ;; esac
[ -x "$GPUORCH" ] || { echo "bench/kube.sh: no $GPUORCH (build it first)" >&2; exit 1; }

KUBE_TESTS=$ROOT/tests/kube
# shellcheck source=../tests/kube/lib.sh
. "$KUBE_TESTS/lib.sh"
PY=$KUBE_PY
RES=$T/results
mkdir -p "$RES"
say() { echo "bench/kube.sh: $*" >&2; }

cat >"$T/teams.yaml" <<'EOF'
name: kbench
pools: []
teams:
  - {name: bench, guaranteed_gpus: 100000, burst_gpus: 100000}
EOF

machine="$(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), load average $(cut -d' ' -f1-3 /proc/loadavg) at the start, $(date -u +%Y-%m-%d)"
results=""
for kb_n in $NODES; do
    for kb_s in $SCHEDS; do
        case $kb_s in
        kube-scheduler) sname=default-scheduler ;;
        gpuorch) sname=gpuorch ;;
        *) fail "unknown scheduler $kb_s (kube-scheduler, gpuorch)" ;;
        esac
        say "$kb_s on $kb_n nodes, $PODS pods: a fresh control plane"
        kube_up "$T/plane"
        kctl create namespace bench >/dev/null
        # gpuorch's deployment has the PodGroup CRD (it watches PodGroups): both planes get it
        kctl apply -f deploy/kubernetes/podgroup-crd.yaml >/dev/null || fail "the PodGroup CRD"
        kube_wait 30 "the PodGroup CRD is established" \
            kube_holds /apis/apiextensions.k8s.io/v1/customresourcedefinitions/podgroups.scheduling.x-k8s.io \
            '[c for c in d["status"]["conditions"] if c["type"] == "Established" and c["status"] == "True"]'
        t0=$(date +%s)
        fake_node create -q --nodes "$kb_n" --prefix gpu --gpus 8 || fail "fake_node create --nodes $kb_n"
        say "$kb_n nodes in $(($(date +%s) - t0)) s"
        "$PY" bench/kube.py --kubeconfig "$KUBE_ADMIN" pods --ns bench --count "$PODS" \
            --seed "$SEED" --scheduler "$sname" >"$RES/pods.json" || fail "creating the pods"
        say "pods: $(cat "$RES/pods.json")"
        log=$RES/$kb_s-$kb_n.log
        case $kb_s in
        kube-scheduler)
            hp=$(kube_free_port)
            cat >"$T/sched.yaml" <<EOF
apiVersion: kubescheduler.config.k8s.io/v1beta1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: $KUBE_ADMIN
  qps: $QPS
  burst: $BURST
leaderElection:
  leaderElect: false
healthzBindAddress: 127.0.0.1:$hp
metricsBindAddress: 127.0.0.1:$hp
EOF
            set -- "$KUBE_BIN/kube-scheduler" --config="$T/sched.yaml" --secure-port=0
            KVER=$("$KUBE_BIN/kube-scheduler" --version 2>/dev/null | awk '{print $2}') || KVER=1.20
            ;;
        gpuorch)
            rm -rf "${T:?}/var"
            mkdir -p "$T/var"
            port=$(kube_free_port)
            # shellcheck disable=SC2086 # GPUORCH_ARGS is a list of words
            set -- "$GPUORCH" server --kubernetes --kubeconfig "$KUBE_ADMIN" --config "$T/teams.yaml" \
                --db "sqlite:$T/var/gpuorch.db" --listen "127.0.0.1:$port" \
                --kube-qps "$QPS" --kube-burst "$BURST" $GPUORCH_ARGS
            ;;
        esac
        metrics=""
        [ "$kb_s" = gpuorch ] && metrics="--metrics=http://127.0.0.1:$port/metrics"
        # shellcheck disable=SC2086 # metrics: one word or none
        "$PY" bench/kube.py --kubeconfig "$KUBE_ADMIN" run --ns bench --name "$kb_s" --nodes "$kb_n" $metrics \
            --node-prefix gpu --expect "$PODS" --pid "apiserver=$KUBE_APISERVER_PID" \
            --pid "etcd=$KUBE_ETCD_PID" --quiet "$QUIET" --log "$log" --out "$RES/$kb_s-$kb_n.json" \
            -- "$@" >&2 || fail "the $kb_s run on $kb_n nodes"
        results="$results $RES/$kb_s-$kb_n.json"
        kube_down
    done
done

kcmd="kube-scheduler --config=SCHED.yaml --secure-port=0 (clientConnection qps $QPS, burst $BURST, leaderElect false)"
gcmd="$BUILD_SHOWN/gpuorch server --kubernetes --kubeconfig ADMIN.kubeconfig --config TEAMS.yaml --db sqlite:DIR/gpuorch.db --listen 127.0.0.1:PORT --kube-qps $QPS --kube-burst $BURST${GPUORCH_ARGS:+ $GPUORCH_ARGS}"
# shellcheck disable=SC2086 # results is a list of paths
"$PY" bench/kube.py report --pods-json "$RES/pods.json" --seed "$SEED" --qps "$QPS" --burst "$BURST" \
    --quiet "$QUIET" --command "bench/kube.sh$ARGV" --kcmd "$kcmd" --gcmd "$gcmd" \
    --k8s-version "${KVER:-1.20}" --machine "$machine" $results >"$T/section.md" || fail "the report"
if [ -n "$KEEP" ]; then
    mkdir -p "$KEEP"
    cp "$RES"/* "$KEEP"/
fi
if [ -n "$OUT" ]; then
    cp "$T/section.md" "$OUT"
    say "wrote $OUT"
else
    cat "$T/section.md"
fi
