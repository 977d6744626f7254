#!/usr/bin/env bash
# Builds (or reuses) the upstream Go sample device plugin (k8s.io/kubernetes/test/images/sample-device-plugin)
# at KUBERNETES_VERSION through its wrapper module in k8s/, into the cache build.sh uses, and prints the path
# of the binary. `make bench-plugin` runs it beside dpo. The directory is named after a hash of every build
# input, so a warm cache costs one hash and a Kubernetes bump or a new Go builds it again.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
command -v go >/dev/null 2>&1 || export PATH="$PATH:/usr/local/go/bin"
# shellcheck source=k8s-version.sh
. "$here/k8s-version.sh"

cache_root="${DPO_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/dpo}"
stamp="$(echo "KUBERNETES_VERSION=${KUBERNETES_VERSION}" | cat - "$here/build-sample-device-plugin.sh" \
  "$K8S_MODULE_DIR/go.mod" "$K8S_MODULE_DIR/go.sum" | sha256sum | cut -c1-16)-$(go env GOVERSION)"
dir="$cache_root/sample-device-plugin-$stamp"
if [[ -x "$dir/sampledeviceplugin" ]]; then
  echo "$dir/sampledeviceplugin"
  exit 0
fi

start=$(date +%s)
mkdir -p "$dir"
# Built beside the final name and renamed, so a concurrent or interrupted build never leaves a partial
# binary where the check above would take it.
tmp="$(mktemp "$dir/.sampledeviceplugin.XXXXXX")"
trap 'rm -f "$tmp"' EXIT
# As the upstream image is built (test/images/image-util.sh): static, symbol table kept, no DWARF.
(cd "$K8S_MODULE_DIR" && CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false" go build -trimpath -gcflags=all=-dwarf=false -ldflags "-w" \
  -o "$tmp" k8s.io/kubernetes/test/images/sample-device-plugin)
mv -f "$tmp" "$dir/sampledeviceplugin"
trap - EXIT
echo "sample-device-plugin: built in $(( $(date +%s) - start ))s into $dir" >&2
echo "$dir/sampledeviceplugin"
