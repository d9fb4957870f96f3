//! Wake-up coalescing: an idle runtime worker waits a moment before it sleeps in the kernel, so
//! that one wake-up serves the reads of several streams.
//!
//! At 1,000 pairs every 10 s the daemon reads about 6,400 token events a second, nearly each in
//! a wake-up of its own: the worker sleeps in `epoll_wait`, one segment arrives, the worker
//! wakes, reads it and sleeps again. On a VM the wake-up costs more than the read. Waiting
//! [`DEFAULT_WAIT`] before sleeping lets the reads that arrive meanwhile be served together
//! (BENCHMARKS.md §15).
//!
//! A late read does not move a mark: the probe's reads carry the kernel's arrival stamps
//! (`probe::arrival`), so the TTFT, ITL and E2E marks are the instants the bytes arrived
//! whenever the read happens. The wait is skipped whenever that is not enough:
//!
//! - while a probe is between `sent` and the write of its request ([`urgent`]): its connect,
//!   TLS handshake and request write are not stamped, so noticing them late would delay the
//!   request and add to its TTFT. A worker already waiting when a probe becomes urgent stops
//!   waiting. The wait for the response is not urgent: its reads are stamped, headers too
//!   (`super::connect::hold_until_written`; on HTTP/2, and on a connection the probe did not
//!   open, the guard is held to the response headers);
//! - while a probe is read without stamps (a target behind an `https://` or SOCKS proxy, or a
//!   platform without them; [`urgent`] for the whole exchange, and [`unstamped_read`] for twice
//!   its interval after);
//! - for twice the target's interval (at least [`HOLD_OFF`]) after a stream whose token events
//!   were mostly (more than half of its gaps) closer than [`FAST_FACTOR`] × the wait
//!   ([`stream_paced`]): segments read together share the later stamp, so a stream that fast
//!   would see its gaps merged. The majority, not any one gap: a stall of the machine merges
//!   a few gaps of any stream, and must not turn the coalescing off for everyone;
//! - until each new pair's first probe has ended (`schedule::probe_loop` holds an [`urgent`]
//!   guard until then, at start and after a reload), so that a fast target is found before its
//!   reads are ever coalesced.
//!
//! The wait also delays the probes' timers (a probe's start, not its marks) by at most the
//! wait; `/metrics` and the status pages are served by a runtime of their own, without it.
//! `--probe.coalesce-reads 0s` turns it off.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The default wait: 2 ms.
pub const DEFAULT_WAIT: Duration = Duration::from_millis(2);

/// Token events closer than this many waits hold the coalescing off.
pub const FAST_FACTOR: u32 = 4;

/// The shortest hold after a fast stream or an unstamped read (targets probed less often hold
/// it off for twice their interval).
pub const HOLD_OFF: Duration = Duration::from_secs(60);

/// The wait in nanoseconds; 0: off.
static WAIT_NS: AtomicU64 = AtomicU64::new(0);
/// Probes that must be noticed at once ([`Urgent`] guards alive).
static URGENT: AtomicUsize = AtomicUsize::new(0);
/// Nanoseconds after [`epoch`] until which the wait is skipped.
static HOLD_UNTIL_NS: AtomicU64 = AtomicU64::new(0);

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

fn now_ns() -> u64 {
    u64::try_from(epoch().elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// Sets the wait for the whole process (`Duration::ZERO`: off, the initial state). Only
/// Linux reads are stamped, so elsewhere it stays off.
pub fn set_wait(wait: Duration) {
    let ns = if cfg!(target_os = "linux") {
        u64::try_from(wait.as_nanos()).unwrap_or(u64::MAX)
    } else {
        0
    };
    epoch();
    WAIT_NS.store(ns, Ordering::Relaxed);
}

/// The wait now in force (`Duration::ZERO`: off).
pub fn wait() -> Duration {
    Duration::from_nanos(WAIT_NS.load(Ordering::Relaxed))
}

/// How long an idle worker should wait before it sleeps now: the wait, or `None` when it is
/// off, a probe is [`urgent`], or the coalescing is held off.
pub fn wait_now() -> Option<Duration> {
    let ns = WAIT_NS.load(Ordering::Relaxed);
    if ns == 0 || URGENT.load(Ordering::Acquire) > 0 {
        return None;
    }
    (now_ns() >= HOLD_UNTIL_NS.load(Ordering::Relaxed)).then(|| Duration::from_nanos(ns))
}

/// Workers waiting in [`on_park`], woken early by [`urgent`].
static WAITING: AtomicUsize = AtomicUsize::new(0);
/// Bumped by [`urgent`]; what a waiting worker waits on (with [`WAKE`]).
static URGENT_CALLS: Mutex<u64> = Mutex::new(0);
static WAKE: Condvar = Condvar::new();

/// The runtime's park hook (`tokio::runtime::Builder::on_thread_park`): waits [`wait_now`]
/// before the worker sleeps, or less if a probe becomes [`urgent`] meanwhile (the worker then
/// goes on to sleep in the kernel's poll at once, where that probe's connect and write are
/// noticed as they happen).
pub fn on_park() {
    let Some(wait) = wait_now() else {
        return;
    };
    let deadline = Instant::now() + wait;
    let calls = URGENT_CALLS.lock().unwrap_or_else(|e| e.into_inner());
    let seen = *calls;
    // SeqCst here and in `urgent` (a store then a load of the other's variable on each side):
    // either that probe sees this worker waiting and wakes it, or this worker sees the probe.
    WAITING.fetch_add(1, Ordering::SeqCst);
    let mut calls = calls;
    while *calls == seen && URGENT.load(Ordering::SeqCst) == 0 {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        calls = WAKE
            .wait_timeout(calls, left)
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
    WAITING.fetch_sub(1, Ordering::AcqRel);
}

/// While alive, idle workers do not wait (see the module's list). Dropping it ends that.
#[derive(Debug)]
#[must_use = "the guard holds the coalescing off only while it is alive"]
pub struct Urgent(());

/// A guard for a probe that must be noticed at once: from `sent` to the write of its request
/// (at the latest its response headers), or a whole unstamped exchange.
pub fn urgent() -> Urgent {
    URGENT.fetch_add(1, Ordering::SeqCst);
    if WAITING.load(Ordering::SeqCst) > 0 {
        *URGENT_CALLS.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        WAKE.notify_all();
    }
    Urgent(())
}

impl Drop for Urgent {
    fn drop(&mut self) {
        URGENT.fetch_sub(1, Ordering::AcqRel);
    }
}

/// How long before a scheduled probe's start the waiting stops ([`starting`]): longer than a
/// batch of reads takes to serve, so that the probe's connect and request write do not queue
/// behind one.
pub const LEAD: Duration = Duration::from_millis(1);

/// Sleeps until a probe's `start`; with the coalescing on, takes an [`urgent`] guard [`LEAD`]
/// before it, for [`starting`] (dropped with this future if it is cancelled).
pub async fn sleep_until_start(start: tokio::time::Instant) -> Option<Urgent> {
    let early = if WAIT_NS.load(Ordering::Relaxed) != 0 {
        tokio::time::sleep_until(start.checked_sub(LEAD).unwrap_or(start)).await;
        Some(urgent())
    } else {
        None
    };
    tokio::time::sleep_until(start).await;
    early
}

/// An [`urgent`] guard when the coalescing is on, else `None`.
pub fn urgent_if_on() -> Option<Urgent> {
    (WAIT_NS.load(Ordering::Relaxed) != 0).then(urgent)
}

tokio::task_local! {
    /// The guard a scheduled probe's task holds until its exchange takes its own ([`claim`]).
    static EARLY: std::cell::Cell<Option<Urgent>>;
}

/// Runs `probe` holding `early` (taken [`LEAD`] before the probe's start) until the probe's
/// exchange holds its own guard ([`claim`]) or `probe` ends: so that from before the start to
/// the response headers no worker waits, and no batch of reads has gathered when the request
/// goes out.
///
/// Not an `async fn`: one would keep `probe` twice in its state, as its argument and inside
/// the scope it awaits (a probe's future is several KiB, and hundreds are in flight).
pub fn starting<F: std::future::Future>(
    early: Option<Urgent>,
    probe: F,
) -> impl std::future::Future<Output = F::Output> {
    EARLY.scope(std::cell::Cell::new(early), probe)
}

/// Drops the guard [`starting`] handed to the current task, if any (a probe's exchange calls
/// it once it holds its own).
pub fn claim() {
    let _ = EARLY.try_with(|early| drop(early.take()));
}

/// Holds the coalescing off for `hold` from now (longer holds already in force stay); true if
/// it was not held off before (for a log line at the change).
fn hold_for(hold: Duration) -> bool {
    let now = now_ns();
    let until = now.saturating_add(u64::try_from(hold.as_nanos()).unwrap_or(u64::MAX));
    HOLD_UNTIL_NS.fetch_max(until, Ordering::Relaxed) <= now
}

/// A stream of a target probed every `interval` ended, its token events marked at `marks` (in
/// order): if more than half of its gaps are closer than [`FAST_FACTOR`] × the wait, holds the
/// coalescing off for twice `interval` or [`HOLD_OFF`], whichever is longer (so that a fast
/// target keeps it off for as long as it is probed). Fewer than two marks say nothing.
/// Returns true if this turned the coalescing off (it was on).
pub fn stream_paced(marks: impl IntoIterator<Item = Instant>, interval: Duration) -> bool {
    let ns = WAIT_NS.load(Ordering::Relaxed);
    if ns == 0 {
        return false;
    }
    let fast_below = Duration::from_nanos(ns.saturating_mul(u64::from(FAST_FACTOR)));
    let (mut gaps, mut fast) = (0usize, 0usize);
    let mut marks = marks.into_iter();
    let Some(mut previous) = marks.next() else {
        return false;
    };
    for at in marks {
        gaps += 1;
        fast += usize::from(at.saturating_duration_since(previous) < fast_below);
        previous = at;
    }
    fast * 2 > gaps && hold_for(interval.saturating_mul(2).max(HOLD_OFF))
}

/// A token read of a target probed every `interval` had no kernel stamp: holds the
/// coalescing off for twice `interval` or [`HOLD_OFF`], whichever is longer. Returns true if
/// this turned the coalescing off (it was on).
pub fn unstamped_read(interval: Duration) -> bool {
    WAIT_NS.load(Ordering::Relaxed) != 0 && hold_for(interval.saturating_mul(2).max(HOLD_OFF))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The process-wide state is shared by the tests of this binary: one test walks through it
    /// all, and leaves it off.
    #[test]
    fn the_wait_is_skipped_while_urgent_after_a_fast_stream_and_when_off() {
        set_wait(Duration::ZERO);
        assert_eq!(wait_now(), None, "off by default");
        assert!(!stream_paced([Instant::now(), Instant::now()], HOLD_OFF));
        assert_eq!(
            HOLD_UNTIL_NS.load(Ordering::Relaxed),
            0,
            "off: nothing held"
        );

        set_wait(Duration::from_millis(2));
        if !cfg!(target_os = "linux") {
            assert_eq!(wait_now(), None);
            return;
        }
        assert_eq!(wait_now(), Some(Duration::from_millis(2)));
        {
            let _a = urgent();
            let b = urgent();
            assert_eq!(wait_now(), None, "a probe is sending");
            drop(b);
            assert_eq!(wait_now(), None, "one is still sending");
        }
        assert_eq!(wait_now(), Some(Duration::from_millis(2)), "guards dropped");

        // 4 × 2 ms = 8 ms: gaps of 8 ms are slow enough, 7.9 ms are not; a stall that merged
        // two of four gaps (half, not more) says nothing.
        let t0 = Instant::now();
        let marks = |gaps_us: &[u64]| {
            let mut at = t0;
            let mut v = vec![at];
            for g in gaps_us {
                at += Duration::from_micros(*g);
                v.push(at);
            }
            v
        };
        assert!(!stream_paced(marks(&[8_000, 8_000, 8_000]), HOLD_OFF));
        assert!(!stream_paced(marks(&[0, 0, 40_000, 20_000]), HOLD_OFF));
        assert!(!stream_paced(marks(&[]), HOLD_OFF));
        assert!(!stream_paced([], HOLD_OFF));
        assert_eq!(wait_now(), Some(Duration::from_millis(2)));
        let held_for = |hold: Duration| {
            let until = HOLD_UNTIL_NS.load(Ordering::Relaxed);
            let expected = now_ns() + hold.as_nanos() as u64;
            until <= expected && until + 1_000_000_000 > expected
        };
        assert!(stream_paced(marks(&[7_900, 7_900, 20_000]), Duration::ZERO));
        assert_eq!(wait_now(), None, "a fast stream holds it off");
        assert!(held_for(HOLD_OFF), "for at least HOLD_OFF");
        assert!(
            !stream_paced(marks(&[0, 0]), Duration::ZERO),
            "already held off"
        );
        // A target probed every 10 minutes holds it off for 20.
        assert!(!stream_paced(marks(&[0, 0]), Duration::from_secs(600)));
        assert!(held_for(Duration::from_secs(1200)), "twice the interval");

        HOLD_UNTIL_NS.store(0, Ordering::Relaxed);
        assert!(unstamped_read(Duration::ZERO));
        assert_eq!(wait_now(), None, "an unstamped read holds it off");
        assert!(held_for(HOLD_OFF));
        HOLD_UNTIL_NS.store(0, Ordering::Relaxed);
        assert!(hold_for(Duration::from_secs(5)));
        assert!(held_for(Duration::from_secs(5)), "a new pair's first probe");
        assert!(
            !hold_for(Duration::from_secs(1)),
            "a shorter hold leaves the longer one"
        );
        assert!(held_for(Duration::from_secs(5)));

        HOLD_UNTIL_NS.store(0, Ordering::Relaxed);
        set_wait(Duration::ZERO);
        assert_eq!(wait_now(), None);
    }
}
