//! Engine metrics beside the probe: what an inference engine's own Prometheus
//! `/metrics` said about its load in the moments before a probe's request — requests waiting, requests
//! running and KV-cache usage — so that "TTFT rose while 37 requests were waiting" is one query.
//!
//! Pure: [`exposition`] reads the text format, [`adapters`] maps each engine's metric names to
//! an [`EngineLoad`]. The request itself (bounded time and size) is made by the prober
//! (`src/core/probe/engine_scrape.rs`); the numbers become gauges in `src/exporter/metrics/server_load.rs` and fields of
//! the probe record (`src/core/report.rs`).

pub mod adapters;
pub mod exposition;

pub use adapters::{read, Adapter, Engine};

/// Largest `/metrics` body read (4 MiB): a bigger one fails with
/// [`ScrapeFailureReason::TooLarge`] and is not parsed. vLLM's exposition is about 60 KiB.
pub const MAX_BODY_BYTES: usize = 4 << 20;

/// Longest time a scrape may take (connect, headers and body): the smaller of this and the
/// target's `timeout`.
pub const MAX_SCRAPE_TIME: std::time::Duration = std::time::Duration::from_secs(2);

/// What the engine said about its load at one moment. Counts are summed over the label sets of
/// the metric (one per served model, engine core or data-parallel rank); the KV-cache ratio is
/// the largest over them (the fullest cache is the one that makes requests wait). `None`: the
/// engine does not publish that number (TGI has no KV-cache ratio) or did not this time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EngineLoad {
    /// The engine whose names were read (the configured adapter, or the one detected).
    pub engine: Engine,
    /// Requests queued and not yet scheduled (vLLM `num_requests_waiting`, SGLang
    /// `num_queue_reqs`, TGI `queue_size`, llama.cpp `requests_deferred`, TensorRT-LLM
    /// `num_requests_waiting`). A count, ≥ 0.
    pub requests_waiting: Option<f64>,
    /// Requests being processed (in the running batch). A count, ≥ 0.
    pub requests_running: Option<f64>,
    /// Share of the KV cache in use, 0 to 1 (vLLM `kv_cache_usage_perc`, which despite its name
    /// is a ratio; SGLang `token_usage`; llama.cpp `kv_cache_usage_ratio`; TensorRT-LLM
    /// `kv_cache_utilization`).
    pub kv_cache_usage_ratio: Option<f64>,
}

/// Why a scrape of the engine's `/metrics` gave no [`EngineLoad`]: the `reason` label of
/// `llm_probe_server_metrics_scrape_failures_total`. A fixed set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ScrapeFailureReason {
    /// No connection, or the TLS handshake or the request failed before an answer (an answer
    /// whose head cannot be read is `TooLarge` or `Malformed`: the engine did answer).
    Connect,
    /// No complete answer within the scrape's time budget.
    Timeout,
    /// The answer was not a 2xx.
    HttpStatus,
    /// The body exceeded [`MAX_BODY_BYTES`], or the response head the HTTP client's limit.
    TooLarge,
    /// The answer is not HTTP, or its body is not UTF-8 or not the Prometheus text format.
    Malformed,
    /// `server_metrics_adapter: auto` found no metric name of a known engine.
    UnknownEngine,
    /// The configured adapter's metric names are all absent.
    MissingMetrics,
    /// A metric the adapter reads is NaN, infinite, negative, or a ratio above 1.
    InvalidValue,
}

impl ScrapeFailureReason {
    /// Every reason, in label order.
    pub const ALL: [ScrapeFailureReason; 8] = [
        ScrapeFailureReason::Connect,
        ScrapeFailureReason::Timeout,
        ScrapeFailureReason::HttpStatus,
        ScrapeFailureReason::TooLarge,
        ScrapeFailureReason::Malformed,
        ScrapeFailureReason::UnknownEngine,
        ScrapeFailureReason::MissingMetrics,
        ScrapeFailureReason::InvalidValue,
    ];

    /// The metric label value.
    pub fn as_str(self) -> &'static str {
        match self {
            ScrapeFailureReason::Connect => "connect",
            ScrapeFailureReason::Timeout => "timeout",
            ScrapeFailureReason::HttpStatus => "http_status",
            ScrapeFailureReason::TooLarge => "too_large",
            ScrapeFailureReason::Malformed => "malformed",
            ScrapeFailureReason::UnknownEngine => "unknown_engine",
            ScrapeFailureReason::MissingMetrics => "missing_metrics",
            ScrapeFailureReason::InvalidValue => "invalid_value",
        }
    }
}

/// A failed scrape: the reason and a sentence for the probe record. The detail never quotes
/// the body (it names metric names the adapter knows, numbers and HTTP statuses only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScrapeFailure {
    /// The label value.
    pub reason: ScrapeFailureReason,
    /// What happened, e.g. `"HTTP 503"`.
    pub detail: String,
}

impl ScrapeFailure {
    /// A failure with `reason` and `detail`.
    pub fn new(reason: ScrapeFailureReason, detail: impl Into<String>) -> Self {
        ScrapeFailure {
            reason,
            detail: detail.into(),
        }
    }
}

/// The outcome of one scrape of the engine's `/metrics`, kept on the probe's record.
pub type EngineScrape = Result<EngineLoad, ScrapeFailure>;
