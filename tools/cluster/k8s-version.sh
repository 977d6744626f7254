#!/usr/bin/env bash
# Sourced by the build scripts: sets KUBERNETES_VERSION to the release this run uses (K8S_VERSION, or the pinned
# one of versions.env), K8S_MINOR to its minor and K8S_MODULE_DIR to its wrapper module, or fails naming the
# releases there are.
# shellcheck source=versions.env
. "$here/versions.env"
if [[ -n "${K8S_VERSION:-}" ]]; then
  KUBERNETES_VERSION="v${K8S_VERSION#v}"
fi
K8S_MINOR="${KUBERNETES_VERSION#v1.}"
K8S_MINOR="${K8S_MINOR%%.*}"
K8S_MODULE_DIR="$here/k8s/v1.${K8S_MINOR}"
if ! grep -qx "require k8s.io/kubernetes ${KUBERNETES_VERSION}" "$K8S_MODULE_DIR/go.mod" 2>/dev/null; then
  echo "K8S_VERSION=${KUBERNETES_VERSION}: no wrapper module for it in tools/cluster/k8s/ (there are:" \
    "$(grep -h '^require k8s.io/kubernetes' "$here"/k8s/*/go.mod | cut -d' ' -f3 | tr '\n' ' '))" >&2
  exit 2
fi
