//! The command line: flags follow the Prometheus exporter convention (`--config.file`,
//! `--web.listen-address`, `--log.level`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgAction, Args, Parser, Subcommand, ValueEnum};

/// Synthetic streaming probes for LLM inference endpoints: TTFT, TPOT, ITL, output tokens per
/// second and E2E latency as Prometheus histograms.
#[derive(Debug, Parser)]
#[command(name = "llm-probe", version = VERSION.as_str(), about)]
pub struct Cli {
    /// Log level: error, warn, info, debug, trace or off (any case; warning, err and
    /// information are accepted too), or tracing filter directives such as
    /// `info,llm_probe::probe=debug`. Anything else is an error.
    #[arg(long = "log.level", default_value = "info", global = true, value_parser = crate::logging::parse_level)]
    pub log_level: String,
    /// Log format on stderr.
    #[arg(
        long = "log.format",
        value_enum,
        default_value = "logfmt",
        global = true
    )]
    pub log_format: crate::logging::LogFormat,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// `--version`: the package version and the git commit it was built from
/// (`0.1.0 (commit 0123456789ab)`; `commit unknown` when built without git, see `build.rs`).
pub static VERSION: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "{} (commit {})",
        env!("CARGO_PKG_VERSION"),
        option_env!("LLM_PROBE_GIT_COMMIT").unwrap_or("unknown")
    )
});

/// Output formats of `probe-once`.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum Output {
    /// A short block of text per probe.
    Text,
    /// One JSON object per probe, one per line.
    Json,
}

/// Default address of the exporter (the port is in Prometheus' default port allocations range).
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9464";

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the daemon: probe every target on its interval and serve /metrics.
    Run {
        /// The probes file (YAML).
        #[arg(long = "config.file", default_value = "probes.yaml")]
        config_file: PathBuf,
        /// Address to serve /metrics on: `:PORT` (every interface), `HOST:PORT`, `IP:PORT` or
        /// `[IPv6]:PORT`.
        #[arg(long = "web.listen-address", default_value = DEFAULT_LISTEN, value_parser = crate::listen::parse)]
        listen: SocketAddr,
        /// The exporter's own server: TLS, basic auth, on-demand probes, connections.
        #[command(flatten)]
        web: WebFlags,
        /// Reload the config file when its content changes (polled every second; follows the
        /// `..data` symlink swap of a Kubernetes ConfigMap volume), as SIGHUP does.
        #[arg(long = "config.watch")]
        config_watch: bool,
        /// Which pairs this replica probes.
        #[command(flatten)]
        shard: ShardArgs,
        /// An idle worker waits this long before it sleeps, so that one wake-up serves the
        /// reads of several streams (about a third less CPU at 1,000 pairs; BENCHMARKS.md §15).
        /// Marks are unaffected: reads carry the kernel's arrival stamps, and the wait is
        /// skipped while a probe is sending, for unstamped reads and for streams faster than
        /// 4 × this. `0s` turns it off; at most `4ms`.
        #[arg(long = "probe.coalesce-reads", default_value = "2ms",
              value_parser = coalesce_wait, allow_hyphen_values = true)]
        coalesce_reads: Duration,
    },
    /// Validate the probes file and print one line per target; exit 1 on errors.
    CheckConfig {
        /// The probes file (YAML).
        #[arg(long = "config.file", default_value = "probes.yaml")]
        config_file: PathBuf,
        /// Don't look up api_key_env variables or read api_key_file files (checking a probes
        /// file in CI, where the keys are not present); everything else is checked.
        #[arg(long)]
        skip_secrets: bool,
        /// Also print which of this many replicas (`run --shard.count`) probes each
        /// (target, scenario).
        #[arg(long = "shard.count", value_parser = clap::value_parser!(u32).range(1..=crate::shard::MAX_COUNT as i64))]
        shard_count: Option<u32>,
    },
    /// Run each selected (target, scenario) once, print what was measured; exit 1 if any failed.
    ProbeOnce {
        /// The probes file (YAML).
        #[arg(long = "config.file", default_value = "probes.yaml")]
        config_file: PathBuf,
        /// Only this target.
        #[arg(long)]
        target: Option<String>,
        /// Only this scenario.
        #[arg(long)]
        scenario: Option<String>,
        /// Output format.
        #[arg(long, value_enum, default_value = "text")]
        output: Output,
    },
    /// Serve a built-in streaming endpoint with scripted timing (every protocol on its own path).
    Simulate {
        /// Address to listen on.
        #[arg(long = "web.listen-address", default_value = "127.0.0.1:8000", value_parser = crate::listen::parse)]
        listen: SocketAddr,
        /// Time from request arrival to the first token (0 to 1h).
        #[arg(long, default_value = "200ms", value_parser = crate::config::durations::parse_scripted)]
        ttft: Duration,
        /// Time between token events (0 to 1h).
        #[arg(long, default_value = "20ms", value_parser = crate::config::durations::parse_scripted)]
        itl: Duration,
        /// Output tokens per response (capped by the request's max_tokens).
        #[arg(long, default_value_t = 64)]
        tokens: u32,
        /// Tokens per event (more than 1 imitates speculative decoding or server-side chunking).
        #[arg(long, default_value_t = 1)]
        tokens_per_event: u32,
        /// How many of the first tokens are reasoning tokens.
        #[arg(long, default_value_t = 0)]
        reasoning_tokens: u32,
        /// The model name the simulator reports.
        #[arg(long, default_value = "llm-probe-simulator")]
        model: String,
        /// A fault to inject: none, error-after-tokens, error-only, done-only, http-500,
        /// http-429, http-529, no-usage, stall, reset, collapsed, no-terminator, keepalive, no-headers,
        /// invalid-json, invalid-utf8, endless, huge-line; degenerate answers (a stream that is
        /// well formed, whose answer checks fail): repetition-loop, punctuation-only,
        /// special-token, empty-after-reasoning.
        #[arg(long, default_value = "none")]
        fault: crate::simulate::Fault,
        /// The prefix cache: `on` serves a prompt seen before with a quarter of the TTFT (its
        /// prefill is cached); `off` gives every request the scripted TTFT, as a server whose
        /// prefix cache is disabled or broken (the prefix-cache canary's ratio stays near 1).
        #[arg(long = "prefix-cache", value_enum, default_value = "off")]
        prefix_cache: OnOff,
        /// What every answer says, spelled one character per token event (at most --tokens
        /// events; the last carries the rest), e.g. `42` for an exact-answer canary; to a request
        /// with tools, the tool call's arguments, e.g. `{"city":"Paris"}`. Default: ` t0 t1 …`
        /// (and `{}` as arguments).
        #[arg(long)]
        answer: Option<String>,
        /// When the response headers go out: `at-once` (as vLLM, TGI and llama.cpp) or
        /// `with-first-token` (as Ollama: nothing is written before the first token).
        #[arg(long, value_enum, default_value = "at-once")]
        headers: crate::simulate::HeadersAt,
        /// A request quota of N requests a minute (0: none), as a hosted API's key has: every
        /// stream's head carries the rate-limit headers of the protocol (OpenAI's
        /// `x-ratelimit-*`, Anthropic's `anthropic-ratelimit-*`), and a request past the quota
        /// gets HTTP 429 with `Retry-After` until the minute ends.
        #[arg(long = "rate-limit", default_value_t = 0)]
        rate_limit: u32,
        /// The model's context, in prompt tokens (whitespace-separated words of the prompt;
        /// 0: none). A longer prompt is refused or truncated (--context-overflow).
        #[arg(long = "context-limit", default_value_t = 0)]
        context_limit: u64,
        /// What a prompt longer than --context-limit gets: `refuse` (HTTP 400 naming both
        /// sizes, as vLLM and the hosted APIs answer) or `truncate` (cut from the left and
        /// answered, its usage the context's size, as a server that truncates silently).
        #[arg(long = "context-overflow", value_enum, default_value = "refuse")]
        context_overflow: crate::simulate::ContextOverflow,
        /// The load model: slots, prefill, batch slowdown and jitter.
        #[command(flatten)]
        load: SimLoad,
    },
    /// Load-test one (target, scenario): a concurrency or request-rate sweep measured like the
    /// daemon's probes, with P50/P95/P99, the SLA capacity, JSON/Markdown reports and charts.
    Bench(Box<BenchArgs>),
    /// Is AFTER slower than BEFORE? Compare two `bench --output json` files (or two
    /// `probe-once --output json` collections) per level and metric with a U test, a
    /// Hodges–Lehmann interval and a verdict — or, with --prometheus.url, two time windows of
    /// the daemon's histograms (e.g. around the last endpoint change); exit 1 on any
    /// regression (median, P95 tail, failure ratio or SLA capacity), 2 if the runs cannot be
    /// read or compared, 3 with --fail-on inconclusive when a row is inconclusive.
    Compare {
        /// The run before the change (not with --prometheus.url).
        #[arg(
            required_unless_present = "prometheus_url",
            conflicts_with = "prometheus_url"
        )]
        before: Option<PathBuf>,
        /// The run after the change (not with --prometheus.url).
        #[arg(
            required_unless_present = "prometheus_url",
            conflicts_with = "prometheus_url"
        )]
        after: Option<PathBuf>,
        /// Compare two windows of a Prometheus instead of two files.
        #[command(flatten)]
        prometheus: Box<PrometheusCompareArgs>,
        /// Output format.
        #[arg(long, value_enum, default_value = "text")]
        output: crate::compare::Output,
        /// Significance level of the tests (and 1 − alpha the confidence of the intervals), from
        /// 0.000001 to below 0.5.
        #[arg(long, default_value = "0.05", value_parser = crate::compare::parse_alpha)]
        alpha: f64,
        /// Smallest relative change that counts (`10%` or `0.1`).
        #[arg(long, default_value = "10%", value_parser = crate::compare::parse_threshold)]
        threshold: f64,
        /// Compare runs of different scenarios, prompt sizes or max_tokens anyway.
        #[arg(long)]
        force: bool,
        /// Bootstrap resamples for the percentile-change intervals (at least 2000).
        #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u32).range(2000..=1_000_000))]
        resamples: u32,
        /// Bootstrap seed (the same seed gives the same intervals).
        #[arg(long, default_value_t = 17)]
        seed: u64,
        /// Output lengths (tokens) for the expected E2E when the runs are different endpoints.
        #[arg(long, value_delimiter = ',', default_values_t = crate::compare::selection::TYPICAL_LENGTHS)]
        lengths: Vec<u32>,
        /// `inconclusive`: also exit 3 when nothing regressed but a row is inconclusive.
        #[arg(long = "fail-on", value_enum, default_value = "regression")]
        fail_on: crate::compare::FailOn,
    },
    /// Pinned baselines: `baseline save` writes the accepted latency of one (target, scenario)
    /// for the probes file's `baseline_file:` (exported as `llm_probe_baseline_*` gauges).
    #[command(subcommand)]
    Baseline(BaselineCommand),
    /// Exit 0 if a running llm-probe answers its health endpoint (for container health
    /// checks, which have no shell or curl in a minimal image); talks TLS and basic auth.
    Healthcheck(HealthcheckArgs),
    /// First run: start the simulator, probe it, serve /metrics and print a live summary.
    Demo {
        /// Address to serve /metrics on: `:PORT` (every interface), `HOST:PORT`, `IP:PORT` or
        /// `[IPv6]:PORT`.
        #[arg(long = "web.listen-address", default_value = DEFAULT_LISTEN, value_parser = crate::listen::parse)]
        listen: SocketAddr,
        /// Print the summary this often (1s to 1d).
        #[arg(long, default_value = "5s", value_parser = crate::config::durations::parse_summary_every)]
        every: Duration,
    },
}

/// `compare --prometheus.url`'s flags: where the daemon's histograms are and which windows.
#[derive(Debug, Clone, Args)]
pub struct PrometheusCompareArgs {
    /// The Prometheus server that scrapes llm-probe (its root URL, e.g. http://prometheus:9090;
    /// user-info becomes basic auth): compare two time windows of the daemon's histogram
    /// buckets instead of two files. Needs --target and either --before/--after,
    /// --around-change or --by-identity.
    #[arg(long = "prometheus.url", requires = "target")]
    pub prometheus_url: Option<String>,
    /// Bound of each request to Prometheus (1s to 10m).
    #[arg(long = "prometheus.timeout", default_value = "30s", value_parser = prometheus_timeout)]
    pub prometheus_timeout: Duration,
    /// The target (its `target` label).
    #[arg(long, requires = "prometheus_url")]
    pub target: Option<String>,
    /// Only this scenario (default: every scenario of the target with probes in both windows).
    #[arg(long, requires = "prometheus_url")]
    pub scenario: Option<String>,
    /// The BEFORE window, START/END: each RFC 3339 (2026-11-30T14:00:00Z), Unix seconds or
    /// now-DURATION (e.g. now-2h/now-1h).
    #[arg(long = "before", id = "before_window", value_name = "START/END", value_parser = crate::compare::window::parse_range,
          requires_all = ["prometheus_url", "after_window"], conflicts_with = "around_change")]
    pub before_window: Option<crate::compare::window::Range>,
    /// The AFTER window, START/END, as --before.
    #[arg(long = "after", id = "after_window", value_name = "START/END", value_parser = crate::compare::window::parse_range,
          requires_all = ["prometheus_url", "before_window"], conflicts_with = "around_change")]
    pub after_window: Option<crate::compare::window::Range>,
    /// Compare the --window before the last change of the target's llm_probe_endpoint_info
    /// label set (model, fingerprint, server, version) with the --window after it, skipping
    /// --settle after the change.
    #[arg(long, requires = "prometheus_url")]
    pub around_change: bool,
    /// Compare the replicas of a target with `replicas:` by what they run, over the last
    /// --window: BEFORE the replicas of the llm_probe_endpoint_info label set seen first,
    /// AFTER those of the newer one (a rolling upgrade half-way; exactly two must run).
    #[arg(long, requires = "prometheus_url", conflicts_with_all = ["around_change", "before_window", "after_window"])]
    pub by_identity: bool,
    /// Length of each window around the change, or of the one window of --by-identity (1ms
    /// to 30d).
    #[arg(long, default_value = "1h", value_parser = compare_span)]
    pub window: Duration,
    /// Skipped after the change before the AFTER window starts (0 to 30d).
    #[arg(long, default_value = "10m", value_parser = compare_settle)]
    pub settle: Duration,
    /// How far back the last change (or, with --by-identity, each identity's first sample) is
    /// looked for (1ms to 30d).
    #[arg(long, default_value = "1d", value_parser = compare_span)]
    pub lookback: Duration,
    /// TTFT objective for the share of probes above it (default: the target's
    /// llm_probe_slo_time_to_first_token_seconds), e.g. 300ms.
    #[arg(long, value_parser = compare_span)]
    pub slo: Option<Duration>,
}

impl TryFrom<PrometheusCompareArgs> for crate::compare::from_prometheus::Request {
    type Error = String;

    /// What the flags ask of Prometheus. Errors (for the user): `--prometheus.url`, `--target`
    /// or the windows missing.
    fn try_from(a: PrometheusCompareArgs) -> Result<Self, String> {
        use crate::compare::from_prometheus::{Request, Windows};
        let url = a.prometheus_url.ok_or(
            "give BEFORE and AFTER run files, or --prometheus.url with --target and the windows",
        )?;
        let target = a
            .target
            .ok_or("--prometheus.url needs --target (the target's name, its `target` label)")?;
        let windows = match (
            a.before_window,
            a.after_window,
            a.around_change,
            a.by_identity,
        ) {
            (Some(before), Some(after), false, false) => Windows::Given { before, after },
            (None, None, true, false) => Windows::AroundChange {
                window: a.window.as_secs_f64(),
                settle: a.settle.as_secs_f64(),
                lookback: a.lookback.as_secs_f64(),
            },
            (None, None, false, true) => Windows::ByIdentity {
                window: a.window.as_secs_f64(),
                lookback: a.lookback.as_secs_f64(),
            },
            _ => {
                return Err(
                    "--prometheus.url needs the windows: --before START/END and --after \
                     START/END, --around-change, or --by-identity"
                        .into(),
                )
            }
        };
        Ok(Request {
            url,
            target,
            scenario: a.scenario,
            windows,
            slo: a.slo.map(|d| d.as_secs_f64()),
            timeout: a.prometheus_timeout,
        })
    }
}

/// `--window`, `--lookback`, `--slo`: 1 ms to 30 days.
fn compare_span(s: &str) -> Result<Duration, String> {
    crate::config::durations::Bounds {
        min: Duration::from_millis(1),
        max: Duration::from_secs(30 * 86_400),
    }
    .parse(s)
}

/// `--settle`: 0 to 30 days.
fn compare_settle(s: &str) -> Result<Duration, String> {
    crate::config::durations::Bounds {
        min: Duration::ZERO,
        max: Duration::from_secs(30 * 86_400),
    }
    .parse(s)
}

/// `--prometheus.timeout`: 1 s to 10 min.
fn prometheus_timeout(s: &str) -> Result<Duration, String> {
    crate::config::durations::Bounds {
        min: Duration::from_secs(1),
        max: Duration::from_secs(600),
    }
    .parse(s)
}

/// `--web.history.max-age`: 1 s to a week.
fn history_age(s: &str) -> Result<Duration, String> {
    crate::config::durations::Bounds {
        min: Duration::from_secs(1),
        max: Duration::from_secs(7 * 86_400),
    }
    .parse(s)
}

/// `run`'s flags for the exporter's own server and the histograms `/metrics` exposes.
#[derive(Debug, Clone, Args)]
pub struct WebFlags {
    /// Which buckets the latency and tokens/s histograms carry: classic (`_bucket{le=…}`
    /// series, in every format), native (exponential, only in the protobuf format a
    /// Prometheus with native histograms enabled asks for) or both.
    #[arg(long = "metrics.histograms", value_enum, default_value_t = crate::metrics::HistogramKinds::Both)]
    pub histograms: crate::metrics::HistogramKinds,
    /// Resolution of the native buckets: each at most this factor wider than the one before
    /// (above 1, at most 65536); the coarsest Prometheus schema within it is used (1.1:
    /// schema 3, ≈ 9 % wide buckets).
    #[arg(long = "metrics.native-histogram-bucket-factor",
          default_value_t = crate::metrics::NativeBucketFactor::DEFAULT)]
    pub native_bucket_factor: crate::metrics::NativeBucketFactor,
    /// Web config file (TLS with optional client certificates, basic auth users with bcrypt
    /// hashes, extra response headers) in the Prometheus exporter toolkit's format; applies
    /// to every endpoint and is re-read on reload.
    #[arg(long = "web.config.file")]
    pub web_config_file: Option<PathBuf>,
    /// Allow on-demand probes (`/probe`, the status pages' "probe now" links), which spend
    /// tokens; `--web.enable-debug-probe=false` switches them off.
    #[arg(long = "web.enable-debug-probe", default_value_t = true, action = ArgAction::Set,
          num_args = 0..=1, default_missing_value = "true")]
    pub enable_debug_probe: bool,
    /// At most one on-demand probe per target per this period (default: the target's
    /// interval).
    #[arg(long = "web.debug-probe-interval", value_parser = |s: &str| crate::config::durations::DEBUG_PROBE_INTERVAL.parse(s))]
    pub debug_probe_interval: Option<Duration>,
    /// Connections served at once, 1 to 1048576; more wait to be accepted.
    #[arg(long = "web.max-connections", default_value_t = crate::server::DEFAULT_MAX_CONNECTIONS,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=crate::server::MAX_CONNECTIONS as u64))]
    pub max_connections: usize,
    /// Probes the status pages keep per (target, scenario) in memory (failures: 4× as many).
    #[arg(long = "web.history.max-probes", default_value_t = crate::history::HistoryLimits::default().max_probes,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=100_000))]
    pub history_max_probes: usize,
    /// How long the status pages keep a probe in memory (failures: 4× as long), e.g. `6h`.
    #[arg(long = "web.history.max-age", default_value = "6h",
          value_parser = history_age)]
    pub history_max_age: Duration,
    /// The URL under which the exporter is reachable from outside (e.g. behind a reverse
    /// proxy or an Ingress), as Prometheus' flag: its path prefixes every link and redirect,
    /// and is the default of --web.route-prefix.
    #[arg(long = "web.external-url", value_parser = external_url)]
    pub external_url: Option<String>,
    /// Prefix of every endpoint (`/metrics`, `/-/healthy`, the status pages, `/probe`), e.g.
    /// `/llm` (default: the path of --web.external-url, else none); `/` and the bare prefix
    /// redirect to `PREFIX/`.
    #[arg(long = "web.route-prefix", value_parser = route_prefix)]
    pub route_prefix: Option<String>,
    /// The exporter's name in the status pages' header and title (default: the host name,
    /// `$HOSTNAME` or /proc/sys/kernel/hostname).
    #[arg(long = "web.instance-name", env = "LLM_PROBE_INSTANCE_NAME")]
    pub instance_name: Option<String>,
    /// The probe location shown in the status pages' header and title, and the value the
    /// overview's location filter matches; set it to the `location` label Prometheus gives
    /// this exporter's series (llm-probe does not see that label).
    #[arg(long = "web.location", env = "LLM_PROBE_LOCATION")]
    pub location: Option<String>,
}

/// `--probe.coalesce-reads`: a duration from 0 to 4 ms.
fn coalesce_wait(s: &str) -> Result<Duration, String> {
    if s.trim_start().starts_with('-') {
        return Err("a wait cannot be negative (e.g. 2ms, or 0s for off)".into());
    }
    let d = humantime::parse_duration(s).map_err(|e| format!("{e} (e.g. 2ms, or 0s for off)"))?;
    if d > Duration::from_millis(4) {
        return Err(
            "at most 4ms: a longer wait saves no more CPU (BENCHMARKS.md §15), delays \
             probe starts, and puts healthy reads past LlmProbeReadDelayHigh's 10 ms line"
                .into(),
        );
    }
    Ok(d)
}

/// `--web.external-url`: an absolute http(s) URL without query or fragment.
fn external_url(s: &str) -> Result<String, String> {
    crate::server::WebUrls::new(Some(s), None)
        .map(|_| s.to_string())
        .map_err(|e| e.why)
}

/// `--web.route-prefix`: a plain path.
fn route_prefix(s: &str) -> Result<String, String> {
    crate::server::WebUrls::new(None, Some(s))
        .map(|_| s.to_string())
        .map_err(|e| e.why)
}

impl WebFlags {
    /// The server options these flags ask for.
    pub fn server_options(&self) -> crate::server::ServerOptions {
        crate::server::ServerOptions {
            web_config_file: self.web_config_file.clone(),
            debug_probe: crate::server::DebugProbePolicy {
                enabled: self.enable_debug_probe,
                min_interval: self.debug_probe_interval,
            },
            limits: crate::server::ConnectionLimits {
                max_connections: self.max_connections,
                ..Default::default()
            },
            histograms: crate::metrics::HistogramOptions {
                kinds: self.histograms,
                native_bucket_factor: self.native_bucket_factor,
            },
            history: crate::history::HistoryLimits {
                max_probes: self.history_max_probes,
                max_age: self.history_max_age,
            },
            // Each flag was checked when parsed, and together they cannot clash.
            urls: crate::server::WebUrls::new(
                self.external_url.as_deref(),
                self.route_prefix.as_deref(),
            )
            .unwrap_or_default(),
            identity: crate::server::ExporterIdentity {
                instance: self
                    .instance_name
                    .clone()
                    .or_else(|| crate::shard::hostname().ok())
                    .unwrap_or_default()
                    .trim()
                    .to_string(),
                location: self
                    .location
                    .as_deref()
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .map(str::to_string),
            },
        }
    }
}

/// `healthcheck`'s flags; each can also come from an environment variable, so that a
/// container's `HEALTHCHECK` line stays the same when the exporter uses TLS or basic auth.
#[derive(Debug, Clone, Args)]
pub struct HealthcheckArgs {
    /// The health endpoint to ask (https:// for an exporter with TLS).
    #[arg(
        long,
        default_value = "http://127.0.0.1:9464/-/healthy",
        env = "LLM_PROBE_HEALTHCHECK_URL"
    )]
    pub url: String,
    /// How long to wait for the answer.
    #[arg(long, default_value = "3s", value_parser = |s: &str| crate::config::durations::HEALTHCHECK_TIMEOUT.parse(s))]
    pub timeout: Duration,
    /// CA certificates (PEM) that sign the exporter's certificate (default: the system's).
    #[arg(long = "tls.ca-file", env = "LLM_PROBE_HEALTHCHECK_CA_FILE")]
    pub ca_file: Option<PathBuf>,
    /// Client certificate (PEM), for an exporter that requires one.
    #[arg(
        long = "tls.cert-file",
        env = "LLM_PROBE_HEALTHCHECK_CERT_FILE",
        requires = "key_file"
    )]
    pub cert_file: Option<PathBuf>,
    /// The client certificate's private key (PEM).
    #[arg(
        long = "tls.key-file",
        env = "LLM_PROBE_HEALTHCHECK_KEY_FILE",
        requires = "cert_file"
    )]
    pub key_file: Option<PathBuf>,
    /// Accept any server certificate (liveness only; the answer is still checked).
    #[arg(
        long = "tls.insecure-skip-verify",
        env = "LLM_PROBE_HEALTHCHECK_INSECURE_SKIP_VERIFY"
    )]
    pub insecure_skip_verify: bool,
    /// Basic auth user name.
    #[arg(
        long = "basic-auth.username",
        env = "LLM_PROBE_HEALTHCHECK_USERNAME",
        requires = "password_file"
    )]
    pub username: Option<String>,
    /// File holding the basic auth password (one line; never on the command line).
    #[arg(
        long = "basic-auth.password-file",
        env = "LLM_PROBE_HEALTHCHECK_PASSWORD_FILE",
        requires = "username"
    )]
    pub password_file: Option<PathBuf>,
}

impl From<HealthcheckArgs> for crate::healthcheck::Options {
    fn from(a: HealthcheckArgs) -> Self {
        crate::healthcheck::Options {
            url: a.url,
            timeout: a.timeout,
            ca_file: a.ca_file,
            cert_file: a.cert_file,
            key_file: a.key_file,
            insecure_skip_verify: a.insecure_skip_verify,
            username: a.username,
            password_file: a.password_file,
        }
    }
}

/// Sharding flags of `run`: N replicas read the same probes file and each probes the
/// (target, scenario) pairs it owns by rendezvous hashing (see `llm_probe::shard`).
#[derive(Debug, Clone, clap::Args)]
pub struct ShardArgs {
    /// How many replicas share the probes file (1 to 1024).
    #[arg(long = "shard.count", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=crate::shard::MAX_COUNT as i64))]
    pub count: u32,
    /// This replica's index, 0 to count − 1 (default 0).
    #[arg(long = "shard.index", conflicts_with = "index_from_hostname")]
    pub index: Option<u32>,
    /// Take the index from the host name's trailing ordinal, as a StatefulSet pod's name
    /// `llm-probe-3` (from $HOSTNAME, else /proc/sys/kernel/hostname).
    #[arg(long = "shard.index-from-hostname")]
    pub index_from_hostname: bool,
}

/// The simulator's load model on the command line (see [`crate::simulate::Load`]).
#[derive(Debug, Clone, clap::Args)]
pub struct SimLoad {
    /// Streams generated at once; further requests queue FIFO and the wait is part of their
    /// TTFT (0 = unlimited).
    #[arg(long, default_value_t = 0)]
    pub slots: u32,
    /// Prefill time added to the TTFT per prompt token (whitespace-separated word).
    #[arg(long, default_value = "0ms", value_parser = crate::config::durations::parse_scripted)]
    pub prefill_per_token: Duration,
    /// Fractional ITL increase per additional active stream (0.05 = 5 % slower per stream).
    #[arg(long, default_value_t = 0.0, value_parser = non_negative)]
    pub itl_slowdown_per_stream: f64,
    /// Sigma of the lognormal jitter (median 1) on each TTFT and token gap; 0 = none.
    #[arg(long, default_value_t = 0.0, value_parser = non_negative)]
    pub jitter: f64,
    /// Seed of the jitter.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Report each request's queue wait and prefill as vLLM does with
    /// --enable-per-request-metrics (a `metrics` object on the final usage chunk of OpenAI
    /// chat, completions and Responses streams).
    #[arg(long)]
    pub per_request_metrics: bool,
}

impl From<SimLoad> for crate::simulate::Load {
    fn from(l: SimLoad) -> Self {
        crate::simulate::Load {
            slots: l.slots,
            prefill_per_token: l.prefill_per_token,
            itl_slowdown_per_stream: l.itl_slowdown_per_stream,
            jitter: l.jitter,
            seed: l.seed,
            per_request_metrics: l.per_request_metrics,
        }
    }
}

/// The subcommands of `baseline`.
#[derive(Debug, Subcommand)]
pub enum BaselineCommand {
    /// Write a baseline file (schema `llm-probe.baseline/v1`) from one level of a `bench --output
    /// json` file (or a `probe-once --output json` collection), or from a window of the daemon's
    /// histogram buckets in Prometheus: P50/P95/P99 of TTFT, TPOT, tokens/s and E2E, samples,
    /// endpoint identity, date and origin. Exit 2 when the input cannot be used.
    #[command(group(clap::ArgGroup::new("source").required(true).args(["from", "prometheus_url"])))]
    Save {
        /// The bench JSON (or probe-once JSON lines) to take the numbers from (not with
        /// --prometheus.url).
        #[arg(long)]
        from: Option<PathBuf>,
        /// Take the closed-loop level with this many virtual users (default: the highest level
        /// within the SLA capacity, else the first level).
        #[arg(long, conflicts_with_all = ["rate", "prometheus_url"])]
        level: Option<u64>,
        /// Take the open-loop level at this many requests per second.
        #[arg(long, conflicts_with = "prometheus_url", value_parser = non_negative)]
        rate: Option<f64>,
        /// Take the numbers from the Prometheus that scrapes the daemon (its root URL, e.g.
        /// http://prometheus:9090; user-info becomes basic auth): the bucket counts of --target
        /// and --scenario over --range (not with --from).
        #[arg(long = "prometheus.url", value_name = "URL", requires_all = ["target", "scenario", "window"])]
        prometheus_url: Option<String>,
        /// Bound of each request to Prometheus (1s to 10m).
        #[arg(long = "prometheus.timeout", default_value = "30s", value_parser = prometheus_timeout)]
        prometheus_timeout: Duration,
        /// The target (its `target` label).
        #[arg(long, requires = "prometheus_url")]
        target: Option<String>,
        /// The scenario (its `scenario` label).
        #[arg(long, requires = "prometheus_url")]
        scenario: Option<String>,
        /// The time range, START/END, each RFC 3339 (2026-11-30T14:00:00Z), Unix seconds or
        /// now-DURATION (e.g. now-1h/now). (Was `--window`, which `compare` uses for a length;
        /// still accepted.)
        #[arg(long = "range", alias = "window", value_name = "START/END", value_parser = crate::compare::window::parse_range, requires = "prometheus_url")]
        window: Option<crate::compare::window::Range>,
        /// The baseline file to write (replaced whole if it exists; its directory is created).
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
    },
}

/// A finite number ≥ 0.
pub fn non_negative(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if x.is_finite() && x >= 0.0 => Ok(x),
        _ => Err(format!("{s:?} is not a number ≥ 0 (e.g. 0.1)")),
    }
}

/// Prefix-cache policy of `bench`.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum BenchCache {
    /// A unique nonce at the start of every prompt (as the daemon's probes): the server's prefix
    /// cache cannot flatter TTFT.
    Cold,
    /// The prompt verbatim: measures the cached path.
    Warm,
}

/// The flags of `llm-probe bench`.
#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    /// The probes file (YAML): the target and scenario come from it.
    #[arg(long = "config.file", default_value = "probes.yaml")]
    pub config_file: PathBuf,
    /// The target to load (optional when the file has one).
    #[arg(long)]
    pub target: Option<String>,
    /// The scenario to send (optional when the target runs one).
    #[arg(long)]
    pub scenario: Option<String>,
    /// Closed loop: levels of concurrent virtual users, each sending its next request when its
    /// previous stream ends (e.g. 1,2,4,8).
    #[arg(long, value_delimiter = ',', conflicts_with = "rate")]
    pub concurrency: Vec<u32>,
    /// Open loop: levels of request rate (requests/s) with Poisson arrivals; latencies count
    /// from each request's scheduled send (e.g. 0.5,1,2,4).
    #[arg(long, value_delimiter = ',')]
    pub rate: Vec<f64>,
    /// Prompt lengths: levels of generated prompt size in tokens (e.g. 256,1000,4000), each
    /// sent in place of the scenario's messages (its system messages kept) by --concurrency
    /// virtual users (one value; default 1, so that TTFT is not mixed with queueing).
    #[arg(long = "prompt-tokens", value_delimiter = ',', value_name = "TOKENS")]
    pub prompt_tokens: Vec<u32>,
    /// Each level ends after this long (in-flight requests finish) …
    #[arg(long, value_parser = |s: &str| crate::config::durations::CONFIG.parse(s))]
    pub duration: Option<Duration>,
    /// … or after this many measured requests, whichever comes first.
    #[arg(long)]
    pub requests: Option<u64>,
    /// Excluded from each level's statistics: a request count (e.g. 4) or a time (e.g. 10s).
    #[arg(long, default_value = "0")]
    pub warmup: crate::bench::plan::Warmup,
    /// Idle time between levels.
    #[arg(long, default_value = "2s", value_parser = crate::config::durations::parse_scripted)]
    pub pause: Duration,
    /// Seed of the Poisson arrivals (reproducible schedules).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Open loop: most requests in flight at once (later arrivals wait; the wait counts).
    #[arg(long)]
    pub max_concurrency: Option<u32>,
    /// Hard cap on requests over the whole sweep (warmup included); a plan over it is refused.
    #[arg(long, default_value_t = 10_000)]
    pub max_requests: u64,
    /// Stop after the first level that breaks the target's SLO (saves tokens).
    #[arg(long)]
    pub stop_on_slo_breach: bool,
    /// Largest failed/sent ratio a level may have and still meet the SLA.
    #[arg(long, default_value_t = 0.01, value_parser = non_negative)]
    pub max_failure_ratio: f64,
    /// Prefix cache: cold (a unique nonce per request, the default) or warm.
    #[arg(long, value_enum, default_value = "cold")]
    pub prefix_cache: BenchCache,
    /// What to print on stdout.
    #[arg(long, value_enum, default_value = "table")]
    pub output: crate::bench::command::Output,
    /// Also write report.json, report.md, report.txt and the SVG charts into this directory
    /// (created if needed). (Was `--out`, which `baseline save` uses for a file; still
    /// accepted.)
    #[arg(long = "out-dir", alias = "out", value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// No progress output on stderr.
    #[arg(long)]
    pub quiet: bool,
}

impl From<BenchCache> for crate::config::PrefixCache {
    fn from(c: BenchCache) -> Self {
        match c {
            BenchCache::Cold => crate::config::PrefixCache::Cold,
            BenchCache::Warm => crate::config::PrefixCache::Warm,
        }
    }
}

impl From<BenchArgs> for crate::bench::command::Options {
    /// The run the flags describe; its plan is not yet validated (`bench::command::run` does).
    fn from(a: BenchArgs) -> Self {
        use crate::bench::level::Load;
        let levels = if !a.prompt_tokens.is_empty() {
            // Each prompt length at the one concurrency; what does not fit (several
            // concurrencies, a rate) is left for the plan's validation to refuse by name.
            let users = if a.concurrency.is_empty() {
                vec![1]
            } else {
                a.concurrency.clone()
            };
            let mut levels: Vec<Load> = a.rate.iter().map(|&r| Load::Rate(r)).collect();
            for &concurrency in &users {
                levels.extend((a.prompt_tokens.iter()).map(|&tokens| Load::Prompt {
                    tokens,
                    concurrency,
                }));
            }
            levels
        } else if a.rate.is_empty() {
            a.concurrency
                .iter()
                .map(|&c| Load::Concurrency(c))
                .collect()
        } else {
            a.rate.iter().map(|&r| Load::Rate(r)).collect()
        };
        crate::bench::command::Options {
            config_file: a.config_file,
            target: a.target,
            scenario: a.scenario,
            plan: crate::bench::plan::Plan {
                levels,
                duration: a.duration,
                requests: a.requests,
                warmup: a.warmup,
                pause: a.pause,
                seed: a.seed,
                max_concurrency: a.max_concurrency,
                max_requests: a.max_requests,
                stop_on_slo_breach: a.stop_on_slo_breach,
                max_failure_ratio: a.max_failure_ratio,
            },
            prefix_cache: a.prefix_cache.into(),
            output: a.output,
            out: a.out,
            quiet: a.quiet,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// clap's own consistency checks (unique argument ids across flattened groups, valid
    /// `requires`), which otherwise only fire when a user runs the binary.
    #[test]
    fn command_line_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }

    fn command(args: &[&str]) -> Command {
        let argv = ["llm-probe"].iter().chain(args).copied();
        Cli::try_parse_from(argv).unwrap().command
    }

    #[test]
    fn bench_flags_map_onto_the_commands_options() {
        use crate::bench::command::{Options, Output};
        use crate::bench::level::Load;
        let Command::Bench(a) = command(&[
            "bench",
            "--rate",
            "0.5,2",
            "--requests",
            "7",
            "--prefix-cache",
            "warm",
            "--output",
            "json",
            "--quiet",
        ]) else {
            unreachable!()
        };
        let o = Options::from(*a);
        assert_eq!(o.plan.levels, [Load::Rate(0.5), Load::Rate(2.0)]);
        assert_eq!(o.plan.requests, Some(7));
        assert_eq!(o.prefix_cache, crate::config::PrefixCache::Warm);
        assert_eq!(o.output, Output::Json);
        assert!(o.quiet);
        let Command::Bench(a) = command(&["bench", "--concurrency", "1,4"]) else {
            unreachable!()
        };
        let o = Options::from(*a);
        let want = [Load::Concurrency(1), Load::Concurrency(4)];
        assert_eq!(
            (o.plan.levels.as_slice(), o.output),
            (&want[..], Output::Table)
        );
        assert_eq!(o.prefix_cache, crate::config::PrefixCache::Cold);
        // Prompt lengths at concurrency 1 by default, or at the one --concurrency given.
        let levels = |args: &[&str]| {
            let argv: Vec<&str> = ["bench"].iter().chain(args).copied().collect();
            let Command::Bench(a) = command(&argv) else {
                unreachable!()
            };
            Options::from(*a).plan.levels
        };
        let p = |tokens, concurrency| Load::Prompt {
            tokens,
            concurrency,
        };
        assert_eq!(
            levels(&["--prompt-tokens", "256,1000"]),
            [p(256, 1), p(1000, 1)]
        );
        assert_eq!(
            levels(&["--prompt-tokens", "256,1000", "--concurrency", "4"]),
            [p(256, 4), p(1000, 4)]
        );
    }

    #[test]
    fn compare_flags_map_onto_a_prometheus_request() {
        use crate::compare::from_prometheus::{Request, Windows};
        let request = |args: &[&str]| {
            let argv: Vec<&str> = ["compare", "--prometheus.url", "http://p:9090"]
                .iter()
                .chain(args)
                .copied()
                .collect();
            match command(&argv) {
                Command::Compare { prometheus, .. } => Request::try_from(*prometheus),
                _ => unreachable!(),
            }
        };
        let r = request(&[
            "--target",
            "t",
            "--around-change",
            "--window",
            "30m",
            "--slo",
            "300ms",
        ])
        .unwrap();
        assert_eq!((r.url.as_str(), r.target.as_str()), ("http://p:9090", "t"));
        assert_eq!(r.slo, Some(0.3));
        assert_eq!(
            r.windows,
            Windows::AroundChange {
                window: 1800.0,
                settle: 600.0,
                lookback: 86_400.0
            }
        );
        let e = request(&["--target", "t"]).unwrap_err();
        assert!(
            e.contains("--around-change") && e.contains("--by-identity"),
            "{e}"
        );
        let r = request(&["--target", "t", "--by-identity", "--window", "10m"]).unwrap();
        assert_eq!(
            r.windows,
            Windows::ByIdentity {
                window: 600.0,
                lookback: 86_400.0
            }
        );
        // One way of choosing the windows at a time.
        let argv = [
            "llm-probe",
            "compare",
            "--prometheus.url",
            "http://p:9090",
            "--target",
            "t",
            "--by-identity",
            "--around-change",
        ];
        assert!(Cli::try_parse_from(argv).is_err());
    }

    #[test]
    fn healthcheck_flags_map_onto_its_options() {
        let Command::Healthcheck(a) = command(&[
            "healthcheck",
            "--url",
            "https://x:1/-/healthy",
            "--timeout",
            "5s",
            "--tls.insecure-skip-verify",
        ]) else {
            unreachable!()
        };
        let o = crate::healthcheck::Options::from(a);
        assert_eq!(o.url, "https://x:1/-/healthy");
        assert_eq!(o.timeout, Duration::from_secs(5));
        assert!(o.insecure_skip_verify && o.ca_file.is_none() && o.username.is_none());
    }

    fn web(args: &[&str]) -> WebFlags {
        let argv = ["llm-probe", "run"].iter().chain(args).copied();
        match Cli::try_parse_from(argv).unwrap().command {
            Command::Run { web, .. } => web,
            _ => unreachable!(),
        }
    }

    #[test]
    fn web_flags() {
        assert!(web(&[]).enable_debug_probe);
        assert!(web(&["--web.enable-debug-probe"]).enable_debug_probe);
        assert!(!web(&["--web.enable-debug-probe=false"]).enable_debug_probe);
        let o = web(&[
            "--web.config.file",
            "web.yml",
            "--web.debug-probe-interval",
            "5m",
            "--web.max-connections",
            "3",
        ])
        .server_options();
        assert_eq!(
            o.web_config_file.as_deref(),
            Some(std::path::Path::new("web.yml"))
        );
        assert_eq!(o.debug_probe.min_interval, Some(Duration::from_secs(300)));
        assert_eq!(o.limits.max_connections, 3);
        assert!(Cli::try_parse_from(["llm-probe", "run", "--web.max-connections", "0"]).is_err());
        // above tokio's semaphore limit (2^61 − 1) the web thread panicked.
        for huge in ["2305843009213693952", "18446744073709551615", "1048577"] {
            assert!(
                Cli::try_parse_from(["llm-probe", "run", "--web.max-connections", huge]).is_err(),
                "{huge}"
            );
        }
        assert_eq!(
            web(&["--web.max-connections", "1048576"])
                .server_options()
                .limits
                .max_connections,
            1 << 20
        );
        let h = web(&[
            "--web.history.max-probes",
            "50",
            "--web.history.max-age",
            "2h",
        ])
        .server_options()
        .history;
        assert_eq!((h.max_probes, h.max_age), (50, Duration::from_secs(7200)));
        assert_eq!(
            web(&[]).server_options().history,
            crate::history::HistoryLimits::default()
        );
        for bad in [
            ["--web.history.max-probes", "0"],
            ["--web.history.max-age", "0s"],
            ["--web.history.max-age", "30d"],
        ] {
            let e = Cli::try_parse_from(["llm-probe", "run", bad[0], bad[1]]).unwrap_err();
            assert!(e.to_string().contains(bad[0]), "{e}");
        }
        assert!(
            Cli::try_parse_from(["llm-probe", "run", "--web.enable-debug-probe=maybe"]).is_err()
        );
    }

    #[test]
    fn coalesce_reads_flag() {
        let wait = |args: &[&str]| {
            let argv = [&["llm-probe", "run"][..], args].concat();
            match Cli::try_parse_from(argv).map(|c| c.command) {
                Ok(Command::Run { coalesce_reads, .. }) => Ok(coalesce_reads),
                Ok(_) => unreachable!(),
                Err(e) => Err(e.to_string()),
            }
        };
        assert_eq!(wait(&[]), Ok(crate::probe::coalesce::DEFAULT_WAIT));
        assert_eq!(wait(&["--probe.coalesce-reads", "0s"]), Ok(Duration::ZERO));
        assert_eq!(
            wait(&["--probe.coalesce-reads=500us"]),
            Ok(Duration::from_micros(500))
        );
        assert_eq!(
            wait(&["--probe.coalesce-reads", "4ms"]),
            Ok(Duration::from_millis(4))
        );
        let long = wait(&["--probe.coalesce-reads", "4001us"]).unwrap_err();
        assert!(long.contains("at most 4ms"), "{long}");
        let bad = wait(&["--probe.coalesce-reads", "fast"]).unwrap_err();
        assert!(bad.contains("0s for off"), "{bad}");
        // A negative value reaches the parser (not clap's "unexpected argument").
        let negative = wait(&["--probe.coalesce-reads", "-1ms"]).unwrap_err();
        assert!(negative.contains("cannot be negative"), "{negative}");
    }

    #[test]
    fn prefix_and_identity_flags() {
        let o = web(&[
            "--web.external-url",
            "https://probe.example/llm/",
            "--web.instance-name",
            "probe-eu-1",
            "--web.location",
            "eu-west",
        ])
        .server_options();
        assert_eq!(o.urls.route_prefix(), "/llm");
        assert_eq!(o.urls.link("/metrics"), "/llm/metrics");
        assert_eq!(o.identity.instance, "probe-eu-1");
        assert_eq!(o.identity.location.as_deref(), Some("eu-west"));
        let o = web(&["--web.route-prefix", "/x"]).server_options();
        assert_eq!(o.urls.link("/"), "/x/");
        assert_eq!(web(&[]).server_options().urls.route_prefix(), "");
        for bad in [
            ["--web.external-url", "probe.example/llm"],
            ["--web.route-prefix", "/a?b"],
        ] {
            let e = Cli::try_parse_from(["llm-probe", "run", bad[0], bad[1]]).unwrap_err();
            assert!(e.to_string().contains(bad[0]), "{e}");
        }
    }
}

/// A switch given as `on` or `off` on the command line (`simulate --prefix-cache`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OnOff {
    /// Switched on.
    On,
    /// Switched off.
    Off,
}

impl OnOff {
    /// `true` for [`OnOff::On`].
    pub fn is_on(self) -> bool {
        self == OnOff::On
    }
}
