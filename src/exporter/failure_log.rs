//! The daemon's log of failing probes: on change, not on every probe.
//!
//! A pair's first failure, a change of its failure reason and its recovery are logged; while it
//! keeps failing for the same reason, a reminder with the count of failures follows at most
//! every [`Timing::repeat`] (5 minutes). So that a dead endpoint probed by many pairs does not
//! write one line per pair, the first change after a quiet moment is logged at once and the
//! changes that follow within [`Timing::batch`] (10 s) are written together when it ends, one
//! line per (event, reason) naming how many pairs and the first few of them. A dead endpoint
//! behind 20 pairs probed every second for 10 minutes logs about 5 lines instead of 12,000.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use crate::measure::{FailureReason, ProbeOutcome};

/// How often the failure log writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    /// Longest silence about a pair that keeps failing for the same reason.
    pub repeat: Duration,
    /// Changes within this long of a written line are held and written together.
    pub batch: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            repeat: Duration::from_secs(300),
            batch: Duration::from_secs(10),
        }
    }
}

/// At most this many pairs are named in one grouped line.
const NAMED_PAIRS: usize = 5;

type Pair = (Arc<str>, Arc<str>);

/// The log's pair of (`target`, `scenario`) probing `replica` (empty: none). Each replica of a
/// target with `replicas:` is a pair of its own, `scenario@replica`: one failing replica among
/// healthy ones is one failure, not a failure and a recovery at every probe.
fn pair(target: Arc<str>, scenario: Arc<str>, replica: &str) -> Pair {
    match replica {
        "" => (target, scenario),
        replica => (target, format!("{scenario}@{replica}").into()),
    }
}

/// A pair's state as the log last told it.
struct PairState {
    reason: FailureReason,
    /// Failures since the last line that covered this pair.
    unreported: u64,
}

/// A change not yet written.
struct Held {
    pair: Pair,
    /// `None`: recovered.
    reason: Option<FailureReason>,
    detail: String,
    status: Option<u16>,
    failures: u64,
}

#[derive(Default)]
struct Inner {
    failing: HashMap<Pair, PairState>,
    held: Vec<Held>,
    last_line: Option<Instant>,
    last_reminder: Option<Instant>,
}

/// The failure log of one daemon; share it behind an `Arc` between the probe schedules, and
/// run [`FailureLog::run`] to write what is held and the reminders.
pub struct FailureLog {
    timing: Timing,
    inner: Mutex<Inner>,
}

impl FailureLog {
    /// A log that writes at `timing`.
    pub fn new(timing: Timing) -> Self {
        FailureLog {
            timing,
            inner: Mutex::new(Inner::default()),
        }
    }

    /// Forgets a pair that is no longer probed (a departed replica, a removed target or
    /// scenario): no reminder says it is still failing, and a change of it not yet written is
    /// dropped. `replica` is empty for a target without `replicas:`.
    pub fn forget(&self, target: &str, scenario: &str, replica: &str) {
        let (target, scenario) = pair(target.into(), scenario.into(), replica);
        let is = |p: &Pair| p.0 == target && p.1 == scenario;
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.failing.retain(|p, _| !is(p));
        inner.held.retain(|h| !is(&h.pair));
    }

    /// Takes one finished probe: a success is logged at debug; a failure or recovery that
    /// changes the pair's state is logged now or held (see the module docs).
    pub fn record(&self, o: &ProbeOutcome) {
        let pair = pair(o.target.clone(), o.scenario.clone(), &o.replica);
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let held = match &o.result {
            Ok(m) => {
                tracing::debug!(
                    target = %o.target, scenario = %o.scenario,
                    ttft_seconds = m.ttft.as_secs_f64(), output_tokens = m.output_tokens,
                    e2e_seconds = m.e2e.as_secs_f64(), "probe succeeded"
                );
                let Some(was) = inner.failing.remove(&pair) else {
                    return;
                };
                Held {
                    pair,
                    reason: None,
                    detail: String::new(),
                    status: None,
                    failures: was.unreported,
                }
            }
            Err(f) => {
                match inner.failing.get_mut(&pair) {
                    Some(s) if s.reason == f.reason => {
                        s.unreported += 1;
                        return;
                    }
                    _ => {}
                }
                inner.failing.insert(
                    pair.clone(),
                    PairState {
                        reason: f.reason,
                        unreported: 0,
                    },
                );
                Held {
                    pair,
                    reason: Some(f.reason),
                    detail: crate::sanitize::terminal_safe(&f.detail).into_owned(),
                    status: o.observations.http_status,
                    failures: 1,
                }
            }
        };
        let now = Instant::now();
        let quiet = inner
            .last_line
            .is_none_or(|t| now.duration_since(t) >= self.timing.batch);
        inner.held.push(held);
        if quiet && inner.held.len() == 1 {
            write_held(&mut inner, now);
        }
    }

    /// Writes the held changes once their batch is over, and the reminders for pairs that keep
    /// failing; until `shutdown`.
    pub async fn run(self: Arc<Self>, shutdown: tokio_util::sync::CancellationToken) {
        let tick = self.timing.batch.min(self.timing.repeat) / 2;
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => {
                    // What is held is written before the process ends.
                    let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
                    if !inner.held.is_empty() {
                        write_held(&mut inner, Instant::now());
                    }
                    return;
                }
                _ = tokio::time::sleep(tick.max(Duration::from_millis(10))) => {}
            }
            self.flush(Instant::now());
        }
    }

    /// What [`FailureLog::run`] does at each tick.
    fn flush(&self, now: Instant) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let batch_over = inner
            .last_line
            .is_none_or(|t| now.duration_since(t) >= self.timing.batch);
        if !inner.held.is_empty() && batch_over {
            write_held(&mut inner, now);
        }
        let since = *inner.last_reminder.get_or_insert(now);
        if now.duration_since(since) < self.timing.repeat {
            return;
        }
        inner.last_reminder = Some(now);
        // Pairs still failing for the same reason, with failures since they were last told.
        let mut by_reason: BTreeMap<FailureReason, (Vec<String>, u64)> = BTreeMap::new();
        for ((t, s), state) in inner.failing.iter_mut() {
            if state.unreported == 0 {
                continue;
            }
            let entry = by_reason.entry(state.reason).or_default();
            entry.0.push(format!("{t}/{s}"));
            entry.1 += state.unreported;
            state.unreported = 0;
        }
        for (reason, (mut pairs, failures)) in by_reason {
            pairs.sort();
            tracing::warn!(
                reason = reason.as_str(), pairs = pairs.len(), failures,
                examples = %named(&pairs),
                period = %humantime::format_duration(self.timing.repeat),
                "probes still failing"
            );
            inner.last_line = Some(now);
        }
    }
}

/// The first [`NAMED_PAIRS`] of `pairs`, and how many more.
fn named(pairs: &[String]) -> String {
    let mut s = pairs
        .iter()
        .take(NAMED_PAIRS)
        .cloned()
        .collect::<Vec<_>>()
        .join(" ");
    if pairs.len() > NAMED_PAIRS {
        s += &format!(" (+{} more)", pairs.len() - NAMED_PAIRS);
    }
    s
}

/// Writes the held changes: one line for a single change, one per (event, reason) for many.
fn write_held(inner: &mut Inner, now: Instant) {
    let held = std::mem::take(&mut inner.held);
    inner.last_line = Some(now);
    if let [h] = held.as_slice() {
        let (t, s) = &h.pair;
        match h.reason {
            Some(r) => tracing::warn!(
                target = %t, scenario = %s, reason = r.as_str(), status = h.status,
                detail = %h.detail, "probe failed"
            ),
            None => tracing::info!(
                target = %t, scenario = %s, failures = h.failures, "probe recovered"
            ),
        }
        return;
    }
    let mut groups: BTreeMap<Option<FailureReason>, Vec<&Held>> = BTreeMap::new();
    for h in &held {
        groups.entry(h.reason).or_default().push(h);
    }
    for (reason, hs) in groups {
        let mut pairs: Vec<String> = hs
            .iter()
            .map(|h| format!("{}/{}", h.pair.0, h.pair.1))
            .collect();
        pairs.sort();
        let first = hs[0];
        match reason {
            Some(r) => tracing::warn!(
                reason = r.as_str(), pairs = pairs.len(), examples = %named(&pairs),
                target = %first.pair.0, scenario = %first.pair.1, status = first.status,
                detail = %first.detail, "probe failed"
            ),
            None => tracing::info!(
                pairs = pairs.len(), examples = %named(&pairs),
                failures = hs.iter().map(|h| h.failures).sum::<u64>(), "probe recovered"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn many_pairs_are_named_briefly() {
        let pairs: Vec<String> = (0..8).map(|i| format!("t{i}/s")).collect();
        assert_eq!(named(&pairs[..2]), "t0/s t1/s");
        assert_eq!(named(&pairs), "t0/s t1/s t2/s t3/s t4/s (+3 more)");
    }
}
