# lib.sh: what the Kubernetes tests share, sourced by tests/kube/test_*.sh (POSIX sh):
# a real control plane on loopback (etcd, kube-apiserver with RBAC, kube-controller-
# manager with the job, replicaset, deployment and garbagecollector controllers), torn
# down on exit, kubectl and curl against it, and fake_node.py in the kubelet's place.
# Sources tests/cli/lib.sh, so $T (a scratch folder), fail, run, json_ok, out_has and
# err_has are here too. Not a test itself (no test_ prefix).
#
#   kube_up DIR              start the control plane (about 7 s); DIR (created) holds its
#                            logs, certificates, tokens and kubeconfigs; removed on exit
#   kube_down                stop it (every process by PID) and remove DIR; runs on EXIT
#   kube_restart_apiserver   SIGKILL the API server, start it again on the same port
#   kube_own PID             a process the test started (a gpuorch server): kube_down
#                            stops it first, so that a failed test leaves none behind
#   kctl ARGS...             kubectl as the admin, version-skew warnings filtered out
#   kctl_as KUBECONFIG ARGS  the same with another kubeconfig ("$KUBE_GPUORCH")
#   kube_api TOKEN METHOD PATH [BODY [CONTENT_TYPE]]   curl; body in $T/out, KSTATUS
#   kube_bind TOKEN NS POD NODE                        POST the pod's binding
#   kube_holds PATH EXPR     GET as admin: does the Python expression over d hold
#   kube_json PATH EXPR      GET as admin: print the Python expression over d
#   kube_wait SECONDS WHAT CMD...   until CMD succeeds, else fail "not within the time: WHAT"
#   kube_deploy              a platform team's setup: namespace gpu-operator, and from
#                            deploy/kubernetes/ the namespace, PodGroup CRD (waited for),
#                            priority classes and RBAC, with the test user's binding
#   fake_node ARGS...        fake_node.py (as the admin): fake_node create --nodes 4 ...
#   fake_node_start LOG ARGS...     fake_node.py run ARGS in the background (FAKE_NODE_PID)
#   fake_node_stop [PID]     SIGTERM it; its exit status
#
# After kube_up:
#   KUBE_API=https://127.0.0.1:PORT   KUBE_ADMIN=DIR/admin.kubeconfig (system:masters)
#   KUBE_GPUORCH=DIR/gpuorch.kubeconfig (token user `gpuorch`, no groups: only the RBAC
#   bound to it applies; tests/kube/rbac-test-user.yaml binds the ClusterRole gpuorch)
#   KUBE_NOBIND=DIR/nobind.kubeconfig (token user `gpuorch-nobind`, no groups and no
#   RBAC until a test binds some: for a ClusterRole that lacks a verb)
#   KUBE_ADMIN_TOKEN, KUBE_GPUORCH_TOKEN, KUBE_NOBIND_TOKEN   KUBE_BIN (the binaries)
#   KUBE_UP_S (seconds)
# The kubeconfigs are plain YAML (server, insecure-skip-tls-verify, token).
#
# The binaries come from tools/k8s-control-plane.sh (a build of 10-15 minutes the first
# time on a machine, cached after), or from $KUBE_BIN_DIR when set. GPUORCH_SKIP_KUBE=1
# skips the test (exit 77) before anything is built or started. Extra kube-apiserver
# flags: $KUBE_APISERVER_ARGS (words). KEEP_LOGS=1 prints every log's tail on exit (a
# failing test always does). etcd keeps its data on /dev/shm when it can.

# (a script outside tests/kube, such as bench/kube.sh, sets KUBE_TESTS before sourcing)
KUBE_TESTS=${KUBE_TESTS:-$(cd "$(dirname "$0")" && pwd)}
KUBE_ROOT=$(cd "$KUBE_TESTS/../.." && pwd)
. "$KUBE_ROOT/tests/cli/lib.sh"

KUBE_DIR=""
KUBE_PIDS=""
KUBE_OWN_PIDS=""
KUBE_ETCD_PID=""
KUBE_APISERVER_PID=""
KUBE_CM_PID=""
KUBE_ETCD_DATA=""

# Every log of a failed test (or with KEEP_LOGS) ends the output: the control plane's
# and whatever the test wrote to $T/*.log.
kube_exit() {
    rc=$?
    trap - EXIT INT TERM
    if { [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ]; } || [ -n "${KEEP_LOGS:-}" ]; then
        for f in "$T"/*.log ${KUBE_DIR:+"$KUBE_DIR"/*.log}; do
            [ -s "$f" ] || continue
            echo "--- tail of $f:" >&2
            tail -n 25 "$f" >&2
        done
    fi
    kube_down
    rm -rf "$T"
    exit "$rc"
}
trap kube_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

kube_free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# kube_skip MESSAGE: skipped (77).
kube_skip() {
    echo "SKIP: $*"
    exit 77
}

# kube_stop PID [SECONDS]: SIGTERM, then SIGKILL after SECONDS (default 5); returns
# once the process is gone (or a zombie: not ours to reap).
kube_stop() {
    [ -n "$1" ] || return 0
    kill -TERM "$1" 2>/dev/null || return 0
    n=$(( ${2:-5} * 10 ))
    while kill -0 "$1" 2>/dev/null && ! grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null; do
        n=$((n - 1))
        if [ "$n" -le 0 ]; then
            kill -KILL "$1" 2>/dev/null || true
            n=30
            while kill -0 "$1" 2>/dev/null && ! grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null && [ "$n" -gt 0 ]; do
                n=$((n - 1))
                sleep 0.1
            done
            break
        fi
        sleep 0.1
    done
    wait "$1" 2>/dev/null || true
}

# kube_wait_http URL SECONDS [CURL ARGS]: until URL answers 200; 1 when it does not.
kube_wait_http() {
    url=$1
    n=$(($2 * 10))
    shift 2
    while [ "$n" -gt 0 ]; do
        code=$(curl -sk -o /dev/null -w '%{http_code}' --max-time 2 "$@" "$url" 2>/dev/null) || code=000
        [ "$code" = 200 ] && return 0
        n=$((n - 1))
        sleep 0.1
    done
    return 1
}

# kube_log_fail LOG MESSAGE: fail, with the tail of LOG.
kube_log_fail() {
    echo "--- tail of $1:" >&2
    tail -n 30 "$1" >&2
    fail "$2"
}

kube_kubeconfig() { # FILE USER TOKEN
    cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: gpuorch-test
  cluster:
    server: $KUBE_API
    insecure-skip-tls-verify: true
users:
- name: $2
  user:
    token: $3
contexts:
- name: $2@gpuorch-test
  context:
    cluster: gpuorch-test
    user: $2
current-context: $2@gpuorch-test
EOF
}

kube_start_apiserver() {
    # shellcheck disable=SC2086 # KUBE_APISERVER_ARGS is a list of words
    "$KUBE_BIN/kube-apiserver" --etcd-servers="http://127.0.0.1:$KUBE_ETCD_PORT" \
        --advertise-address=127.0.0.1 --bind-address=127.0.0.1 --secure-port="$KUBE_API_PORT" \
        --cert-dir="$KUBE_DIR/certs" --token-auth-file="$KUBE_DIR/tokens.csv" \
        --authorization-mode=RBAC --disable-admission-plugins=ServiceAccount,TaintNodesByCondition \
        --service-account-issuer=https://kubernetes.default.svc \
        --service-account-key-file="$KUBE_DIR/sa.pub" \
        --service-account-signing-key-file="$KUBE_DIR/sa.key" \
        --service-cluster-ip-range=10.0.0.0/24 --endpoint-reconciler-type=none --profiling=false \
        ${KUBE_APISERVER_ARGS:-} \
        >>"$KUBE_DIR/apiserver.log" 2>&1 &
    KUBE_APISERVER_PID=$!
    KUBE_PIDS="$KUBE_PIDS $KUBE_APISERVER_PID"
}

# Ready: /readyz answers 200 and the namespace `default` exists (the API server makes
# it in a post-start hook, a moment after /readyz first says yes). 60 s at most.
kube_wait_apiserver() {
    n=600
    while :; do
        kill -0 "$KUBE_APISERVER_PID" 2>/dev/null ||
            kube_log_fail "$KUBE_DIR/apiserver.log" "kube-apiserver (pid $KUBE_APISERVER_PID) exited while starting"
        code=$(curl -sk -o /dev/null -w '%{http_code}' --max-time 2 \
            -H "Authorization: Bearer $KUBE_ADMIN_TOKEN" "$KUBE_API/readyz" 2>/dev/null) || code=000
        if [ "$code" = 200 ]; then
            code=$(curl -sk -o /dev/null -w '%{http_code}' --max-time 2 \
                -H "Authorization: Bearer $KUBE_ADMIN_TOKEN" "$KUBE_API/api/v1/namespaces/default" 2>/dev/null) || code=000
            [ "$code" = 200 ] && return 0
        fi
        n=$((n - 1))
        [ "$n" -gt 0 ] ||
            kube_log_fail "$KUBE_DIR/apiserver.log" "kube-apiserver on $KUBE_API not ready in 60 s (last answer: HTTP $code)"
        sleep 0.1
    done
}

kube_up() {
    [ -n "${1:-}" ] || fail "usage: kube_up DIR"
    [ "${GPUORCH_SKIP_KUBE:-}" = 1 ] && kube_skip "GPUORCH_SKIP_KUBE=1: no Kubernetes control plane"
    kube_t0=$(date +%s.%N)
    if [ -n "${KUBE_BIN_DIR:-}" ]; then
        KUBE_BIN=$KUBE_BIN_DIR
    else
        KUBE_BIN=$("$KUBE_ROOT/tools/k8s-control-plane.sh" 2>"$T/k8s-control-plane.err") || {
            tail -n 20 "$T/k8s-control-plane.err" >&2
            fail "tools/k8s-control-plane.sh could not provide kube-apiserver and kube-controller-manager" \
                "(it builds them from Debian's kubernetes source package; GPUORCH_SKIP_KUBE=1 skips these tests)"
        }
    fi
    for b in kube-apiserver kube-controller-manager; do
        [ -x "$KUBE_BIN/$b" ] || fail "no $b in $KUBE_BIN"
    done
    command -v etcd >/dev/null || fail "etcd is not installed (Debian package etcd-server)"
    command -v kubectl >/dev/null || fail "kubectl is not on PATH"
    command -v openssl >/dev/null || fail "openssl is not installed"

    KUBE_DIR=$1
    mkdir -p "$KUBE_DIR/certs"
    # etcd fsyncs every write; on tmpfs that costs nothing (etcd 3.4 has no --unsafe-no-fsync)
    if [ -d /dev/shm ] && [ -w /dev/shm ]; then
        KUBE_ETCD_DATA=$(mktemp -d /dev/shm/gpuorch-etcd.XXXXXX)
    else
        KUBE_ETCD_DATA=$KUBE_DIR/etcd
    fi
    KUBE_ETCD_PORT=$(kube_free_port)
    KUBE_ETCD_PEER_PORT=$(kube_free_port)
    KUBE_API_PORT=$(kube_free_port)
    KUBE_API=https://127.0.0.1:$KUBE_API_PORT

    etcd --name default --data-dir "$KUBE_ETCD_DATA" \
        --listen-client-urls "http://127.0.0.1:$KUBE_ETCD_PORT" \
        --advertise-client-urls "http://127.0.0.1:$KUBE_ETCD_PORT" \
        --listen-peer-urls "http://127.0.0.1:$KUBE_ETCD_PEER_PORT" \
        --initial-advertise-peer-urls "http://127.0.0.1:$KUBE_ETCD_PEER_PORT" \
        --initial-cluster "default=http://127.0.0.1:$KUBE_ETCD_PEER_PORT" \
        --quota-backend-bytes=$((4 * 1024 * 1024 * 1024)) >"$KUBE_DIR/etcd.log" 2>&1 &
    KUBE_ETCD_PID=$!
    KUBE_PIDS="$KUBE_PIDS $KUBE_ETCD_PID"

    # while etcd starts: the service-account key pair and the tokens
    openssl genrsa -out "$KUBE_DIR/sa.key" 2048 2>/dev/null || fail "openssl genrsa"
    openssl rsa -in "$KUBE_DIR/sa.key" -pubout -out "$KUBE_DIR/sa.pub" 2>/dev/null || fail "openssl rsa"
    KUBE_ADMIN_TOKEN=$(openssl rand -hex 16)
    KUBE_GPUORCH_TOKEN=$(openssl rand -hex 16)
    KUBE_NOBIND_TOKEN=$(openssl rand -hex 16)
    {
        echo "$KUBE_ADMIN_TOKEN,admin,uid-admin,\"system:masters\""
        echo "$KUBE_GPUORCH_TOKEN,gpuorch,uid-gpuorch"
        echo "$KUBE_NOBIND_TOKEN,gpuorch-nobind,uid-gpuorch-nobind"
    } >"$KUBE_DIR/tokens.csv"
    KUBE_ADMIN=$KUBE_DIR/admin.kubeconfig
    KUBE_GPUORCH=$KUBE_DIR/gpuorch.kubeconfig
    KUBE_NOBIND=$KUBE_DIR/nobind.kubeconfig
    kube_kubeconfig "$KUBE_ADMIN" admin "$KUBE_ADMIN_TOKEN"
    kube_kubeconfig "$KUBE_GPUORCH" gpuorch "$KUBE_GPUORCH_TOKEN"
    kube_kubeconfig "$KUBE_NOBIND" gpuorch-nobind "$KUBE_NOBIND_TOKEN"
    export KUBE_API KUBE_ADMIN KUBE_GPUORCH KUBE_NOBIND KUBE_ADMIN_TOKEN KUBE_GPUORCH_TOKEN \
        KUBE_NOBIND_TOKEN KUBE_BIN

    kube_wait_http "http://127.0.0.1:$KUBE_ETCD_PORT/health" 30 ||
        kube_log_fail "$KUBE_DIR/etcd.log" "etcd did not answer on 127.0.0.1:$KUBE_ETCD_PORT in 30 s"
    kube_start_apiserver
    kube_wait_apiserver

    "$KUBE_BIN/kube-controller-manager" --kubeconfig="$KUBE_ADMIN" \
        --controllers=job,replicaset,deployment,garbagecollector \
        --bind-address=127.0.0.1 --secure-port=0 --port=0 --leader-elect=false \
        >"$KUBE_DIR/controller-manager.log" 2>&1 &
    KUBE_CM_PID=$!
    KUBE_PIDS="$KUBE_PIDS $KUBE_CM_PID"
    KUBE_UP_S=$(echo "$kube_t0 $(date +%s.%N)" | awk '{printf "%.1f", $2 - $1}')
    echo "kube_up: control plane on $KUBE_API in ${KUBE_UP_S} s" >&2
}

# kube_restart_apiserver: kill -9 the API server (a crash, not a drain) and start it
# again on the same port, etcd and certificates; returns when it is ready again.
kube_restart_apiserver() {
    [ -n "$KUBE_APISERVER_PID" ] || fail "kube_restart_apiserver before kube_up"
    kill -KILL "$KUBE_APISERVER_PID" 2>/dev/null || true
    wait "$KUBE_APISERVER_PID" 2>/dev/null || true
    echo "--- kube_restart_apiserver $(date +%T)" >>"$KUBE_DIR/apiserver.log"
    kube_start_apiserver
    kube_wait_apiserver
}

# kube_own PID: kube_down stops it (SIGTERM, SIGKILL after 3 s) before the control plane.
kube_own() {
    KUBE_OWN_PIDS="$KUBE_OWN_PIDS $1"
}

# kube_down: the controller manager and the API server first (SIGKILL after 5 s: the
# 1.20 API server can take over 10 s to drain), then etcd; then the data.
kube_down() {
    for p in $KUBE_OWN_PIDS $FAKE_NODE_PIDS; do kube_stop "$p" 3; done
    KUBE_OWN_PIDS=""
    FAKE_NODE_PIDS=""
    [ -n "$KUBE_DIR" ] || return 0
    for p in $KUBE_CM_PID $KUBE_APISERVER_PID; do kill -TERM "$p" 2>/dev/null || true; done
    kube_stop "$KUBE_CM_PID" 5
    kube_stop "$KUBE_APISERVER_PID" 5
    kube_stop "$KUBE_ETCD_PID" 5
    for p in $KUBE_PIDS; do kill -KILL "$p" 2>/dev/null || true; done
    case $KUBE_ETCD_DATA in /dev/shm/gpuorch-etcd.*) rm -rf "$KUBE_ETCD_DATA" ;; esac
    rm -rf "$KUBE_DIR"
    KUBE_DIR=""
    KUBE_PIDS=""
}

# The Python that runs fake_node.py: the interpreter itself, not a wrapper (a pyenv
# shim forks, and a signal to it would not reach the fake node).
KUBE_PY=$(python3 -c 'import sys; print(sys.executable)')
FAKE_NODE_PIDS=""

# fake_node ARGS...: tests/kube/fake_node.py as the admin, in the foreground
# (fake_node create --nodes 4 --prefix h100 ...).
fake_node() {
    "$KUBE_PY" "$KUBE_TESTS/fake_node.py" --kubeconfig "$KUBE_ADMIN" "$@"
}

# fake_node_start LOG ARGS...: `fake_node.py run ARGS` in the background, its stderr
# appended to LOG; its PID in FAKE_NODE_PID (stopped on exit).
fake_node_start() {
    fn_log=$1
    shift
    "$KUBE_PY" "$KUBE_TESTS/fake_node.py" --kubeconfig "$KUBE_ADMIN" run "$@" 2>>"$fn_log" &
    FAKE_NODE_PID=$!
    FAKE_NODE_PIDS="$FAKE_NODE_PIDS $FAKE_NODE_PID"
}

# fake_node_stop [PID]: SIGTERM to a fake node (default: the last started); its exit
# status is returned (0: it stopped cleanly).
fake_node_stop() {
    fn_pid=${1:-$FAKE_NODE_PID}
    kill -TERM "$fn_pid" 2>/dev/null || return 1
    fn_rc=0
    wait "$fn_pid" || fn_rc=$?
    return $fn_rc
}

# kctl ARGS...: kubectl as the admin. kubectl 1.32 warns about its skew to the 1.20
# server; those lines are dropped from stderr, the rest (and the exit status) kept.
kctl() {
    kctl_as "$KUBE_ADMIN" "$@"
}

# kctl_as KUBECONFIG ARGS...: kubectl with another kubeconfig, filtered the same way.
kctl_as() {
    kctl_kc=$1
    shift
    kctl_err=$(mktemp "$T/.kctl.XXXXXX")
    kctl_rc=0
    kubectl --kubeconfig "$kctl_kc" "$@" 2>"$kctl_err" || kctl_rc=$?
    grep -v -i -e 'version difference between client' -e 'exceeds the supported minor version skew' \
        "$kctl_err" >&2 || true
    rm -f "$kctl_err"
    return $kctl_rc
}

# kube_wait SECONDS DESCRIPTION CMD...: until CMD succeeds (every 0.2 s), else fail.
kube_wait() {
    n=$(($1 * 5))
    what=$2
    shift 2
    until "$@" >/dev/null 2>&1; do
        n=$((n - 1))
        [ "$n" -gt 0 ] || fail "not within the time: $what"
        sleep 0.2
    done
}

# kube_deploy: what a platform team applies before gpuorch runs (the Deployment aside: no
# kubelet runs it here), and the ClusterRole bound to the test user gpuorch too.
kube_deploy() {
    kctl create namespace gpu-operator >/dev/null
    kctl apply -f "$KUBE_ROOT/deploy/kubernetes/namespace.yaml" \
        -f "$KUBE_ROOT/deploy/kubernetes/podgroup-crd.yaml" \
        -f "$KUBE_ROOT/deploy/kubernetes/priorityclasses.yaml" \
        -f "$KUBE_ROOT/deploy/kubernetes/rbac.yaml" \
        -f "$KUBE_TESTS/rbac-test-user.yaml" >"$T/apply.log" || fail "kubectl apply deploy/kubernetes"
    kube_wait 30 "the PodGroup CRD is established" \
        kube_holds /apis/apiextensions.k8s.io/v1/customresourcedefinitions/podgroups.scheduling.x-k8s.io \
        '[c for c in d["status"]["conditions"] if c["type"] == "Established" and c["status"] == "True"]'
}

# kube_api TOKEN METHOD PATH [BODY [CONTENT_TYPE]]: one request with that bearer token
# ($KUBE_ADMIN_TOKEN, $KUBE_GPUORCH_TOKEN); the body in $T/out, the status in KSTATUS.
kube_api() {
    ka_tok=$1 ka_method=$2 ka_path=$3
    if [ $# -ge 4 ]; then
        KSTATUS=$(curl -sk -o "$T/out" -w '%{http_code}' -X "$ka_method" -H "Authorization: Bearer $ka_tok" \
            -H "Content-Type: ${5:-application/json}" --data-binary "$4" "$KUBE_API$ka_path") || KSTATUS=000
    else
        KSTATUS=$(curl -sk -o "$T/out" -w '%{http_code}' -X "$ka_method" -H "Authorization: Bearer $ka_tok" \
            "$KUBE_API$ka_path") || KSTATUS=000
    fi
}

# kube_bind TOKEN NAMESPACE POD NODE: the binding a scheduler posts; KSTATUS 201 when it
# took.
kube_bind() {
    kube_api "$1" POST "/api/v1/namespaces/$2/pods/$3/binding" \
        "{\"apiVersion\":\"v1\",\"kind\":\"Binding\",\"metadata\":{\"name\":\"$3\"},\"target\":{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"name\":\"$4\"}}"
}

# kube_json PATH EXPR: GET PATH as the admin, print the Python expression over d.
kube_json() {
    curl -sk -H "Authorization: Bearer $KUBE_ADMIN_TOKEN" "$KUBE_API$1" |
        python3 -c 'import json,sys; d = json.load(sys.stdin); print(eval(sys.argv[1]))' "$2"
}

# kube_holds PATH EXPR: GET PATH as the admin; 0 when the Python expression over d holds.
kube_holds() {
    curl -sk -H "Authorization: Bearer $KUBE_ADMIN_TOKEN" "$KUBE_API$1" 2>/dev/null |
        python3 -c 'import json,sys; d = json.load(sys.stdin); sys.exit(0 if eval(sys.argv[1]) else 1)' "$2" 2>/dev/null
}
