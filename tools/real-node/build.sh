#!/usr/bin/env bash
# Builds (or reuses) what the real node runs besides the kubelet (tools/cluster/build.sh builds the kubelet
# and kube-proxy with the control plane): containerd 2.x, its runc shim and ctr from the Go module proxy into
# the tools cache, and installs from Debian's packages what the node needs on the machine (runc, the CNI
# plugins, iptables for kube-proxy). Prints the directory that holds containerd's binaries.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
command -v go >/dev/null 2>&1 || export PATH="$PATH:/usr/local/go/bin"
log() { echo "real-node: $*" >&2; }

# Debian's packages, each checked by the file the node uses; one apt at a time on the machine (`make test`
# runs builds side by side).
missing=()
[[ -x /usr/sbin/runc || -x /usr/bin/runc ]] || missing+=(runc)
[[ -x /usr/lib/cni/bridge ]] || missing+=(containernetworking-plugins)
command -v iptables >/dev/null 2>&1 || missing+=(iptables)
command -v conntrack >/dev/null 2>&1 || missing+=(conntrack)
if (( ${#missing[@]} > 0 )); then
  if [[ "$(id -u)" != 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
    log "the real node needs Debian's ${missing[*]}; install them as root (apt-get install ${missing[*]})"
    exit 1
  fi
  log "installing ${missing[*]}"
  flock /tmp/dpo-apt.lock apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive flock /tmp/dpo-apt.lock apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

version="$(sed -n 's|^require github.com/containerd/containerd/v2 ||p' "$here/containerd/go.mod")"
cache_root="${DPO_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/dpo}"
stamp="$(cat "$here/build.sh" "$here/containerd/go.mod" "$here/containerd/go.sum" | sha256sum | cut -c1-16)-$(go env GOVERSION)"
bin="$cache_root/containerd-${version}-${stamp}/bin"
if [[ -x "$bin/containerd" && -x "$bin/containerd-shim-runc-v2" && -x "$bin/ctr" ]]; then
  echo "$bin"
  exit 0
fi

start=$(date +%s)
log "building containerd ${version} (containerd, containerd-shim-runc-v2, ctr)"
tmp="$(mktemp -d "${bin%/bin}.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
# Static, as containerd's release builds are; the btrfs snapshotter needs cgo and the node uses overlayfs.
(cd "$here/containerd" && CGO_ENABLED=0 GOFLAGS="-mod=mod -buildvcs=false" go build -trimpath -gcflags=all=-dwarf=false -tags no_btrfs \
  -ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=${version}" -o "$tmp/" \
  github.com/containerd/containerd/v2/cmd/containerd github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 \
  github.com/containerd/containerd/v2/cmd/ctr)
mkdir -p "$bin"
mv -f "$tmp"/* "$bin/"
log "built in $(( $(date +%s) - start ))s into $bin"
echo "$bin"
