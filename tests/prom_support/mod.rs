//! A real Prometheus 2.x on loopback for the end-to-end tests: loads a test variant of the
//! shipped rules and scrapes the given exporters; killed and reaped when dropped.
//!
//! The rules it loads are made by text substitution of the shipped files (production windows
//! would take 10+ minutes): `[10m]` → `[15s]`, the minimum-count guard `>= 20` → `>= 3`, and
//! every `for:` → `for: 2s`. Each substitution must match, so the tests fail if the shipped rules
//! drift away from what is rewritten.
#![allow(dead_code)]

use std::path::Path;

use serde_json::Value;

use crate::dash_support::{require_tool, root};

pub use crate::common::prometheus::{Prometheus, Scrape};

fn replace_all(text: &str, from: &str, to: &str, file: &str) -> String {
    assert!(
        text.contains(from),
        "{file}: expected {from:?} in the shipped rules"
    );
    text.replace(from, to)
}

/// Writes the test variant of the recording and alert rules into `dir`; returns their names.
pub fn write_test_rules(dir: &Path) -> Vec<String> {
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

/// Starts Prometheus (1 s scrape and evaluation interval) with the test rules, scraping
/// `targets` as job `llm-probe`, and waits until it is ready.
pub async fn start(dir: &Path, targets: &[Scrape<'_>]) -> Prometheus {
    require_tool("prometheus");
    let rules = write_test_rules(dir);
    Prometheus::start_scraping(dir, &rules, targets).await
}

/// The `data` of a successful API answer.
pub async fn api(p: &Prometheus, path: &str, query: &[(&str, &str)]) -> Value {
    p.api(path, query).await
}

/// The series of the instant query `q`.
pub async fn vector(p: &Prometheus, q: &str) -> Vec<Value> {
    let d = api(p, "/api/v1/query", &[("query", q)]).await;
    d["result"].as_array().cloned().unwrap_or_default()
}

/// The value of the single-series instant query `q`, if any.
pub async fn scalar(p: &Prometheus, q: &str) -> Option<f64> {
    vector(p, q).await.first()?["value"][1]
        .as_str()?
        .parse()
        .ok()
}

/// The active alerts named `name` (their labels and state).
pub async fn alerts(p: &Prometheus, name: &str) -> Vec<Value> {
    let d = api(p, "/api/v1/alerts", &[]).await;
    d["alerts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["labels"]["alertname"] == name)
        .cloned()
        .collect()
}

/// The states (`pending`, `firing`) of the active alerts named `name` for target `target`.
pub async fn alert_states(p: &Prometheus, name: &str, target: &str) -> Vec<String> {
    alerts(p, name)
        .await
        .iter()
        .filter(|a| a["labels"]["target"] == target)
        .map(|a| a["state"].as_str().unwrap().to_string())
        .collect()
}

/// Waits until alert `name` fires for `target` (at most 60 s; panics with the states seen).
pub async fn wait_until_firing(p: &Prometheus, name: &str, target: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut seen = Vec::new();
    loop {
        let states = alert_states(p, name, target).await;
        for s in &states {
            if !seen.contains(s) {
                seen.push(s.clone());
            }
        }
        if states.iter().any(|s| s == "firing") {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{name} did not fire for {target} within 60 s (states seen: {seen:?})"
        );
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}

/// Asserts that over five of Prometheus' own evaluations of alert `name` (longer than the test
/// rules' `for: 2s` at a 1 s evaluation interval) it is never pending or firing for `target`:
/// no fixed wait. `why` describes the situation for the failure message.
pub async fn assert_silent_over_evaluations(p: &Prometheus, name: &str, target: &str, why: &str) {
    let mut evaluations = Vec::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while evaluations.len() < 5 {
        let states = alert_states(p, name, target).await;
        assert!(states.is_empty(), "{name} is {states:?} {why}");
        let last = last_evaluation(p, name).await;
        if !evaluations.contains(&last) {
            evaluations.push(last);
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{name} was evaluated only {} times in 30 s",
            evaluations.len()
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// Waits until Prometheus has evaluated alert `name` `n` more times (at most 30 s): states read
/// after that reflect the data as it is now, not an evaluation from before it.
pub async fn wait_for_evaluations(p: &Prometheus, name: &str, n: usize) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut seen = vec![last_evaluation(p, name).await];
    while seen.len() <= n {
        assert!(
            std::time::Instant::now() < deadline,
            "{name} was not evaluated {n} times in 30 s"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        let last = last_evaluation(p, name).await;
        if !seen.contains(&last) {
            seen.push(last);
        }
    }
}

/// When Prometheus last evaluated the alert rule `name` (its `lastEvaluation`, RFC 3339).
pub async fn last_evaluation(p: &Prometheus, name: &str) -> String {
    let d = api(p, "/api/v1/rules", &[("type", "alert")]).await;
    d["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap())
        .find(|r| r["name"] == name)
        .and_then(|r| r["lastEvaluation"].as_str())
        .unwrap_or_else(|| panic!("{name} not loaded: {d}"))
        .to_string()
}
