//! The pinned baselines (`baseline_file:`): their TTFT, TPOT, tokens/s and E2E quantiles, the
//! samples they were computed from and when they were measured. Per pair; replaced as a set on
//! each configuration load.

use std::sync::Mutex;

use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Unit;

use super::fast::Catalog;
use super::labels::{ProbeLabels, WithLabel};
use super::series::SeriesFamily;
use super::F64Gauge;
use crate::config::baseline_file::{Baseline, Quantiles};

/// The baseline families.
pub(super) struct Baselines {
    ttft: SeriesFamily<WithLabel<ProbeLabels>, F64Gauge>,
    tpot: SeriesFamily<WithLabel<ProbeLabels>, F64Gauge>,
    tokens_per_second: SeriesFamily<WithLabel<ProbeLabels>, F64Gauge>,
    e2e: SeriesFamily<WithLabel<ProbeLabels>, F64Gauge>,
    prefill: SeriesFamily<WithLabel<ProbeLabels>, F64Gauge>,
    samples: SeriesFamily<ProbeLabels, Gauge>,
    timestamp: SeriesFamily<ProbeLabels, F64Gauge>,
    /// The pairs whose baseline is exported now (what [`Baselines::set`] replaces).
    pairs: Mutex<Vec<ProbeLabels>>,
}

impl Baselines {
    /// Registers the baseline families in `r`.
    pub(super) fn register(r: &mut Catalog) -> Self {
        let ttft = r.register_with_unit(
            "baseline_time_to_first_token",
            "Pinned baseline TTFT of the pair (the probes file's baseline_file, written by llm-probe baseline save), by quantile",
            Unit::Seconds,
            SeriesFamily::default(),
        );
        let tpot = r.register_with_unit(
            "baseline_time_per_output_token",
            "Pinned baseline TPOT of the pair, by quantile",
            Unit::Seconds,
            SeriesFamily::default(),
        );
        let tokens_per_second = r.register(
            "baseline_output_tokens_per_second",
            "Pinned baseline output tokens per second of the pair, by quantile",
            SeriesFamily::default(),
        );
        let e2e = r.register_with_unit(
            "baseline_request_duration",
            "Pinned baseline end-to-end request duration (E2E) of the pair, by quantile",
            Unit::Seconds,
            SeriesFamily::default(),
        );
        let prefill = r.register(
            "baseline_prefill_tokens_per_second",
            "Pinned baseline prefill speed of the pair (a scenario with prompt_tokens), prompt tokens per second of TTFT, by quantile",
            SeriesFamily::default(),
        );
        let samples = r.register(
            "baseline_samples",
            "Successful requests the pinned baseline was computed from",
            SeriesFamily::default(),
        );
        let timestamp = r.register_with_unit(
            "baseline_timestamp",
            "Unix time the pinned baseline's measurement ended",
            Unit::Seconds,
            SeriesFamily::default(),
        );
        Baselines {
            ttft,
            tpot,
            tokens_per_second,
            e2e,
            prefill,
            samples,
            timestamp,
            pairs: Mutex::new(Vec::new()),
        }
    }

    /// Exports exactly the baselines in `pinned`: sets their gauges and removes those of pairs
    /// no longer in it. A metric the baseline has no value for (`null` TPOT) has no series.
    pub(super) fn set(&self, pinned: &[(ProbeLabels, &Baseline)]) {
        let mut current = self.pairs.lock().unwrap_or_else(|e| e.into_inner());
        let quantile_families = [
            &self.ttft,
            &self.tpot,
            &self.tokens_per_second,
            &self.e2e,
            &self.prefill,
        ];
        for old in current.iter() {
            let kept = pinned.iter().find(|(l, _)| l == old).map(|(_, b)| *b);
            let values = kept.map(quantiles);
            for (i, family) in quantile_families.iter().enumerate() {
                if values.is_some_and(|v| v[i].is_some()) {
                    continue;
                }
                family.remove_all_of(old);
            }
            if kept.is_none() {
                self.samples.remove(old);
                self.timestamp.remove(old);
            }
        }
        for (labels, b) in pinned {
            for (family, q) in quantile_families.iter().zip(quantiles(b)) {
                for (name, v) in q.iter().flat_map(|q| q.labelled()) {
                    family.get_or_create(&labels.with("quantile", name)).set(v);
                }
            }
            self.samples
                .get_or_create(labels)
                .set(i64::try_from(b.samples).unwrap_or(i64::MAX));
            self.timestamp
                .get_or_create(labels)
                .set(b.measured_unix_seconds());
        }
        *current = pinned.iter().map(|(l, _)| l.clone()).collect();
    }
}

/// A baseline's TTFT, TPOT, tokens/s, E2E and prefill speed quantiles, in the order of the
/// gauge families.
fn quantiles(b: &Baseline) -> [Option<Quantiles>; 5] {
    [
        Some(b.ttft_seconds),
        b.tpot_seconds,
        b.output_tokens_per_second,
        b.e2e_seconds,
        b.prefill_tokens_per_second,
    ]
}
