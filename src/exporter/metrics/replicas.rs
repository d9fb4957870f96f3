//! Replica discovery (`replicas:` of a target): how many replicas were found and are probed,
//! and the discoveries that failed, by reason. Per target.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;

use super::fast::Catalog;
use super::labels::{DiscoveryLabels, WithLabel};
use super::series::SeriesFamily;

/// The discovery families.
pub(super) struct Discovery {
    replicas: SeriesFamily<DiscoveryLabels, Gauge>,
    found: SeriesFamily<DiscoveryLabels, Gauge>,
    failures: SeriesFamily<WithLabel<DiscoveryLabels>, Counter>,
}

impl Discovery {
    /// Registers the discovery families in `r`.
    pub(super) fn register(r: &mut Catalog) -> Self {
        let replicas = r.register(
            "replicas",
            "Replicas of the target being probed (replicas:): the last good discovery, after the cap (replicas.max)",
            SeriesFamily::default(),
        );
        let found = r.register(
            "replicas_discovered",
            "Replicas the target's last good discovery found before the cap (replicas.max); above llm_probe_replicas when the cap left some out",
            SeriesFamily::default(),
        );
        let failures = r.register(
            "replica_discovery_failures",
            "Discoveries of the target's replicas that failed, by reason (resolve, read, format, empty, timeout); the last good set stays probed",
            SeriesFamily::default(),
        );
        Discovery {
            replicas,
            found,
            failures,
        }
    }

    /// Creates a target's failure counters at zero (every reason).
    pub(super) fn register_target(&self, target: &str) {
        let t = DiscoveryLabels {
            target: target.into(),
        };
        for reason in crate::replicas::REASONS {
            let _ = self.failures.get_or_create(&t.with("reason", reason));
        }
    }

    /// A good discovery: `found` replicas, `kept` of them probed.
    pub(super) fn discovered(&self, target: &str, found: usize, kept: usize) {
        let t = DiscoveryLabels {
            target: target.into(),
        };
        let gauge = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        self.replicas.get_or_create(&t).set(gauge(kept));
        self.found.get_or_create(&t).set(gauge(found));
    }

    /// A failed discovery (`reason`: one of [`crate::replicas::REASONS`]).
    pub(super) fn failed(&self, target: &str, reason: &'static str) {
        let t = DiscoveryLabels {
            target: target.into(),
        };
        self.failures.get_or_create(&t.with("reason", reason)).inc();
    }

    /// Removes every series of a target.
    pub(super) fn forget_target(&self, target: &str) {
        let t = DiscoveryLabels {
            target: target.into(),
        };
        self.replicas.remove(&t);
        self.found.remove(&t);
        self.failures.remove_all_of(&t);
    }
}
