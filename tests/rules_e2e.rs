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

/// States of the TTFT alert for target `sim`.
async fn ttft_alert_states(p: &Prometheus) -> Vec<String> {
    prom_support::alerts(p, ALERT)
        .await
        .iter()
        .filter(|a| a["labels"]["target"] == "sim")
        .map(|a| a["state"].as_str().unwrap().to_string())
        .collect()
}

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

    let deadline = Instant::now() + Duration::from_secs(60);
    let mut states_seen = Vec::new();
    loop {
        let states = ttft_alert_states(&prom).await;
        for s in &states {
            if !states_seen.contains(s) {
                states_seen.push(s.clone());
            }
        }
        if states.iter().any(|s| s == "firing") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{ALERT} did not fire within 60 s (states seen: {states_seen:?})"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
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
    // Prometheus' own evaluations of the alert, not a fixed wait: over five of them (longer than
    // `for: 2s` at a 1 s evaluation interval) it is never pending or firing.
    let mut evaluations = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while evaluations.len() < 5 {
        let states = ttft_alert_states(&prom).await;
        assert!(states.is_empty(), "{ALERT} is {states:?} for a 50 ms TTFT");
        let last = alert_rule_last_evaluation(&prom).await;
        if !evaluations.contains(&last) {
            evaluations.push(last);
        }
        assert!(
            Instant::now() < deadline,
            "{ALERT} was evaluated only {} times in 30 s",
            evaluations.len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    daemon.stop().await;
}

/// When Prometheus last evaluated the TTFT alert rule (its `lastEvaluation`, RFC 3339).
async fn alert_rule_last_evaluation(p: &Prometheus) -> String {
    let d = p.api("/api/v1/rules", &[("type", "alert")]).await;
    d["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap())
        .find(|r| r["name"] == ALERT)
        .and_then(|r| r["lastEvaluation"].as_str())
        .unwrap_or_else(|| panic!("{ALERT} not loaded: {d}"))
        .to_string()
}
