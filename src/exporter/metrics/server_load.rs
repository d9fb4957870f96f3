//! The server's load: the engine's own, read from its metrics endpoint just before a probe
//! (`server_metrics_url:`: requests waiting and running, KV-cache use, and the reads that gave no
//! numbers), and a hosted API's quota left, from its rate-limit headers (`rate_limits.rs`). The
//! load gauges are per engine: per target, and per replica for a target with `replicas:` (each
//! replica is its own engine, with its own queue); the failure counters and the quota are per
//! target.

use std::sync::Arc;

use prometheus_client::encoding::{EncodeLabelSet, LabelSetEncoder};
use prometheus_client::metrics::counter::Counter;

use super::fast::Catalog;
use super::labels::{ProbeLabels, TargetLabels, WithLabel};
use super::rate_limits::RateLimitGauges;
use super::series::{SeriesFamily, SeriesLabels};
use super::F64Gauge;
use crate::engine::ScrapeFailureReason;
use crate::measure::ProbeOutcome;

/// The labels of one engine's load gauges: its target, and its replica for a target with
/// `replicas:` (empty otherwise: no `replica` label at all, as before replicas existed). A
/// target's series sort together, the one without a replica first.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord)]
struct EngineLabels {
    target: Arc<str>,
    model: Arc<str>,
    replica: Arc<str>,
}

impl EngineLabels {
    fn of(labels: &ProbeLabels) -> Self {
        EngineLabels {
            target: labels.target.clone(),
            model: labels.model.clone(),
            replica: labels.replica.clone(),
        }
    }

    /// The first label set of target `t` in label order.
    fn first_of(t: &TargetLabels) -> Self {
        EngineLabels {
            target: t.target.clone(),
            model: t.model.clone(),
            replica: "".into(),
        }
    }

    fn is_of(&self, t: &TargetLabels) -> bool {
        self.target == t.target && self.model == t.model
    }
}

impl SeriesLabels for EngineLabels {
    fn for_each_label(&self, f: &mut dyn FnMut(&'static str, &str)) {
        f("target", &self.target);
        f("model", &self.model);
        if !self.replica.is_empty() {
            f("replica", &self.replica);
        }
    }
}

impl EncodeLabelSet for EngineLabels {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> Result<(), std::fmt::Error> {
        [("target", &*self.target), ("model", &*self.model)].encode(encoder)?;
        if !self.replica.is_empty() {
            [("replica", &*self.replica)].encode(encoder)?;
        }
        Ok(())
    }
}

/// The engine-load families, and the quota-left ones after them.
pub(super) struct ServerLoad {
    waiting: SeriesFamily<EngineLabels, F64Gauge>,
    running: SeriesFamily<EngineLabels, F64Gauge>,
    kv_ratio: SeriesFamily<EngineLabels, F64Gauge>,
    scrape_failures: SeriesFamily<WithLabel<TargetLabels>, Counter>,
    /// A hosted API's quota left.
    quota: RateLimitGauges,
}

impl ServerLoad {
    /// Registers the engine-load families in `r`, then the quota-left ones.
    pub(super) fn register(r: &mut Catalog) -> Self {
        let waiting = r.register(
            "server_requests_waiting",
            "Requests waiting in the engine's queue (the replica's, for a target with replicas:), from the engine's own /metrics read just before the last probe (server_metrics_url:; summed over the engine's label sets); absent after a failed read",
            SeriesFamily::default(),
        );
        let running = r.register(
            "server_requests_running",
            "Requests the engine (the replica's, for a target with replicas:) was running, from its own /metrics read just before the last probe (server_metrics_url:; summed over the engine's label sets); absent after a failed read",
            SeriesFamily::default(),
        );
        let kv_ratio = r.register(
            "server_kv_cache_usage_ratio",
            "Share of the engine's KV cache in use (0 to 1; the replica's, for a target with replicas:), from its own /metrics read just before the last probe (server_metrics_url:; the largest over the engine's label sets); absent when the engine does not publish it or the read failed",
            SeriesFamily::default(),
        );
        let scrape_failures = r.register(
            "server_metrics_scrape_failures",
            "Reads of the engine's own /metrics (server_metrics_url:) that gave no numbers, by reason, summed over a target's replicas; the probe itself is not affected",
            SeriesFamily::default(),
        );
        ServerLoad {
            waiting,
            running,
            kv_ratio,
            scrape_failures,
            quota: RateLimitGauges::register(r),
        }
    }

    /// Creates the failure counters of a target with a `server_metrics_url` at zero (every
    /// reason).
    pub(super) fn register_target(&self, t: &TargetLabels) {
        for reason in ScrapeFailureReason::ALL {
            let _ = self
                .scrape_failures
                .get_or_create(&t.with("reason", reason.as_str()));
        }
    }

    /// The engine's load read before a probe ([`ServerLoad::observe_engine`]) and the quota left
    /// after it.
    pub(super) fn observe(&self, labels: &ProbeLabels, outcome: &ProbeOutcome) {
        self.observe_engine(labels, outcome);
        self.quota.observe(labels, outcome);
    }

    /// The engine's load read before a probe, if it was read: sets the gauges it published and
    /// removes the others (an absent series, not a stale or made-up value); a failed read counts
    /// in `llm_probe_server_metrics_scrape_failures_total{reason}` and removes all three gauges.
    fn observe_engine(&self, labels: &ProbeLabels, outcome: &ProbeOutcome) {
        let Some(scrape) = &outcome.observations.server_load else {
            return;
        };
        let (waiting, running, kv) = match scrape {
            Ok(l) => (
                l.requests_waiting,
                l.requests_running,
                l.kv_cache_usage_ratio,
            ),
            Err(f) => {
                self.scrape_failures
                    .get_or_create(&labels.target().with("reason", f.reason.as_str()))
                    .inc();
                (None, None, None)
            }
        };
        let engine = EngineLabels::of(labels);
        for (family, value) in [
            (&self.waiting, waiting),
            (&self.running, running),
            (&self.kv_ratio, kv),
        ] {
            match value {
                Some(v) => {
                    family.get_or_create(&engine).set(v);
                }
                None => {
                    family.remove(&engine);
                }
            }
        }
    }

    /// Removes a target's three load gauges, every replica's; the failure counters stay.
    pub(super) fn forget_load(&self, t: &TargetLabels) {
        let first = EngineLabels::first_of(t);
        for family in [&self.waiting, &self.running, &self.kv_ratio] {
            family.remove_run(&first, |l| l.is_of(t));
        }
    }

    /// Removes the load gauges of the replica `labels` probed (its last pair is gone). Nothing
    /// for a pair without a replica: a target's own gauges go with the target.
    pub(super) fn forget_replica(&self, labels: &ProbeLabels) {
        if labels.replica.is_empty() {
            return;
        }
        let engine = EngineLabels::of(labels);
        for family in [&self.waiting, &self.running, &self.kv_ratio] {
            family.remove(&engine);
        }
    }

    /// Removes a target's engine series: the load gauges and the failure counters (its quota
    /// left, from its response heads, stays).
    pub(super) fn forget_engine(&self, t: &TargetLabels) {
        self.forget_load(t);
        self.scrape_failures.remove_all_of(t);
    }

    /// Removes every series of a target.
    pub(super) fn forget_target(&self, t: &TargetLabels) {
        self.forget_engine(t);
        self.quota.forget_target(t);
    }
}
