//! Gives the allocator's free memory back to the kernel every 15 s (glibc only).
//!
//! glibc keeps memory a program freed inside its heap, resident, for the next allocation. The
//! daemon frees memory in waves: each status-page ring is reallocated as it grows (4, 8, 16,
//! 32, 64, then 120 records), and at 1,000 pairs the last growth alone frees 4 MiB of 64-record
//! rings within one interval; each scrape frees its rendered body. Those freed pages stay in
//! the RSS. `malloc_trim(0)` hands every whole free page back (`madvise(MADV_DONTNEED)`, all
//! arenas).
//!
//! Measured on the shipped daemon at 1,000 pairs every 10 s, the history full
//! (BENCHMARKS.md §20–§22): 55.8–57.1 MiB without a trim (peak 61.3 MiB), 51.8–55.5 MiB
//! trimming once a minute (a sample just before a trim carried up to a minute of freed
//! memory), and anonymous memory 39.0–40.7 MiB trimming every 15 s against 39.1–42.9 MiB
//! once a minute. A trim takes 0.3–1.2 ms at that scale (§16, §19), on a blocking thread;
//! while it holds an arena's lock, an allocation of a worker using that arena waits, so a
//! probe starting at that instant can start up to a millisecond late (its arrival marks are
//! the kernel's and do not move). Every 15 s that is about one probe start in 15,000.
//!
//! With another C library nothing is done.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// How often [`run`] trims in the daemon.
pub const TRIM_EVERY: Duration = Duration::from_secs(15);

/// Hands the allocator's whole free pages back to the kernel (glibc's `malloc_trim(0)`) and
/// returns whether any memory was released. Always `false` without glibc.
pub fn return_free_memory_to_os() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only gives memory the allocator holds free back to the kernel; it
    // touches no live allocation.
    unsafe {
        libc::malloc_trim(0) == 1
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    false
}

/// Trims every `every` (the first one `every` after the start) on a blocking thread, until
/// `shutdown` is cancelled.
pub async fn run(every: Duration, shutdown: CancellationToken) {
    run_every(every, shutdown, || {
        tokio::task::spawn_blocking(return_free_memory_to_os);
    })
    .await;
}

/// Calls `trim` every `every` (the first call `every` after the start; a late tick is not
/// caught up) until `shutdown` is cancelled.
async fn run_every(every: Duration, shutdown: CancellationToken, trim: impl Fn()) {
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = ticks.tick() => trim(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[tokio::test(start_paused = true)]
    async fn trims_once_per_period_and_stops_on_shutdown() {
        let calls = Arc::new(AtomicUsize::new(0));
        let shutdown = CancellationToken::new();
        let c = calls.clone();
        let task = tokio::spawn(run_every(
            Duration::from_secs(60),
            shutdown.clone(),
            move || {
                c.fetch_add(1, Ordering::SeqCst);
            },
        ));
        tokio::time::sleep(Duration::from_secs(59)).await;
        assert_eq!(calls.load(Ordering::SeqCst), 0, "not at the start");
        tokio::time::sleep(Duration::from_secs(151)).await;
        assert_eq!(calls.load(Ordering::SeqCst), 3, "at 60, 120 and 180 s");
        shutdown.cancel();
        task.await.unwrap();
        tokio::time::sleep(Duration::from_secs(600)).await;
        assert_eq!(calls.load(Ordering::SeqCst), 3, "none after the shutdown");
    }
}
