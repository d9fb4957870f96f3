//! The last probe outcomes kept in memory, in a compact form: for the landing page and the
//! demo's live summary. Bounded: at most `capacity` recent probes, and separately the last
//! `capacity` failures, so a failure stays visible long after a run of successes.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use crate::measure::{FailureReason, ProbeOutcome};

/// One probe, summarised.
#[derive(Debug, Clone, PartialEq)]
pub struct RecentProbe {
    /// Target name.
    pub target: String,
    /// Scenario name.
    pub scenario: String,
    /// Wall-clock start of the probe.
    pub started_at: SystemTime,
    /// TTFT, when the probe succeeded.
    pub ttft: Option<Duration>,
    /// Output tokens per second, when known.
    pub output_tokens_per_second: Option<f64>,
    /// E2E, when the probe succeeded.
    pub e2e: Option<Duration>,
    /// Output tokens, when the probe succeeded.
    pub output_tokens: Option<u64>,
    /// The failure reason and detail, when it failed.
    pub failure: Option<(FailureReason, String)>,
}

impl From<&ProbeOutcome> for RecentProbe {
    fn from(o: &ProbeOutcome) -> Self {
        let m = o.result.as_ref().ok();
        RecentProbe {
            target: o.target.to_string(),
            scenario: o.scenario.to_string(),
            started_at: o.started_at,
            ttft: m.map(|m| m.ttft),
            output_tokens_per_second: m.and_then(|m| m.output_tokens_per_second),
            e2e: m.map(|m| m.e2e),
            output_tokens: m.map(|m| m.output_tokens),
            failure: o
                .result
                .as_ref()
                .err()
                .map(|f| (f.reason, f.detail.clone())),
        }
    }
}

#[derive(Debug, Default)]
struct Rings {
    recent: VecDeque<RecentProbe>,
    failures: VecDeque<RecentProbe>,
}

/// Bounded rings of recent probes and recent failures, newest last.
#[derive(Debug)]
pub struct History {
    capacity: usize,
    rings: Mutex<Rings>,
}

fn push_bounded(ring: &mut VecDeque<RecentProbe>, capacity: usize, p: RecentProbe) {
    if ring.len() == capacity {
        ring.pop_front();
    }
    ring.push_back(p);
}

impl History {
    /// An empty history holding at most `capacity` probes and `capacity` failures.
    pub fn new(capacity: usize) -> Self {
        History {
            capacity,
            rings: Mutex::new(Rings::default()),
        }
    }

    /// Adds a probe, dropping the oldest beyond capacity.
    pub fn push(&self, outcome: &ProbeOutcome) {
        let p = RecentProbe::from(outcome);
        let mut r = self.rings.lock().unwrap_or_else(|e| e.into_inner());
        if p.failure.is_some() {
            push_bounded(&mut r.failures, self.capacity, p.clone());
        }
        push_bounded(&mut r.recent, self.capacity, p);
    }

    /// The recent probes, oldest first.
    pub fn snapshot(&self) -> Vec<RecentProbe> {
        let r = self.rings.lock().unwrap_or_else(|e| e.into_inner());
        r.recent.iter().cloned().collect()
    }

    /// The recent failures, oldest first (kept apart, so they outlive the recent probes).
    pub fn failures(&self) -> Vec<RecentProbe> {
        let r = self.rings.lock().unwrap_or_else(|e| e.into_inner());
        r.failures.iter().cloned().collect()
    }
}

/// The `q`-quantile (0..=1) of `values` by the nearest-rank method; `None` when empty.
pub fn quantile(values: &mut [f64], q: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let rank = (q * values.len() as f64).ceil().max(1.0) as usize;
    Some(values[rank.min(values.len()) - 1])
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::measure::{Failure, Observations, TokenKind};

    fn outcome(ok: bool) -> ProbeOutcome {
        let t0 = Instant::now();
        let mut obs = Observations::new(t0);
        obs.token(t0, TokenKind::Output);
        obs.timeline.ended = Some(t0);
        let failure = (!ok).then(|| Failure::new(FailureReason::Timeout, "slow"));
        ProbeOutcome::conclude(
            "t".into(),
            "s".into(),
            "m".into(),
            SystemTime::now(),
            obs,
            failure,
        )
    }

    #[test]
    fn nearest_rank_quantiles() {
        let mut v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(quantile(&mut v, 0.5), Some(50.0));
        assert_eq!(quantile(&mut v, 0.95), Some(95.0));
        assert_eq!(quantile(&mut v, 1.0), Some(100.0));
        assert_eq!(quantile(&mut [3.0], 0.5), Some(3.0));
        assert_eq!(quantile(&mut [], 0.5), None);
    }

    #[test]
    fn bounded_and_failures_outlive_successes() {
        let h = History::new(3);
        h.push(&outcome(false));
        for _ in 0..10 {
            h.push(&outcome(true));
        }
        assert_eq!(h.snapshot().len(), 3);
        assert!(h.snapshot().iter().all(|p| p.failure.is_none()));
        assert_eq!(
            h.failures().len(),
            1,
            "the failure is still there after 10 successes"
        );
        for _ in 0..5 {
            h.push(&outcome(false));
        }
        assert_eq!(h.failures().len(), 3);
    }
}
