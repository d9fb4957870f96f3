//! The command line: flags follow the Prometheus exporter convention (`--config.file`,
//! `--web.listen-address`, `--log.level`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};

/// Synthetic streaming probes for LLM inference endpoints: TTFT, TPOT, ITL, output tokens per
/// second and E2E latency as Prometheus histograms.
#[derive(Debug, Parser)]
#[command(name = "llm-probe", version, about)]
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
    pub log_format: LogFormat,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Log output formats.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum LogFormat {
    /// logfmt: one line of key=value pairs per event (as Prometheus and its exporters log).
    Logfmt,
    /// One JSON object per line.
    Json,
}

/// Output formats of `probe-once`.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum Output {
    /// A short block of text per probe.
    Text,
    /// One JSON object per probe, one per line.
    Json,
}

/// Output formats of `compare`.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum CompareOutput {
    /// An aligned table per level.
    Text,
    /// Markdown tables (for a pull-request comment).
    Markdown,
    /// One JSON document (`"schema": "llm-probe.compare/v1"`).
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
        /// Address to serve /metrics on.
        #[arg(long = "web.listen-address", default_value = DEFAULT_LISTEN)]
        listen: SocketAddr,
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
    /// Serve a built-in OpenAI-compatible streaming endpoint with scripted timing.
    Simulate {
        /// Address to listen on.
        #[arg(long = "web.listen-address", default_value = "127.0.0.1:8000")]
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
        /// http-429, no-usage, stall, reset, collapsed, no-terminator, keepalive, no-headers,
        /// invalid-json, invalid-utf8, endless, huge-line.
        #[arg(long, default_value = "none")]
        fault: crate::simulate::Fault,
    },
    /// Is AFTER slower than BEFORE? Compare two `bench --output json` files (or two
    /// `probe-once --output json` collections) per level and metric with a U test, a
    /// Hodges–Lehmann interval and a verdict; exit 1 on any regression, 2 if the runs cannot be
    /// read or compared.
    Compare {
        /// The run before the change.
        before: PathBuf,
        /// The run after the change.
        after: PathBuf,
        /// Output format.
        #[arg(long, value_enum, default_value = "text")]
        output: CompareOutput,
        /// Significance level of the tests (and 1 − alpha the confidence of the intervals).
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
    },
    /// Exit 0 if a running exporter answers its health endpoint (for container health checks,
    /// which have no shell or curl in a minimal image).
    Healthcheck {
        /// The health endpoint to ask.
        #[arg(long, default_value = "http://127.0.0.1:9464/-/healthy")]
        url: String,
    },
    /// First run: start the simulator, probe it, serve /metrics and print a live summary.
    Demo {
        /// Address to serve /metrics on.
        #[arg(long = "web.listen-address", default_value = DEFAULT_LISTEN)]
        listen: SocketAddr,
        /// Print the summary this often (1s to 1d).
        #[arg(long, default_value = "5s", value_parser = crate::config::durations::parse_summary_every)]
        every: Duration,
    },
}
