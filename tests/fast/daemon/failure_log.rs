//! The failure log against a dead endpoint behind 20 pairs probed every second for 10 minutes,
//! at its real timing (reminders every 5 minutes, changes batched for 10 s) on tokio's paused
//! clock: 12,000 failed probes write fewer than 20 lines, the first failures grouped into one
//! line naming how many pairs, and reminders carry the count. The daemon's wiring of the log is
//! checked through the binary's own log (`terminal`).

use crate::common;

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use llm_probe::failure_log::{FailureLog, Timing};
use llm_probe::measure::{Failure, FailureReason, Observations, ProbeOutcome};
use tokio_util::sync::CancellationToken;

#[derive(Clone, Default)]
struct Buffer(Arc<Mutex<Vec<u8>>>);

impl Write for Buffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// What is logged at info and above on this thread while the guard lives.
fn capture_log() -> (Buffer, tracing::subscriber::DefaultGuard) {
    let log = Buffer::default();
    let writer = log.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::INFO)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    (log, tracing::subscriber::set_default(subscriber))
}

/// A probe of (`target`, `scenario`) that could not connect.
fn refused(target: &str, scenario: &str) -> ProbeOutcome {
    ProbeOutcome::conclude(
        target.into(),
        scenario.into(),
        "m".into(),
        SystemTime::now(),
        Observations::new(Instant::now()),
        Some(Failure::new(
            FailureReason::Connect,
            "connection refused (os error 111)",
        )),
    )
}

#[tokio::test(start_paused = true)]
async fn a_dead_endpoint_behind_twenty_pairs_logs_a_few_lines() {
    // This thread only: the paused runtime runs the log's task here too.
    let (log, _guard) = capture_log();
    let timing = Timing::default();
    assert_eq!(
        (timing.repeat, timing.batch),
        (Duration::from_secs(300), Duration::from_secs(10))
    );
    let failure_log = Arc::new(FailureLog::new(timing));
    let shutdown = CancellationToken::new();
    let writer_task = tokio::spawn(failure_log.clone().run(shutdown.clone()));
    let pairs: Vec<(String, String)> = (0..4)
        .flat_map(|t| (0..5).map(move |s| (format!("t{t}"), format!("s{s}"))))
        .collect();
    let start = tokio::time::Instant::now();
    for _ in 0..600 {
        for (t, s) in &pairs {
            failure_log.record(&refused(t, s));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    assert_eq!(
        start.elapsed(),
        Duration::from_secs(600),
        "the paused clock"
    );
    shutdown.cancel();
    writer_task.await.unwrap();

    let text = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    // 12,000 failed probes (the old log wrote one line each) and a handful of lines: the first
    // pair at once, the other 19 grouped, a reminder each 5 minutes.
    assert!(
        (3..20).contains(&lines.len()),
        "{} lines for 12,000 failed probes:\n{text}",
        lines.len()
    );
    let connect = text.contains("reason=\"connect\"") || text.contains("reason=connect");
    assert!(text.contains("probe failed") && connect, "{text}");
    let grouped = lines
        .iter()
        .any(|l| l.contains("probe failed") && l.contains("pairs=19"));
    assert!(grouped, "the pairs' first failures are grouped:\n{text}");
    assert!(
        text.contains("probes still failing"),
        "a reminder with the count:\n{text}"
    );
}

#[tokio::test(start_paused = true)]
async fn one_failing_replica_among_healthy_ones_is_one_failure_not_a_flapping_pair() {
    // This thread only: the paused runtime runs the log's task here too.
    let (log, _guard) = capture_log();
    let failure_log = Arc::new(FailureLog::new(Timing::default()));
    let shutdown = CancellationToken::new();
    let writer_task = tokio::spawn(failure_log.clone().run(shutdown.clone()));
    let replica = |mut o: ProbeOutcome, r: &str| {
        o.target = "pool".into();
        o.scenario = "chat".into();
        o.replica = r.into();
        o
    };
    for _ in 0..120 {
        failure_log.record(&replica(refused("pool", "chat"), "127.0.0.2:8000"));
        for healthy in ["127.0.0.3:8000", "127.0.0.4:8000"] {
            let ok = common::synthetic::success(Duration::from_millis(100));
            failure_log.record(&replica(ok, healthy));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    shutdown.cancel();
    writer_task.await.unwrap();
    let text = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
    assert!(!text.contains("probe recovered"), "{text}");
    let failed: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("probe failed"))
        .collect();
    assert_eq!(failed.len(), 1, "{text}");
    assert!(failed[0].contains("chat@127.0.0.2:8000"), "{text}");
}

/// A replica that departs while it fails is forgotten: no reminder says it is still failing
/// minutes after it was last probed.
#[tokio::test(start_paused = true)]
async fn a_departed_failing_replica_gets_no_reminder() {
    // This thread only: the paused runtime runs the log's task here too.
    let (log, _guard) = capture_log();
    let failure_log = Arc::new(FailureLog::new(Timing::default()));
    let shutdown = CancellationToken::new();
    let writer_task = tokio::spawn(failure_log.clone().run(shutdown.clone()));
    for gone in [false, true] {
        for _ in 0..3 {
            let mut o = refused("pool", "chat");
            o.replica = "127.0.0.9:8000".into();
            failure_log.record(&o);
            failure_log.record(&refused("other", "chat"));
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        if gone {
            failure_log.forget("pool", "chat", "127.0.0.9:8000");
        }
        // Past a reminder's 5 minutes.
        tokio::time::sleep(Duration::from_secs(310)).await;
    }
    shutdown.cancel();
    writer_task.await.unwrap();
    let text = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
    let reminders: Vec<&str> = (text.lines())
        .filter(|l| l.contains("probes still failing"))
        .collect();
    // The first reminder names both; the second, after the replica departed, only the other.
    assert_eq!(reminders.len(), 2, "{text}");
    assert!(reminders[0].contains("127.0.0.9:8000"), "{text}");
    assert!(!reminders[1].contains("127.0.0.9:8000"), "{text}");
    assert!(reminders[1].contains("other/chat"), "{text}");
}
