//! The quota a hosted API says is left (`x-ratelimit-*`, `anthropic-ratelimit-*` response
//! headers; [`crate::measure::RateLimits`]): limit, remaining and time to reset per kind. Per
//! target: a quota belongs to the key, not to a scenario.

use super::fast::Catalog;
use super::labels::{ProbeLabels, TargetLabels, WithLabel};
use super::series::SeriesFamily;
use super::F64Gauge;
use crate::measure::{ProbeOutcome, RateLimitKind};

/// The rate-limit families.
pub(super) struct RateLimitGauges {
    limit: SeriesFamily<WithLabel<TargetLabels>, F64Gauge>,
    remaining: SeriesFamily<WithLabel<TargetLabels>, F64Gauge>,
    reset: SeriesFamily<WithLabel<TargetLabels>, F64Gauge>,
}

impl RateLimitGauges {
    /// Registers the rate-limit families in `r`.
    pub(super) fn register(r: &mut Catalog) -> Self {
        let limit = r.register(
            "rate_limit_limit",
            "The size of the target's rate-limit window by kind (requests, tokens, input_tokens, output_tokens), as the last response that carried rate-limit headers said (x-ratelimit-limit-*, anthropic-ratelimit-*-limit)",
            SeriesFamily::default(),
        );
        let remaining = r.register(
            "rate_limit_remaining",
            "What is left of the target's rate-limit window by kind, as the last response that carried rate-limit headers said (x-ratelimit-remaining-*, anthropic-ratelimit-*-remaining)",
            SeriesFamily::default(),
        );
        let reset = r.register_with_unit(
            "rate_limit_reset",
            "Seconds until the target's rate-limit window is full again, by kind, from when the last response that carried rate-limit headers was read (x-ratelimit-reset-*, anthropic-ratelimit-*-reset)",
            prometheus_client::registry::Unit::Seconds,
            SeriesFamily::default(),
        );
        RateLimitGauges {
            limit,
            remaining,
            reset,
        }
    }

    /// A response that described its rate limits replaces what the gauges show: each number it
    /// gave is set, each it did not give (or gave unreadably) is removed. A probe whose response
    /// had no rate-limit header (or that got no response) changes nothing.
    pub(super) fn observe(&self, labels: &ProbeLabels, outcome: &ProbeOutcome) {
        let Some(limits) = &outcome.observations.rate_limits else {
            return;
        };
        let t = labels.target();
        for kind in RateLimitKind::ALL {
            let w = limits.window(kind);
            let key = t.with("kind", kind.as_str());
            for (family, value) in [
                (&self.limit, w.and_then(|w| w.limit).map(|n| n as f64)),
                (
                    &self.remaining,
                    w.and_then(|w| w.remaining).map(|n| n as f64),
                ),
                (
                    &self.reset,
                    w.and_then(|w| w.reset).map(|d| d.as_secs_f64()),
                ),
            ] {
                match value {
                    Some(v) => {
                        family.get_or_create(&key).set(v);
                    }
                    None => {
                        family.remove(&key);
                    }
                }
            }
        }
    }

    /// Removes every series of a target.
    pub(super) fn forget_target(&self, t: &TargetLabels) {
        self.limit.remove_all_of(t);
        self.remaining.remove_all_of(t);
        self.reset.remove_all_of(t);
    }
}
