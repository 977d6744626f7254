#!/usr/bin/env bash
# Builds (or reuses) promtool, Prometheus' rules checker and rule unit-test runner, from the Go module proxy
# into the cache the other tools use, and prints the path of the binary. The cache directory is named after a
# hash of this script (which pins the version) and the Go version, so a warm cache costs one hash.
set -euo pipefail
command -v go >/dev/null 2>&1 || export PATH="$PATH:/usr/local/go/bin"

# Prometheus 3.x publishes its Go module as v0.<major*100+minor>.<patch>: v0.316.0 is Prometheus 3.16.0.
PROMETHEUS_MODULE_VERSION=v0.316.0
# promtool links every service-discovery plugin through prometheus/plugins; dpo's rules need none of them,
# and leaving them out (the build tag Prometheus' own plugins.yml documents) halves the build.
TAGS=remove_all_sd

self="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/build.sh"
cache_root="${DPO_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/dpo}"
stamp="$(sha256sum < "$self" | cut -c1-16)-$(go env GOVERSION)"
dir="$cache_root/promtool-$stamp"
if [[ -x "$dir/promtool" ]]; then
  echo "$dir/promtool"
  exit 0
fi

start=$(date +%s)
mkdir -p "$dir"
# Installed into a scratch directory and renamed, so a concurrent or interrupted build never leaves a
# partial binary where the check above would take it.
tmp="$(mktemp -d "$dir/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
CGO_ENABLED=0 GOFLAGS=-buildvcs=false GOBIN="$tmp" go install -trimpath -gcflags=all=-dwarf=false -tags "$TAGS" -ldflags "-s -w" \
  "github.com/prometheus/prometheus/cmd/promtool@${PROMETHEUS_MODULE_VERSION}"
mv -f "$tmp/promtool" "$dir/promtool"
echo "promtool: built in $(( $(date +%s) - start ))s into $dir" >&2
echo "$dir/promtool"
