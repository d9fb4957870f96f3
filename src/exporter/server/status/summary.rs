//! What the status pages say about one (target, scenario): its state ([`super::state::judge`])
//! and headline numbers over the last [`WINDOW`], its recent TTFTs, and backend identity
//! changes.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use super::state::{judge, PairState};
use crate::config::Slo;
use crate::history::RecentProbe;
use crate::measure::FailureReason;

/// TTFTs kept in [`Summary::recent_ttft`] (the overview's sparkline).
pub const SPARK_POINTS: usize = 24;

/// A backend identity change: when the first probe with the new identity started.
#[derive(Debug, Clone, PartialEq)]
pub struct IdentityChange {
    /// Start of the first probe that saw `to`.
    pub at: SystemTime,
    /// The previous identity line.
    pub from: String,
    /// The new identity line.
    pub to: String,
}

/// One pair's numbers for the cards, the API and the badges.
#[derive(Debug, Clone)]
pub struct Summary {
    /// Target name.
    pub target: String,
    /// Scenario name.
    pub scenario: String,
    /// Its objectives.
    pub slo: Slo,
    /// Probes kept.
    pub kept_probes: usize,
    /// Failures kept (some older than every kept probe).
    pub kept_failures: usize,
    /// The last `SPARK_POINTS` successful probes: (start, epoch seconds; TTFT, ms).
    pub recent_ttft: Vec<(f64, f64)>,
    /// State over the window ([`judge`]).
    pub state: PairState,
    /// `down`: since when every probe failed; `failing`: the first failure in the window.
    pub since: Option<SystemTime>,
    /// `down` and `failing`: the latest failure's reason and detail.
    pub reason: Option<(FailureReason, String)>,
    /// Probes in the window.
    pub window_probes: usize,
    /// Successful probes in the window over all probes in it (`None`: none in it).
    pub success_ratio: Option<f64>,
    /// P50 TTFT over the window's successes, ms.
    pub ttft_p50_ms: Option<f64>,
    /// P95 TTFT over the window's successes, ms.
    pub ttft_p95_ms: Option<f64>,
    /// P50 output tokens/s over the window.
    pub tokens_per_second_p50: Option<f64>,
    /// P5 output tokens/s over the window.
    pub tokens_per_second_p5: Option<f64>,
    /// When the last probe started.
    pub last_probe: Option<SystemTime>,
    /// The last identity seen.
    pub identity: Option<String>,
    /// Identity changes within the kept probes, oldest first.
    pub identity_changes: Vec<IdentityChange>,
    /// For a pool (a target with `replicas:`): each replica probed within the window, judged
    /// over its own probes as a pair is, worst first (`by_replica`), at most
    /// `MAX_REPLICAS_LISTED`; empty otherwise.
    pub replicas: Vec<ReplicaSummary>,
    /// Replicas probed within the window beyond `MAX_REPLICAS_LISTED` (the best ones).
    pub replicas_not_listed: usize,
}

/// Replicas a pool's summary lists at most: the most a target may probe at once
/// (`replicas.max`). A discovery that names new replicas at every refresh can leave more than
/// that probed within one window; the best of them are then counted, not listed, so a page and
/// an API answer stay bounded.
pub const MAX_REPLICAS_LISTED: usize = crate::config::replicas::MAX_MAX;

/// One replica of a pool: its own probes summarised as a pair's are (its `summary` has no
/// replicas of its own).
#[derive(Debug, Clone)]
pub struct ReplicaSummary {
    /// The `replica` label value.
    pub replica: String,
    /// Its state and numbers over the window.
    pub summary: Summary,
}

/// The replicas among `probes` and `failures` (a pair's kept ones, oldest first) that were
/// probed within the window, each summarised against `slo` at `now`, worst first: by state,
/// then by P95 TTFT (highest first; none last), then by name. Probes without a replica are left
/// out, as are replicas not probed within the window (gone from discovery, or from a shard).
fn by_replica(
    target: &str,
    scenario: &str,
    slo: Slo,
    probes: &[&RecentProbe],
    failures: &[&RecentProbe],
    now: SystemTime,
) -> Vec<ReplicaSummary> {
    type Split<'a> = (Vec<&'a RecentProbe>, Vec<&'a RecentProbe>);
    let mut split: BTreeMap<&str, Split> = BTreeMap::new();
    for p in probes.iter().filter(|p| !p.replica.is_empty()) {
        split.entry(&p.replica).or_default().0.push(p);
    }
    for p in failures.iter().filter(|p| !p.replica.is_empty()) {
        split.entry(&p.replica).or_default().1.push(p);
    }
    let mut all: Vec<ReplicaSummary> = split
        .into_iter()
        .map(|(replica, (probes, failures))| ReplicaSummary {
            replica: replica.to_string(),
            summary: Summary::judged(target, scenario, slo, &probes, &failures, now),
        })
        .filter(|r| r.summary.window_probes > 0)
        .collect();
    all.sort_by(|a, b| {
        let p95 = |r: &ReplicaSummary| r.summary.ttft_p95_ms.unwrap_or(f64::NEG_INFINITY);
        (a.summary.state.cmp(&b.summary.state))
            .then(p95(b).total_cmp(&p95(a)))
            .then(a.replica.cmp(&b.replica))
    });
    all
}

/// Identity changes along `probes` (oldest first); probes that revealed nothing are skipped.
pub fn identity_changes(probes: &[&RecentProbe]) -> Vec<IdentityChange> {
    let mut changes = Vec::new();
    let mut last: Option<&str> = None;
    for p in probes {
        let Some(id) = p.identity.as_deref() else {
            continue;
        };
        if let Some(prev) = last.filter(|prev| *prev != id) {
            changes.push(IdentityChange {
                at: p.started_at,
                from: prev.to_string(),
                to: id.to_string(),
            });
        }
        last = Some(id);
    }
    changes
}

impl Summary {
    /// Summarises `probes` and `failures` of a pair against `slo` at `now`, and each of its
    /// replicas when it is a pool.
    pub fn new(
        target: &str,
        scenario: &str,
        slo: Slo,
        probes: &[&RecentProbe],
        failures: &[&RecentProbe],
        now: SystemTime,
    ) -> Self {
        let mut replicas = by_replica(target, scenario, slo, probes, failures, now);
        let pool = Self::judged(target, scenario, slo, probes, failures, now);
        if replicas.is_empty() {
            return pool;
        }
        // A pool's replicas may run different backends (a rolling upgrade): its probes, in
        // time order, would change identity at almost every probe. Its changes are each
        // replica's own.
        let mut identity_changes: Vec<IdentityChange> = replicas
            .iter()
            .flat_map(|r| r.summary.identity_changes.iter().cloned())
            .collect();
        identity_changes.sort_by_key(|c| c.at);
        let replicas_not_listed = replicas.len().saturating_sub(MAX_REPLICAS_LISTED);
        replicas.truncate(MAX_REPLICAS_LISTED);
        Summary {
            replicas,
            replicas_not_listed,
            identity_changes,
            ..pool
        }
    }

    /// [`Summary::new`] without the replicas.
    fn judged(
        target: &str,
        scenario: &str,
        slo: Slo,
        probes: &[&RecentProbe],
        failures: &[&RecentProbe],
        now: SystemTime,
    ) -> Self {
        let verdict = judge(probes, slo, now);
        let mut recent_ttft: Vec<(f64, f64)> = probes
            .iter()
            .rev()
            .filter_map(|p| Some((super::svg::secs(p.started_at), p.ttft?.as_secs_f64() * 1e3)))
            .take(SPARK_POINTS)
            .collect();
        recent_ttft.reverse();
        let (n, failed) = (verdict.window_probes, verdict.window_failures);
        Summary {
            target: target.to_string(),
            scenario: scenario.to_string(),
            slo,
            state: verdict.state,
            since: verdict.since,
            reason: verdict.reason,
            window_probes: n,
            success_ratio: (n > 0).then(|| (n - failed) as f64 / n as f64),
            ttft_p50_ms: verdict.ttft_p50_ms,
            ttft_p95_ms: verdict.ttft_p95_ms,
            tokens_per_second_p50: verdict.tokens_per_second_p50,
            tokens_per_second_p5: verdict.tokens_per_second_p5,
            last_probe: probes.last().map(|p| p.started_at),
            identity: probes
                .iter()
                .rev()
                .find_map(|p| p.identity.as_deref().map(str::to_string)),
            identity_changes: identity_changes(probes),
            kept_probes: probes.len(),
            kept_failures: failures.len(),
            recent_ttft,
            replicas: Vec::new(),
            replicas_not_listed: 0,
        }
    }

    /// The SLO's TTFT objective, ms.
    pub fn slo_ms(&self) -> f64 {
        self.slo.ttft_p95.as_secs_f64() * 1e3
    }
}

/// `d` for people: `42 s`, `5 min`, `3 h`.
pub fn ago(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..=119 => format!("{s} s"),
        120..=7199 => format!("{} min", s / 60),
        _ => format!("{} h", s / 3600),
    }
}

#[cfg(test)]
mod tests {
    use super::super::state::WINDOW;
    use super::*;

    fn probe(at: SystemTime, ttft_ms: u64, tps: f64, id: &str) -> RecentProbe {
        RecentProbe {
            target: "t".into(),
            scenario: "s".into(),
            replica: "".into(),
            started_at: at,
            ttft: Some(Duration::from_millis(ttft_ms)),
            output_tokens_per_second: Some(tps),
            tpot: None,
            itl: None,
            e2e: None,
            output_tokens: None,
            failure: None,
            identity: Some(id.into()),
            trace_id: None,
        }
    }

    /// A pool lists the replicas probed within the window (not one that left before it), at
    /// most `MAX_REPLICAS_LISTED`, the rest counted; its identity changes are each replica's
    /// own, not the alternation of replicas that run different backends.
    #[test]
    fn a_pool_lists_its_recent_replicas_bounded_and_their_own_identity_changes() {
        let now = SystemTime::now();
        let old = now - WINDOW - Duration::from_secs(1);
        let mut all = Vec::new();
        for i in 0..MAX_REPLICAS_LISTED + 7 {
            // Two backends side by side, each replica constant.
            let mut p = probe(now, 100 + i as u64 % 50, 50.0, ["v1", "v2"][i % 2]);
            p.replica = format!("10.0.{}.{}:8000", i / 250, i % 250).into();
            all.push(p);
        }
        let mut gone = probe(old, 900, 50.0, "v1");
        gone.replica = "10.9.9.9:8000".into();
        all.insert(0, gone);
        // One replica upgraded from v1 to v2 within the window.
        let mut up = probe(now, 100, 50.0, "v1");
        up.replica = "10.8.0.1:8000".into();
        all.push(up.clone());
        up.identity = Some("v2".into());
        all.push(up);
        let refs: Vec<&RecentProbe> = all.iter().collect();
        let s = Summary::new("t", "s", Slo::default(), &refs, &[], now);
        assert_eq!(s.replicas.len(), MAX_REPLICAS_LISTED);
        assert_eq!(s.replicas_not_listed, 8);
        assert!(s.replicas.iter().all(|r| &*r.replica != "10.9.9.9:8000"));
        assert_eq!(s.identity_changes.len(), 1, "{:?}", s.identity_changes);
        assert_eq!(
            (
                s.identity_changes[0].from.as_str(),
                s.identity_changes[0].to.as_str()
            ),
            ("v1", "v2")
        );
    }

    #[test]
    fn old_probes_are_outside_the_window_and_identity_changes_are_found() {
        let now = SystemTime::now();
        let old = now - WINDOW - Duration::from_secs(1);
        let probes = [
            probe(old, 900, 50.0, "a"),
            probe(now, 100, 50.0, "a"),
            probe(now, 100, 50.0, "b"),
        ];
        let refs: Vec<&RecentProbe> = probes.iter().collect();
        let s = Summary::new("t", "s", Slo::default(), &refs, &[], now);
        assert_eq!(
            s.state,
            PairState::Ok,
            "the 900 ms probe is older than the window"
        );
        assert_eq!(s.window_probes, 2);
        assert_eq!(s.identity.as_deref(), Some("b"));
        assert_eq!(s.identity_changes.len(), 1);
        assert_eq!(
            (
                s.identity_changes[0].from.as_str(),
                s.identity_changes[0].to.as_str()
            ),
            ("a", "b")
        );
        assert_eq!(ago(Duration::from_secs(300)), "5 min");
    }
}
