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
# 500ms). Environment: TARGETS (default 1000) pairs; REPLICAS (default 0) makes each target a
# `replicas:` target whose file_sd file lists REPLICAS replicas (one simulator on each of
# 127.0.0.2, 127.0.0.3, …, all on one port): TARGETS × REPLICAS pairs; BIN the binary (default
# target/dist/llm-probe, the container's build: `cargo build --profile dist`, release with LTO,
# built if missing; a BIN you name must exist); DAEMON_ARGS more
# flags for `llm-probe run`, split on spaces (e.g. `--web.history.max-probes 60`); PROMPT_TOKENS
# (default 0: the one-sentence prompt) makes the scenario a generated long prompt of that many
# tokens (`prompt_tokens:`, `needle: false`), to measure what building and sending it costs.
# DISTINCT_HOSTS=1 gives each target a host name of its own (`t0000.localhost`, …), as the
# pools of a real fleet have: the client of a replica is keyed by (host name, address), so each
# of the TARGETS × REPLICAS replicas then has an HTTP client of its own, as in production (with
# one host name, the targets' replicas share REPLICAS clients).
# The simulator (`llm-probe simulate`, TTFT 200 ms, ITL 20 ms) runs pinned to CPU 1, the
# daemon to CPU 0; `curl --compressed` scrapes /metrics every 15 s, as Prometheus would. Every
# 30 s it prints the daemon's VmRSS, VmHWM (peak), RssAnon, RssFile and its CPU over those 30 s
# (utime+stime from /proc/PID/stat); at the end (or on Ctrl-C) the successful and failed
# probes and the time of each /metrics scrape (curl's time_total: min, median, max).
# Stops what it started, by PID; a child that fails (the daemon or a simulator, checked every
# 15 s) has its log printed.
set -euo pipefail
# BIN, when named, is a path from the caller's directory.
if [[ -n ${BIN:-} ]]; then
  [[ -f $BIN && -x $BIN ]] || { echo "BIN=$BIN is not an executable file" >&2; exit 2; }
  BIN=$(realpath "$BIN")
fi
cd "$(dirname "$0")/.."
MINUTES=${1:-22}
TOKENS=${2:-64}
INTERVAL=${3:-10s}
TARGETS=${TARGETS:-1000}
REPLICAS=${REPLICAS:-0}
PROMPT_TOKENS=${PROMPT_TOKENS:-0}
DISTINCT_HOSTS=${DISTINCT_HOSTS:-0}
[[ $DISTINCT_HOSTS =~ ^[01]$ ]] || { echo "DISTINCT_HOSTS is '$DISTINCT_HOSTS': 0 or 1 is needed" >&2; exit 2; }
# Numbers as bash's arithmetic reads them: no leading zero (010 is octal 8 there, 08 an error,
# and 10 for seq and YAML), at most 9 digits (past 2^63 it wraps: 18446744073709551621 is 5).
[[ $PROMPT_TOKENS =~ ^(0|[1-9][0-9]{0,8})$ ]] || { echo "PROMPT_TOKENS is '$PROMPT_TOKENS': a whole number from 0 to 999999999 is needed" >&2; exit 2; }
for v in MINUTES TOKENS TARGETS; do
  [[ ${!v} =~ ^[1-9][0-9]{0,8}$ ]] || { echo "$v is '${!v}': a whole number from 1 to 999999999 is needed" >&2; exit 2; }
done
[[ $REPLICAS =~ ^(0|[1-9][0-9]{0,2})$ ]] && ((REPLICAS <= 200)) || { echo "REPLICAS is '$REPLICAS': a whole number from 0 to 200 is needed" >&2; exit 2; }
if [[ -z ${BIN:-} ]]; then
  [[ -x target/dist/llm-probe ]] || cargo build --locked --profile dist --quiet
  BIN=$(realpath target/dist/llm-probe)
fi

for t in curl python3 taskset; do
  command -v "$t" >/dev/null || { echo "$t is needed" >&2; exit 2; }
done
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
tmp=$(mktemp -d)
SIM_PID="" DAEMON_PID="" SLEEP_PID=""
cleanup() {
  for p in $SLEEP_PID $DAEMON_PID $SIM_PID; do kill "$p" 2>/dev/null || true; done
  for p in $SLEEP_PID $DAEMON_PID $SIM_PID; do wait "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
# Set before any child starts: without a trap, a SIGINT that came while a command ran in the
# foreground (a readiness check, check-config) and that it did not die of was dropped. The
# summary once the daemon answers.
trap 'echo "interrupted"; if declare -F summary >/dev/null; then summary; fi; exit 130' INT
trap 'exit 143' TERM
# A child that is gone: say which, with its log, and stop.
died() {
  echo "the $1 (PID $2) is not running; its log:" >&2
  cat "$3" >&2
  exit 1
}

sim_port=$(free_port)
sd=$tmp/replicas.json  # quoted in the probes file: TMPDIR may hold a space, '#', ',' or '}'
{
  printf 'defaults:\n  interval: %s\n  timeout: %s\n' "$INTERVAL" "$INTERVAL"
  if ((PROMPT_TOKENS > 0)); then
    printf 'scenarios:\n  - name: chat\n    prompt_tokens: %s\n    needle: false\n    max_tokens: %s\n' "$PROMPT_TOKENS" "$TOKENS"
  else
    printf 'scenarios:\n  - name: chat\n    messages: [{role: user, content: "Say something."}]\n    max_tokens: %s\n' "$TOKENS"
  fi
  printf 'targets:\n'
  for i in $(seq -f '%04g' 0 $((TARGETS - 1))); do
    host=127.0.0.1
    ((DISTINCT_HOSTS)) && host=t$i.localhost
    printf '  - name: t%s\n    protocol: openai-chat\n    base_url: http://%s:%s/v1\n    model: sim\n' "$i" "$host" "$sim_port"
    if ((REPLICAS > 0)); then
      printf "    replicas: {file_sd: '%s', max: %s}\n" "${sd//\'/\'\'}" "$REPLICAS"
    fi
  done
} >"$tmp/probes.yaml"
"$BIN" check-config --config.file "$tmp/probes.yaml" >"$tmp/check.log" 2>&1 ||
  { echo "the generated probes file is refused (MINUTES=$MINUTES TOKENS=$TOKENS INTERVAL=$INTERVAL TARGETS=$TARGETS):" >&2; cat "$tmp/check.log" >&2; exit 2; }

# One simulator, or one per replica address (127.0.0.2, …: Linux routes 127.0.0.0/8 to lo).
sim_ips=(127.0.0.1)
if ((REPLICAS > 0)); then
  sim_ips=()
  for r in $(seq 1 "$REPLICAS"); do sim_ips+=("127.0.$((r / 250)).$((r % 250 + 1))"); done
  python3 -c 'import json, sys; print(json.dumps([{"targets": sys.argv[2:], "labels": {}}]))' \
    x $(for ip in "${sim_ips[@]}"; do echo "$ip:$sim_port"; done) >"$sd"
fi
for ip in "${sim_ips[@]}"; do
  taskset -c 1 "$BIN" --log.level warn simulate --web.listen-address "$ip:$sim_port" \
    --ttft 200ms --itl 20ms --tokens "$TOKENS" >>"$tmp/sim.log" 2>&1 &
  SIM_PID="$SIM_PID $!"
  for _ in $(seq 100); do curl -fs "http://$ip:$sim_port/v1/models" >/dev/null && break; sleep 0.1; done
  kill -0 "$!" 2>/dev/null || died simulator "$!" "$tmp/sim.log"
done

port=$(free_port)
read -r -a daemon_args <<<"${DAEMON_ARGS:-}"
taskset -c 0 "$BIN" run --config.file "$tmp/probes.yaml" --log.level warn \
  --web.listen-address "127.0.0.1:$port" "${daemon_args[@]}" >"$tmp/daemon.log" 2>&1 &
DAEMON_PID=$!
url=http://127.0.0.1:$port/metrics
for _ in $(seq 100); do curl -fs -o /dev/null "$url" && break; sleep 0.1; done
kill -0 "$DAEMON_PID" 2>/dev/null || died daemon "$DAEMON_PID" "$tmp/daemon.log"

# The probes counted in the exposition file $1; $2 says when it was scraped.
counts() {
  python3 -c '
import sys
ok = failed = 0.0
for line in open(sys.argv[1]):
    if line.startswith("llm_probe_request_duration_seconds_count"):
        ok += float(line.split()[-1])
    elif line.startswith("llm_probe_probe_failures_total"):
        failed += float(line.split()[-1])
print(f"probes: {ok:.0f} successful, {failed:.0f} failed{sys.argv[2]}")' "$1" "$2"
}
# On Ctrl-C the daemon has the SIGINT too and may be gone: then the last scrape's counts.
last_scrape=""
summary() {
  if curl -fs -o "$tmp/metrics.end" "$url"; then
    counts "$tmp/metrics.end" ""
  elif [[ -n $last_scrape ]]; then
    counts "$tmp/metrics" " (by the last scrape, at $last_scrape s; /metrics did not answer at the end)"
  else
    echo "probes: /metrics did not answer"
  fi
  if [[ -s $tmp/scrapes ]]; then
    python3 -c '
import statistics, sys
t = sorted(float(x) * 1000 for x in open(sys.argv[1]) if x.strip())
print(f"/metrics scrapes ({len(t)}, gzip, curl time_total): min {t[0]:.1f} ms, median {statistics.median(t):.1f} ms, max {t[-1]:.1f} ms")' "$tmp/scrapes"
  fi
  grep -v '^$' "$tmp/daemon.log" | tail -5 || true
}

echo "<!-- $(date -u +%FT%TZ) $(uname -srm), $(nproc) cores, $BIN ($("$BIN" --version 2>/dev/null | head -1)), repository at git $(git rev-parse --short HEAD), $TARGETS targets × ${REPLICAS} replicas (0: none), distinct hosts ${DISTINCT_HOSTS}, every $INTERVAL, $TOKENS tokens, prompt ${PROMPT_TOKENS} tokens (0: one sentence), $MINUTES min, daemon flags: ${DAEMON_ARGS:-none}, loadavg $(cut -d' ' -f1-3 /proc/loadavg) -->"
echo "| minute | RSS MiB | peak (VmHWM) MiB | anon / file MiB | CPU over the last 30 s | loadavg |"
echo "|---:|---:|---:|---:|---:|---:|"
kib() { awk -v f="$1:" '$1 == f { print $2 }' "/proc/$DAEMON_PID/status"; }
ticks() { awk '{ print $14 + $15 }' "/proc/$DAEMON_PID/stat"; }
hz=$(getconf CLK_TCK)
start=$(date +%s)
# The CPU's interval timed to the nanosecond (date +%s.%N, beside each read of the ticks):
# whole seconds would be up to 1 s off in 30.
last_t=$(date +%s.%N) last_ticks=$(ticks)
end=$((start + MINUTES * 60))
next_sample=$((start + 30))
# The daemon, and the simulators it probes: a soak whose probes all fail measures another load.
alive() {
  kill -0 "$DAEMON_PID" 2>/dev/null || died daemon "$DAEMON_PID" "$tmp/daemon.log"
  for p in $SIM_PID; do kill -0 "$p" 2>/dev/null || died simulator "$p" "$tmp/sim.log"; done
}
while (($(date +%s) < end)); do
  alive
  # The time of the scrapes that answered; the body kept for a summary after Ctrl-C.
  if scrape=$(curl -fs --compressed -o "$tmp/metrics.new" -w '%{time_total}' "$url"); then
    mv "$tmp/metrics.new" "$tmp/metrics"
    echo "$scrape" >>"$tmp/scrapes"
    last_scrape=$(($(date +%s) - start))
  else
    echo "scrape failed at $(($(date +%s) - start)) s"
  fi
  # In the background, so that Ctrl-C and TERM act at once.
  sleep 15 &
  SLEEP_PID=$!
  wait "$SLEEP_PID" || true
  SLEEP_PID=""
  now=$(date +%s)
  if ((now >= next_sample)); then
    alive
    t=$(ticks) t_at=$(date +%s.%N)
    cpu=$(python3 -c "print(f'{100 * ($t - $last_ticks) / $hz / ($t_at - $last_t):.1f} %')")
    printf '| %.1f | %.1f | %.1f | %.1f / %.1f | %s | %s |\n' \
      "$(python3 -c "print(($now - $start) / 60)")" \
      "$(python3 -c "print($(kib VmRSS) / 1024)")" "$(python3 -c "print($(kib VmHWM) / 1024)")" \
      "$(python3 -c "print($(kib RssAnon) / 1024)")" "$(python3 -c "print($(kib RssFile) / 1024)")" \
      "$cpu" "$(cut -d' ' -f1 /proc/loadavg)"
    last_t=$t_at last_ticks=$t next_sample=$((now + 30))
  fi
done
summary
