//! The probe counters and the state of each pair's last probe: probes, failures by reason,
//! anomalies by kind, tokens, cost, last success and time, the prefix-cache canary, the server's
//! `Retry-After`. The process-wide counts of panicked probes and dropped log lines sit among
//! them in the exposition, so they are registered here too.

use std::sync::atomic::Ordering;
use std::time::SystemTime;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Unit;

use std::sync::LazyLock;

use super::by_label::{CountsByLabel, LabelValues};
use super::fast::Catalog;
use super::labels::{ProbeLabels, WithLabel};
use super::series::SeriesFamily;
use super::{unix_seconds, F64Gauge};
use crate::measure::{FailureReason, ProbeOutcome};

/// `reason`: every failure reason.
static FAILURE_REASONS: LazyLock<LabelValues> =
    LazyLock::new(|| LabelValues::new("reason", FailureReason::ALL.map(FailureReason::as_str)));

/// The counter and last-probe families.
pub(super) struct ProbeCounters {
    probes: SeriesFamily<ProbeLabels, Counter>,
    /// By reason: one series per pair holds all its reasons' counts.
    failures: SeriesFamily<ProbeLabels, CountsByLabel>,
    anomalies: SeriesFamily<WithLabel<ProbeLabels>, Counter>,
    output_tokens: SeriesFamily<ProbeLabels, Counter>,
    prompt_tokens: SeriesFamily<ProbeLabels, Counter>,
    cached_prompt_tokens: SeriesFamily<ProbeLabels, Counter>,
    last_success: SeriesFamily<ProbeLabels, Gauge>,
    last_timestamp: SeriesFamily<ProbeLabels, F64Gauge>,
    cache_ratio: SeriesFamily<ProbeLabels, F64Gauge>,
    cache_warm_cached: SeriesFamily<ProbeLabels, Gauge>,
    retry_after: SeriesFamily<ProbeLabels, F64Gauge>,
    cost: SeriesFamily<ProbeLabels, Counter<f64, std::sync::atomic::AtomicU64>>,
}

impl ProbeCounters {
    /// Registers the counter and last-probe families in `r`.
    pub(super) fn register(r: &mut Catalog) -> Self {
        let probes = r.register(
            "probes",
            "Probes finished, successful or not",
            SeriesFamily::default(),
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
        let failures = r.register(
            "probe_failures",
            "Failed probes by reason",
            SeriesFamily::new(|| CountsByLabel::new(&FAILURE_REASONS)),
        );
        let anomalies = r.register("stream_anomalies", "Streams that succeeded or failed with something that makes their numbers less trustworthy, by kind", SeriesFamily::default());
        let output_tokens = r.register(
            "output_tokens",
            "Output tokens generated for the probe's own requests (the probe's token spend)",
            SeriesFamily::default(),
        );
        let prompt_tokens = r.register(
            "prompt_tokens",
            "Prompt tokens sent by the probe, as counted by the server",
            SeriesFamily::default(),
        );
        let cached_prompt_tokens = r.register(
            "prompt_cached_tokens",
            "Prompt tokens the server reports it served from its prefix cache",
            SeriesFamily::default(),
        );
        let last_success = r.register(
            "last_probe_success",
            "1 if the last probe succeeded, 0 if it failed",
            SeriesFamily::default(),
        );
        let last_timestamp = r.register_with_unit(
            "last_probe_timestamp",
            "Unix time the last probe finished",
            Unit::Seconds,
            SeriesFamily::default(),
        );
        let cache_ratio = r.register(
            "prefix_cache_warm_cold_ratio",
            "Prefix-cache canary (cache_canary: true): TTFT of the same prompt sent again right after / TTFT of its first request, last probe whose both requests succeeded; below 1 when the server's prefix cache helps",
            SeriesFamily::default(),
        );
        let cache_warm_cached = r.register(
            "prefix_cache_warm_cached_tokens",
            "Prefix-cache canary: prompt tokens the server reported serving from its cache on the second request of the last pair, where it reports them",
            SeriesFamily::default(),
        );
        let retry_after = r.register_with_unit(
            "retry_after",
            "Wait the server asked for with Retry-After on the last probe (429/503/529); the next probe is held back until it passes; 0 when none",
            Unit::Seconds,
            SeriesFamily::default(),
        );
        let cost = r.register(
            "probe_cost",
            "Money the probes spent, in the currency unit of the target's cost prices (per million prompt and output tokens), from the tokens the server reported; only targets with cost: prices",
            SeriesFamily::default(),
        );
        ProbeCounters {
            probes,
            failures,
            anomalies,
            output_tokens,
            prompt_tokens,
            cached_prompt_tokens,
            last_success,
            last_timestamp,
            cache_ratio,
            cache_warm_cached,
            retry_after,
            cost,
        }
    }

    /// Creates the probe count and the failure counts (every reason) of a pair at zero.
    pub(super) fn register_pair(&self, labels: &ProbeLabels) {
        let _ = self.probes.get_or_create(labels);
        let _ = self.failures.get_or_create(labels);
    }

    /// Creates a pair's cost counter at zero when its target has prices; removes it when it has
    /// none.
    pub(super) fn set_priced(&self, labels: &ProbeLabels, priced: bool) {
        if priced {
            let _ = self.cost.get_or_create(labels);
        } else {
            // Prices removed by a reload: the counter would stand still forever.
            self.cost.remove(labels);
        }
    }

    /// The instance of `labels` the pair's series are keyed by, once the pair is registered
    /// (else `labels` itself): keying a new series by it shares one label set and its text.
    pub(super) fn kept_labels(&self, labels: ProbeLabels) -> ProbeLabels {
        self.probes.kept_labels(&labels).unwrap_or(labels)
    }

    /// Records one finished probe.
    pub(super) fn observe(&self, labels: &ProbeLabels, outcome: &ProbeOutcome) {
        self.probes.get_or_create(labels).inc();
        let obs = &outcome.observations;
        if let Some(n) = obs.usage.prompt_tokens {
            add_saturating(&self.prompt_tokens.get_or_create(labels), n);
        }
        if let Some(n) = obs.usage.cached_prompt_tokens {
            add_saturating(&self.cached_prompt_tokens.get_or_create(labels), n);
        }
        for &kind in &obs.anomalies {
            self.anomalies
                .get_or_create(&labels.with("kind", kind.as_str()))
                .inc();
        }
        // A counter only rises: a NaN, infinite or negative amount is never added.
        if let Some(c) = obs.cost.filter(|c| c.is_finite() && *c > 0.0) {
            self.cost.get_or_create(labels).inc_by(c);
        }
        match &outcome.result {
            Ok(m) => {
                add_saturating(&self.output_tokens.get_or_create(labels), m.output_tokens);
                self.last_success.get_or_create(labels).set(1);
            }
            Err(f) => {
                self.failures.get_or_create(labels).inc(f.reason.as_str());
                // Tokens the server generated before failing were still spent.
                if let Some(n) = obs.usage.completion_tokens {
                    add_saturating(&self.output_tokens.get_or_create(labels), n);
                }
                self.last_success.get_or_create(labels).set(0);
            }
        }
        // A multi-turn probe's later requests were spent too (the first is the probe's own).
        for t in obs.turns.iter().skip(1) {
            if let Some(n) = t.prompt_tokens {
                add_saturating(&self.prompt_tokens.get_or_create(labels), n);
            }
            if let Some(n) = t.cached_prompt_tokens {
                add_saturating(&self.cached_prompt_tokens.get_or_create(labels), n);
            }
            if let Some(n) = t.output_tokens {
                add_saturating(&self.output_tokens.get_or_create(labels), n);
            }
        }
        if let Some(c) = &obs.cache_canary {
            if let Some(r) = c.ratio() {
                self.cache_ratio.get_or_create(labels).set(r);
            }
            if let Some(n) = c.warm_cached_tokens {
                self.cache_warm_cached
                    .get_or_create(labels)
                    .set(i64::try_from(n).unwrap_or(i64::MAX));
            }
        }
        self.last_timestamp
            .get_or_create(labels)
            .set(unix_seconds(SystemTime::now()));
        self.retry_after
            .get_or_create(labels)
            .set(obs.retry_after.map_or(0.0, |d| d.as_secs_f64()));
    }

    /// Whether a pair of `labels`' replica (same target and model, any scenario) has series:
    /// the replica is still probed, or its series linger. False for a pair without a replica.
    pub(super) fn has_pair_of_replica(&self, labels: &ProbeLabels) -> bool {
        if labels.replica.is_empty() {
            return false;
        }
        // A target's pairs sort together (target, model, scenario, replica): its run starts at
        // the empty scenario.
        let first = ProbeLabels::new(labels.target.clone(), labels.model.clone(), "", "");
        let series = self.probes.read();
        let mut run = (series.range(first..).map(|(l, _)| l))
            .take_while(|l| l.target == labels.target && l.model == labels.model);
        run.any(|l| l.replica == labels.replica)
    }

    /// Removes every series of one pair.
    pub(super) fn forget(&self, labels: &ProbeLabels) {
        for c in [
            &self.probes,
            &self.output_tokens,
            &self.prompt_tokens,
            &self.cached_prompt_tokens,
        ] {
            c.remove(labels);
        }
        self.failures.remove(labels);
        self.anomalies.remove_all_of(labels);
        self.last_success.remove(labels);
        self.last_timestamp.remove(labels);
        self.cache_ratio.remove(labels);
        self.cache_warm_cached.remove(labels);
        self.retry_after.remove(labels);
        self.cost.remove(labels);
    }
}

/// Adds `n` to a count, stopping at `u64::MAX` rather than wrapping: a counter that wrapped
/// would read as a reset to every `rate()`.
pub(super) fn add_saturating(counter: &Counter, n: u64) {
    let atomic = counter.inner();
    // The closure never returns `None`, so the update cannot fail.
    let _ = atomic.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |c| {
        Some(c.saturating_add(n))
    });
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant, SystemTime};

    use super::*;
    use crate::measure::{Observations, TokenKind};
    use crate::metrics::Metrics;

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
        let labels = ProbeLabels::new("t", "m", "s", "");
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
