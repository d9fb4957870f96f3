#!/usr/bin/env bash
# CPU per streamed response: llm-probe beside libcurl and the openai-python loop, against one
# simulator, in one sitting (BENCHMARKS §26).
#
#   benches/client-cpu.sh [RUNS (default 5)] [REQUESTS (default 200, at most 10000)]
#
# One `llm-probe simulate --ttft 0ms --itl 1ms --tokens 64` pinned to CPU 1; each client, pinned
# to CPU 0, reads REQUESTS sequential streams of 64 token events 1 ms apart, every event:
#
#   bench         `llm-probe bench --concurrency 1 --requests REQUESTS` with a probes file of
#                 the defaults (a fresh connection per request, as the daemon probes)
#   bench-reuse   the same with `connection: reuse` (keep-alive, as curl and the SDK)
#   curl          one `curl -sN` process given the same POST for REQUESTS URLs (libcurl reuses
#                 its connection), the body to /dev/null
#   curl-fresh    the same with `connection: close` on each request, so that each stream has a
#                 connection of its own, as `bench` by default: bench's like-for-like peer
#   openai-python the `openai` SDK's streaming loop (benches/peers/openai_stream_loop.py), when
#                 `import openai` works in BENCH_VENV (default /work/bench-venv, or else python3;
#                 a BENCH_VENV named must have bin/python);
#                 skipped with a note otherwise
#
# The clients run interleaved (round 1: every client once, round 2: …) so that the load of a
# shared machine hits them alike. Each run's CPU is the client process's user + system time
# (getrusage of the child, microseconds) and its peak RSS; a run counts only if it read every
# stream whole (bench and the Python loop: every stream, TOKENS token events each, checked in
# their output; curl, whose measured runs write to /dev/null: no transfer failed, its streams
# having been read whole and checked once before the rounds) and the simulator this script
# started still runs after its round. Prints each run, then per client the median, min and max of the
# runs, the CPU per stream and per token event, and the ratio of the medians to curl's (and the
# median of the per-round ratios), and the like-for-like ratio: each llm-probe client to the
# curl of its connection handling (bench to curl-fresh, bench-reuse to curl), the median of the
# per-round ratios; /proc/loadavg before and after. A run's CPU includes the process's start:
# about 7 ms for bench and curl, about 0.4 s for the Python loop (the interpreter and `import
# openai`), which its "per stream" carries divided by REQUESTS.
#
# Environment: BIN the llm-probe binary (default target/release/llm-probe, built with
# `cargo build --release --locked`); BEFORE_BIN a second llm-probe binary (e.g. a build of an
# earlier commit) measured in the same rounds as `before-bench` and `before-bench-reuse`;
# CLIENT_CPU_PORT the simulator's port (default: a free one; one in use is refused); TOKENS (default 64) and ITL
# (default 1ms) the simulator's stream. Stops what it started, by PID.
set -euo pipefail
# Without a trap, bash drops a SIGINT that a command in the foreground (the build, the Python
# checks) did not die of; with it the script exits once that command has ended.
trap 'exit 130' INT
trap 'exit 143' TERM
# BIN, BEFORE_BIN and BENCH_VENV, when named, are paths from the caller's directory.
for v in BIN BEFORE_BIN; do
  if [[ -n ${!v:-} ]]; then
    [[ -f ${!v} && -x ${!v} ]] || { echo "$v=${!v} is not an executable file" >&2; exit 2; }
    printf -v "$v" %s "$(realpath "${!v}")"
  fi
done
if [[ -n ${BENCH_VENV:-} ]]; then
  # Named, it must be a venv: falling back to python3 would measure another interpreter.
  [[ -x $BENCH_VENV/bin/python ]] || { echo "BENCH_VENV=$BENCH_VENV has no bin/python" >&2; exit 2; }
  BENCH_VENV=$(realpath "$BENCH_VENV")
fi
cd "$(dirname "$0")/.."
RUNS=${1:-5}
REQUESTS=${2:-200}
TOKENS=${TOKENS:-64}
ITL=${ITL:-1ms}
for v in RUNS REQUESTS TOKENS; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "$v is '${!v}': a whole number ≥ 1 is needed" >&2; exit 2; }
done
# bench refuses more (its --max-requests), after the curl checks have read REQUESTS streams twice.
((${#REQUESTS} <= 5 && REQUESTS <= 10000)) ||
  { echo "REQUESTS is $REQUESTS: at most 10000 (bench's --max-requests) is allowed" >&2; exit 2; }
if [[ -z ${BIN:-} ]]; then
  cargo build --release --locked --quiet
  BIN=$(realpath target/release/llm-probe)
fi
command -v curl >/dev/null || { echo "curl is needed" >&2; exit 2; }
[[ -x /usr/bin/time ]] || { echo "GNU time (/usr/bin/time) is needed" >&2; exit 2; }
VENV=${BENCH_VENV:-/work/bench-venv}
PY=python3
[[ -x $VENV/bin/python ]] && PY=$VENV/bin/python
OPENAI=""
if "$PY" -c 'import openai' 2>/dev/null; then
  OPENAI=$("$PY" -c 'import openai; print(openai.__version__)')
fi
# A free port, or CLIENT_CPU_PORT if it is free: a server already there would answer for the
# simulator (which then fails to listen) and be measured in its place.
PORT=$(python3 -c 'import socket, sys
s = socket.socket()
try:
    s.bind(("127.0.0.1", int(sys.argv[1])))
except (OSError, OverflowError, ValueError) as e:
    sys.exit(f"CLIENT_CPU_PORT={sys.argv[1]}: {e}")
print(s.getsockname()[1])' "${CLIENT_CPU_PORT:-0}") || exit 2

tmp=$(mktemp -d)
SIM_PID="" CHILD=""
export RSS_FILE=$tmp/rss ERR_FILE=$tmp/err
cleanup() {
  for p in $CHILD $SIM_PID; do kill "$p" 2>/dev/null || true; done
  for p in $CHILD $SIM_PID; do wait "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
# Runs "$@" in the background and waits for it: bash runs a trap only once a command in the
# foreground has ended, so a curl check or a client run in the foreground held off INT and TERM
# (for good: a SIGINT that the foreground command did not die of was dropped). cleanup stops it.
bg() {
  "$@" &
  CHILD=$!
  local rc=0
  wait "$CHILD" || rc=$?
  CHILD=""
  return "$rc"
}

taskset -c 1 "$BIN" simulate --log.level warn --web.listen-address "127.0.0.1:$PORT" \
  --ttft 0ms --itl "$ITL" --tokens "$TOKENS" >"$tmp/sim.log" 2>&1 &
SIM_PID=$!
base=http://127.0.0.1:$PORT/v1
sim_alive() {
  kill -0 "$SIM_PID" 2>/dev/null || { echo "the simulator ($1) is not running:" >&2; cat "$tmp/sim.log" >&2; exit 1; }
}
for _ in $(seq 100); do
  kill -0 "$SIM_PID" 2>/dev/null || break
  curl -fs "$base/models" >/dev/null && break
  sleep 0.1
done
sim_alive "at start"

for conn in fresh reuse; do
  cat >"$tmp/$conn.yaml" <<YAML
scenarios:
  - name: s
    messages: [{role: user, content: "Say hello."}]
    max_tokens: $TOKENS
targets:
  - name: sim
    protocol: openai-chat
    base_url: $base
    model: llm-probe-simulator
    connection: $conn
YAML
done
# The body llm-probe sends for that scenario (less its per-probe nonce).
printf '{"model":"llm-probe-simulator","messages":[{"role":"user","content":"Say hello."}],"max_tokens":%s,"stream":true,"stream_options":{"include_usage":true}}' \
  "$TOKENS" >"$tmp/body.json"
for _ in $(seq "$REQUESTS"); do echo "url = \"$base/chat/completions\""; done >"$tmp/urls.cfg"
# curl's exit status is its last transfer's, and 0 for an HTTP error, unless --fail and
# --fail-early: with them a measured run whose output is not read fails on any stream that did.
CURL=(curl -sSN --fail --fail-early -H 'content-type: application/json' -d @"$tmp/body.json"
  -K "$tmp/urls.cfg")

# Runs a command, its stdout to $1 and its stderr to $ERR_FILE (empty in a good run of every
# client); prints "user_s system_s maxrss_kib exit_status". CPU is
# getrusage of the child tree (microseconds; GNU time's own fork and wait add about 0.1 ms);
# the peak RSS is the command's own, from GNU time (the child of this Python would carry
# Python's pages into its maximum before its exec).
# Run by bg, it replaces its shell (exec), so that cleanup's TERM reaches it; it passes a TERM or
# an INT on to the command, which runs in a session of its own.
cpu() {
  exec python3 -c 'import os, signal, subprocess, sys
rss = os.environ["RSS_FILE"]
child = []
def stop(*_):
    for pid in child:
        os.killpg(pid, signal.SIGTERM)
    sys.exit(143)
signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGINT, stop)
with open(sys.argv[1], "wb") as out, open(os.environ["ERR_FILE"], "wb") as err:
    p = subprocess.Popen(["/usr/bin/time", "-f", "%M", "-o", rss] + sys.argv[2:], stdout=out,
                         stderr=err, start_new_session=True)
    child.append(p.pid)
    _, status, ru = os.wait4(p.pid, 0)
print(f"{ru.ru_utime:.6f} {ru.ru_stime:.6f} {open(rss).read().split()[-1]} {os.waitstatus_to_exitcode(status)}")' "$@"
}

# Whether client $1's output $2 shows every stream read whole.
check() {
  case $1 in
    *bench*) python3 -c 'import json, sys
l = json.load(open(sys.argv[1]))["levels"][0]
n, tokens = int(sys.argv[2]), int(sys.argv[3])
sys.exit(0 if l["requests"]["succeeded"] == n and l["output_tokens"] == n * tokens else 1)' \
      "$2" "$REQUESTS" "$TOKENS" ;;
    curl) [[ $(grep -c '^data: \[DONE\]' "$2") == "$REQUESTS" &&
      $(grep -c '"content":"[^"]' "$2") == $((REQUESTS * TOKENS)) ]] ;;
    openai-python) grep -qx "streams $REQUESTS content_chunks $((REQUESTS * TOKENS))" "$2" ;;
  esac
}

run_client() {
  local client=$1 out=$2 bin=$BIN
  [[ $client == before-* ]] && bin=$BEFORE_BIN
  case $client in
    *bench) cpu "$out" taskset -c 0 "$bin" bench --config.file "$tmp/fresh.yaml" --concurrency 1 \
      --requests "$REQUESTS" --pause 0s --quiet --output json ;;
    *bench-reuse) cpu "$out" taskset -c 0 "$bin" bench --config.file "$tmp/reuse.yaml" --concurrency 1 \
      --requests "$REQUESTS" --pause 0s --quiet --output json ;;
    curl) cpu /dev/null taskset -c 0 "${CURL[@]}" ;;
    curl-fresh) cpu /dev/null taskset -c 0 "${CURL[@]}" -H 'connection: close' ;;
    openai-python) cpu "$out" taskset -c 0 "$PY" benches/peers/openai_stream_loop.py \
      --base-url "$base" --n "$REQUESTS" --max-tokens "$TOKENS" ;;
  esac
}

clients=(bench bench-reuse curl curl-fresh)
[[ -n ${BEFORE_BIN:-} ]] && clients=(before-bench before-bench-reuse "${clients[@]}")
if [[ -n $OPENAI ]]; then
  clients+=(openai-python)
else
  echo "openai-python: skipped ('import openai' fails in $PY; pip install openai into BENCH_VENV to measure it)"
fi

# curl writes its streams to /dev/null when measured: check once here that they are whole.
bg "${CURL[@]}" >"$tmp/curl.out" && check curl "$tmp/curl.out" ||
  { echo "curl did not read $REQUESTS whole streams" >&2; exit 1; }
bg "${CURL[@]}" -H 'connection: close' >"$tmp/curl.out" && check curl "$tmp/curl.out" ||
  { echo "curl-fresh did not read $REQUESTS whole streams" >&2; exit 1; }

echo "<!-- $(date -u +%FT%TZ) $(uname -srm), $(nproc) cores, git $(git rev-parse --short HEAD 2>/dev/null || echo -) -->"
echo "llm-probe: $BIN ($("$BIN" --version 2>/dev/null | head -1))${BEFORE_BIN:+; before: $BEFORE_BIN}"
echo "curl: $(curl --version | head -1 | cut -d' ' -f1-2,4-5)${OPENAI:+; openai $OPENAI on $("$PY" -c 'import sys; print(sys.version.split()[0], sys.executable)')}"
echo "$RUNS runs × $REQUESTS streams of $TOKENS token events, $ITL apart (simulator on CPU 1, clients on CPU 0)"
echo "loadavg before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| round | client | user s | sys s | CPU s | peak RSS MiB |"
echo "|---:|---|---:|---:|---:|---:|"
: >"$tmp/runs"
for r in $(seq "$RUNS"); do
  for c in "${clients[@]}"; do
    : >"$tmp/out"
    u="" s="" rss="" code=""
    bg run_client "$c" "$tmp/out" >"$tmp/res" || true
    read -r u s rss code <"$tmp/res" || true
    if [[ $code != 0 ]] || { [[ $c != curl* ]] && ! check "$c" "$tmp/out"; }; then
      echo "round $r: $c failed (exit $code); its output and its stderr:" >&2
      head -c 2000 "$tmp/out" >&2
      tail -c 2000 "$tmp/err" >&2
      exit 1
    fi
    echo "$r $c $u $s $rss" >>"$tmp/runs"
    awk -v r="$r" -v c="$c" -v u="$u" -v s="$s" -v m="$rss" \
      'BEGIN { printf "| %d | %s | %.3f | %.3f | %.3f | %.1f |\n", r, c, u, s, u + s, m / 1024 }'
  done
  # Still the simulator this script started that answered the round.
  sim_alive "after round $r"
done
echo
echo "loadavg after: $(cut -d' ' -f1-3 /proc/loadavg)"
((RUNS >= 5)) || echo "note: $RUNS round(s); the medians and ratios below are indicative only (BENCHMARKS §31: a median of 5 is good to about ±10–15 %)"
echo
python3 - "$tmp/runs" "$REQUESTS" "$TOKENS" "${clients[@]}" <<'EOF'
import statistics, sys
path, n, tokens, clients = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
runs = {}
for line in open(path):
    r, c, u, s, rss = line.split()
    runs.setdefault(c, {})[int(r)] = (float(u) + float(s), int(rss) / 1024)
med = {c: statistics.median(v[0] for v in runs[c].values()) for c in clients}
# Each llm-probe client's like-for-like curl: the same connection handling.
peer = {c: "curl-fresh" if c.endswith("bench") else "curl" for c in clients if "bench" in c}
print("| client | CPU median s (min–max) | per stream | per token event | peak RSS MiB | ÷ curl (medians) | ÷ curl (median of rounds) | like for like: ÷ (median of rounds) |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
def like(c):
    if c not in peer:
        return ""
    p = peer[c]
    return f"{statistics.median(runs[c][r][0] / runs[p][r][0] for r in runs[c]):.2f}× {p}"
for c in clients:
    cpus = [v[0] for v in runs[c].values()]
    rounds = [runs[c][r][0] / runs["curl"][r][0] for r in runs[c]]
    rss = statistics.median(v[1] for v in runs[c].values())
    print(f"| {c} | {med[c]:.3f} ({min(cpus):.3f}–{max(cpus):.3f}) | {med[c] / n * 1e3:.2f} ms "
          f"| {med[c] / n / tokens * 1e6:.1f} µs | {rss:.1f} | {med[c] / med['curl']:.2f}× "
          f"| {statistics.median(rounds):.2f}× | {like(c)} |")
EOF
