//! Hostile streams against the per-probe caps, in the fidelity tier so that no other test's load
//! or memory is in their readings: an endless stream and a single 100 MB
//! line end as `too_large` with bounded memory.

use crate::common;

use llm_probe::measure::FailureReason;
use llm_probe::simulate::Fault;

/// The two tests read this process's memory: one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endless_stream_hits_the_cap_with_bounded_memory() {
    let _serial = SERIAL.lock().await;
    let before = common::rss_kib();
    let (o, _sim) = common::OneProbe::default()
        .timeout("5s")
        .of(common::faulty(Fault::Endless))
        .await;
    assert_eq!(
        o.failure_reason(),
        Some(FailureReason::TooLarge),
        "{:?}",
        o.result
    );
    let limits = llm_probe::probe::Limits::default();
    let events = o.observations.timeline.token_events.len();
    assert!(
        o.observations.bytes <= limits.max_stream_bytes + 64 * 1024
            || events <= limits.max_token_events + 1000
    );
    let grown = common::rss_kib().saturating_sub(before);
    assert!(
        grown < 64 * 1024,
        "memory grew by {grown} KiB on an endless stream"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_100_mb_line_is_too_large_without_buffering_it() {
    let _serial = SERIAL.lock().await;
    let before = common::rss_kib();
    let (o, _sim) = common::OneProbe::default()
        .timeout("5s")
        .of(common::faulty(Fault::HugeLine))
        .await;
    assert_eq!(
        o.failure_reason(),
        Some(FailureReason::TooLarge),
        "{:?}",
        o.result
    );
    assert!(
        o.observations.bytes < 8 << 20,
        "stopped reading early: {} bytes",
        o.observations.bytes
    );
    let grown = common::rss_kib().saturating_sub(before);
    assert!(
        grown < 32 * 1024,
        "memory grew by {grown} KiB on a 100 MB line"
    );
}
