//! One task per (target, scenario): the first probe soon after start at a deterministic phase
//! (so targets don't all fire together), then every `interval`; a probe never overlaps its
//! predecessor (a late probe skips ticks instead of bunching up); a `Retry-After` from the
//! server holds the next probe back until it has passed; cancellation drops an in-flight probe
//! without observing it; a probe that panics is logged and counted, and the schedule goes on.

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;

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

/// Probes that panicked since the process started (a bug in llm-probe: the probe is logged at
/// error and dropped, and the schedule goes on); exported as `llm_probe_probe_panics_total`.
pub static PROBE_PANICS: LazyLock<Counter> = LazyLock::new(Counter::default);

/// `from + d`, or an instant far beyond any run of the process if that overflows: waiting
/// "forever" instead of panicking on `overflow when adding duration to instant`.
pub fn instant_after(from: Instant, d: Duration) -> Instant {
    const FAR: Duration = Duration::from_secs(30 * 365 * 24 * 60 * 60);
    from.checked_add(d)
        .or_else(|| from.checked_add(FAR))
        .unwrap_or(from)
}

/// Probes `scenario` with `prober` every interval until `shutdown`, handing each outcome to
/// `record`. Each probe runs in its own task: a probe that panics is logged, counted in
/// [`PROBE_PANICS`] and skipped, and the schedule goes on.
pub async fn probe_loop<F>(
    prober: Prober,
    scenario: Arc<Scenario>,
    record: F,
    shutdown: CancellationToken,
) where
    F: Fn(ProbeOutcome) + Send,
{
    let target = prober.target().clone();
    // The configured interval, or longer when a monthly budget needs it.
    let interval = target.effective_interval();
    let start = instant_after(
        Instant::now(),
        phase(&target.name, &scenario.name, interval),
    );
    let names = (target.name.clone(), scenario.name.clone());
    let probe = move || {
        let (prober, scenario) = (prober.clone(), scenario.clone());
        async move { prober.probe(&scenario).await }
    };
    let after = |outcome: ProbeOutcome| {
        let hold = outcome.observations.retry_after;
        record(outcome);
        hold
    };
    run_loop(&names, start, interval, probe, after, shutdown).await;
}

/// The schedule of [`probe_loop`], over any probe: `probe()` at `start` and every `interval`
/// (skipping missed ticks), each in its own task; `after` takes each result and returns how
/// long the server asked to be left alone (`Retry-After`). `names` is (target, scenario).
async fn run_loop<T, P, Fut>(
    names: &(String, String),
    start: Instant,
    interval: Duration,
    probe: P,
    mut after: impl FnMut(T) -> Option<Duration>,
    shutdown: CancellationToken,
) where
    T: Send + 'static,
    P: Fn() -> Fut,
    Fut: std::future::Future<Output = T> + Send + 'static,
{
    let mut ticker = tokio::time::interval_at(start, interval);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = ticker.tick() => {}
        }
        let task = AbortOnDropHandle::new(tokio::spawn(probe()));
        let result = tokio::select! {
            _ = shutdown.cancelled() => return,
            r = task => r,
        };
        let outcome = match result {
            Ok(outcome) => outcome,
            Err(e) => {
                PROBE_PANICS.inc();
                tracing::error!(
                    target = %names.0, scenario = %names.1, panic = %panic_message(e),
                    "a probe panicked (a bug in llm-probe; please report it); it is not counted, the next probe runs on schedule"
                );
                continue;
            }
        };
        // The server asked to be left alone (429/503 + Retry-After): no probe before then.
        if let Some(wait) = after(outcome) {
            ticker.reset_at(instant_after(Instant::now(), wait));
        }
    }
}

/// What a failed task said, for the log.
pub fn panic_message(e: tokio::task::JoinError) -> String {
    if !e.is_panic() {
        return e.to_string();
    }
    let payload = e.into_panic();
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
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

    #[tokio::test]
    async fn a_panicking_probe_is_counted_and_the_schedule_goes_on() {
        use std::sync::atomic::{AtomicU32, Ordering};
        let calls = Arc::new(AtomicU32::new(0));
        let c = calls.clone();
        let probe = move || {
            let n = c.fetch_add(1, Ordering::SeqCst);
            async move {
                assert!(n != 1, "probe {n} fails on purpose");
                n
            }
        };
        let shutdown = CancellationToken::new();
        let mut seen = Vec::new();
        let stop = shutdown.clone();
        let before = PROBE_PANICS.get();
        let after = |n: u32| {
            seen.push(n);
            if n >= 3 {
                stop.cancel();
            }
            None
        };
        let names = ("t".to_string(), "s".to_string());
        let run = run_loop(
            &names,
            Instant::now(),
            Duration::from_millis(5),
            probe,
            after,
            shutdown,
        );
        tokio::time::timeout(Duration::from_secs(10), run)
            .await
            .expect("the schedule went on after the panic");
        assert_eq!(seen, [0, 2, 3]);
        assert!(PROBE_PANICS.get() > before);
    }

    #[test]
    fn instants_never_overflow() {
        let now = Instant::now();
        assert!(instant_after(now, Duration::MAX) > now + Duration::from_secs(365 * 24 * 3600));
        assert_eq!(
            instant_after(now, Duration::from_secs(1)),
            now + Duration::from_secs(1)
        );
    }
}
