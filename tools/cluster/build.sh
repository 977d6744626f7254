#!/usr/bin/env bash
# Builds (or reuses) kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, the kubelet and kube-proxy
# (for the real node), etcd, kwok and helm (build-helm.sh), from the Go module proxy into a cache outside the
# repo, and prints the directory that holds them. etcd, kwok and helm are built once for every release. K8S_VERSION picks the Kubernetes release (versions.env: the pinned one by default).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=k8s-version.sh
. "$here/k8s-version.sh"

# The control plane's certificates are made with openssl; install it where the machine lacks it.
if ! command -v openssl >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [[ "$(id -u)" == 0 ]]; then
    echo "cluster-tools: installing openssl" >&2
    apt-get update -qq >&2 && apt-get install -y -qq openssl >&2
  else
    echo "cluster-tools: openssl is required to start the local control plane; please install it" >&2
    exit 1
  fi
fi

cache_root="${DPO_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/dpo}"
bin="$cache_root/k8s-${KUBERNETES_VERSION}-etcd-${ETCD_VERSION}-kwok-${KWOK_VERSION}/bin"
# The stamp covers every input of the build, so an edited go.mod or a new Go rebuilds. Only the control
# plane's lines of versions.env count: a helm bump is build-helm.sh's business.
stamp_value="$({ echo "KUBERNETES_VERSION=${KUBERNETES_VERSION}"; grep -E '^(ETCD|KWOK)_VERSION=' "$here/versions.env"; } \
  | cat - "$here/build.sh" "$K8S_MODULE_DIR"/go.mod "$K8S_MODULE_DIR"/go.sum "$here"/etcd/go.mod "$here"/etcd/go.sum "$here"/etcd/main.go \
  | sha256sum | cut -d' ' -f1) $(go env GOVERSION)"

if [[ -f "$bin/.stamp" && "$(cat "$bin/.stamp")" == "$stamp_value" ]]; then
  "$here/build-helm.sh" "$bin"
  echo "$bin"
  exit 0
fi

log() { echo "cluster-tools: $*" >&2; }
mkdir -p "$bin"
rm -f "$bin/.stamp"
start=$(date +%s)

build_date="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
ldflags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=${KUBERNETES_VERSION} -X $pkg.gitMajor=1 -X $pkg.gitMinor=${K8S_MINOR}"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=${build_date}"
done

export CGO_ENABLED=0 GOFLAGS=-mod=mod
# Every Go build of the project compiles without DWARF (-gcflags=all=-dwarf=false): the binaries are
# stripped at link (-s -w) anyway, the compiler then spends 6-11% less CPU on a cold cache (docs/benchmarks.md,
# "the local control plane"), and the same flags everywhere let builds share compiled packages.
log "building Kubernetes ${KUBERNETES_VERSION} (kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kubelet, kube-proxy)"
(cd "$K8S_MODULE_DIR" && go build -trimpath -gcflags=all=-dwarf=false -ldflags "-s -w $ldflags" -o "$bin/" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl k8s.io/kubernetes/cmd/kubelet \
  k8s.io/kubernetes/cmd/kube-proxy)

# etcd and kwok are the same for every Kubernetes release: built once into the cache, under a lock (two
# releases' builds may run at once), and linked into each release's directory.
shared_stamp="$({ grep -E '^(ETCD|KWOK)_VERSION=' "$here/versions.env"; } \
  | cat - "$here"/etcd/go.mod "$here"/etcd/go.sum "$here"/etcd/main.go | sha256sum | cut -d' ' -f1) $(go env GOVERSION)"
shared="$cache_root/etcd-${ETCD_VERSION}-kwok-${KWOK_VERSION}-$(go env GOVERSION)"
mkdir -p "$shared"
exec 9>"$shared/.lock"
flock 9
if ! [[ -f "$shared/.stamp" && "$(cat "$shared/.stamp")" == "$shared_stamp" ]]; then
  rm -f "$shared/.stamp"
  log "building etcd ${ETCD_VERSION}"
  (cd "$here/etcd" && go build -trimpath -gcflags=all=-dwarf=false -ldflags "-s -w" -o "$shared/etcd" .)
  log "building kwok ${KWOK_VERSION}"
  (cd "$shared" && GOFLAGS= GOBIN="$shared" go install -trimpath -gcflags=all=-dwarf=false -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@${KWOK_VERSION}")
  echo "$shared_stamp" > "$shared/.stamp"
fi
for tool in etcd kwok; do
  rm -f "$bin/$tool"
  ln "$shared/$tool" "$bin/$tool" 2>/dev/null || cp "$shared/$tool" "$bin/$tool"
done
exec 9>&-

echo "$stamp_value" > "$bin/.stamp"
log "built in $(( $(date +%s) - start ))s; $(du -sh "$bin" | cut -f1) in $bin"
"$here/build-helm.sh" "$bin"
echo "$bin"
