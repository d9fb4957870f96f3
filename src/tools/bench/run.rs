//! Runs one level of a sweep on the daemon's [`Prober`]: closed loop (C virtual users, also at
//! each prompt length of a prompt-length sweep) or open loop (seeded Poisson arrivals, latencies from the scheduled send). Ctrl-C (`cancel`) aborts
//! in-flight requests; what completed is returned.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::SeedableRng;
use rand_distr::{Distribution, Exp};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::level::Load;
use super::plan::{Plan, Warmup};
use super::progress::Progress;
use super::record::RequestRecord;
use crate::config::Scenario;
use crate::measure::ProbeOutcome;
use crate::probe::Prober;

/// How far apart a closed-loop level's virtual users send their first request (256 users: all
/// started within 0.26 s).
pub const USER_SPACING: Duration = Duration::from_millis(1);

/// What a level shares with its requests.
#[derive(Clone)]
pub struct LevelRun {
    /// The target's prober (its HTTP client and connections are reused across the sweep).
    pub prober: Prober,
    /// The scenario, with the bench's prefix-cache choice applied.
    pub scenario: Arc<Scenario>,
    /// The sweep's plan.
    pub plan: Arc<Plan>,
    /// Requests sent so far over the sweep (for `--max-requests`).
    pub sent_total: Arc<AtomicU64>,
    /// Ctrl-C.
    pub cancel: CancellationToken,
    /// Progress output.
    pub progress: Progress,
}

struct Shared {
    run: LevelRun,
    level: usize,
    start: Instant,
    next: AtomicU64,
    records: Mutex<Vec<RequestRecord>>,
    first_outcome: Mutex<Option<ProbeOutcome>>,
}

impl Shared {
    /// The next request's index, or `None` when the level's count or the sweep's cap is spent.
    fn claim(&self) -> Option<u64> {
        let plan = &self.run.plan;
        let i = self.next.fetch_add(1, Ordering::SeqCst);
        let budget = plan
            .requests
            .map(|n| n.saturating_add(plan.warmup_requests()));
        if budget.is_some_and(|b| i >= b) {
            return None;
        }
        if self.run.sent_total.fetch_add(1, Ordering::SeqCst) >= plan.max_requests {
            return None;
        }
        Some(i)
    }

    fn out_of_time(&self, at: Duration) -> bool {
        self.run.cancel.is_cancelled() || self.run.plan.duration.is_some_and(|d| at >= d)
    }

    /// Sends request `i` due at `due` (level offset; `None` in closed loop, where a request is
    /// due when it is sent) and records it.
    async fn request(&self, i: u64, due: Option<Duration>) {
        let outcome = tokio::select! {
            _ = self.run.cancel.cancelled() => return,
            o = self.run.prober.probe(&self.run.scenario) => o,
        };
        let start = self.start.into_std();
        let sent = outcome
            .observations
            .timeline
            .sent
            .saturating_duration_since(start);
        let due = due.map_or(sent, |d| d.min(sent));
        let warmup = match self.run.plan.warmup {
            Warmup::Requests(n) => i < n,
            Warmup::Time(d) => due < d,
        };
        let ended = start.elapsed();
        let record = RequestRecord::new(self.level, i, warmup, due, sent - due, ended, &outcome);
        self.run.progress.request_done(record.result.is_ok());
        self.records
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(record);
        let mut first = self.first_outcome.lock().unwrap_or_else(|e| e.into_inner());
        if first.is_none() && outcome.is_success() {
            *first = Some(outcome);
        }
    }
}

/// What one level produced.
pub struct LevelResult {
    /// Every request that ended (succeeded or failed), in completion order.
    pub records: Vec<RequestRecord>,
    /// The first successful outcome (endpoint identity, prompt tokens).
    pub first_success: Option<ProbeOutcome>,
}

/// Runs level `level` (index in the plan) with `load`.
pub async fn run_level(run: &LevelRun, level: usize, load: Load) -> LevelResult {
    let shared = Arc::new(Shared {
        run: run.clone(),
        level,
        start: Instant::now(),
        next: AtomicU64::new(0),
        records: Mutex::new(Vec::new()),
        first_outcome: Mutex::new(None),
    });
    let mut tasks = JoinSet::new();
    match load {
        Load::Concurrency(c) | Load::Prompt { concurrency: c, .. } => {
            for user in 0..c {
                let s = shared.clone();
                tasks.spawn(async move {
                    // Users start USER_SPACING apart: C connections opened at one instant are a
                    // burst the generator itself would delay (BENCHMARKS §9b: up to 27 ms in the
                    // first round at 256 users).
                    let offset = USER_SPACING * user;
                    tokio::select! {
                        _ = s.run.cancel.cancelled() => return,
                        _ = tokio::time::sleep_until(s.start + offset) => {}
                    }
                    while !s.out_of_time(s.start.elapsed()) {
                        let Some(i) = s.claim() else { break };
                        s.request(i, None).await;
                    }
                });
            }
        }
        Load::Rate(rate) => open_loop(&shared, rate, &mut tasks).await,
    }
    while tasks.join_next().await.is_some() {}
    let records = std::mem::take(&mut *shared.records.lock().unwrap_or_else(|e| e.into_inner()));
    let first_success = shared
        .first_outcome
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take();
    LevelResult {
        records,
        first_success,
    }
}

/// Schedules Poisson arrivals at `rate` per second (seeded with `seed + level`) until the
/// level's duration or count ends; each request runs in its own task, waiting for a
/// `--max-concurrency` permit if set (that wait counts as lateness).
async fn open_loop(shared: &Arc<Shared>, rate: f64, tasks: &mut JoinSet<()>) {
    let plan = &shared.run.plan;
    let cap = plan
        .max_concurrency
        .map(|c| Arc::new(Semaphore::new(c as usize)));
    let seed = plan.seed.wrapping_add(shared.level as u64);
    for due in arrivals(rate, seed) {
        if shared.out_of_time(due) {
            break;
        }
        let Some(i) = shared.claim() else { break };
        tokio::select! {
            _ = shared.run.cancel.cancelled() => break,
            _ = tokio::time::sleep_until(shared.start + due) => {}
        }
        let s = shared.clone();
        let cap = cap.clone();
        tasks.spawn(async move {
            let _permit = match cap {
                Some(c) => c.acquire_owned().await.ok(),
                None => None,
            };
            s.request(i, Some(due)).await;
        });
    }
}

/// Poisson arrivals at `rate` per second from `seed`: the scheduled send times from the level's
/// start, the first at 0, then exponential gaps of mean `1/rate`. Empty for a rate that is not
/// finite and positive.
pub fn arrivals(rate: f64, seed: u64) -> impl Iterator<Item = Duration> {
    let gaps = Exp::new(rate)
        .ok()
        .filter(|_| rate.is_finite() && rate > 0.0);
    let mut rng = StdRng::seed_from_u64(seed);
    let mut due = Some(Duration::ZERO);
    std::iter::from_fn(move || {
        let gaps = gaps.as_ref()?;
        let this = due?;
        // A gap too long for a Duration (a tiny rate) ends the schedule instead of panicking.
        due = Duration::try_from_secs_f64(gaps.sample(&mut rng))
            .ok()
            .and_then(|gap| this.checked_add(gap));
        Some(this)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gap_too_long_for_a_duration_ends_the_schedule_instead_of_panicking() {
        // Mean gap 1e300 s: the first arrival is at 0, the next cannot be represented.
        let a: Vec<Duration> = arrivals(1e-300, 1).take(3).collect();
        assert_eq!(a, vec![Duration::ZERO]);
    }

    #[test]
    fn arrivals_are_seeded_poisson() {
        let a: Vec<Duration> = arrivals(4.0, 7).take(4000).collect();
        let b: Vec<Duration> = arrivals(4.0, 7).take(4000).collect();
        assert_eq!(a, b, "the same seed gave another schedule");
        assert_ne!(a, arrivals(4.0, 8).take(4000).collect::<Vec<_>>());
        assert_eq!(a[0], Duration::ZERO);
        assert!(a.windows(2).all(|w| w[0] <= w[1]));
        // 3999 gaps of mean 250 ms: the observed rate within 5 % of 4/s.
        let rate = 3999.0 / a[3999].as_secs_f64();
        assert!((rate - 4.0).abs() < 0.2, "rate {rate}");
        // Exponential gaps: about e^-1 ≈ 37 % of them are longer than the mean.
        let long = a
            .windows(2)
            .filter(|w| w[1] - w[0] > Duration::from_millis(250))
            .count();
        assert!((1300..1650).contains(&long), "{long} gaps above the mean");
        assert_eq!(arrivals(0.0, 1).next(), None);
    }
}
