#!/usr/bin/env bash
# The shipped daemon itself at 1,000 pairs: `llm-probe run` as a process of its own, its RSS
# and CPU read from /proc over a long run (BENCHMARKS §20). `suite scale` measures the daemon
# inside the bench's process (its records, its code pages and its runtime beside it) and fills
# the status-page history by hand; this runs the shipped binary as users do, until the history
# has filled by probing (120 probes per pair: 20 minutes at 10 s).
#
#   benches/daemon-soak.sh [MINUTES (default 22)] [TOKENS (default 64)] [INTERVAL (default 10s)]
#
# MINUTES and TOKENS are whole numbers ≥ 1; INTERVAL is a duration the probes file takes (10s,
# 500ms). Environment: TARGETS (default 1000) pairs; BIN the binary (default
# target/dist/llm-probe, the container's build: `cargo build --profile dist`, release with LTO,
# built if missing; a BIN you name must exist); DAEMON_ARGS more
# flags for `llm-probe run`, split on spaces (e.g. `--web.history.max-probes 60`).
# The simulator (`llm-probe simulate`, TTFT 200 ms, ITL 20 ms) runs pinned to CPU 1, the
# daemon to CPU 0; `curl --compressed` scrapes /metrics every 15 s, as Prometheus would. Every
# 30 s it prints the daemon's VmRSS, VmHWM (peak), RssAnon, RssFile and its CPU over those 30 s
# (utime+stime from /proc/PID/stat); at the end (or on Ctrl-C) the successful and failed
# probes. Stops what it started, by PID; a child that fails has its log printed.
set -euo pipefail
cd "$(dirname "$0")/.."
MINUTES=${1:-22}
TOKENS=${2:-64}
INTERVAL=${3:-10s}
TARGETS=${TARGETS:-1000}
for v in MINUTES TOKENS TARGETS; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "$v is '${!v}': a whole number ≥ 1 is needed" >&2; exit 2; }
done
if [[ -n ${BIN:-} ]]; then
  [[ -x $BIN ]] || { echo "BIN=$BIN is not an executable file" >&2; exit 2; }
else
  BIN=target/dist/llm-probe
  [[ -x $BIN ]] || cargo build --locked --profile dist --quiet
fi
BIN=$(realpath "$BIN")

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
tmp=$(mktemp -d)
SIM_PID="" DAEMON_PID="" SLEEP_PID=""
cleanup() {
  for p in $SLEEP_PID $DAEMON_PID $SIM_PID; do kill "$p" 2>/dev/null || true; done
  for p in $SLEEP_PID $DAEMON_PID $SIM_PID; do wait "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
# A child that is gone: say which, with its log, and stop.
died() {
  echo "the $1 (PID $2) is not running; its log:" >&2
  cat "$3" >&2
  exit 1
}

sim_port=$(free_port)
{
  printf 'defaults:\n  interval: %s\n  timeout: %s\n' "$INTERVAL" "$INTERVAL"
  printf 'scenarios:\n  - name: chat\n    messages: [{role: user, content: "Say something."}]\n    max_tokens: %s\n' "$TOKENS"
  printf 'targets:\n'
  for i in $(seq -f '%04g' 0 $((TARGETS - 1))); do
    printf '  - name: t%s\n    protocol: openai-chat\n    base_url: http://127.0.0.1:%s/v1\n    model: sim\n' "$i" "$sim_port"
  done
} >"$tmp/probes.yaml"
"$BIN" check-config --config.file "$tmp/probes.yaml" >"$tmp/check.log" 2>&1 ||
  { echo "the generated probes file is refused (MINUTES=$MINUTES TOKENS=$TOKENS INTERVAL=$INTERVAL TARGETS=$TARGETS):" >&2; cat "$tmp/check.log" >&2; exit 2; }

taskset -c 1 "$BIN" --log.level warn simulate --web.listen-address "127.0.0.1:$sim_port" \
  --ttft 200ms --itl 20ms --tokens "$TOKENS" >"$tmp/sim.log" 2>&1 &
SIM_PID=$!
for _ in $(seq 100); do curl -fs "http://127.0.0.1:$sim_port/v1/models" >/dev/null && break; sleep 0.1; done
kill -0 "$SIM_PID" 2>/dev/null || died simulator "$SIM_PID" "$tmp/sim.log"

port=$(free_port)
read -r -a daemon_args <<<"${DAEMON_ARGS:-}"
taskset -c 0 "$BIN" run --config.file "$tmp/probes.yaml" --log.level warn \
  --web.listen-address "127.0.0.1:$port" "${daemon_args[@]}" >"$tmp/daemon.log" 2>&1 &
DAEMON_PID=$!
url=http://127.0.0.1:$port/metrics
for _ in $(seq 100); do curl -fs -o /dev/null "$url" && break; sleep 0.1; done
kill -0 "$DAEMON_PID" 2>/dev/null || died daemon "$DAEMON_PID" "$tmp/daemon.log"

summary() {
  curl -fs "$url" | python3 -c '
import sys
ok = failed = 0.0
for line in sys.stdin:
    if line.startswith("llm_probe_request_duration_seconds_count"):
        ok += float(line.split()[-1])
    elif line.startswith("llm_probe_probe_failures_total"):
        failed += float(line.split()[-1])
print(f"probes: {ok:.0f} successful, {failed:.0f} failed")' || echo "probes: /metrics did not answer"
  grep -v '^$' "$tmp/daemon.log" | tail -5 || true
}
trap 'echo "interrupted"; summary; exit 130' INT
trap 'exit 143' TERM

echo "<!-- $(date -u +%FT%TZ) $(uname -srm), $(nproc) cores, $BIN ($("$BIN" --version 2>/dev/null | head -1)), repository at git $(git rev-parse --short HEAD), $TARGETS pairs every $INTERVAL, $TOKENS tokens, $MINUTES min, daemon flags: ${DAEMON_ARGS:-none}, loadavg $(cut -d' ' -f1-3 /proc/loadavg) -->"
echo "| minute | RSS MiB | peak (VmHWM) MiB | anon / file MiB | CPU over the last 30 s | loadavg |"
echo "|---:|---:|---:|---:|---:|---:|"
kib() { awk -v f="$1:" '$1 == f { print $2 }' "/proc/$DAEMON_PID/status"; }
ticks() { awk '{ print $14 + $15 }' "/proc/$DAEMON_PID/stat"; }
hz=$(getconf CLK_TCK)
start=$(date +%s)
last_t=$start last_ticks=$(ticks)
end=$((start + MINUTES * 60))
next_sample=$((start + 30))
while (($(date +%s) < end)); do
  kill -0 "$DAEMON_PID" 2>/dev/null || died daemon "$DAEMON_PID" "$tmp/daemon.log"
  curl -fs --compressed -o /dev/null "$url" || echo "scrape failed at $(($(date +%s) - start)) s"
  # In the background, so that Ctrl-C and TERM act at once.
  sleep 15 &
  SLEEP_PID=$!
  wait "$SLEEP_PID" || true
  SLEEP_PID=""
  now=$(date +%s)
  if ((now >= next_sample)); then
    kill -0 "$DAEMON_PID" 2>/dev/null || died daemon "$DAEMON_PID" "$tmp/daemon.log"
    t=$(ticks)
    cpu=$(python3 -c "print(f'{100 * ($t - $last_ticks) / $hz / ($now - $last_t):.1f} %')")
    printf '| %.1f | %.1f | %.1f | %.1f / %.1f | %s | %s |\n' \
      "$(python3 -c "print(($now - $start) / 60)")" \
      "$(python3 -c "print($(kib VmRSS) / 1024)")" "$(python3 -c "print($(kib VmHWM) / 1024)")" \
      "$(python3 -c "print($(kib RssAnon) / 1024)")" "$(python3 -c "print($(kib RssFile) / 1024)")" \
      "$cpu" "$(cut -d' ' -f1 /proc/loadavg)"
    last_t=$now last_ticks=$t next_sample=$((now + 30))
  fi
done
summary
