//! One task per (target, scenario): the first probe soon after start at a deterministic phase
//! (so targets don't all fire together), then every `interval`; a probe never overlaps its
//! predecessor (a late probe skips ticks instead of bunching up); a `Retry-After` from the
//! server holds the next probe back until it has passed; cancellation drops an in-flight probe
//! without observing it.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

use crate::config::Scenario;
use crate::measure::ProbeOutcome;
use crate::probe::Prober;

/// Longest start-up phase: the first probe of every pair happens within this (or within the
/// interval, if shorter) of start.
pub const MAX_PHASE: Duration = Duration::from_secs(10);

/// The deterministic phase of one (target, scenario): FNV-1a of `target \0 scenario` as a
/// fraction of `min(interval, MAX_PHASE)`. The same names always get the same phase.
pub fn phase(target: &str, scenario: &str, interval: Duration) -> Duration {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in target.bytes().chain([0]).chain(scenario.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    let frac = (h >> 11) as f64 / (1u64 << 53) as f64;
    interval.min(MAX_PHASE).mul_f64(frac)
}

/// Probes `scenario` with `prober` every interval until `shutdown`, handing each outcome to
/// `record`.
pub async fn probe_loop<F>(
    prober: Prober,
    scenario: Arc<Scenario>,
    record: F,
    shutdown: CancellationToken,
) where
    F: Fn(ProbeOutcome) + Send,
{
    let target = prober.target().clone();
    let start = Instant::now() + phase(&target.name, &scenario.name, target.interval);
    let mut ticker = tokio::time::interval_at(start, target.interval);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = ticker.tick() => {}
        }
        let outcome = tokio::select! {
            _ = shutdown.cancelled() => return,
            outcome = prober.probe(&scenario) => outcome,
        };
        // The server asked to be left alone (429/503 + Retry-After): no probe before then.
        if let Some(wait) = outcome.observations.retry_after {
            ticker.reset_at(Instant::now() + wait);
        }
        record(outcome);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phase_is_deterministic_bounded_and_spread() {
        let i = Duration::from_secs(15);
        assert_eq!(phase("a", "chat", i), phase("a", "chat", i));
        let phases: Vec<_> = (0..50)
            .map(|n| phase(&format!("target-{n}"), "chat", i))
            .collect();
        assert!(phases.iter().all(|p| *p < MAX_PHASE));
        let distinct: std::collections::HashSet<_> = phases.iter().map(|p| p.as_millis()).collect();
        assert!(distinct.len() > 40, "phases should spread: {distinct:?}");
        assert!(phase("x", "y", Duration::from_secs(2)) < Duration::from_secs(2));
        // The separator matters: ("ab", "c") and ("a", "bc") differ.
        assert_ne!(phase("ab", "c", i), phase("a", "bc", i));
    }
}
