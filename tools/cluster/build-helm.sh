#!/usr/bin/env bash
# Builds (or reuses) helm at HELM_VERSION from the Go module proxy into the directory given as $1 (build.sh
# passes its bin directory, so kubectl and helm sit side by side). Its own stamp: a helm bump rebuilds helm only.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin="${1:?usage: build-helm.sh BIN_DIR}"
HELM_VERSION="$(sed -n 's/^HELM_VERSION=//p' "$here/versions.env")"
[[ -n "$HELM_VERSION" ]] || { echo "cluster-tools: no HELM_VERSION in $here/versions.env" >&2; exit 1; }

stamp_value="$(printf '%s\n' "$HELM_VERSION" | cat - "$here/build-helm.sh" | sha256sum | cut -d' ' -f1) $(go env GOVERSION)"
if [[ -x "$bin/helm" && -f "$bin/.stamp-helm" && "$(cat "$bin/.stamp-helm")" == "$stamp_value" ]]; then
  exit 0
fi

rm -f "$bin/.stamp-helm"
start=$(date +%s)
echo "cluster-tools: building helm ${HELM_VERSION}" >&2
# The module path carries the major version (helm.sh/helm/v4); a module build reports no version unless
# it is stamped the way Helm's own Makefile does.
module="helm.sh/helm/${HELM_VERSION%%.*}"
(cd "$bin" && CGO_ENABLED=0 GOFLAGS= GOBIN="$bin" go install -trimpath \
  -ldflags "-s -w -X $module/internal/version.version=${HELM_VERSION} -X $module/internal/version.gitTreeState=clean" \
  "$module/cmd/helm@${HELM_VERSION}")
echo "$stamp_value" > "$bin/.stamp-helm"
echo "cluster-tools: built helm in $(( $(date +%s) - start ))s" >&2
