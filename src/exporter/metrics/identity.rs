//! What each target is and how it is probed, and what this replica is: credential reloads, the
//! probe interval, the SLO, the endpoint's own description of itself, the configuration loads
//! and the shard.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Unit;

use super::fast::Catalog;
use super::labels::{ProbeLabels, TargetLabels};
use super::series::{SeriesFamily, SeriesLabels};
use super::{unix_seconds, F64Gauge};
use crate::config::Slo;
use crate::measure::{Identity as Revealed, ProbeOutcome};

/// `llm_probe_endpoint_info`'s labels: the target (and the replica, for a target with
/// `replicas:`: each replica says what it runs, so a rolling upgrade shows old and new side by
/// side) and what its backend revealed.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord)]
struct EndpointLabels {
    target: Arc<str>,
    model: Arc<str>,
    /// Empty for a target without `replicas:`: no `replica` label at all.
    replica: Arc<str>,
    response_model: Arc<str>,
    system_fingerprint: Arc<str>,
    server: Arc<str>,
    server_version: Arc<str>,
}

impl EndpointLabels {
    fn each(&self, f: &mut dyn FnMut(&'static str, &str)) {
        f("target", &self.target);
        f("model", &self.model);
        if !self.replica.is_empty() {
            f("replica", &self.replica);
        }
        f("response_model", &self.response_model);
        f("system_fingerprint", &self.system_fingerprint);
        f("server", &self.server);
        f("server_version", &self.server_version);
    }
}

impl SeriesLabels for EndpointLabels {
    fn for_each_label(&self, f: &mut dyn FnMut(&'static str, &str)) {
        self.each(f);
    }
}

impl EncodeLabelSet for EndpointLabels {
    fn encode(
        &self,
        encoder: &mut prometheus_client::encoding::LabelSetEncoder,
    ) -> Result<(), std::fmt::Error> {
        let mut pairs: Vec<(&'static str, String)> = Vec::with_capacity(7);
        self.each(&mut |k, v| pairs.push((k, v.to_string())));
        pairs.encode(encoder)
    }
}

/// A target's name and its replica (empty for a target without `replicas:`).
type TargetReplica = (Arc<str>, Arc<str>);

#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
struct ShardLabels {
    index: u32,
    count: u32,
}

/// The per-target and per-replica families.
pub(super) struct Identity {
    credential_reloads: SeriesFamily<TargetLabels, Counter>,
    interval: SeriesFamily<ProbeLabels, F64Gauge>,
    slo_ttft: SeriesFamily<TargetLabels, F64Gauge>,
    slo_tokens_per_second: SeriesFamily<TargetLabels, F64Gauge>,
    slo_headroom: SeriesFamily<TargetLabels, F64Gauge>,
    slo_prefill: SeriesFamily<TargetLabels, F64Gauge>,
    endpoint_info: SeriesFamily<EndpointLabels, Gauge>,
    /// Each target's (or replica's) exported endpoint identity, by target name and replica.
    current_identity: Mutex<HashMap<TargetReplica, EndpointLabels>>,
    reload_success: Gauge,
    reload_timestamp: F64Gauge,
    shard_info: Family<ShardLabels, Gauge>,
}

impl Identity {
    /// Registers the per-target and per-replica families in `r`.
    pub(super) fn register(r: &mut Catalog) -> Self {
        let credential_reloads = r.register(
            "credential_reloads",
            "Times the target's credentials (api_key_file, TLS files) were read again because a file changed, and the next probes used them (never the value)",
            SeriesFamily::default(),
        );
        let interval = r.register_with_unit(
            "probe_interval",
            "Time between the starts of two probes of the pair (the configured interval, or longer when the target's cost.monthly_budget needs it); the alert rules derive their probe-count guards and detection windows from it",
            Unit::Seconds,
            SeriesFamily::default(),
        );
        let slo_ttft = r.register_with_unit(
            "slo_time_to_first_token",
            "Configured P95 TTFT objective of the target",
            Unit::Seconds,
            SeriesFamily::default(),
        );
        let slo_tokens_per_second = r.register(
            "slo_output_tokens_per_second",
            "Configured output tokens per second floor of the target",
            SeriesFamily::default(),
        );
        let slo_headroom = r.register(
            "slo_rate_limit_headroom_ratio",
            "Configured floor of the target's rate-limit headroom: the share of a rate-limit window that should stay left (LlmProbeRateLimitHeadroomLow)",
            SeriesFamily::default(),
        );
        let slo_prefill = r.register(
            "slo_prefill_tokens_per_second",
            "Configured prefill speed floor of the target (slo.prefill_tokens_per_second_min), prompt tokens per second of TTFT for scenarios with prompt_tokens; only targets that set one",
            SeriesFamily::default(),
        );
        let endpoint_info = r.register("endpoint_info", "What the backend reveals about itself (value 1); a new label set marks a model or framework change", SeriesFamily::default());
        let reload_success = r.register(
            "config_last_reload_successful",
            "1 if the last configuration load succeeded",
            Gauge::default(),
        );
        let reload_timestamp = r.register_with_unit(
            "config_last_reload_success_timestamp",
            "Unix time of the last successful configuration load",
            Unit::Seconds,
            F64Gauge::default(),
        );
        let shard_info = r.register(
            "shard_info",
            "This replica's shard: index in 0..count of the replicas sharing the probes file (value 1)",
            Family::default(),
        );
        Identity {
            credential_reloads,
            interval,
            slo_ttft,
            slo_tokens_per_second,
            slo_headroom,
            slo_prefill,
            endpoint_info,
            current_identity: Mutex::new(HashMap::new()),
            reload_success,
            reload_timestamp,
            shard_info,
        }
    }

    /// Creates the credential reload count of a pair's target at zero and exports its SLO.
    pub(super) fn register_pair(&self, labels: &ProbeLabels, slo: &Slo) {
        let t = labels.target();
        let _ = self.credential_reloads.get_or_create(&t);
        self.slo_ttft
            .get_or_create(&t)
            .set(slo.ttft_p95.as_secs_f64());
        self.slo_tokens_per_second
            .get_or_create(&t)
            .set(slo.output_tokens_per_second_min);
        self.slo_headroom
            .get_or_create(&t)
            .set(slo.rate_limit_headroom_min);
        match slo.prefill_tokens_per_second_min {
            Some(floor) => {
                self.slo_prefill.get_or_create(&t).set(floor);
            }
            None => {
                self.slo_prefill.remove(&t);
            }
        }
    }

    /// Exports the interval a pair is probed at.
    pub(super) fn set_interval(&self, labels: &ProbeLabels, interval: Duration) {
        self.interval
            .get_or_create(labels)
            .set(interval.as_secs_f64());
    }

    /// Records one finished probe: a credential reload, and what the backend revealed.
    pub(super) fn observe(&self, labels: &ProbeLabels, outcome: &ProbeOutcome) {
        let obs = &outcome.observations;
        self.update_identity(labels, &obs.identity);
        if obs.credentials_reloaded {
            self.credential_reloads
                .get_or_create(&labels.target())
                .inc();
        }
    }

    fn update_identity(&self, labels: &ProbeLabels, id: &Revealed) {
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
            replica: labels.replica.clone(),
            response_model: id.response_model.as_deref().unwrap_or_default().into(),
            system_fingerprint: id.system_fingerprint.as_deref().unwrap_or_default().into(),
            server: id.server_header.as_deref().unwrap_or_default().into(),
            server_version: id.server_version.as_deref().unwrap_or_default().into(),
        };
        let mut current = self
            .current_identity
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let key = (labels.target.clone(), labels.replica.clone());
        if current.get(&key) != Some(&new) {
            if let Some(old) = current.insert(key, new.clone()) {
                self.endpoint_info.remove(&old);
            }
            self.endpoint_info.get_or_create(&new).set(1);
        }
    }

    /// Removes every series of one pair (not its replica's identity: [`Identity::forget_replica`]).
    pub(super) fn forget(&self, labels: &ProbeLabels) {
        self.interval.remove(labels);
    }

    /// Removes the identity of the replica `labels` probed (its last pair is gone). Nothing for
    /// a pair without a replica: a target's own identity goes with the target.
    pub(super) fn forget_replica(&self, labels: &ProbeLabels) {
        if labels.replica.is_empty() {
            return;
        }
        let key = (labels.target.clone(), labels.replica.clone());
        let old = self
            .current_identity
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&key);
        if let Some(old) = old {
            self.endpoint_info.remove(&old);
        }
    }

    /// Removes every series of a target.
    pub(super) fn forget_target(&self, t: &TargetLabels) {
        self.slo_ttft.remove(t);
        self.slo_tokens_per_second.remove(t);
        self.slo_headroom.remove(t);
        self.slo_prefill.remove(t);
        self.credential_reloads.remove(t);
        let mut current = self
            .current_identity
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        current.retain(|(target, _), old| {
            let keep = *target != t.target;
            if !keep {
                self.endpoint_info.remove(old);
            }
            keep
        });
    }

    /// Records the result of loading the configuration at `at`.
    pub(super) fn config_loaded(&self, success: bool, at: SystemTime) {
        self.reload_success.set(i64::from(success));
        if success {
            self.reload_timestamp.set(unix_seconds(at));
        }
    }

    /// Exports `shard` (replacing any earlier one).
    pub(super) fn set_shard(&self, shard: crate::shard::Shard) {
        self.shard_info.clear();
        self.shard_info
            .get_or_create(&ShardLabels {
                index: shard.index,
                count: shard.count,
            })
            .set(1);
    }
}
