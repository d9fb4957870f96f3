#!/usr/bin/env bash
# The whole test suite on a fresh machine: installs what it needs (scripts/install-test-deps.sh:
# Prometheus, Alertmanager, Node.js, Chromium, kubectl, hadolint, cargo-audit, the PyPI mocks
# and llmock, the AWS SDK for JavaScript, the real llama.cpp server and the real vLLM), then runs
# every tier: fast (`cargo test`, which needs none of them), end-to-end (`--test e2e`, the real
# components) and fidelity (`--test fidelity`, timing and memory claims one at a time).
#
# Needs: Rust (cargo) — the suite checks that rustc is the version the Dockerfile pins (the
# `FROM rust:X.Y.Z-…` line, 1.95.0 today; the crate itself builds with 1.88 or newer); python3
# with pip; and root or sudo, because missing system packages are installed with apt-get.
# Set LLM_PROBE_ADVISORY_DB to a RustSec advisory-db snapshot when GitHub is unreachable;
# otherwise `cargo audit` fetches the database. Set LLM_PROBE_QUIET_LOCK to a lock file that
# background jobs hold (flock) to make the fidelity tier wait for them (.ci/run does).
#
# The real llama.cpp server (127.0.0.1:18080) is started by the tests that need it. If it was not
# running before, it is stopped again at the end; if it was, it is left running. The real vLLM
# (127.0.0.1:18090, scripts/real-vllm.sh) takes minutes to start: for a full run (no arguments)
# it is started in the background while cargo compiles the tests, and stopped the same way.
# Extra arguments replace the three tiers with one `cargo test` with them (e.g.
# `scripts/test.sh --test e2e alerts::`).
set -euo pipefail
cd "$(dirname "$0")/.."

say() { echo "test.sh: $*" >&2; }

pinned=$(sed -n 's/^FROM rust:\([0-9.]*\)-.*/\1/p' Dockerfile | head -1)
have=$(rustc --version 2>/dev/null | awk '{print $2}') || true
[ -n "$have" ] || { say "rustc is not installed: install Rust $pinned (https://rustup.rs, then: rustup default $pinned)"; exit 1; }
say "rustc $have; the Dockerfile pins $pinned${pinned:+ (tests/e2e/project/supply_chain.rs checks they match)}"
if [ -n "$pinned" ] && [ "$have" != "$pinned" ]; then
  say "WARNING: rustc $have is not the pinned $pinned: tests/e2e/project/supply_chain.rs will fail (rustup default $pinned)"
fi

scripts/install-test-deps.sh
# Tools installed into our own cache (hadolint) come after the system's.
export PATH="$PATH:$HOME/.cache/llm-probe-tools/bin"

was_running=""
scripts/real-llm.sh status && was_running=1
vllm_was_running=""
scripts/real-vllm.sh status && vllm_was_running=1
if [ -z "$vllm_was_running" ] && [ $# -eq 0 ]; then
  # tests/e2e/engines/vllm.rs waits for this start (same PID file) instead of starting another.
  vllm_log=$(mktemp "${TMPDIR:-/tmp}/real-vllm-start.XXXXXX")
  say "starting the real vLLM in the background (log $vllm_log)"
  scripts/real-vllm.sh start >"$vllm_log" 2>&1 &
fi
rc=0
if [ $# -gt 0 ]; then
  cargo test --locked --no-fail-fast "$@" || rc=$?
else
  # The three tiers (CONTRIBUTING.md, "Tests in tiers"): fast (unit tests and tests/fast), then
  # the real components (tests/e2e), then the timing and memory claims one at a time
  # (tests/fidelity). Each runs even if one before it failed.
  # Each tier's time and result, printed again together at the end.
  tiers=""
  # The end-to-end tests that spend their time waiting on a real Prometheus' clock (the shipped
  # rules' windows scaled 15 times, a dashboard's two minutes of data) and compute little: they
  # run side by side. Every other end-to-end test runs one at a time, as each starts real
  # servers that take a core of their own (llama.cpp, vLLM, Chromium, promtool's rule tests).
  # A name here is a filter and a --skip of the same text, so each test is in exactly one run.
  waiting=(
    alerts::baseline:: alerts::cache_canary:: alerts::incidents::incidents_page
    alerts::locations:: alerts::replicas:: alerts::sharding::one_prometheus alerts::ttft::
    dashboards::queries:: fleet::balancer:: tools::compare_prometheus::around_change
    tools::compare_prometheus::by_identity tools::baseline_prometheus::a_window
  )
  e2e_tier() {
    local r=0 skips=() t
    for t in "${waiting[@]}"; do skips+=(--skip "$t"); done
    say "end-to-end: the tests that wait on Prometheus' clock, side by side"
    cargo test --locked --no-fail-fast --test e2e -- --test-threads=4 "${waiting[@]}" || r=$?
    say "end-to-end: the others, one at a time"
    cargo test --locked --no-fail-fast --test e2e -- --test-threads=1 "${skips[@]}" || r=$?
    return "$r"
  }
  tier() {
    local name=$1 t=$SECONDS r=0
    shift
    say "$name tier: $*"
    "$@" || r=$?
    tiers="$tiers$name: $((SECONDS - t)) s, $([ "$r" -eq 0 ] && echo passed || echo "FAILED ($r)")"$'\n'
    [ "$r" -eq 0 ] || rc=$r
  }
  tier fast cargo test --locked --no-fail-fast
  tier end-to-end e2e_tier
  if [ -n "${LLM_PROBE_QUIET_LOCK:-}" ]; then
    # CI's background checks (clippy, the release build) hold this lock: the timing and memory
    # claims are read on a quiet machine.
    say "fidelity tier: waiting for the jobs holding $LLM_PROBE_QUIET_LOCK to end"
    flock "$LLM_PROBE_QUIET_LOCK" true
  fi
  tier fidelity cargo test --locked --no-fail-fast --test fidelity -- --test-threads=1
  printf '%s' "$tiers" | sed 's/^/test.sh: /' >&2
fi
if [ -z "$was_running" ]; then
  # Only if a test started it (a run that needed none would say nothing was running).
  if scripts/real-llm.sh status >/dev/null 2>&1; then scripts/real-llm.sh stop; fi
else
  say "the real llama.cpp server was already running before the tests; left running (stop it: scripts/real-llm.sh stop)"
fi
if [ -z "$vllm_was_running" ]; then
  # Stopped even while still starting (the background start of a full run).
  scripts/real-vllm.sh stop
else
  say "the real vLLM was already running before the tests; left running (stop it: scripts/real-vllm.sh stop)"
fi
exit "$rc"
