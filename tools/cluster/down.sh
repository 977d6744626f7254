#!/usr/bin/env bash
# Stops the local control plane started by up.sh and removes its state; harmless when none runs.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
exec node --import tsx tools/cluster/cli.ts down "$@"
