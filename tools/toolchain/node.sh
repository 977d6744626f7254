#!/usr/bin/env bash
# Prints the directory of the Node.js binary the project runs on: the machine's own when it is the pinned
# major or newer, otherwise the pinned release installed once from the npm registry (the `node` package)
# into .local/toolchain. The Makefile puts that directory first on PATH, so npm, npx, vitest and every
# process the tests start run on it.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
pinned="$(tr -d '[:space:]' < "$root/.node-version")"
pinned_major="${pinned%%.*}"

machine_major=0
if command -v node >/dev/null 2>&1; then
  machine_major="$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)"
fi
if [[ "${DPO_USE_MACHINE_NODE:-}" == 1 || "$machine_major" -ge "$pinned_major" && -z "${DPO_PIN_NODE:-}" ]]; then
  dirname "$(command -v node)"
  exit 0
fi

prefix="$root/.local/toolchain/node-v$pinned"
bin="$prefix/node_modules/node/bin"
if [[ -x "$bin/node" && "$("$bin/node" --version)" == "v$pinned" ]]; then
  echo "$bin"
  exit 0
fi

if ! command -v npm >/dev/null 2>&1; then
  echo "toolchain: npm is needed to install Node.js v$pinned (the machine has Node ${machine_major})" >&2
  exit 1
fi
echo "toolchain: installing Node.js v$pinned into ${prefix#"$root"/} (the machine has Node ${machine_major})" >&2
rm -rf "$prefix"
mkdir -p "$prefix"
# A package.json of its own keeps npm from treating the project (and its engines) as the install root.
echo '{"private":true}' > "$prefix/package.json"
(cd "$prefix" && npm install --prefix "$prefix" --no-audit --no-fund --no-save --loglevel=error "node@$pinned" >&2)
if [[ "$("$bin/node" --version)" != "v$pinned" ]]; then
  echo "toolchain: the installed Node.js says $("$bin/node" --version), not v$pinned" >&2
  exit 1
fi
echo "$bin"
