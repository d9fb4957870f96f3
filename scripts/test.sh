#!/usr/bin/env bash
# The whole test suite on a fresh machine: installs and starts what it needs (Prometheus, the
# real llama.cpp server), then runs every test, the real-component ones included.
# Extra arguments go to `cargo test` (e.g. `scripts/test.sh --test accuracy`).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-test-deps.sh
# Tools installed into our own cache (hadolint) come after the system's.
export PATH="$PATH:$HOME/.cache/llm-probe-tools/bin"
exec cargo test --locked --no-fail-fast "$@"
