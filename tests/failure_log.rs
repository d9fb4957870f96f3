//! Issue 24, acceptance 4: 20 pairs at a dead endpoint for 10 minutes at 1 s log fewer than 20
//! lines. Scaled down by 10 in time: probes every 100 ms for 60 s (600 probes per pair, as 10
//! minutes at 1 s), with the failure log's periods scaled by 10 too (reminders every 30 s
//! instead of 5 minutes, changes batched for 1 s instead of 10 s).

mod common;

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use llm_probe::failure_log::{set_default_timing, Timing};

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_endpoint_behind_twenty_pairs_logs_a_few_lines() {
    let log = Buffer::default();
    let writer = log.clone();
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::INFO)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .init();
    set_default_timing(Timing {
        repeat: Duration::from_secs(30),
        batch: Duration::from_secs(1),
    });
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = dead.local_addr().unwrap().port();
    drop(dead);
    let mut yaml = String::from("defaults:\n  interval: 100ms\n  timeout: 100ms\nscenarios:\n");
    for s in 0..5 {
        yaml += &common::scenario(&format!("s{s}"), 4);
    }
    yaml += "targets:\n";
    for t in 0..4 {
        yaml += &format!("  - name: t{t}\n    protocol: openai-chat\n    base_url: http://127.0.0.1:{port}/v1\n    model: m\n");
    }
    let daemon = common::daemon(common::parse(&yaml)).await;
    tokio::time::sleep(Duration::from_secs(61)).await;
    let (_, _, metrics) = common::get(daemon.addr, "/metrics", None).await;
    daemon.stop().await;

    let probes: f64 = metrics
        .lines()
        .filter(|l| l.starts_with("llm_probe_probes_total{"))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum();
    let text = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    // 20 pairs probing a closed port: thousands of failed probes (the old log wrote one line
    // each), and a handful of lines.
    assert!(probes >= 2000.0, "only {probes} probes ran:\n{text}");
    assert!(
        lines.len() < 20,
        "{} lines for {probes} failed probes:\n{text}",
        lines.len()
    );
    let connect = text.contains("reason=\"connect\"") || text.contains("reason=connect");
    assert!(text.contains("probe failed") && connect, "{text}");
    let grouped = lines
        .iter()
        .any(|l| l.contains("probe failed") && l.contains("pairs="));
    assert!(grouped, "the pairs' first failures are grouped:\n{text}");
    assert!(
        text.contains("probes still failing"),
        "a reminder with the count:\n{text}"
    );
}
