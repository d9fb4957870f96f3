//! End to end with real components: Prometheus 2.x on loopback loads the shipped rules (every
//! duration divided by 15, `common::rules`), scrapes the daemon, which probes the in-process
//! simulator every second (a 15 s target in the scaled world). A slow TTFT (400 ms against the
//! default 300 ms SLO) drives the page LlmProbeTTFTP95AboveSLO to firing in /api/v1/alerts; a fast
//! one (50 ms) does not. The incident suite (tests/e2e/alerts/incidents.rs) adds Alertmanager.

use crate::common;

use std::time::{Duration, Instant};

use common::rules::scalar;
use llm_probe::simulate::{Script, Simulator};

const ALERT: &str = "LlmProbeTTFTP95AboveSLO";

async fn setup(ttft_ms: u64) -> (Simulator, llm_probe::daemon::Daemon) {
    let sim = common::simulator(Script {
        ttft: Duration::from_millis(ttft_ms),
        itl: Duration::from_millis(5),
        tokens: 8,
        ..Script::default()
    })
    .await;
    let cfg = common::parse(&common::yaml(
        &sim.base_url(),
        "1s",
        &common::scenario("chat", 16),
        "",
    ));
    let daemon = common::daemon(cfg).await;
    (sim, daemon)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_ttft_fires_the_alert_in_prometheus() {
    let (_sim, daemon) = setup(400).await;
    let dir = tempfile::tempdir().unwrap();
    let prom = common::rules::start_one(dir.path(), daemon.addr).await;

    common::rules::wait_until_firing(&prom, ALERT, "sim").await;
    // The SLI behind it: every probe slower than the SLO, so its quantile 0.7 is above it (0.4 s:
    // the bucket above the SLO ends at 0.5 s).
    let p70 = scalar(
        &prom,
        r#"target_model_scenario:llm_probe_ttft_slo_sli:p70_10m{target="sim"}"#,
    )
    .await
    .expect("the SLI is recorded");
    assert!(p70 > 0.3 && p70 <= 0.5, "P70 of the SLI: {p70}");
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fast_ttft_does_not_fire() {
    let (_sim, daemon) = setup(50).await;
    let dir = tempfile::tempdir().unwrap();
    let prom = common::rules::start_one(dir.path(), daemon.addr).await;

    // Positive control: the alert rule is loaded.
    let rules = prom.api("/api/v1/rules", &[]).await;
    assert!(rules.to_string().contains(ALERT), "{ALERT} not loaded");

    // Wait until the guard is satisfied and the SLI is computed.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let judged = scalar(
            &prom,
            r#"target_model_scenario:llm_probe_ttft_slo:judged{target="sim"}"#,
        )
        .await;
        let p70 = scalar(
            &prom,
            r#"target_model_scenario:llm_probe_ttft_slo_sli:p70_10m{target="sim"}"#,
        )
        .await;
        if let (Some(_), Some(p70)) = (judged, p70) {
            assert!(p70 <= 0.3, "every 50 ms probe is within 300 ms: P70 {p70}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the guard was never met (SLI {p70:?})"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // Prometheus' own evaluations of the alert, not a fixed wait.
    common::rules::assert_silent_over_evaluations(&prom, ALERT, "sim", "for a 50 ms TTFT").await;
    daemon.stop().await;
}
