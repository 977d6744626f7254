#!/usr/bin/env bash
# Regenerates the TypeScript for the kubelet wire contract (src/plugin-runtime/proto/**/*.proto) into
# src/plugin-runtime/proto/gen/ with ts-proto. `make proto` runs it; the output is committed.
# Every .proto under src/plugin-runtime/proto is generated (device plugin v1beta1, plugin registration,
# PodResources v1, DRA plugin v1 and v1beta1); a new file needs no change here.
#
# Why these ts-proto options:
#   outputServices=grpc-js    service definitions (method paths, streaming flags, serializers), a typed
#                             server interface and a client constructor for @grpc/grpc-js. The client
#                             constructors are then moved from each api.ts to a clients.ts beside it
#                             (tools/proto/split-clients.ts): api.ts loads no grpc-js at run time, so
#                             the plugin, which serves on node:http2 (ADR 0008), never loads it.
#   esModuleInterop=true      matches tsconfig.json.
#   importSuffix=.js          the package is ESM with NodeNext resolution: relative imports need it.
#   env=node                  bytes are Buffers, no browser shims.
#   forceLong=number          the 64-bit fields are NUMA node ids, CPU ids and memory sizes in bytes, all
#                             far below 2^53; plain numbers are what the rest of the code uses (decoding
#                             throws beyond Number.MAX_SAFE_INTEGER).
#   useOptionals=messages     nested message fields (RegisterRequest.options, Device.topology) are
#                             optional keys, so object literals can leave them out; scalars, lists and
#                             maps stay required and decode to their proto3 defaults.
#   annotateFilesWithVersion=false
#                             no protoc/ts-proto version line: the output depends only on the .proto
#                             files and the locked ts-proto, so re-running gives identical files.
# Usage: tools/proto/generate.sh [--check]
#   --check  regenerate into a scratch directory and fail if the committed output differs.
#
# Field names are ts-proto's camelCase of the proto names (resource_name -> resourceName,
# available_deviceIDs -> availableDeviceIDs, devices_ids -> devicesIds); ID stays ID.
set -euo pipefail

check_only=false
case "${1:-}" in
  "") ;;
  --check) check_only=true ;;
  *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
proto_root="$repo_root/src/plugin-runtime/proto"
out_dir="$proto_root/gen"
plugin="$repo_root/node_modules/.bin/protoc-gen-ts_proto"

if ! command -v protoc >/dev/null 2>&1; then
  echo "protoc not found; installing Debian's protobuf-compiler" >&2
  sudo_cmd=()
  if [[ "$(id -u)" -ne 0 ]]; then sudo_cmd=(sudo); fi
  "${sudo_cmd[@]}" apt-get update
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y --no-install-recommends protobuf-compiler
fi

if [[ ! -x "$plugin" ]]; then
  echo "ts-proto is missing from node_modules; run npm ci (make deps) first" >&2
  exit 1
fi

# Relative paths with -I keep the "source:" header and the generated layout independent of where the
# repository is checked out; sorting keeps the input order stable.
cd "$proto_root"
mapfile -t proto_files < <(find . -path ./gen -prune -o -name '*.proto' -print | sed 's|^\./||' | LC_ALL=C sort)

# Generate into a scratch directory and swap it in, so files of deleted .proto files do not linger.
scratch="$(mktemp -d "$proto_root/.gen.XXXXXX")"
trap 'rm -rf "$scratch"' EXIT

generate() {
  protoc \
    --plugin="protoc-gen-ts_proto=$plugin" \
    -I . \
    --ts_proto_out="$scratch" \
    --ts_proto_opt=outputServices=grpc-js \
    --ts_proto_opt=esModuleInterop=true \
    --ts_proto_opt=importSuffix=.js \
    --ts_proto_opt=env=node \
    --ts_proto_opt=forceLong=number \
    --ts_proto_opt=useOptionals=messages \
    --ts_proto_opt=annotateFilesWithVersion=false \
    "$@"
}
dra_files=()
kubelet_files=()
for file in "${proto_files[@]}"; do
  case "$file" in
    dra*) dra_files+=("$file") ;;
    *) kubelet_files+=("$file") ;;
  esac
done
# The APIs every device plugin loads (device plugin, registration, PodResources) without the JSON and
# partial methods (fromJSON, toJSON, fromPartial, create): a device plugin only encodes and decodes, and
# V8 keeps the source of every function a plugin loads, used or not. The DRA plugin builds its messages
# with fromPartial.
if ((${#kubelet_files[@]} > 0)); then
  generate --ts_proto_opt=outputJsonMethods=false --ts_proto_opt=outputPartialMethods=false "${kubelet_files[@]}"
fi
if ((${#dra_files[@]} > 0)); then generate "${dra_files[@]}"; fi

node --import tsx "$repo_root/tools/proto/split-clients.ts" "$scratch"

if [[ "$check_only" == true ]]; then
  if ! diff -r "$out_dir" "$scratch" >&2; then
    echo "${out_dir#"$repo_root"/} is stale: run make proto and commit the result" >&2
    exit 1
  fi
  echo "${out_dir#"$repo_root"/} is up to date"
  exit 0
fi

rm -rf "$out_dir"
mv "$scratch" "$out_dir"
chmod 755 "$out_dir"
trap - EXIT
echo "generated $(find "$out_dir" -name '*.ts' | wc -l) files in ${out_dir#"$repo_root"/}"
