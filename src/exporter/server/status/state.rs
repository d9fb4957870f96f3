//! The one definition of a (target, scenario) pair's state, shared by the status pages, the
//! JSON API (`/api/v1/targets`) and the badges: [`judge`].
//!
//! It looks at the pair's probes of the last [`WINDOW`] (10 minutes: the window of the shipped
//! SLO alerts, `dashboards/prometheus/llm-probe-alerts.rules.yml`, whose recording rules are
//! `…:p95_10m`, `…:p05_10m` and `…:ratio10m`), so the page never says "breached" over a window
//! the alerts do not look at. States, most severe first:
//!
//! | state | when |
//! |---|---|
//! | `down` | probes in the window, every one failed |
//! | `failing` | some probes in the window failed |
//! | `breached` | none failed; P95 TTFT above `slo.ttft_p95` or P5 output tokens/s below `slo.output_tokens_per_second_min` |
//! | `at_risk` | none failed; P95 TTFT above 80 % of the objective or P5 tokens/s below 120 % of the floor |
//! | `ok` | none failed, within both objectives with that margin |
//! | `no_data` | no probe in the window (nothing probed yet, or the schedule stopped) |

use std::time::{Duration, SystemTime};

use crate::config::Slo;
use crate::history::RecentProbe;
use crate::measure::FailureReason;
use crate::stats::quantiles_type7;

/// The window states are judged over: 10 minutes, as the SLO alerts.
pub const WINDOW: Duration = crate::history::STATE_WINDOW;

/// Fraction of a threshold at which a pair is "at risk": P95 TTFT above 80 % of the
/// objective, or P5 tokens/s below 120 % of the floor.
pub const AT_RISK_MARGIN: f64 = 0.2;

/// A pair's state over [`WINDOW`]; the variants are declared most severe first, so sorting by
/// the derived `Ord` puts the worst first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PairState {
    /// Every probe in the window failed.
    Down,
    /// Some probes in the window failed.
    Failing,
    /// No failure; P95 TTFT above the objective or P5 tokens/s below the floor.
    Breached,
    /// No failure; within both objectives, but within 20 % of one.
    AtRisk,
    /// No failure; within both objectives with margin.
    Ok,
    /// No probe in the window.
    NoData,
}

impl PairState {
    /// Every state, most severe first.
    pub const ALL: [PairState; 6] = [
        PairState::Down,
        PairState::Failing,
        PairState::Breached,
        PairState::AtRisk,
        PairState::Ok,
        PairState::NoData,
    ];

    /// `down`, `failing`, `breached`, `at_risk`, `ok` or `no_data`: API values, query values
    /// (`?state=`) and CSS classes.
    pub fn as_str(self) -> &'static str {
        match self {
            PairState::Down => "down",
            PairState::Failing => "failing",
            PairState::Breached => "breached",
            PairState::AtRisk => "at_risk",
            PairState::Ok => "ok",
            PairState::NoData => "no_data",
        }
    }

    /// For people: `down`, `failing`, `breached`, `at risk`, `ok`, `no data`.
    pub fn label(self) -> &'static str {
        match self {
            PairState::AtRisk => "at risk",
            PairState::NoData => "no data",
            s => s.as_str(),
        }
    }

    /// The state named `s` by [`PairState::as_str`] (`None`: no such state).
    pub fn parse(s: &str) -> Option<PairState> {
        PairState::ALL.into_iter().find(|v| v.as_str() == s)
    }
}

/// What [`judge`] says about a pair.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// The state.
    pub state: PairState,
    /// `down`: start of the run of failures (which may begin before the window; the earliest
    /// kept probe of the run); `failing`: the first failure in the window; else `None`.
    pub since: Option<SystemTime>,
    /// `down` and `failing`: the latest failure's reason and detail; else `None`.
    pub reason: Option<(FailureReason, String)>,
    /// Probes in the window.
    pub window_probes: usize,
    /// Failed probes in the window.
    pub window_failures: usize,
    /// P50 TTFT over the window's successes (type 7, as bench's), ms.
    pub ttft_p50_ms: Option<f64>,
    /// P95 TTFT over the window's successes (type 7, as bench's), ms.
    pub ttft_p95_ms: Option<f64>,
    /// P50 output tokens/s over the window's successes (type 7).
    pub tokens_per_second_p50: Option<f64>,
    /// P5 output tokens/s over the window's successes (type 7).
    pub tokens_per_second_p5: Option<f64>,
}

/// The state of a pair with kept probes `probes` (oldest first, as
/// [`crate::history::History::with_pair`] gives them) against `slo`, at `now`: see the module
/// documentation for the definition.
pub fn judge(probes: &[&RecentProbe], slo: Slo, now: SystemTime) -> Verdict {
    let from = now.checked_sub(WINDOW).unwrap_or(SystemTime::UNIX_EPOCH);
    let start = probes.partition_point(|p| p.started_at < from);
    let window = &probes[start..];
    let failures = window.iter().filter(|p| p.failure.is_some()).count();
    let mut ttft: Vec<f64> = window
        .iter()
        .filter_map(|p| p.ttft.map(|d| d.as_secs_f64() * 1e3))
        .collect();
    let mut tps: Vec<f64> = window
        .iter()
        .filter(|p| p.failure.is_none())
        .filter_map(|p| p.output_tokens_per_second)
        .collect();
    let [ttft_p50_ms, ttft_p95_ms] = quantiles_type7(&mut ttft, [0.5, 0.95]);
    let [tokens_per_second_p5, tokens_per_second_p50] = quantiles_type7(&mut tps, [0.05, 0.5]);
    let latest_failure = || window.iter().rev().find_map(|p| p.failure.clone());
    let (state, since, reason) = if window.is_empty() {
        (PairState::NoData, None, None)
    } else if failures == window.len() {
        // The run of failures, back past the window's start.
        let run = probes.iter().rev().take_while(|p| p.failure.is_some());
        let since = run.last().map(|p| p.started_at);
        (PairState::Down, since, latest_failure())
    } else if failures > 0 {
        let since = window
            .iter()
            .find(|p| p.failure.is_some())
            .map(|p| p.started_at);
        (PairState::Failing, since, latest_failure())
    } else {
        let slo_ms = slo.ttft_p95.as_secs_f64() * 1e3;
        let floor = slo.output_tokens_per_second_min;
        let above = |limit: f64| ttft_p95_ms.is_some_and(|t| t > limit);
        let below = |limit: f64| tokens_per_second_p5.is_some_and(|r| r < limit);
        let state = if above(slo_ms) || below(floor) {
            PairState::Breached
        } else if above(slo_ms * (1.0 - AT_RISK_MARGIN)) || below(floor * (1.0 + AT_RISK_MARGIN)) {
            PairState::AtRisk
        } else {
            PairState::Ok
        };
        (state, None, None)
    };
    Verdict {
        state,
        since,
        reason,
        window_probes: window.len(),
        window_failures: failures,
        ttft_p50_ms,
        ttft_p95_ms,
        tokens_per_second_p50,
        tokens_per_second_p5,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(ago_s: u64, ttft_ms: Option<u64>, tps: f64, now: SystemTime) -> RecentProbe {
        RecentProbe {
            target: "t".into(),
            scenario: "s".into(),
            replica: "".into(),
            started_at: now - Duration::from_secs(ago_s),
            ttft: ttft_ms.map(Duration::from_millis),
            output_tokens_per_second: ttft_ms.map(|_| tps),
            tpot: None,
            itl: None,
            e2e: None,
            output_tokens: None,
            failure: ttft_ms
                .is_none()
                .then(|| (FailureReason::Connect, format!("refused {ago_s}"))),
            identity: None,
            trace_id: None,
        }
    }

    /// Probes at `ago` seconds (oldest first): `Some(ms)` a success, `None` a failure.
    fn judged(probes: &[(u64, Option<u64>)], tps: f64) -> Verdict {
        let now = SystemTime::now();
        let kept: Vec<RecentProbe> = probes
            .iter()
            .map(|&(ago, t)| probe(ago, t, tps, now))
            .collect();
        let refs: Vec<&RecentProbe> = kept.iter().collect();
        judge(&refs, Slo::default(), now)
    }

    /// A pair whose probes ran exactly at the tokens-per-second floor is not breached once they
    /// have been kept in the history (stored as `f32`, read back to 7 significant digits).
    #[test]
    fn a_rate_exactly_at_the_floor_is_not_below_it_after_the_history() {
        let now = SystemTime::now();
        let history = crate::history::History::new(crate::history::HistoryLimits::default());
        for ago in [60, 40, 20] {
            history.push_probe(probe(ago, Some(100), 0.7, now));
        }
        let kept = history.probes("t", "s");
        assert_eq!(kept[0].output_tokens_per_second, Some(0.7));
        let refs: Vec<&RecentProbe> = kept.iter().collect();
        let slo = Slo {
            output_tokens_per_second_min: 0.7,
            ..Slo::default()
        };
        assert_ne!(judge(&refs, slo, now).state, PairState::Breached);
    }

    #[test]
    fn states_against_the_default_300_ms_and_30_tokens_per_second() {
        let s = |p: &[(u64, Option<u64>)], tps| judged(p, tps).state;
        assert_eq!(s(&[], 50.0), PairState::NoData);
        assert_eq!(
            s(&[(700, Some(100))], 50.0),
            PairState::NoData,
            "older than 10 min"
        );
        assert_eq!(
            s(&[(30, Some(100)), (20, Some(120)), (10, Some(130))], 50.0),
            PairState::Ok
        );
        assert_eq!(
            s(&[(30, Some(100)), (20, Some(120)), (10, Some(260))], 50.0),
            PairState::AtRisk
        );
        assert_eq!(s(&[(30, Some(100))], 34.0), PairState::AtRisk);
        assert_eq!(
            s(&[(30, Some(100)), (10, Some(400))], 50.0),
            PairState::Breached
        );
        assert_eq!(s(&[(30, Some(100))], 20.0), PairState::Breached);
        assert_eq!(
            s(&[(30, Some(400)), (10, None)], 50.0),
            PairState::Failing,
            "a failure outranks a breach"
        );
        assert_eq!(s(&[(30, None), (10, None)], 50.0), PairState::Down);
        assert_eq!(
            s(&[(700, Some(100)), (30, None)], 50.0),
            PairState::Down,
            "a success before the window does not count"
        );
    }

    #[test]
    fn down_says_since_when_and_why() {
        let v = judged(
            &[(900, Some(100)), (800, None), (400, None), (5, None)],
            50.0,
        );
        assert_eq!(v.state, PairState::Down);
        let since = v.since.unwrap();
        let age = SystemTime::now().duration_since(since).unwrap().as_secs();
        assert!(
            (800..=802).contains(&age),
            "the run began 800 s ago, before the window: {age}"
        );
        assert_eq!(v.reason, Some((FailureReason::Connect, "refused 5".into())));
        assert_eq!((v.window_probes, v.window_failures), (2, 2));
        let f = judged(&[(300, Some(100)), (200, None), (100, Some(90))], 50.0);
        assert_eq!(f.state, PairState::Failing);
        let age = SystemTime::now()
            .duration_since(f.since.unwrap())
            .unwrap()
            .as_secs();
        assert!((200..=202).contains(&age), "{age}");
    }

    #[test]
    fn severity_order_and_names() {
        let mut v = vec![
            PairState::Ok,
            PairState::NoData,
            PairState::Down,
            PairState::AtRisk,
        ];
        v.sort();
        assert_eq!(
            v,
            [
                PairState::Down,
                PairState::AtRisk,
                PairState::Ok,
                PairState::NoData
            ]
        );
        for s in PairState::ALL {
            assert_eq!(PairState::parse(s.as_str()), Some(s));
        }
        assert_eq!(PairState::parse("red"), None);
    }
}
