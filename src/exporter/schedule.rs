//! One task per (target, scenario): the first probe soon after start, then every `interval` at
//! the pair's deterministic [`Slot`] (targets don't all fire together, and the scenarios of one
//! target are spread evenly across the interval); a probe never overlaps its
//! predecessor (a late probe skips ticks instead of bunching up); a target's engine metrics are
//! read in the idle time before each probe's start and end by it, so a slow engine never
//! delays a probe or the cadence; a `Retry-After` from the
//! server holds the next probe back until it has passed; cancellation drops an in-flight probe
//! without observing it; a probe that panics is logged and counted, and the schedule goes on.

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;
use xxhash_rust::xxh3::xxh3_64;

use crate::clock::instant_after;
use crate::config::Scenario;
use crate::measure::ProbeOutcome;
use crate::probe::{coalesce, Prober};

/// Longest start-up phase: the first probe of every pair happens within this (or within the
/// interval, if shorter) of start.
pub const MAX_PHASE: Duration = Duration::from_secs(10);

/// When one (target, scenario) pair probes, as offsets from the moment its schedule starts.
///
/// The pairs of one target are spread evenly: the `k` scenarios of a target sit `1/k` of the
/// cycle apart, so a target sees one probe every `interval / k` and never `k` at once (probes
/// queueing against each other on the server would inflate each other's TTFT). Where the cycle
/// starts is a well-mixed hash (XXH3) of the target's name and its scenarios' names, so
/// different targets don't all fire together and names that differ in one byte land far apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    /// The first probe, within `min(interval, MAX_PHASE)` of start (the same fraction of that
    /// window as `steady` is of the interval): a new pair is measured soon.
    pub first: Duration,
    /// The steady-state offset within the interval, in `[0, interval)`: from the second probe
    /// on, the pair probes at `start + steady + n × interval` (n ≥ 1).
    pub steady: Duration,
}

/// The deterministic [`Slot`] of `scenarios[index]` of `target` (`scenarios`: the target's
/// scenario names in config order), probed every `interval`. The same inputs always give the
/// same slot; an `index` beyond the list is taken modulo its length (an empty list as one
/// scenario).
pub fn slot(target: &str, scenarios: &[&str], index: usize, interval: Duration) -> Slot {
    let count = scenarios.len().max(1);
    let mut key = Vec::with_capacity(64);
    key.extend_from_slice(target.as_bytes());
    for name in scenarios {
        key.push(0);
        key.extend_from_slice(name.as_bytes());
    }
    let base = (xxh3_64(&key) >> 11) as f64 / (1u64 << 53) as f64;
    let frac = (base + (index % count) as f64 / count as f64).fract();
    Slot {
        first: interval.min(MAX_PHASE).mul_f64(frac),
        steady: interval.mul_f64(frac),
    }
}

/// Probes that panicked since the process started (a bug in llm-probe: the probe is logged at
/// error and dropped, and the schedule goes on); exported as `llm_probe_probe_panics_total`.
pub static PROBE_PANICS: LazyLock<Counter> = LazyLock::new(Counter::default);

/// Probes `scenario` with `prober` every interval until `shutdown`, handing each outcome to
/// `record`. Each probe runs in its own task: a probe that panics is logged, counted in
/// [`PROBE_PANICS`] and skipped, and the schedule goes on. A target's engine metrics
/// ([`Prober::read_engine`]) are read before each start, within the read's budget and ending
/// by the start ([`Prober::engine_read_lead`]).
///
/// A plain function that returns the schedule's future, so that the future holds only what
/// the loop uses (the set-up's temporaries and the moved-from arguments of an `async fn` would
/// stay in it for the pair's whole life: one per pair, 2,000 at a time in a fleet).
pub fn probe_loop<F>(
    prober: Prober,
    scenario: Arc<Scenario>,
    record: F,
    shutdown: CancellationToken,
) -> impl std::future::Future<Output = ()> + Send
where
    F: Fn(ProbeOutcome) + Send,
{
    let target = prober.target();
    // The configured interval, or longer when a monthly budget needs it.
    let interval = target.effective_interval();
    let (first, then) = {
        let names: Vec<&str> = target.scenarios.iter().map(|s| s.name.as_str()).collect();
        let index = names.iter().position(|n| *n == scenario.name).unwrap_or(0);
        // The replicas of a target are spread like targets: each its own phase.
        let key = match prober.replica() {
            Some(r) => format!("{}\u{0}{}", target.name, r.label),
            None => target.name.clone(),
        };
        let slot = slot(&key, &names, index, interval);
        let now = Instant::now();
        (
            instant_after(now, slot.first),
            instant_after(now, slot.steady.saturating_add(interval)),
        )
    };
    let names = Names {
        target: Arc::clone(target),
        scenario: Arc::clone(&scenario),
    };
    // The engine's metrics are read in the idle time before each start, so that a slow
    // engine never delays the probe or the schedule (the read fails as `timeout` at the start).
    let ahead = Ahead {
        lead: prober.engine_read_lead(),
        read: {
            let prober = prober.clone();
            move |until| {
                let prober = prober.clone();
                async move { prober.read_engine(until).await }
            }
        },
    };
    let probe = move |load: Option<Option<crate::engine::EngineScrape>>| {
        let (prober, scenario) = (prober.clone(), scenario.clone());
        async move { prober.probe_with_load(&scenario, load.flatten()).await }
    };
    // Until this new pair's first probe has ended, no wake-up coalescing: a fast stream is
    // found at full resolution before its reads could ever be merged (`coalesce`).
    let mut first_pending = coalesce::urgent_if_on();
    let after = move |outcome: ProbeOutcome| {
        first_pending.take();
        let hold = outcome.observations.retry_after;
        record(outcome);
        hold
    };
    run_loop(
        names,
        (first, then),
        interval,
        ahead,
        probe,
        after,
        shutdown,
    )
}

/// The (target, scenario) a schedule names in its log lines: the shared config values, not
/// copies of their names.
struct Names {
    target: Arc<crate::config::Target>,
    scenario: Arc<Scenario>,
}

/// What runs before a probe's start: `read(until)` begun `lead` before it (or when the previous
/// probe ended, if later) and ending by `until`, the start ([`probe_loop`]: the engine's
/// metrics). A zero `lead` reads nothing.
struct Ahead<R> {
    lead: Duration,
    read: R,
}

/// The schedule of [`probe_loop`], over any probe: `probe(read)` at `first`, then at `then` and
/// every `interval` after it (skipping missed ticks), each in its own task, with what
/// `ahead.read` gave before that start (`None`: nothing read, or the read panicked); `after`
/// takes each result and returns how long the server asked to be left alone (`Retry-After`).
/// The read runs in the idle time before the start and never delays it. `names` is (target,
/// scenario).
// An `async fn` would keep its arguments twice (see the body).
#[allow(clippy::manual_async_fn)]
fn run_loop<T, S, R, RFut, P, Fut>(
    names: Names,
    (first, then): (Instant, Instant),
    interval: Duration,
    ahead: Ahead<R>,
    probe: P,
    mut after: impl FnMut(T) -> Option<Duration>,
    shutdown: CancellationToken,
) -> impl std::future::Future<Output = ()>
where
    T: Send + 'static,
    S: Send + 'static,
    R: Fn(Instant) -> RFut,
    RFut: std::future::Future<Output = S> + Send + 'static,
    P: Fn(Option<S>) -> Fut,
    Fut: std::future::Future<Output = T> + Send + 'static,
{
    // An `async` block, not an `async fn`: it keeps each argument once (an `async fn` moves
    // its arguments into locals and may keep both).
    async move {
        // The config refuses a zero interval. Given one anyway, the schedule stops (a panic its
        // task reports on `/-/healthy` as "probe schedule stopped"), as tokio's `interval` did
        // before, rather than probing in a tight loop.
        assert!(
            !interval.is_zero(),
            "a probe interval of zero (the config refuses one)"
        );
        // The first probe at `first`, then on the steady grid `then + k × interval`: the first
        // slot of it after the previous probe ended (a slot missed while a probe ran is skipped).
        // The first probe leaves its read the whole lead (a new pair's first slot may be sooner).
        let mut start = first.max(instant_after(Instant::now(), ahead.lead));
        loop {
            // The read ahead of the start: from `lead` before it (not before the previous probe
            // ended: this runs after it), bounded by the start itself.
            let mut read = None;
            if !ahead.lead.is_zero() {
                let from = start.checked_sub(ahead.lead).unwrap_or(start);
                let reading = async {
                    tokio::time::sleep_until(from).await;
                    let task = AbortOnDropHandle::new(tokio::spawn((ahead.read)(start)));
                    // Ending by the start whatever the read does (it bounds itself too).
                    tokio::time::timeout_at(start, task).await
                };
                read = tokio::select! {
                    _ = shutdown.cancelled() => return,
                    r = reading => r.ok().and_then(Result::ok),
                };
            }
            // With wake-up coalescing on, idle workers stop waiting a moment before the start
            // (`coalesce::starting`).
            let early = tokio::select! {
                _ = shutdown.cancelled() => return,
                early = coalesce::sleep_until_start(start) => early,
            };
            let task = AbortOnDropHandle::new(tokio::spawn(coalesce::starting(early, probe(read))));
            let result = tokio::select! {
                _ = shutdown.cancelled() => return,
                r = task => r,
            };
            // Strictly after this start, even for a probe that took no time.
            let mut not_before = Instant::now().max(start + Duration::from_nanos(1));
            start = next_slot(then, interval, not_before);
            let outcome = match result {
                Ok(outcome) => outcome,
                Err(e) => {
                    PROBE_PANICS.inc();
                    tracing::error!(
                        target = %names.target.name, scenario = %names.scenario.name, panic = %panic_message(e),
                        "a probe panicked (a bug in llm-probe; please report it); it is not counted, the next probe runs on schedule"
                    );
                    continue;
                }
            };
            // The server asked to be left alone (429/503 + Retry-After): no probe before then.
            if let Some(wait) = after(outcome) {
                // The first of the pair's own slots once the wait has passed, so that the pairs of
                // a target stay spread across the interval.
                not_before = not_before.max(instant_after(Instant::now(), wait));
                start = next_slot(then, interval, not_before);
            }
        }
    }
}

/// The first instant `anchor + n × interval` (n ≥ 0) at or after `not_before`; `not_before`
/// itself when `interval` is zero or the slot would overflow.
fn next_slot(anchor: Instant, interval: Duration, not_before: Instant) -> Instant {
    if anchor >= not_before || interval.is_zero() {
        return anchor.max(not_before);
    }
    let late = (not_before - anchor).as_nanos();
    let n = late.div_ceil(interval.as_nanos());
    u32::try_from(n)
        .ok()
        .and_then(|n| interval.checked_mul(n))
        .and_then(|d| anchor.checked_add(d))
        .unwrap_or(not_before)
}

/// What a failed task said, for the log.
pub fn panic_message(e: tokio::task::JoinError) -> String {
    match e.try_into_panic() {
        Ok(payload) => panic_text(payload.as_ref()),
        Err(e) => e.to_string(),
    }
}

/// The message of a panic's payload (a `&str` or a `String`; anything else is unnamed): its
/// first line, at most 300 characters, control characters escaped.
pub fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    let text = (payload.downcast_ref::<&str>().copied())
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a panic without a message");
    let line: String = text
        .lines()
        .next()
        .unwrap_or_default()
        .chars()
        .take(300)
        .collect();
    crate::sanitize::terminal_safe(&line).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_deterministic_bounded_and_spread_across_targets() {
        let i = Duration::from_secs(15);
        assert_eq!(slot("a", &["chat"], 0, i), slot("a", &["chat"], 0, i));
        let slots: Vec<_> = (0..50)
            .map(|n| slot(&format!("target-{n}"), &["chat"], 0, i))
            .collect();
        assert!(slots.iter().all(|s| s.first < MAX_PHASE && s.steady < i));
        let distinct: std::collections::HashSet<_> =
            slots.iter().map(|s| s.first.as_millis()).collect();
        assert!(distinct.len() > 40, "slots should spread: {distinct:?}");
        let short = slot("x", &["y"], 0, Duration::from_secs(2));
        assert!(short.first < Duration::from_secs(2));
        assert_eq!(
            short.first, short.steady,
            "interval under MAX_PHASE: one slot"
        );
        // An index out of range wraps, an empty list is one scenario: no panic.
        assert_eq!(slot("t", &["a", "b"], 3, i), slot("t", &["a", "b"], 1, i));
        assert!(slot("t", &[], 5, i).steady < i);
        // The separator matters: ("ab", "c") and ("a", "bc") differ.
        assert_ne!(slot("ab", &["c"], 0, i), slot("a", &["bc"], 0, i));
    }

    /// The (target, scenario) of a schedule under test: `t` and `s`.
    fn names() -> Names {
        let yaml = "scenarios: [{name: s, messages: [{role: user, content: hi}], max_tokens: 1}]\ntargets: [{name: t, protocol: openai-chat, base_url: 'http://127.0.0.1:9/v1', model: m}]\n";
        let cfg = crate::config::parse(yaml, "t.yaml", &|_| None).unwrap_or_else(|e| panic!("{e}"));
        let target = Arc::clone(&cfg.targets[0]);
        Names {
            scenario: Arc::clone(&target.scenarios[0]),
            target,
        }
    }

    /// A pair's schedule is one task per pair for the daemon's whole life (2,000 of them in a
    /// fleet of 250 pools of 8): its future keeps one prober in each of its two closures, its
    /// timers and its outcome handler, and nothing of its set-up. It was 1,448 bytes when
    /// `probe_loop` and `run_loop` were `async fn`s (712 as they are now).
    #[tokio::test]
    async fn a_pair_s_schedule_keeps_a_small_state() {
        let names = names();
        let prober = Prober::new(Arc::clone(&names.target)).unwrap();
        // As the daemon's outcome handler: five shared handles.
        let shared = [(); 5].map(|()| Arc::new(0u8));
        let record = move |o: ProbeOutcome| drop((&shared, o));
        let schedule = probe_loop(prober, names.scenario, record, CancellationToken::new());
        let bytes = std::mem::size_of_val(&schedule);
        assert!(bytes <= 800, "a pair's schedule is {bytes} bytes");
    }

    /// Distance on the circle of one interval.
    fn apart(a: Duration, b: Duration, interval: Duration) -> Duration {
        let d = a.abs_diff(b);
        d.min(interval - d)
    }

    #[test]
    fn scenarios_of_one_target_differing_in_one_byte_are_spread_evenly() {
        // Names differing in a last byte got phases microseconds apart under FNV-1a's top
        // bits; slots now come from the scenario's position, so the hash of its name is moot.
        for secs in [15, 60, 300] {
            let interval = Duration::from_secs(secs);
            let window = interval.min(MAX_PHASE);
            for target in ["chat-1", "chat-2", "a", "b"] {
                let names: Vec<String> = (0..10).map(|n| format!("chat-{n}")).collect();
                let names: Vec<&str> = names.iter().map(String::as_str).collect();
                let slots: Vec<Slot> = (0..10).map(|n| slot(target, &names, n, interval)).collect();
                for (x, a) in slots.iter().enumerate() {
                    for b in &slots[x + 1..] {
                        assert!(
                            apart(a.steady, b.steady, interval) >= interval / 20,
                            "{target} every {secs} s: steady slots {a:?} and {b:?} too close"
                        );
                        assert!(
                            apart(a.first, b.first, window) >= window / 20,
                            "{target} every {secs} s: first probes {a:?} and {b:?} too close"
                        );
                    }
                }
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_first_probe_comes_early_then_the_steady_slot_holds() {
        let t0 = Instant::now();
        let interval = Duration::from_secs(60);
        let (first, then) = (t0 + Duration::from_secs(3), t0 + Duration::from_secs(78));
        let shutdown = CancellationToken::new();
        let stop = shutdown.clone();
        let mut at = Vec::new();
        let after = |()| {
            at.push(Instant::now() - t0);
            if at.len() == 4 {
                stop.cancel();
            }
            None
        };
        let names = names();
        run_loop(
            names,
            (first, then),
            interval,
            nothing_ahead(),
            |_| async {},
            after,
            shutdown,
        )
        .await;
        let secs: Vec<u64> = at.iter().map(Duration::as_secs).collect();
        assert_eq!(secs, [3, 78, 138, 198]);
    }

    #[tokio::test(start_paused = true)]
    async fn retry_after_holds_until_the_next_own_slot() {
        let t0 = Instant::now();
        let interval = Duration::from_secs(10);
        let shutdown = CancellationToken::new();
        let stop = shutdown.clone();
        let mut at = Vec::new();
        let after = |()| {
            at.push(Instant::now() - t0);
            if at.len() == 3 {
                stop.cancel();
            }
            // The first probe is told to wait 25 s: no probe at 12 or 22, the next at 32.
            (at.len() == 1).then_some(Duration::from_secs(25))
        };
        let names = names();
        let start = t0 + Duration::from_secs(2);
        run_loop(
            names,
            (start, start + interval),
            interval,
            nothing_ahead(),
            |_| async {},
            after,
            shutdown,
        )
        .await;
        let secs: Vec<u64> = at.iter().map(Duration::as_secs).collect();
        assert_eq!(secs, [2, 32, 42]);
    }

    /// No read ahead of the probes.
    fn nothing_ahead() -> Ahead<fn(Instant) -> std::future::Ready<()>> {
        Ahead {
            lead: Duration::ZERO,
            read: |_| std::future::ready(()),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_engine_read_does_not_delay_the_schedule() {
        let t0 = Instant::now();
        let interval = Duration::from_secs(1);
        let shutdown = CancellationToken::new();
        let stop = shutdown.clone();
        let ends = std::sync::Mutex::new(Vec::new());
        let reads = Arc::new(std::sync::Mutex::new(Vec::new()));
        let after = |got: Option<Duration>| {
            let mut ends = ends.lock().unwrap();
            ends.push((Instant::now() - t0, got));
            if ends.len() == 4 {
                stop.cancel();
            }
            None
        };
        let names = names();
        let start = t0 + Duration::from_secs(1);
        // A slow engine: its read takes its whole 1 s budget (the target's timeout ≈ the
        // interval), cut at the probe's start; the probe's request takes 100 ms.
        let seen = reads.clone();
        let ahead = Ahead {
            lead: Duration::from_secs(1),
            read: move |until: Instant| {
                seen.lock().unwrap().push(Instant::now() - t0);
                async move {
                    tokio::time::sleep(Duration::from_secs(5)).await;
                    until - t0
                }
            },
        };
        let probe = |read: Option<Duration>| async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            read
        };
        run_loop(
            names,
            (start, start + interval),
            interval,
            ahead,
            probe,
            after,
            shutdown,
        )
        .await;
        let ms = |d: &Duration| d.as_millis();
        let ends = ends.into_inner().unwrap();
        assert_eq!(
            ends.iter().map(|(e, _)| ms(e)).collect::<Vec<_>>(),
            [1100, 2100, 3100, 4100],
            "a probe every interval, on time"
        );
        assert!(
            ends.iter().all(|(_, got)| got.is_none()),
            "a read cut at the start gives nothing: {ends:?}"
        );
        // Each read began after the previous probe ended, at most 1 s before its start.
        assert_eq!(
            reads
                .lock()
                .unwrap()
                .iter()
                .take(4)
                .map(ms)
                .collect::<Vec<_>>(),
            [0, 1100, 2100, 3100]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_quick_engine_read_reaches_its_probe() {
        let t0 = Instant::now();
        let interval = Duration::from_secs(10);
        let shutdown = CancellationToken::new();
        let stop = shutdown.clone();
        let mut got = Vec::new();
        let after = |r: (Duration, Option<Duration>)| {
            got.push(r);
            if got.len() == 2 {
                stop.cancel();
            }
            None
        };
        let names = names();
        let start = t0 + Duration::from_secs(3);
        let ahead = Ahead {
            lead: Duration::from_secs(2),
            read: move |_until: Instant| async move {
                tokio::time::sleep(Duration::from_millis(50)).await;
                Instant::now() - t0
            },
        };
        let probe = |read: Option<Duration>| async move { (Instant::now() - t0, read) };
        run_loop(
            names,
            (start, start + interval),
            interval,
            ahead,
            probe,
            after,
            shutdown,
        )
        .await;
        let ms = |d: Duration| d.as_millis();
        let got: Vec<_> = got.iter().map(|(a, r)| (ms(*a), r.map(ms))).collect();
        // Read from 2 s before the start (1.05 s, 11.05 s); the probe on its slot with it.
        assert_eq!(got, [(3000, Some(1050)), (13000, Some(11050))]);
    }

    #[test]
    fn next_slot_keeps_the_grid() {
        let t0 = Instant::now();
        let s = Duration::from_secs(1);
        assert_eq!(next_slot(t0, s, t0), t0);
        assert_eq!(next_slot(t0 + s, s, t0), t0 + s);
        assert_eq!(next_slot(t0, s, t0 + s / 2), t0 + s);
        assert_eq!(next_slot(t0, s, t0 + s * 7), t0 + s * 7);
        assert_eq!(next_slot(t0, s, t0 + s * 7 + s / 10), t0 + s * 8);
        assert_eq!(next_slot(t0, Duration::ZERO, t0 + s), t0 + s);
        let far = instant_after(t0, Duration::MAX);
        assert!(next_slot(t0, Duration::from_nanos(1), far) >= far);
    }

    #[tokio::test]
    async fn a_panicking_probe_is_counted_and_the_schedule_goes_on() {
        use std::sync::atomic::{AtomicU32, Ordering};
        let calls = Arc::new(AtomicU32::new(0));
        let c = calls.clone();
        let probe = move |_: Option<()>| {
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
        let names = names();
        let now = Instant::now();
        let run = run_loop(
            names,
            (now, now + Duration::from_millis(5)),
            Duration::from_millis(5),
            nothing_ahead(),
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
}
