//! The last probe outcomes kept in memory, in a compact form: for the landing page and the
//! demo's live summary. Bounded: at most `capacity` entries.

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

/// A bounded ring of recent probes, newest last.
#[derive(Debug)]
pub struct History {
    capacity: usize,
    entries: Mutex<VecDeque<RecentProbe>>,
}

impl History {
    /// An empty history holding at most `capacity` probes.
    pub fn new(capacity: usize) -> Self {
        History {
            capacity,
            entries: Mutex::new(VecDeque::with_capacity(capacity)),
        }
    }

    /// Adds a probe, dropping the oldest beyond capacity.
    pub fn push(&self, outcome: &ProbeOutcome) {
        let mut e = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if e.len() == self.capacity {
            e.pop_front();
        }
        e.push_back(outcome.into());
    }

    /// A copy of the entries, oldest first.
    pub fn snapshot(&self) -> Vec<RecentProbe> {
        self.entries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .cloned()
            .collect()
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
    use super::*;

    #[test]
    fn nearest_rank_quantiles() {
        let mut v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(quantile(&mut v, 0.5), Some(50.0));
        assert_eq!(quantile(&mut v, 0.95), Some(95.0));
        assert_eq!(quantile(&mut v, 1.0), Some(100.0));
        assert_eq!(quantile(&mut [3.0], 0.5), Some(3.0));
        assert_eq!(quantile(&mut [], 0.5), None);
    }
}
