#!/bin/sh
# tools/k8s-control-plane.sh: print the directory holding a real kube-apiserver,
# kube-controller-manager and kube-scheduler, building them once from Debian's source
# package `kubernetes` when the cache does not have them yet.
#
# The Kubernetes tests and the Kubernetes benchmark run these binaries; Debian ships only
# kubectl, so we build the control plane from its source package with Debian's Go. The
# cache lives outside the clone (GPUORCH_CACHE, default ~/.cache/gpuorch) and is keyed by
# the source package's version, so a machine builds once (7-12 minutes on 2 cores) and
# every later run starts at once. Progress goes to stderr; stdout is the one directory.
set -eu

cache=${GPUORCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuorch}
bins="kube-apiserver kube-controller-manager kube-scheduler"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo

have_all() {
    for b in $bins; do [ -x "$1/$b" ] || return 1; done
}

# The tests drive the control plane with kubectl: Debian's when none is on the PATH.
command -v kubectl >/dev/null || "$(dirname "$0")/install-deps.sh" kubernetes-client >&2

# A cached build of any version answers at once without touching apt.
for d in "$cache"/kubernetes-*/bin; do
    if [ -d "$d" ] && have_all "$d"; then
        echo "$d"
        exit 0
    fi
done

say() { echo "k8s-control-plane: $*" >&2; }

# Debian's source lists, for the same archive the machine already uses.
src_list=/etc/apt/sources.list.d/gpuorch-debian-src.sources
if ! grep -rqs '^Types:.*deb-src' /etc/apt/sources.list.d/ && ! grep -qs '^deb-src' /etc/apt/sources.list; then
    say "adding Debian's deb-src lists ($src_list)"
    $SUDO sh -c "cat > $src_list" <<'EOT'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOT
    $SUDO apt-get update -qq >&2
fi
"$(dirname "$0")/install-deps.sh" golang-go dpkg-dev rsync etcd-server \
    golang-github-modern-go-reflect2-dev golang-github-json-iterator-go-dev >&2

work=$(mktemp -d "${TMPDIR:-/tmp}/gpuorch-k8s-build.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"
say "fetching Debian's kubernetes source package"
apt-get source --download-only kubernetes >&2 2>&1 | tail -2 >&2 || true
dsc=$(ls kubernetes_*.dsc 2>/dev/null | head -1)
[ -n "$dsc" ] || {
    say "apt-get source kubernetes gave no .dsc (are deb-src lists reachable?)"
    exit 1
}
version=$(sed -n 's/^Version: //p' "$dsc" | head -1)
out="$cache/kubernetes-$version/bin"
dpkg-source -x "$dsc" k8s >/dev/null
cd k8s

# Go 1.19 with the vendored reflect2 1.0.1 crashes the apiserver about a minute after it
# starts ("fatal error: fault" in mapiterinit); Debian's packaged copies do not.
for d in modern-go/reflect2 json-iterator/go; do
    rm -rf "vendor/github.com/$d"
    mkdir -p "vendor/github.com/$d"
    cp -r "/usr/share/gocode/src/github.com/$d/." "vendor/github.com/$d/"
    rm -rf "vendor/github.com/$d/"*_test.go "vendor/github.com/$d/"test*
done
# GOPATH mode, as debian/rules builds it (module mode wants go.mod updates).
mkdir -p .go/src/k8s.io
ln -sfn ../../.. .go/src/k8s.io/kubernetes
say "building $bins from kubernetes $version (about 10 minutes on 2 cores)"
GOPATH=$PWD/.go CGO_ENABLED=0 HOME=$PWD/.gohome GOCACHE=$PWD/.gocache \
    make WHAT="cmd/kube-apiserver cmd/kube-controller-manager cmd/kube-scheduler" >&2
mkdir -p "$out.tmp"
for b in $bins; do cp "_output/bin/$b" "$out.tmp/"; done
rm -rf "$out"
mv "$out.tmp" "$out"
say "cached in $out"
echo "$out"
