#!/usr/bin/env bash
# Builds (or reuses) one of the small Go harnesses under tools/ (its directory is the argument, its binary
# named after the directory) from the Go module proxy into the cache that tools/cluster/build.sh uses, and
# prints the path of the binary. The cache directory is named after a hash of every build input, so a
# warm cache costs one hash and different checkouts never overwrite each other.
set -euo pipefail
here="$(cd "$1" && pwd)"
name="$(basename "$here")"
shared="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/build-go-harness.sh"
command -v go >/dev/null 2>&1 || export PATH="$PATH:/usr/local/go/bin"

cache_root="${DPO_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/dpo}"
stamp="$(cat "$shared" "$here/build.sh" "$here/go.mod" "$here/go.sum" "$here"/*.go | sha256sum | cut -c1-16)-$(go env GOVERSION)"
dir="$cache_root/$name-$stamp"
if [[ -x "$dir/$name" ]]; then
  echo "$dir/$name"
  exit 0
fi

start=$(date +%s)
mkdir -p "$dir"
# Built beside the final name and renamed, so a concurrent build or an interrupted one never leaves a
# partial binary where the check above would take it.
tmp="$(mktemp "$dir/.$name.XXXXXX")"
trap 'rm -f "$tmp"' EXIT
(cd "$here" && CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false" go build -trimpath -gcflags=all=-dwarf=false -ldflags "-s -w" -o "$tmp" .)
mv -f "$tmp" "$dir/$name"
trap - EXIT
echo "$name: built in $(( $(date +%s) - start ))s into $dir" >&2
echo "$dir/$name"
