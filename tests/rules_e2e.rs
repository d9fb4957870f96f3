//! End to end with real components: Prometheus 2.x on loopback loads the shipped rules, scrapes
//! the daemon, which probes the in-process simulator. A slow TTFT (400 ms) drives
//! LlmProbeTTFTP95AboveSLO to firing in /api/v1/alerts; a fast one (50 ms) does not.
//!
//! The rules Prometheus loads are a test variant made by text substitution of the shipped files
//! (production windows would take 10+ minutes): `[10m]` → `[15s]`, the minimum-count guard
//! `>= 20` → `>= 3`, and every `for:` → `for: 2s`. Each substitution must match, so the test
//! fails if the shipped rules drift away from what it rewrites.

mod common;
mod dash_support;

use std::path::Path;
use std::time::{Duration, Instant};

use common::prometheus::Prometheus;
use dash_support::{require_tool, root};
use llm_probe::simulate::{Script, Simulator};

const ALERT: &str = "LlmProbeTTFTP95AboveSLO";

fn replace_all(text: &str, from: &str, to: &str, file: &str) -> String {
    assert!(
        text.contains(from),
        "{file}: expected {from:?} in the shipped rules"
    );
    text.replace(from, to)
}

/// Writes the test variant of the recording and alert rules into `dir`.
fn write_test_rules(dir: &Path) -> Vec<String> {
    let prom = root().join("dashboards/prometheus");
    let rec = std::fs::read_to_string(prom.join("llm-probe-recording.rules.yml")).unwrap();
    let rec = replace_all(&rec, "[10m]", "[15s]", "recording");
    let alerts = std::fs::read_to_string(prom.join("llm-probe-alerts.rules.yml")).unwrap();
    let alerts = replace_all(&alerts, ">= 20)", ">= 3)", "alerts");
    let mut fors = 0;
    let alerts: String = alerts
        .lines()
        .map(|l| {
            if l.trim_start().starts_with("for: ") {
                fors += 1;
                format!("{}for: 2s\n", &l[..l.len() - l.trim_start().len()])
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    assert!(fors >= 5, "only {fors} `for:` lines rewritten");
    std::fs::write(dir.join("recording.yml"), rec).unwrap();
    std::fs::write(dir.join("alerts.yml"), alerts).unwrap();
    vec!["recording.yml".into(), "alerts.yml".into()]
}

async fn start_prometheus(dir: &Path, scrape: std::net::SocketAddr) -> Prometheus {
    require_tool("prometheus");
    let rules = write_test_rules(dir);
    Prometheus::start(dir, &rules, scrape).await
}

/// The value of the single-series instant query `q`, if any.
async fn scalar(p: &Prometheus, q: &str) -> Option<f64> {
    let d = p.api("/api/v1/query", &[("query", q)]).await;
    d["result"].as_array()?.first()?["value"][1]
        .as_str()?
        .parse()
        .ok()
}

/// States of the TTFT alert for target `sim`.
async fn ttft_alert_states(p: &Prometheus) -> Vec<String> {
    let d = p.api("/api/v1/alerts", &[]).await;
    d["alerts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["labels"]["alertname"] == ALERT && a["labels"]["target"] == "sim")
        .map(|a| a["state"].as_str().unwrap().to_string())
        .collect()
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
