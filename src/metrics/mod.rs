//! Every metric the exporter publishes (`DESIGN.md` §3), owned by one [`Metrics`] value whose
//! domain methods (`observe`, `forget`, …) are the only way to change them. The only module that
//! touches `prometheus-client` types.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Unit;

use crate::config::Slo;
use crate::measure::{Anomaly, FailureReason, Identity, ProbeOutcome, TtftComponent};

pub mod accept;
pub mod exemplars;
pub mod fast;
pub mod histogram;
pub mod series;
pub use accept::{negotiate, negotiate_text};
use exemplars::Exemplar;
use fast::Catalog;
use histogram::{ProbeHistogram, SharedHistogram};
use series::{series_labels, SeriesFamily};

/// Labels of every probe series: the config's names, never a URL or prompt text.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct ProbeLabels {
    /// Target name.
    pub target: Arc<str>,
    /// Configured model.
    pub model: Arc<str>,
    /// Scenario name.
    pub scenario: Arc<str>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
struct FailureLabels {
    target: Arc<str>,
    model: Arc<str>,
    scenario: Arc<str>,
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
struct CheckLabels {
    target: Arc<str>,
    model: Arc<str>,
    scenario: Arc<str>,
    check: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
struct AnomalyLabels {
    target: Arc<str>,
    model: Arc<str>,
    scenario: Arc<str>,
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
struct ComponentLabels {
    target: Arc<str>,
    model: Arc<str>,
    scenario: Arc<str>,
    component: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
struct TargetLabels {
    target: Arc<str>,
    model: Arc<str>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
struct ScrapeFailureLabels {
    target: Arc<str>,
    model: Arc<str>,
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
struct EndpointLabels {
    target: Arc<str>,
    model: Arc<str>,
    response_model: Arc<str>,
    system_fingerprint: Arc<str>,
    server: Arc<str>,
    server_version: Arc<str>,
}

/// A pinned baseline's quantile: the probe labels and `quantile` (`0.5`, `0.95`, `0.99`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
struct QuantileLabels {
    target: Arc<str>,
    model: Arc<str>,
    scenario: Arc<str>,
    quantile: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
struct ShardLabels {
    index: u32,
    count: u32,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
struct BuildLabels {
    version: &'static str,
}

series_labels!(ProbeLabels {
    target,
    model,
    scenario
});
series_labels!(FailureLabels {
    target,
    model,
    scenario,
    reason
});
series_labels!(CheckLabels {
    target,
    model,
    scenario,
    check
});
series_labels!(AnomalyLabels {
    target,
    model,
    scenario,
    kind
});
series_labels!(ComponentLabels {
    target,
    model,
    scenario,
    component
});
series_labels!(TargetLabels { target, model });
series_labels!(ScrapeFailureLabels {
    target,
    model,
    reason
});
series_labels!(QuantileLabels {
    target,
    model,
    scenario,
    quantile
});
series_labels!(EndpointLabels {
    target,
    model,
    response_model,
    system_fingerprint,
    server,
    server_version
});

/// Bucket upper bounds (seconds) for TTFT and time to first output token.
pub const TTFT_BUCKETS: &[f64] = &[
    0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 7.5,
    10.0, 15.0, 20.0, 30.0, 60.0,
];
/// Bucket upper bounds (seconds) for TPOT and inter-token latency.
pub const TOKEN_TIME_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15,
    0.2, 0.3, 0.5, 0.75, 1.0, 2.5,
];
/// Bucket upper bounds (tokens/s) for output tokens per second.
pub const TOKENS_PER_SECOND_BUCKETS: &[f64] = &[
    1.0, 2.5, 5.0, 10.0, 15.0, 20.0, 25.0, 30.0, 40.0, 50.0, 60.0, 75.0, 100.0, 125.0, 150.0,
    200.0, 250.0, 300.0, 400.0, 500.0, 750.0, 1000.0, 2000.0,
];
/// Bucket upper bounds (seconds) for connection setup: from loopback (well under a millisecond)
/// to a TLS handshake across continents or behind a slow proxy.
pub const CONNECTION_SETUP_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];
/// Bucket upper bounds (seconds) for the probe's own read delay (kernel arrival to read): a
/// healthy host reads within a fraction of a millisecond; the alert fires at a P99 of 5 ms.
pub const READ_DELAY_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
];
/// Bucket upper bounds (seconds) for end-to-end request duration.
pub const E2E_BUCKETS: &[f64] = &[
    0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 7.5, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0, 90.0,
    120.0, 180.0, 300.0,
];

/// Which buckets the latency and rate histograms carry (`run --metrics.histograms`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum HistogramKinds {
    /// Classic buckets only (`_bucket{le=…}` series): the fixed boundaries (`TTFT_BUCKETS`
    /// and the others) plus the SLO thresholds.
    Classic,
    /// Native (exponential) buckets only; the text formats then carry `_sum`, `_count` and
    /// a single `le="+Inf"` bucket.
    Native,
    /// Both in one histogram: the protobuf exposition carries both, the text formats the
    /// classic buckets.
    #[default]
    Both,
}

/// The layout of the latency and rate histograms, fixed when the exporter starts.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct HistogramOptions {
    /// Classic, native or both.
    pub kinds: HistogramKinds,
    /// Resolution of the native buckets. Ignored with [`HistogramKinds::Classic`].
    pub native_bucket_factor: NativeBucketFactor,
}

/// A native bucket growth factor, above 1 and at most 65536 (2^16, schema −4, the coarsest
/// Prometheus knows): the native schema chosen is the coarsest whose buckets grow by at most
/// this factor (1.1 → schema 3, each bucket 2^(1/8) ≈ 9 % wider than the one before).
/// Made by [`NativeBucketFactor::new`] or parsed (`"1.1".parse()`), so always valid.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NativeBucketFactor(f64);

impl NativeBucketFactor {
    /// client_golang's recommendation, the default of
    /// `--metrics.native-histogram-bucket-factor`.
    pub const DEFAULT: NativeBucketFactor = NativeBucketFactor(1.1);

    /// `factor` if it is above 1 and at most 65536; else an error naming the range.
    pub fn new(factor: f64) -> Result<Self, String> {
        if factor > 1.0 && factor <= 65536.0 {
            Ok(NativeBucketFactor(factor))
        } else {
            Err(format!(
                "{factor} is out of range: the factor must be above 1 and at most 65536 (e.g. 1.1: each bucket at most 10 % wider than the one before)"
            ))
        }
    }

    /// The factor.
    pub fn get(self) -> f64 {
        self.0
    }
}

impl Default for NativeBucketFactor {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl std::fmt::Display for NativeBucketFactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::str::FromStr for NativeBucketFactor {
    type Err = String;

    /// A decimal number in the accepted range; errors say what was wrong.
    fn from_str(s: &str) -> Result<Self, String> {
        let f: f64 = s
            .trim()
            .parse()
            .map_err(|_| format!("{s:?} is not a number; use e.g. 1.1"))?;
        Self::new(f)
    }
}

/// The bucket layout of one histogram family: classic bounds (without `+Inf`) and, if
/// enabled, the native configuration; and the bounds whose buckets keep one exemplar each
/// (the configured classic bounds, also when only native buckets are exported).
#[derive(Clone)]
pub struct Buckets {
    classic: Arc<[f64]>,
    /// The native schema ([`ProbeHistogram::schema_for_factor`]).
    native: Option<i8>,
    exemplar_slots: Arc<[f64]>,
}

impl Buckets {
    /// A new series of this layout, at zero.
    pub fn new_histogram(&self) -> SharedHistogram {
        SharedHistogram::new(ProbeHistogram::new(
            self.classic.clone(),
            self.native,
            self.exemplar_slots.clone(),
        ))
    }

    /// An empty family of series of this layout.
    fn family<L: series::SeriesLabels>(&self) -> SeriesFamily<L, SharedHistogram> {
        let b = self.clone();
        SeriesFamily::new(move || b.new_histogram())
    }
}

/// `base` with `extra` merged in, sorted, deduplicated.
fn with_thresholds(base: &[f64], extra: impl IntoIterator<Item = f64>) -> Arc<[f64]> {
    let mut v: Vec<f64> = base
        .iter()
        .copied()
        .chain(extra)
        .filter(|b| b.is_finite() && *b > 0.0)
        .collect();
    v.sort_by(f64::total_cmp);
    v.dedup();
    v.into()
}

impl HistogramOptions {
    /// The layout of a family whose classic bounds would be `bounds`.
    fn buckets(&self, bounds: &Arc<[f64]>) -> Buckets {
        let native = ProbeHistogram::schema_for_factor(self.native_bucket_factor.get());
        match self.kinds {
            HistogramKinds::Classic => Buckets {
                classic: bounds.clone(),
                native: None,
                exemplar_slots: bounds.clone(),
            },
            HistogramKinds::Native => Buckets {
                classic: Arc::new([]),
                native: Some(native),
                exemplar_slots: bounds.clone(),
            },
            HistogramKinds::Both => Buckets {
                classic: bounds.clone(),
                native: Some(native),
                exemplar_slots: bounds.clone(),
            },
        }
    }
}

type Hist = SeriesFamily<ProbeLabels, SharedHistogram>;
type F64Gauge = Gauge<f64, std::sync::atomic::AtomicU64>;

/// The exporter's metrics. Cheap to share (`Arc<Metrics>`); all methods take `&self`.
pub struct Metrics {
    /// Every family, in exposition order ([`fast`]).
    catalog: Catalog,
    /// TTFT, TPOT and E2E carry exemplars ([`exemplars`]).
    ttft: Hist,
    ttfo: Hist,
    tpot: Hist,
    itl: Hist,
    tokens_per_second: Hist,
    e2e: Hist,
    server_prefill: Hist,
    ttft_overhead: Hist,
    /// The TTFT split (issue 29), one series per component.
    ttft_component: SeriesFamily<ComponentLabels, SharedHistogram>,
    connection_setup: Hist,
    first_tool_call: Hist,
    tool_arguments: Hist,
    answer_checks: SeriesFamily<CheckLabels, Counter>,
    /// The probe host's own delay, no per-pair labels (issue 15).
    read_delay: Histogram,
    probes: SeriesFamily<ProbeLabels, Counter>,
    failures: SeriesFamily<FailureLabels, Counter>,
    anomalies: SeriesFamily<AnomalyLabels, Counter>,
    output_tokens: SeriesFamily<ProbeLabels, Counter>,
    prompt_tokens: SeriesFamily<ProbeLabels, Counter>,
    cached_prompt_tokens: SeriesFamily<ProbeLabels, Counter>,
    last_success: SeriesFamily<ProbeLabels, Gauge>,
    last_timestamp: SeriesFamily<ProbeLabels, F64Gauge>,
    retry_after: SeriesFamily<ProbeLabels, F64Gauge>,
    cache_ratio: SeriesFamily<ProbeLabels, F64Gauge>,
    cache_warm_cached: SeriesFamily<ProbeLabels, Gauge>,
    interval: SeriesFamily<ProbeLabels, F64Gauge>,
    credential_reloads: SeriesFamily<TargetLabels, Counter>,
    cost: SeriesFamily<ProbeLabels, Counter<f64, std::sync::atomic::AtomicU64>>,
    /// The engine's own load before the last probe (`server_metrics_url:`, issue 29).
    server_waiting: SeriesFamily<TargetLabels, F64Gauge>,
    server_running: SeriesFamily<TargetLabels, F64Gauge>,
    server_kv_ratio: SeriesFamily<TargetLabels, F64Gauge>,
    server_scrape_failures: SeriesFamily<ScrapeFailureLabels, Counter>,
    slo_ttft: SeriesFamily<TargetLabels, F64Gauge>,
    slo_tokens_per_second: SeriesFamily<TargetLabels, F64Gauge>,
    endpoint_info: SeriesFamily<EndpointLabels, Gauge>,
    current_identity: Mutex<HashMap<Arc<str>, EndpointLabels>>,
    reload_success: Gauge,
    reload_timestamp: F64Gauge,
    shard_info: Family<ShardLabels, Gauge>,
    baseline_ttft: SeriesFamily<QuantileLabels, F64Gauge>,
    baseline_tpot: SeriesFamily<QuantileLabels, F64Gauge>,
    baseline_tokens_per_second: SeriesFamily<QuantileLabels, F64Gauge>,
    baseline_e2e: SeriesFamily<QuantileLabels, F64Gauge>,
    baseline_samples: SeriesFamily<ProbeLabels, Gauge>,
    baseline_timestamp: SeriesFamily<ProbeLabels, F64Gauge>,
    /// The pairs whose baseline is exported now (what [`Metrics::set_baselines`] replaces).
    baseline_pairs: Mutex<Vec<ProbeLabels>>,
    /// Whether the histograms carry classic buckets.
    classic: bool,
    ttft_boundaries: Arc<[f64]>,
    tps_boundaries: Arc<[f64]>,
    /// Bytes of the last render per [`Exposition`]: the next one reserves this much up front, so a 15 MiB body is
    /// written once instead of being copied through every doubling of a growing `String`
    /// (which also held the old and the new buffer at once: a 2–3× peak in RSS).
    last_render_len: [AtomicUsize; 3],
    /// The same for the gzip-compressed bodies ([`Metrics::render_gzip`]).
    last_gzip_len: [AtomicUsize; 3],
}

impl Metrics {
    /// Registers every metric. Each SLO threshold in `slos` (TTFT in seconds, tokens/s floor)
    /// is added to the bucket boundaries so that "P95 above the SLO" and "share under the SLO
    /// below 95 %" are the same question (`DESIGN.md` §3).
    pub fn new(slos: &[Slo]) -> Self {
        Self::with_histograms(slos, HistogramOptions::default())
    }

    /// [`Metrics::new`] with the histogram layout `histograms` (classic, native or both).
    pub fn with_histograms(slos: &[Slo], histograms: HistogramOptions) -> Self {
        let ttft_b = with_thresholds(TTFT_BUCKETS, slos.iter().map(|s| s.ttft_p95.as_secs_f64()));
        let tps_b = with_thresholds(
            TOKENS_PER_SECOND_BUCKETS,
            slos.iter().map(|s| s.output_tokens_per_second_min),
        );
        let layout = |bounds: &Arc<[f64]>| histograms.buckets(bounds).family();
        let token_b = with_thresholds(TOKEN_TIME_BUCKETS, []);
        let mut m = Metrics {
            catalog: Catalog::new("llm_probe"),
            ttft: layout(&ttft_b),
            ttfo: layout(&ttft_b),
            tpot: layout(&token_b),
            itl: layout(&token_b),
            tokens_per_second: layout(&tps_b),
            e2e: layout(&with_thresholds(E2E_BUCKETS, [])),
            server_prefill: layout(&ttft_b),
            ttft_overhead: layout(&ttft_b),
            ttft_component: histograms.buckets(&ttft_b).family(),
            connection_setup: layout(&with_thresholds(CONNECTION_SETUP_BUCKETS, [])),
            first_tool_call: layout(&ttft_b),
            tool_arguments: layout(&with_thresholds(E2E_BUCKETS, [])),
            answer_checks: Default::default(),
            read_delay: Histogram::new(READ_DELAY_BUCKETS.iter().copied()),
            probes: Default::default(),
            failures: Default::default(),
            anomalies: Default::default(),
            output_tokens: Default::default(),
            prompt_tokens: Default::default(),
            cached_prompt_tokens: Default::default(),
            last_success: Default::default(),
            last_timestamp: Default::default(),
            retry_after: Default::default(),
            cache_ratio: Default::default(),
            cache_warm_cached: Default::default(),
            interval: Default::default(),
            credential_reloads: Default::default(),
            cost: Default::default(),
            server_waiting: Default::default(),
            server_running: Default::default(),
            server_kv_ratio: Default::default(),
            server_scrape_failures: Default::default(),
            slo_ttft: Default::default(),
            slo_tokens_per_second: Default::default(),
            endpoint_info: Default::default(),
            current_identity: Mutex::new(HashMap::new()),
            reload_success: Gauge::default(),
            reload_timestamp: F64Gauge::default(),
            shard_info: Default::default(),
            baseline_ttft: Default::default(),
            baseline_tpot: Default::default(),
            baseline_tokens_per_second: Default::default(),
            baseline_e2e: Default::default(),
            baseline_samples: Default::default(),
            baseline_timestamp: Default::default(),
            baseline_pairs: Mutex::new(Vec::new()),
            classic: histograms.kinds != HistogramKinds::Native,
            ttft_boundaries: ttft_b,
            tps_boundaries: tps_b,
            last_render_len: Default::default(),
            last_gzip_len: Default::default(),
        };
        let r = &mut m.catalog;
        r.register_with_unit("time_to_first_token", "Time to first token (TTFT): first token-bearing event (reasoning included) minus request sent", Unit::Seconds, m.ttft.clone());
        r.register_with_unit(
            "time_to_first_output_token",
            "Time to first output token: first non-reasoning token event minus request sent",
            Unit::Seconds,
            m.ttfo.clone(),
        );
        r.register_with_unit(
            "time_per_output_token",
            "Time per output token (TPOT): (last token - first token) / (output tokens - 1)",
            Unit::Seconds,
            m.tpot.clone(),
        );
        r.register_with_unit(
            "inter_token_latency",
            "Inter-token latency: every gap between consecutive token-bearing events",
            Unit::Seconds,
            m.itl.clone(),
        );
        r.register(
            "output_tokens_per_second",
            "Output tokens per second: (output tokens - 1) / (last token - first token) = 1 / TPOT",
            m.tokens_per_second.clone(),
        );
        r.register_with_unit(
            "request_duration",
            "End-to-end request duration (E2E): stream end minus request sent",
            Unit::Seconds,
            m.e2e.clone(),
        );
        r.register_with_unit(
            "server_prefill",
            "Prompt processing (prefill) time as reported by the server itself (llama.cpp timings.prompt_ms, Ollama prompt_eval_duration); successful probes whose server reports it",
            Unit::Seconds,
            m.server_prefill.clone(),
        );
        r.register_with_unit(
            "ttft_overhead",
            "Client TTFT minus the server-reported model load and prefill time: network, TLS, gateways and queueing in front of the server",
            Unit::Seconds,
            m.ttft_overhead.clone(),
        );
        r.register_with_unit(
            "ttft_component",
            "A probe's TTFT split by component: the server's own engine_queue, model_load and engine_prefill, and the rest, outside_engine when the server reported its queue and prefill, else unattributed; per probe the components sum to TTFT. Successful probes whose server reports any part (vLLM --enable-per-request-metrics, llama.cpp timings, Ollama, TGI x-queue-time)",
            Unit::Seconds,
            m.ttft_component.clone(),
        );
        r.register_with_unit(
            "time_to_first_tool_call",
            "From request sent to the first stream event carrying a tool call (its name or arguments), successful probes that made a call",
            Unit::Seconds,
            m.first_tool_call.clone(),
        );
        r.register_with_unit(
            "tool_call_arguments",
            "From the first tool-call event to the last one carrying arguments (the arguments are complete), successful probes that made a call",
            Unit::Seconds,
            m.tool_arguments.clone(),
        );
        r.register(
            "answer_check_failures",
            "Probes whose answer failed a check (reason wrong_answer), by check: contains, regex, json, json_schema, min_output_tokens, max_output_tokens, repetition_loop, punctuation_only, special_tokens, empty_after_reasoning, tool_call_missing, tool_arguments",
            m.answer_checks.clone(),
        );
        r.register_with_unit(
            "connection_setup",
            "Time to open the connection a probe used (DNS, TCP, proxy CONNECT, TLS), part of its TTFT; every probe that opened a new connection, whatever its outcome (with connection: fresh, every probe that connected)",
            Unit::Seconds,
            m.connection_setup.clone(),
        );
        r.register_with_unit(
            "read_delay",
            "How long after the kernel received a token event's bytes the probe read them (kernel receive timestamp to read); one sample per read that carried token events, for probes with timestamp_source kernel. High values mean the probe host is overloaded and read-instant timings would be inflated",
            Unit::Seconds,
            m.read_delay.clone(),
        );
        r.register(
            "probes",
            "Probes finished, successful or not",
            m.probes.clone(),
        );
        r.register(
            "probe_panics",
            "Probes that panicked (a bug in llm-probe; logged at error, not counted in probes)",
            crate::schedule::PROBE_PANICS.clone(),
        );
        r.register(
            "log_write_failures",
            "Log lines that could not be written (e.g. stderr closed by a dead log shipper) and were dropped",
            crate::logging::LOG_WRITE_FAILURES.clone(),
        );
        r.register(
            "probe_failures",
            "Failed probes by reason",
            m.failures.clone(),
        );
        r.register("stream_anomalies", "Streams that succeeded or failed with something that makes their numbers less trustworthy, by kind", m.anomalies.clone());
        r.register(
            "output_tokens",
            "Output tokens generated for the probe's own requests (the probe's token spend)",
            m.output_tokens.clone(),
        );
        r.register(
            "prompt_tokens",
            "Prompt tokens sent by the probe, as counted by the server",
            m.prompt_tokens.clone(),
        );
        r.register(
            "prompt_cached_tokens",
            "Prompt tokens the server reports it served from its prefix cache",
            m.cached_prompt_tokens.clone(),
        );
        r.register(
            "last_probe_success",
            "1 if the last probe succeeded, 0 if it failed",
            m.last_success.clone(),
        );
        r.register_with_unit(
            "last_probe_timestamp",
            "Unix time the last probe finished",
            Unit::Seconds,
            m.last_timestamp.clone(),
        );
        r.register(
            "prefix_cache_warm_cold_ratio",
            "Prefix-cache canary (cache_canary: true): TTFT of the same prompt sent again right after / TTFT of its first request, last probe whose both requests succeeded; below 1 when the server's prefix cache helps",
            m.cache_ratio.clone(),
        );
        r.register(
            "prefix_cache_warm_cached_tokens",
            "Prefix-cache canary: prompt tokens the server reported serving from its cache on the second request of the last pair, where it reports them",
            m.cache_warm_cached.clone(),
        );
        r.register_with_unit(
            "retry_after",
            "Wait the server asked for with Retry-After on the last probe (429/503); the next probe is held back until it passes; 0 when none",
            Unit::Seconds,
            m.retry_after.clone(),
        );
        r.register(
            "probe_cost",
            "Money the probes spent, in the currency unit of the target's cost prices (per million prompt and output tokens), from the tokens the server reported; only targets with cost: prices",
            m.cost.clone(),
        );
        r.register(
            "server_requests_waiting",
            "Requests waiting in the engine's queue, from the engine's own /metrics read just before the last probe (server_metrics_url:; summed over the engine's label sets); absent after a failed read",
            m.server_waiting.clone(),
        );
        r.register(
            "server_requests_running",
            "Requests the engine was running, from its own /metrics read just before the last probe (server_metrics_url:; summed over the engine's label sets); absent after a failed read",
            m.server_running.clone(),
        );
        r.register(
            "server_kv_cache_usage_ratio",
            "Share of the engine's KV cache in use (0 to 1), from its own /metrics read just before the last probe (server_metrics_url:; the largest over the engine's label sets); absent when the engine does not publish it or the read failed",
            m.server_kv_ratio.clone(),
        );
        r.register(
            "server_metrics_scrape_failures",
            "Reads of the engine's own /metrics (server_metrics_url:) that gave no numbers, by reason; the probe itself is not affected",
            m.server_scrape_failures.clone(),
        );
        r.register(
            "credential_reloads",
            "Times the target's credentials (api_key_file, TLS files) were read again because a file changed, and the next probes used them (never the value)",
            m.credential_reloads.clone(),
        );
        r.register_with_unit(
            "probe_interval",
            "Time between the starts of two probes of the pair (the configured interval, or longer when the target's cost.monthly_budget needs it); the alert rules derive their probe-count guards and detection windows from it",
            Unit::Seconds,
            m.interval.clone(),
        );
        r.register_with_unit(
            "slo_time_to_first_token",
            "Configured P95 TTFT objective of the target",
            Unit::Seconds,
            m.slo_ttft.clone(),
        );
        r.register(
            "slo_output_tokens_per_second",
            "Configured output tokens per second floor of the target",
            m.slo_tokens_per_second.clone(),
        );
        r.register("endpoint_info", "What the backend reveals about itself (value 1); a new label set marks a model or framework change", m.endpoint_info.clone());
        r.register(
            "config_last_reload_successful",
            "1 if the last configuration load succeeded",
            m.reload_success.clone(),
        );
        r.register_with_unit(
            "config_last_reload_success_timestamp",
            "Unix time of the last successful configuration load",
            Unit::Seconds,
            m.reload_timestamp.clone(),
        );
        r.register(
            "shard_info",
            "This replica's shard: index in 0..count of the replicas sharing the probes file (value 1)",
            m.shard_info.clone(),
        );
        r.register_with_unit(
            "baseline_time_to_first_token",
            "Pinned baseline TTFT of the pair (the probes file's baseline_file, written by llm-probe baseline save), by quantile",
            Unit::Seconds,
            m.baseline_ttft.clone(),
        );
        r.register_with_unit(
            "baseline_time_per_output_token",
            "Pinned baseline TPOT of the pair, by quantile",
            Unit::Seconds,
            m.baseline_tpot.clone(),
        );
        r.register(
            "baseline_output_tokens_per_second",
            "Pinned baseline output tokens per second of the pair, by quantile",
            m.baseline_tokens_per_second.clone(),
        );
        r.register_with_unit(
            "baseline_request_duration",
            "Pinned baseline end-to-end request duration (E2E) of the pair, by quantile",
            Unit::Seconds,
            m.baseline_e2e.clone(),
        );
        r.register(
            "baseline_samples",
            "Successful requests the pinned baseline was computed from",
            m.baseline_samples.clone(),
        );
        r.register_with_unit(
            "baseline_timestamp",
            "Unix time the pinned baseline's measurement ended",
            Unit::Seconds,
            m.baseline_timestamp.clone(),
        );
        let build = Family::<BuildLabels, Gauge>::default();
        build
            .get_or_create(&BuildLabels {
                version: env!("CARGO_PKG_VERSION"),
            })
            .set(1);
        r.register("build_info", "Build information (value 1)", build);
        m
    }

    /// Exports `llm_probe_shard_info{index,count} 1` for `shard` (replacing any earlier one).
    pub fn set_shard(&self, shard: crate::shard::Shard) {
        self.shard_info.clear();
        self.shard_info
            .get_or_create(&ShardLabels {
                index: shard.index,
                count: shard.count,
            })
            .set(1);
    }

    /// Whether the histograms carry classic buckets (not with [`HistogramKinds::Native`]).
    pub fn has_classic_buckets(&self) -> bool {
        self.classic
    }

    /// Classic bucket boundaries of the TTFT histograms, seconds (for start-up checks and
    /// tests); what they would be when [`Metrics::has_classic_buckets`] is false.
    pub fn ttft_boundaries(&self) -> &[f64] {
        &self.ttft_boundaries
    }

    /// Classic bucket boundaries of the output-tokens-per-second histogram, tokens/s.
    pub fn tokens_per_second_boundaries(&self) -> &[f64] {
        &self.tps_boundaries
    }

    /// Creates the series of one (target, model, scenario) at zero, so that dashboards and
    /// `rate()` see them before the first probe (and the first failure) happens; exports the
    /// target's SLO.
    pub fn register_probe(&self, labels: &ProbeLabels, slo: &Slo) {
        let _ = self.probes.get_or_create(labels);
        for reason in FailureReason::ALL {
            let _ = self.failures.get_or_create(&failure_labels(labels, reason));
        }
        let t = TargetLabels {
            target: labels.target.clone(),
            model: labels.model.clone(),
        };
        let _ = self.credential_reloads.get_or_create(&t);
        self.slo_ttft
            .get_or_create(&t)
            .set(slo.ttft_p95.as_secs_f64());
        self.slo_tokens_per_second
            .get_or_create(&t)
            .set(slo.output_tokens_per_second_min);
    }

    /// Exports the interval one (target, model, scenario) is probed at as
    /// `llm_probe_probe_interval_seconds` (seconds between the starts of two probes: the
    /// configured interval, or longer when the target's `cost.monthly_budget` needs it), and
    /// creates its cost counter at zero when the target has prices (removes it when it has
    /// none). The alert rules scale their probe-count guards and windows with the interval, so
    /// a pair probed every 5 min gets latency alerts as well as one probed every 15 s.
    pub fn set_schedule(&self, labels: &ProbeLabels, interval: std::time::Duration, priced: bool) {
        self.interval
            .get_or_create(labels)
            .set(interval.as_secs_f64());
        if priced {
            let _ = self.cost.get_or_create(labels);
        } else {
            // Prices removed by a reload: the counter would stand still forever.
            self.cost.remove(labels);
        }
    }

    /// Creates the engine-metrics failure counters of a target with a `server_metrics_url` at
    /// zero (every reason), so that `rate()` and `increase()` see the first failure.
    pub fn register_server_metrics(&self, target: &str, model: &str) {
        for reason in crate::engine::ScrapeFailureReason::ALL {
            let _ = self
                .server_scrape_failures
                .get_or_create(&ScrapeFailureLabels {
                    target: target.into(),
                    model: model.into(),
                    reason: reason.as_str(),
                });
        }
    }

    /// Removes a target's engine-metrics gauges and failure counters (its `server_metrics_url`
    /// was removed, or the target left the config).
    pub fn forget_server_metrics(&self, target: &str, model: &str) {
        self.forget_server_load(target, model);
        for reason in crate::engine::ScrapeFailureReason::ALL {
            self.server_scrape_failures.remove(&ScrapeFailureLabels {
                target: target.into(),
                model: model.into(),
                reason: reason.as_str(),
            });
        }
    }

    /// Removes a target's three engine-load gauges (its `server_metrics_url` or adapter
    /// changed: the old engine's numbers must not stand for the new one until its first read).
    /// The failure counters stay.
    pub fn forget_server_load(&self, target: &str, model: &str) {
        let t = TargetLabels {
            target: target.into(),
            model: model.into(),
        };
        self.server_waiting.remove(&t);
        self.server_running.remove(&t);
        self.server_kv_ratio.remove(&t);
    }

    /// The engine's load read before a probe: sets the gauges it published and removes the
    /// others (an absent series, not a stale or made-up value); a failed read counts in
    /// `llm_probe_server_metrics_scrape_failures_total{reason}` and removes all three gauges.
    fn observe_server_load(&self, labels: &ProbeLabels, scrape: &crate::engine::EngineScrape) {
        let t = TargetLabels {
            target: labels.target.clone(),
            model: labels.model.clone(),
        };
        let (waiting, running, kv) = match scrape {
            Ok(l) => (
                l.requests_waiting,
                l.requests_running,
                l.kv_cache_usage_ratio,
            ),
            Err(f) => {
                let l = ScrapeFailureLabels {
                    target: t.target.clone(),
                    model: t.model.clone(),
                    reason: f.reason.as_str(),
                };
                self.server_scrape_failures.get_or_create(&l).inc();
                (None, None, None)
            }
        };
        for (family, value) in [
            (&self.server_waiting, waiting),
            (&self.server_running, running),
            (&self.server_kv_ratio, kv),
        ] {
            match value {
                Some(v) => {
                    family.get_or_create(&t).set(v);
                }
                None => {
                    family.remove(&t);
                }
            }
        }
    }

    /// The histogram families keyed by (target, model, scenario) alone ([`ProbeLabels`]):
    /// every per-pair histogram but `ttft_component`, which adds a component label.
    fn pair_histograms(&self) -> [&Hist; 11] {
        [
            &self.ttft,
            &self.ttfo,
            &self.tpot,
            &self.itl,
            &self.tokens_per_second,
            &self.e2e,
            &self.server_prefill,
            &self.ttft_overhead,
            &self.connection_setup,
            &self.first_tool_call,
            &self.tool_arguments,
        ]
    }

    /// Removes every series of one (target, model, scenario), e.g. when it leaves the config.
    pub fn forget(&self, labels: &ProbeLabels) {
        for h in self.pair_histograms() {
            h.remove(labels);
        }
        for check in crate::check::CheckName::ALL {
            self.answer_checks.remove(&CheckLabels {
                target: labels.target.clone(),
                model: labels.model.clone(),
                scenario: labels.scenario.clone(),
                check: check.as_str(),
            });
        }
        for c in [
            &self.probes,
            &self.output_tokens,
            &self.prompt_tokens,
            &self.cached_prompt_tokens,
        ] {
            c.remove(labels);
        }
        self.last_success.remove(labels);
        self.last_timestamp.remove(labels);
        self.cost.remove(labels);
        self.retry_after.remove(labels);
        self.cache_ratio.remove(labels);
        self.cache_warm_cached.remove(labels);
        self.interval.remove(labels);
        for reason in FailureReason::ALL {
            self.failures.remove(&failure_labels(labels, reason));
        }
        for kind in Anomaly::ALL {
            self.anomalies.remove(&anomaly_labels(labels, kind));
        }
        for c in TtftComponent::ALL {
            self.ttft_component.remove(&component_labels(labels, c));
        }
    }

    /// Removes the per-target series (SLO, endpoint identity) of a target that left the config.
    pub fn forget_target(&self, target: &str, model: &str) {
        let t = TargetLabels {
            target: target.into(),
            model: model.into(),
        };
        self.slo_ttft.remove(&t);
        self.slo_tokens_per_second.remove(&t);
        self.credential_reloads.remove(&t);
        self.forget_server_metrics(target, model);
        if let Some(old) = self
            .current_identity
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(target)
        {
            self.endpoint_info.remove(&old);
        }
    }

    /// Exports exactly the pinned baselines in `pinned` (probe labels, baseline): sets their
    /// `llm_probe_baseline_*` gauges and removes those of pairs no longer in it (a baseline
    /// taken out of the probes file, a pair removed or moved to another shard). A metric the
    /// baseline has no value for (`null` TPOT) has no series.
    pub fn set_baselines(&self, pinned: &[(ProbeLabels, &crate::baseline::Baseline)]) {
        let mut current = self
            .baseline_pairs
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let quantile_families = [
            &self.baseline_ttft,
            &self.baseline_tpot,
            &self.baseline_tokens_per_second,
            &self.baseline_e2e,
        ];
        for old in current.iter() {
            let kept = pinned.iter().find(|(l, _)| l == old).map(|(_, b)| *b);
            let values = kept.map(baseline_values);
            for (i, family) in quantile_families.iter().enumerate() {
                if values.is_some_and(|v| v[i].is_some()) {
                    continue;
                }
                for q in ["0.5", "0.95", "0.99"] {
                    family.remove(&quantile_labels(old, q));
                }
            }
            if kept.is_none() {
                self.baseline_samples.remove(old);
                self.baseline_timestamp.remove(old);
            }
        }
        for (labels, b) in pinned {
            for (family, q) in quantile_families.iter().zip(baseline_values(b)) {
                for (name, v) in q.iter().flat_map(|q| q.labelled()) {
                    family.get_or_create(&quantile_labels(labels, name)).set(v);
                }
            }
            self.baseline_samples
                .get_or_create(labels)
                .set(i64::try_from(b.samples).unwrap_or(i64::MAX));
            self.baseline_timestamp
                .get_or_create(labels)
                .set(b.measured_unix_seconds());
        }
        *current = pinned.iter().map(|(l, _)| l.clone()).collect();
    }

    /// Records one finished probe: counters and gauges always; connection setup whenever the
    /// probe opened a connection (it is complete even when the stream later fails); the latency
    /// and rate histograms only for a success (a failed stream's partial timings are never
    /// observed).
    pub fn observe(&self, outcome: &ProbeOutcome) {
        let labels = ProbeLabels {
            target: outcome.target.clone(),
            model: outcome.model.clone(),
            scenario: outcome.scenario.clone(),
        };
        self.probes.get_or_create(&labels).inc();
        let obs = &outcome.observations;
        if let Some(n) = obs.usage.prompt_tokens {
            add_saturating(&self.prompt_tokens.get_or_create(&labels), n);
        }
        if let Some(n) = obs.usage.cached_prompt_tokens {
            add_saturating(&self.cached_prompt_tokens.get_or_create(&labels), n);
        }
        for &kind in &obs.anomalies {
            self.anomalies
                .get_or_create(&anomaly_labels(&labels, kind))
                .inc();
        }
        self.update_identity(&labels, &obs.identity);
        if let Some(scrape) = &obs.server_load {
            self.observe_server_load(&labels, scrape);
        }
        // A counter only rises: a NaN, infinite or negative amount is never added.
        if let Some(c) = obs.cost.filter(|c| c.is_finite() && *c > 0.0) {
            self.cost.get_or_create(&labels).inc_by(c);
        }
        if obs.credentials_reloaded {
            let t = TargetLabels {
                target: labels.target.clone(),
                model: labels.model.clone(),
            };
            self.credential_reloads.get_or_create(&t).inc();
        }
        for delay in &obs.read_delays {
            self.read_delay.observe(delay.as_secs_f64());
        }
        if let Some(setup) = obs.timeline.connection_setup() {
            self.connection_setup
                .get_or_create(&labels)
                .observe(setup.as_secs_f64(), None);
        }
        match &outcome.result {
            Ok(m) => {
                // The probe's exemplar of an observation `v` (none without a W3C trace id).
                let trace_id = obs.trace_id();
                let exemplar = |v: f64| {
                    let id = trace_id?;
                    Some(Exemplar::new(
                        id,
                        obs.request_id.as_deref(),
                        v,
                        outcome.started_at,
                    ))
                };
                let ttft = m.ttft.as_secs_f64();
                self.ttft
                    .get_or_create(&labels)
                    .observe(ttft, exemplar(ttft));
                if let Some(t) = m.time_to_first_output_token {
                    self.ttfo
                        .get_or_create(&labels)
                        .observe(t.as_secs_f64(), None);
                }
                if let Some(t) = m.tpot.map(|t| t.as_secs_f64()) {
                    self.tpot.get_or_create(&labels).observe(t, exemplar(t));
                }
                if let Some(r) = m.output_tokens_per_second {
                    self.tokens_per_second
                        .get_or_create(&labels)
                        .observe(r, None);
                }
                let itl = self.itl.get_or_create(&labels);
                for gap in &m.inter_token_latencies {
                    itl.observe(gap.as_secs_f64(), None);
                }
                drop(itl);
                let e2e = m.e2e.as_secs_f64();
                self.e2e.get_or_create(&labels).observe(e2e, exemplar(e2e));
                if let Some(p) = m.server_prefill {
                    self.server_prefill
                        .get_or_create(&labels)
                        .observe(p.as_secs_f64(), None);
                }
                if let Some(o) = m.ttft_overhead {
                    self.ttft_overhead
                        .get_or_create(&labels)
                        .observe(o.as_secs_f64(), None);
                }
                for (c, d) in m.ttft_split.components() {
                    self.ttft_component
                        .get_or_create(&component_labels(&labels, c))
                        .observe(d.as_secs_f64(), None);
                }
                let answer = &obs.answer;
                if let Some(first) = answer.first_tool_call {
                    let sent = obs.timeline.sent;
                    self.first_tool_call
                        .get_or_create(&labels)
                        .observe(first.saturating_duration_since(sent).as_secs_f64(), None);
                    if let Some(last) = answer.last_tool_arguments {
                        self.tool_arguments
                            .get_or_create(&labels)
                            .observe(last.saturating_duration_since(first).as_secs_f64(), None);
                    }
                }
                add_saturating(&self.output_tokens.get_or_create(&labels), m.output_tokens);
                self.last_success.get_or_create(&labels).set(1);
            }
            Err(f) => {
                self.failures
                    .get_or_create(&failure_labels(&labels, f.reason))
                    .inc();
                if let Some(check) = obs.answer.failed_check {
                    let l = CheckLabels {
                        target: labels.target.clone(),
                        model: labels.model.clone(),
                        scenario: labels.scenario.clone(),
                        check,
                    };
                    self.answer_checks.get_or_create(&l).inc();
                }
                // Tokens the server generated before failing were still spent.
                if let Some(n) = obs.usage.completion_tokens {
                    add_saturating(&self.output_tokens.get_or_create(&labels), n);
                }
                self.last_success.get_or_create(&labels).set(0);
            }
        }
        if let Some(c) = &obs.cache_canary {
            if let Some(r) = c.ratio() {
                self.cache_ratio.get_or_create(&labels).set(r);
            }
            if let Some(n) = c.warm_cached_tokens {
                self.cache_warm_cached
                    .get_or_create(&labels)
                    .set(i64::try_from(n).unwrap_or(i64::MAX));
            }
        }
        self.last_timestamp
            .get_or_create(&labels)
            .set(unix_seconds(SystemTime::now()));
        self.retry_after
            .get_or_create(&labels)
            .set(obs.retry_after.map_or(0.0, |d| d.as_secs_f64()));
    }

    fn update_identity(&self, labels: &ProbeLabels, id: &Identity) {
        if id.response_model.is_none()
            && id.system_fingerprint.is_none()
            && id.server_header.is_none()
            && id.server_version.is_none()
        {
            return;
        }
        let new = EndpointLabels {
            target: labels.target.clone(),
            model: labels.model.clone(),
            response_model: id.response_model.as_deref().unwrap_or_default().into(),
            system_fingerprint: id.system_fingerprint.as_deref().unwrap_or_default().into(),
            server: id.server_header.as_deref().unwrap_or_default().into(),
            server_version: id.server_version.as_deref().unwrap_or_default().into(),
        };
        let mut current = self
            .current_identity
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if current.get(&labels.target) != Some(&new) {
            if let Some(old) = current.insert(labels.target.clone(), new.clone()) {
                self.endpoint_info.remove(&old);
            }
            self.endpoint_info.get_or_create(&new).set(1);
        }
    }

    /// Records the result of loading the configuration at `at`.
    pub fn config_loaded(&self, success: bool, at: SystemTime) {
        self.reload_success.set(i64::from(success));
        if success {
            self.reload_timestamp.set(unix_seconds(at));
        }
    }

    /// Renders the registry in the text format the `Accept` header asks for (see
    /// [`negotiate_text`]): OpenMetrics 1.0.0 when the header prefers it, else
    /// the Prometheus text format 0.0.4 (a protobuf preference is not considered here; `/metrics`
    /// offers it, see [`Metrics::render_as`]). Returns `(content type, body)`.
    ///
    /// Panics if the encoder fails, which it does not for these formats (a `String` sink and
    /// histograms that always carry at least the `+Inf` bucket).
    pub fn render(&self, accept: Option<&str>) -> (&'static str, String) {
        let format = negotiate_text(accept);
        let body = self
            .render_as(format)
            .expect("the text formats encode every metric");
        let body = String::from_utf8(body).expect("the text formats are UTF-8");
        (format.content_type(), body)
    }

    /// Renders the registry in `format`: the text formats carry the classic buckets of each
    /// histogram, the protobuf format classic and native buckets (whichever are enabled).
    /// The per-pair families go through the fast encoder ([`fast`]), byte-identical to
    /// [`Metrics::render_reference`].
    ///
    /// Errors: the encoder failed (a histogram whose native buckets cannot be encoded).
    pub fn render_as(&self, format: Exposition) -> Result<Vec<u8>, RenderError> {
        let last_len = &self.last_render_len[format as usize];
        let last = last_len.load(Ordering::Relaxed);
        // Room for the last body plus growth (new series, longer numbers) of ~3 %.
        let capacity = (last + last / 32).max(16 * 1024);
        let out = match format {
            Exposition::OpenMetrics | Exposition::Text => {
                let mut out = String::with_capacity(capacity);
                advise_huge_pages(out.as_ptr(), out.capacity());
                let text = if format == Exposition::OpenMetrics {
                    fast::TextFormat::OpenMetrics
                } else {
                    fast::TextFormat::Prometheus
                };
                self.catalog
                    .render_text(text, &mut out)
                    .map_err(|_| RenderError(format))?;
                out.into_bytes()
            }
            Exposition::Protobuf => {
                let mut out = Vec::with_capacity(capacity);
                advise_huge_pages(out.as_ptr(), out.capacity());
                self.catalog
                    .render_protobuf(&mut out)
                    .map_err(|_| RenderError(format))?;
                out
            }
        };
        last_len.store(out.len(), Ordering::Relaxed);
        Ok(out)
    }

    /// Heap bytes of the per-pair histograms beyond their structs, summed over every series:
    /// `(native buckets, classic buckets and exemplars)` ([`ProbeHistogram::heap_bytes`]). For
    /// the scale benchmark's memory accounting (BENCHMARKS §17).
    #[doc(hidden)]
    pub fn histogram_heap_bytes(&self) -> (usize, usize) {
        fn add<L>(total: &mut (usize, usize), family: &SeriesFamily<L, SharedHistogram>) {
            for s in family.read().values() {
                let (native, other) = s.metric.heap_bytes();
                total.0 += native;
                total.1 += other;
            }
        }
        let mut total = (0, 0);
        for family in self.pair_histograms() {
            add(&mut total, family);
        }
        add(&mut total, &self.ttft_component);
        total
    }

    /// [`Metrics::render_as`] compressed with gzip (RFC 1952, flate2 at its fastest level), as
    /// `/metrics` answers a scraper that accepts it (Prometheus does): the body is compressed
    /// family by family as it is rendered, so the uncompressed body (~18 KiB per pair in the
    /// text formats) is never held whole, only its largest family and the compressed output
    /// (5 % of the text at 1,000 pairs, BENCHMARKS.md §16; about 13 % of protobuf). Decompressed, it is
    /// byte for byte the body of [`Metrics::render_as`].
    ///
    /// Errors: as [`Metrics::render_as`].
    pub fn render_gzip(&self, format: Exposition) -> Result<Vec<u8>, RenderError> {
        self.render_gzip_in_parts_of(format, GZIP_PART_BYTES)
    }

    /// [`Metrics::render_gzip`], compressing whenever `part_bytes` or more of the body are
    /// waiting (tests use 1: after every family).
    #[doc(hidden)]
    pub fn render_gzip_in_parts_of(
        &self,
        format: Exposition,
        part_bytes: usize,
    ) -> Result<Vec<u8>, RenderError> {
        use flate2::write::GzEncoder;
        use std::io::Write;
        let last_len = &self.last_gzip_len[format as usize];
        let last = last_len.load(Ordering::Relaxed);
        let mut gz = GzEncoder::new(
            Vec::with_capacity((last + last / 32).max(4 * 1024)),
            flate2::Compression::fast(),
        );
        // Writing into a Vec fails only when memory runs out, which aborts first.
        let fail = |_| RenderError(format);
        match format {
            Exposition::OpenMetrics | Exposition::Text => {
                let text = if format == Exposition::OpenMetrics {
                    fast::TextFormat::OpenMetrics
                } else {
                    fast::TextFormat::Prometheus
                };
                let mut out = String::with_capacity(part_bytes.min(GZIP_PART_BYTES) * 2);
                self.catalog
                    .render_text_in_parts(text, &mut out, &mut |out| {
                        if compress_part(&mut gz, out.as_bytes(), part_bytes)? {
                            out.clear();
                        }
                        Ok(())
                    })
                    .map_err(fail)?;
                gz.write_all(out.as_bytes())
                    .map_err(|_| RenderError(format))?;
            }
            Exposition::Protobuf => {
                let mut out = Vec::with_capacity(part_bytes.min(GZIP_PART_BYTES) * 2);
                self.catalog
                    .render_protobuf_in_parts(&mut out, &mut |out| {
                        if compress_part(&mut gz, out, part_bytes)? {
                            out.clear();
                        }
                        Ok(())
                    })
                    .map_err(fail)?;
                gz.write_all(&out).map_err(|_| RenderError(format))?;
            }
        }
        let body = gz.finish().map_err(|_| RenderError(format))?;
        last_len.store(body.len(), Ordering::Relaxed);
        Ok(body)
    }

    /// [`Metrics::render_as`] by prometheus-client's own encoders alone, over one registry of
    /// every family: the reference the fast encoder is tested against (slower: ~5× at 1,000
    /// pairs). Exemplars are added to the crate's output afterwards ([`exemplars`]).
    ///
    /// Errors: as [`Metrics::render_as`].
    pub fn render_reference(&self, format: Exposition) -> Result<Vec<u8>, RenderError> {
        let registry = self.catalog.reference();
        Ok(match format {
            Exposition::OpenMetrics | Exposition::Text => {
                let mut out = String::new();
                let written = if format == Exposition::OpenMetrics {
                    prometheus_client::encoding::text::encode(&mut out, registry)
                } else {
                    prometheus_client::encoding::prometheus_text::encode(&mut out, registry)
                };
                written.map_err(|_| RenderError(format))?;
                if format == Exposition::OpenMetrics {
                    exemplars::add_to_openmetrics(&mut out, &self.traced());
                }
                out.into_bytes()
            }
            Exposition::Protobuf => {
                use prometheus_client::encoding::prometheus_protobuf::encode;
                use prost::Message;
                let mut families = encode(registry).map_err(|_| RenderError(format))?;
                exemplars::add_to_protobuf(&mut families, &self.traced());
                let mut out = Vec::new();
                for family in families {
                    family
                        .encode_length_delimited(&mut out)
                        .map_err(|_| RenderError(format))?;
                }
                out
            }
        })
    }
}

impl Metrics {
    /// The families with exemplars, by full metric name.
    fn traced(&self) -> [(&'static str, &Hist); 3] {
        [
            ("llm_probe_time_to_first_token_seconds", &self.ttft),
            ("llm_probe_time_per_output_token_seconds", &self.tpot),
            ("llm_probe_request_duration_seconds", &self.e2e),
        ]
    }
}

/// Asks the kernel to back the body buffer at `ptr` (`capacity` bytes) with transparent huge
/// pages where it can. A render writes into freshly mapped memory each time (the buffer is
/// returned to the kernel after the response, `app::return_large_buffers_to_os`); faulting
/// 20 MiB in 4 KiB pages cost 14–25 ms on the benchmark VM, in 2 MiB pages 1.3–5.7 ms
/// (BENCHMARKS §13). Only buffers of at least 4 MiB; a no-op where THP is off or on other
/// systems. The contents are not affected.
fn advise_huge_pages(ptr: *const u8, capacity: usize) {
    #[cfg(target_os = "linux")]
    if capacity >= 4 << 20 {
        const HUGE: usize = 2 << 20;
        let start = (ptr as usize).next_multiple_of(HUGE);
        let end = (ptr as usize + capacity) / HUGE * HUGE;
        if end > start {
            // SAFETY: the range lies inside an allocation this function's caller owns and
            // has not written yet; MADV_HUGEPAGE only changes how its pages are backed.
            unsafe {
                libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (ptr, capacity);
}

/// Rendering the metrics in a format failed (an encoder error; nothing a scraper sent).
#[derive(Debug, thiserror::Error)]
#[error("encoding the metrics as {0:?} failed")]
pub struct RenderError(pub Exposition);

/// How much of an uncompressed body [`Metrics::render_gzip`] lets gather before compressing it
/// (it compresses at family boundaries, so a part is at least this and at most this plus one
/// family: ~2.4 MiB for a histogram family at 1,000 pairs).
const GZIP_PART_BYTES: usize = 256 * 1024;

/// Compresses `part` into `gz` when it has reached `part_bytes`; whether it did (the caller
/// then empties its buffer). Writing into a `Vec` fails only when memory runs out, which aborts
/// first; the error is the encoders' own type so that it ends their render.
fn compress_part(
    gz: &mut flate2::write::GzEncoder<Vec<u8>>,
    part: &[u8],
    part_bytes: usize,
) -> Result<bool, std::fmt::Error> {
    use std::io::Write;
    if part.len() < part_bytes {
        return Ok(false);
    }
    gz.write_all(part).map_err(|_| std::fmt::Error)?;
    Ok(true)
}

/// The exposition formats `/metrics` serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Exposition {
    /// The Prometheus text format 0.0.4 (the default).
    Text = 0,
    /// OpenMetrics 1.0.0 text.
    OpenMetrics = 1,
    /// The Prometheus protobuf format: length-delimited `io.prometheus.client.MetricFamily`
    /// messages, the only format that carries native histograms.
    Protobuf = 2,
}

impl Exposition {
    /// The `Content-Type` of a body in this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Exposition::Text => "text/plain; version=0.0.4; charset=utf-8",
            Exposition::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Exposition::Protobuf => PROTOBUF_CONTENT_TYPE,
        }
    }
}

/// The media type of the Prometheus protobuf exposition.
pub const PROTOBUF_CONTENT_TYPE: &str =
    "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited";

/// Adds `n` to a count, stopping at `u64::MAX` rather than wrapping: a counter that wrapped
/// would read as a reset to every `rate()`.
fn add_saturating(counter: &Counter, n: u64) {
    let atomic = counter.inner();
    // The closure never returns `None`, so the update cannot fail.
    let _ = atomic.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |c| {
        Some(c.saturating_add(n))
    });
}

fn failure_labels(l: &ProbeLabels, reason: FailureReason) -> FailureLabels {
    FailureLabels {
        target: l.target.clone(),
        model: l.model.clone(),
        scenario: l.scenario.clone(),
        reason: reason.as_str(),
    }
}

/// A baseline's TTFT, TPOT, tokens/s and E2E quantiles, in the order of the gauge families.
fn baseline_values(b: &crate::baseline::Baseline) -> [Option<crate::baseline::Quantiles>; 4] {
    [
        Some(b.ttft_seconds),
        b.tpot_seconds,
        b.output_tokens_per_second,
        b.e2e_seconds,
    ]
}

fn quantile_labels(l: &ProbeLabels, quantile: &'static str) -> QuantileLabels {
    QuantileLabels {
        target: l.target.clone(),
        model: l.model.clone(),
        scenario: l.scenario.clone(),
        quantile,
    }
}

fn anomaly_labels(l: &ProbeLabels, kind: Anomaly) -> AnomalyLabels {
    AnomalyLabels {
        target: l.target.clone(),
        model: l.model.clone(),
        scenario: l.scenario.clone(),
        kind: kind.as_str(),
    }
}

fn component_labels(l: &ProbeLabels, component: TtftComponent) -> ComponentLabels {
    ComponentLabels {
        target: l.target.clone(),
        model: l.model.clone(),
        scenario: l.scenario.clone(),
        component: component.as_str(),
    }
}

fn unix_seconds(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_secs_f64()
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::measure::{Observations, TokenKind};

    #[test]
    fn a_count_stops_at_the_largest_value_and_never_wraps() {
        let c = Counter::default();
        add_saturating(&c, u64::MAX - 1);
        add_saturating(&c, 5);
        assert_eq!(c.get(), u64::MAX);
        add_saturating(&c, u64::MAX);
        assert_eq!(c.get(), u64::MAX);
    }

    /// A successful outcome with `cost` and 2^64 − 1 cached prompt tokens (kept: no request
    /// bound them), observed twice.
    #[test]
    fn counters_only_rise_whatever_the_outcome_says() {
        let metrics = Metrics::new(&[]);
        let exposition = |cost: f64| {
            let t0 = Instant::now();
            let mut o = Observations::new(t0);
            o.token(t0 + Duration::from_millis(5), TokenKind::Output);
            o.timeline.ended = Some(t0 + Duration::from_millis(6));
            o.asked.body_bytes = Some(u64::MAX);
            o.usage.prompt_tokens = Some(u64::MAX - 1);
            let mut outcome = ProbeOutcome::conclude(
                "t".into(),
                "s".into(),
                "m".into(),
                SystemTime::now(),
                o,
                None,
            );
            outcome.observations.cost = Some(cost);
            metrics.observe(&outcome);
            metrics.render(None).1
        };
        let sample = |text: &str, name: &str| {
            text.lines()
                .find(|l| l.starts_with(name))
                .and_then(|l| l.rsplit(' ').next())
                .map(|v| v.parse::<f64>().unwrap())
        };
        let first = exposition(1.5);
        assert_eq!(sample(&first, "llm_probe_probe_cost_total"), Some(1.5));
        for bad in [f64::NAN, f64::INFINITY, -3.0] {
            let text = exposition(bad);
            assert_eq!(
                sample(&text, "llm_probe_probe_cost_total"),
                Some(1.5),
                "{bad}"
            );
            let prompt = sample(&text, "llm_probe_prompt_tokens_total").unwrap();
            assert_eq!(prompt, u64::MAX as f64, "saturated, not wrapped");
        }
    }

    #[test]
    fn prices_removed_by_a_reload_remove_the_cost_series() {
        let metrics = Metrics::new(&[]);
        let labels = ProbeLabels {
            target: "t".into(),
            model: "m".into(),
            scenario: "s".into(),
        };
        let has_cost = |m: &Metrics| {
            m.render(None)
                .1
                .lines()
                .any(|l| l.starts_with("llm_probe_probe_cost_total{"))
        };
        metrics.set_schedule(&labels, Duration::from_secs(15), true);
        assert!(has_cost(&metrics));
        metrics.set_schedule(&labels, Duration::from_secs(15), false);
        assert!(!has_cost(&metrics));
    }
}
