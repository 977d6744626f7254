#!/usr/bin/env bash
# Builds (or reuses) helm at HELM_VERSION from the Go module proxy and puts it in the directory given as $1
# (build.sh passes its bin directory, so kubectl and helm sit side by side). Its own stamp: a helm bump
# rebuilds helm only. One build serves every Kubernetes release's directory (it is the same helm), made once
# in the cache under a lock and linked into each.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin="${1:?usage: build-helm.sh BIN_DIR}"
HELM_VERSION="$(sed -n 's/^HELM_VERSION=//p' "$here/versions.env")"
[[ -n "$HELM_VERSION" ]] || { echo "cluster-tools: no HELM_VERSION in $here/versions.env" >&2; exit 1; }

stamp_value="$(printf '%s\n' "$HELM_VERSION" | cat - "$here/build-helm.sh" | sha256sum | cut -d' ' -f1) $(go env GOVERSION)"
if [[ -x "$bin/helm" && -f "$bin/.stamp-helm" && "$(cat "$bin/.stamp-helm")" == "$stamp_value" ]]; then
  exit 0
fi

cache_root="${DPO_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/dpo}"
shared="$cache_root/helm-${HELM_VERSION}-$(go env GOVERSION)"
mkdir -p "$shared"
# Two releases' builds at once (make -j) wait for one helm build.
exec 9>"$shared/.lock"
flock 9
if ! [[ -x "$shared/helm" && -f "$shared/.stamp-helm" && "$(cat "$shared/.stamp-helm")" == "$stamp_value" ]]; then
  rm -f "$shared/.stamp-helm"
  start=$(date +%s)
  echo "cluster-tools: building helm ${HELM_VERSION}" >&2
  # The module path carries the major version (helm.sh/helm/v4); a module build reports no version unless
  # it is stamped the way Helm's own Makefile does.
  module="helm.sh/helm/${HELM_VERSION%%.*}"
  (cd "$shared" && CGO_ENABLED=0 GOFLAGS= GOBIN="$shared" go install -trimpath -gcflags=all=-dwarf=false \
    -ldflags "-s -w -X $module/internal/version.version=${HELM_VERSION} -X $module/internal/version.gitTreeState=clean" \
    "$module/cmd/helm@${HELM_VERSION}")
  echo "$stamp_value" > "$shared/.stamp-helm"
  echo "cluster-tools: built helm in $(( $(date +%s) - start ))s" >&2
fi
rm -f "$bin/.stamp-helm" "$bin/helm"
ln "$shared/helm" "$bin/helm" 2>/dev/null || cp "$shared/helm" "$bin/helm"
echo "$stamp_value" > "$bin/.stamp-helm"
