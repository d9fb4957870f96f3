//! End to end with real components: Prometheus 2.x on loopback loads the shipped rules (the
//! shortened-window variant of `prom_support`), scrapes the daemon, which probes the in-process
//! simulator. A slow TTFT (400 ms) drives LlmProbeTTFTP95AboveSLO to firing in /api/v1/alerts; a
//! fast one (50 ms) does not.

mod common;
mod dash_support;
mod prom_support;

use std::path::Path;
use std::time::{Duration, Instant};

use llm_probe::simulate::{Script, Simulator};
use prom_support::{scalar, Prometheus, Scrape};

const ALERT: &str = "LlmProbeTTFTP95AboveSLO";

async fn start_prometheus(dir: &Path, scrape: std::net::SocketAddr) -> Prometheus {
    prom_support::start(
        dir,
        &[Scrape {
            addr: scrape,
            labels: &[],
        }],
    )
    .await
}

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
    let prom = start_prometheus(dir.path(), daemon.addr).await;

    prom_support::wait_until_firing(&prom, ALERT, "sim").await;
    // The SLI behind it: no probe met 300 ms.
    let ratio = scalar(
        &prom,
        r#"target_model_scenario:llm_probe_time_to_first_token_seconds_le_300ms:ratio10m{target="sim"}"#,
    )
    .await;
    assert_eq!(ratio, Some(0.0));
    // The tokens/s floor ratio resolves whatever `le` spelling Prometheus scraped ("30" in the
    // text format, "30.0" in OpenMetrics, which Prometheus 2.x asks for first).
    let stored = prom
        .api(
            "/api/v1/series",
            &[(
                "match[]",
                r#"llm_probe_output_tokens_per_second_bucket{le=~"30(\\.0)?"}"#,
            )],
        )
        .await;
    let spelling = stored[0]["le"].as_str().unwrap_or("none").to_string();
    eprintln!("Prometheus stored the tokens/s floor bucket as le={spelling:?}");
    let tps_ratio = scalar(
        &prom,
        r#"target_model_scenario:llm_probe_output_tokens_per_second_le_30:ratio10m{target="sim"}"#,
    )
    .await;
    assert!(
        tps_ratio.is_some(),
        "tokens/s floor ratio missing; Prometheus stored le={spelling:?}"
    );
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fast_ttft_does_not_fire() {
    let (_sim, daemon) = setup(50).await;
    let dir = tempfile::tempdir().unwrap();
    let prom = start_prometheus(dir.path(), daemon.addr).await;

    // Positive control: the alert rule is loaded.
    let rules = prom.api("/api/v1/rules", &[]).await;
    assert!(rules.to_string().contains(ALERT), "{ALERT} not loaded");

    // Wait until the guard is satisfied and the SLI is computed, then past `for: 2s`.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let count = scalar(
            &prom,
            r#"target_model_scenario:llm_probe_time_to_first_token_seconds_count:increase10m{target="sim"}"#,
        )
        .await
        .unwrap_or(0.0);
        let ratio = scalar(
            &prom,
            r#"target_model_scenario:llm_probe_time_to_first_token_seconds_le_300ms:ratio10m{target="sim"}"#,
        )
        .await;
        if count >= 3.0 && ratio.is_some() {
            assert_eq!(ratio, Some(1.0), "every 50 ms probe is within 300 ms");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "guard count never reached 3 (last {count})"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // Prometheus' own evaluations of the alert, not a fixed wait.
    prom_support::assert_silent_over_evaluations(&prom, ALERT, "sim", "for a 50 ms TTFT").await;
    daemon.stop().await;
}
