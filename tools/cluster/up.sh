#!/usr/bin/env bash
# Starts the local control plane (see README.md); `make cluster-up NODES=3` calls this with --nodes.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
exec node --import tsx tools/cluster/cli.ts up "$@"
