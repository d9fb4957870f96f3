//! The bucket layouts of the latency and rate histograms: the fixed classic boundaries, the SLO
//! thresholds merged into them, and the native (exponential) resolution.

use std::sync::Arc;

use super::histogram::{ProbeHistogram, SharedHistogram};
use super::series::{SeriesFamily, SeriesLabels};

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
/// Bucket upper bounds (tokens/s) for prefill speed: from a small CPU (tens of prompt tokens
/// a second) to a large accelerator pool (hundreds of thousands).
pub const PREFILL_TOKENS_PER_SECOND_BUCKETS: &[f64] = &[
    10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0, 10000.0, 25000.0, 50000.0,
    100000.0, 250000.0, 500000.0, 1000000.0,
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
    pub(super) fn family<L: SeriesLabels>(&self) -> SeriesFamily<L, SharedHistogram> {
        let b = self.clone();
        SeriesFamily::new(move || b.new_histogram())
    }
}

/// `base` with `extra` merged in, sorted, deduplicated.
pub(super) fn with_thresholds(base: &[f64], extra: impl IntoIterator<Item = f64>) -> Arc<[f64]> {
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
    pub(super) fn buckets(&self, bounds: &Arc<[f64]>) -> Buckets {
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
