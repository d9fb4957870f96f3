#!/usr/bin/env bash
# The whole test suite on a fresh machine: installs and starts what it needs (Prometheus, the
# real llama.cpp server), then runs every test, the real-component ones included.
# Extra arguments go to `cargo test` (e.g. `scripts/test.sh --test accuracy`).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-test-deps.sh
exec cargo test --locked "$@"
