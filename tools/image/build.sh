#!/usr/bin/env bash
# Builds the images declared in tools/image/images.ts as OCI archives under .local/image/, with no container
# engine (see README.md here) and prints each archive's path:
#   tools/image/build.sh [dpo|pause|busybox|sample-device-plugin|test-images|all]...   (dpo when none is named; `make image`)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# The project's Node runs the script (tsx); the image's own node binary is the pinned release, found by build.ts.
PATH="$("$root/tools/toolchain/node.sh"):$PATH"
command -v go >/dev/null 2>&1 || PATH="$PATH:/usr/local/go/bin"
export PATH
for tool in apt-get dpkg-deb tar ldd unshare go npm; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "image: $tool is missing (the images are built from Debian packages, with Go and npm)" >&2
    exit 1
  fi
done
# The dpo image's other architecture runs under QEMU while it is built (its compile cache) and in the image
# test: Debian's qemu-user-static, installed here as root as tools/real-node/build.sh installs the real
# node's packages. Not root, build.ts names the package when it finds no emulator.
case "$(uname -m)" in
  x86_64) qemu=qemu-aarch64-static ;;
  aarch64) qemu=qemu-x86_64-static ;;
  *) qemu="" ;;
esac
if [[ -n "$qemu" && ( $# -eq 0 || " $* " == *" dpo "* || " $* " == *" all "* ) ]] \
  && ! command -v "$qemu" >/dev/null 2>&1 && [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null 2>&1; then
  echo "image: installing qemu-user-static (for $qemu)" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends qemu-user-static >&2 || {
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends qemu-user-static >&2
  }
fi
if [[ ! -d "$root/node_modules/tsx" ]]; then
  echo "image: node_modules is missing: run make deps (make image does)" >&2
  exit 1
fi
cd "$root"
exec node --import tsx tools/image/build.ts "$@"
