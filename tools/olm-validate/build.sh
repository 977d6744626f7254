#!/usr/bin/env bash
# Builds (or reuses) the olm-validate harness and prints the path of its binary (see tools/build-go-harness.sh).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec "$here/../build-go-harness.sh" "$here"
