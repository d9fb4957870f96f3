//! A real Prometheus 2.x on loopback for the end-to-end tests: loads a test variant of the
//! shipped rules and scrapes the given exporters; killed and reaped when dropped.
//!
//! The rules it loads are the shipped files with every duration divided by [`TIME_SCALE`] (the
//! production rules assume a 15 s scrape and evaluation interval; the tests scrape and evaluate
//! every second): windows `[10m]` → `[40s]`, `offset`, `for:`, `keep_firing_for:` and group
//! `interval:` alike, and the configured probe interval multiplied by it where the rules read it
//! (`llm_probe_probe_interval_seconds`), so a daemon probing every second is judged as a 15 s
//! target in a world running 15 times faster. Nothing else changes: thresholds, guards and
//! interval classes are the shipped ones. [`scale_rules`] is checked by tests/e2e/alerts/incidents.rs.

use std::path::Path;

use serde_json::Value;

use super::dashboards::{require_tool, root};

pub use crate::common::prometheus::{Prometheus, Scrape};

/// How much faster than production the tests' Prometheus runs (1 s vs 15 s scrape/evaluation).
pub const TIME_SCALE: u64 = 15;

/// A Prometheus duration (`45s`, `10m`, `1d`, `250ms`) in milliseconds.
fn duration_ms(d: &str) -> Option<u64> {
    let split = d.find(|c: char| !c.is_ascii_digit())?;
    let (n, unit) = d.split_at(split);
    let n: u64 = n.parse().ok()?;
    let ms = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        "w" => 604_800_000,
        _ => return None,
    };
    Some(n * ms)
}

/// `d` divided by `k`, as a Prometheus duration in milliseconds (at least 1 ms).
fn scaled(d: &str, k: u64, file: &str) -> String {
    let ms = duration_ms(d).unwrap_or_else(|| panic!("{file}: cannot scale duration {d:?}"));
    format!("{}ms", (ms / k).max(1))
}

/// The rules text `text` (of `file`) running `k` times faster: every duration in a range
/// selector (`[10m]`), after `offset`, and in `for:`, `keep_firing_for:` and a group's
/// `interval:` divided by `k`; the configured probe interval multiplied by `k` where the
/// rules read it (`(llm_probe_probe_interval_seconds)`, which must appear at most once).
/// Returns the text and how many durations were rewritten.
pub fn scale_rules(text: &str, k: u64, file: &str) -> (String, usize) {
    let mut n = 0;
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let trimmed = line.trim_start();
        let indent = &line[..line.len() - trimmed.len()];
        let key = ["for: ", "keep_firing_for: ", "interval: "]
            .into_iter()
            .find(|k| trimmed.starts_with(k));
        if let Some(key) = key.filter(|_| !trimmed.starts_with('#')) {
            let d = trimmed[key.len()..].trim();
            out += &format!("{indent}{key}{}\n", scaled(d, k, file));
            n += 1;
            continue;
        }
        if trimmed.starts_with('#') {
            out += line;
            out.push('\n');
            continue;
        }
        // Range selectors and offsets inside an expression.
        let mut rest = line;
        while let Some(i) = rest.find(['[', 'o']) {
            let (head, tail) = rest.split_at(i);
            out += head;
            if let Some(inner) = tail.strip_prefix('[') {
                let end = inner
                    .find(']')
                    .unwrap_or_else(|| panic!("{file}: unclosed [ in {line}"));
                let d = &inner[..end];
                if duration_ms(d).is_some() {
                    out += &format!("[{}]", scaled(d, k, file));
                    n += 1;
                } else {
                    out += &format!("[{d}]");
                }
                rest = &inner[end + 1..];
            } else if let Some(after) = tail.strip_prefix("offset ") {
                let end = after
                    .find(|c: char| !c.is_ascii_alphanumeric())
                    .unwrap_or(after.len());
                if duration_ms(&after[..end]).is_some() {
                    out += &format!("offset {}", scaled(&after[..end], k, file));
                    n += 1;
                } else {
                    out += &format!("offset {}", &after[..end]);
                }
                rest = &after[end..];
            } else {
                out.push('o');
                rest = &tail[1..];
            }
        }
        out += rest;
        out.push('\n');
    }
    let interval = "(llm_probe_probe_interval_seconds)";
    assert!(
        out.matches(interval).count() <= 1,
        "{file}: the probe interval is read more than once"
    );
    let out = out.replace(
        interval,
        &format!("(llm_probe_probe_interval_seconds * {k})"),
    );
    (out, n)
}

/// Writes the test variant (every duration divided by [`TIME_SCALE`]) of the recording and
/// alert rules into `dir`; returns their names.
pub fn write_test_rules(dir: &Path) -> Vec<String> {
    let prom = root().join("dashboards/prometheus");
    let mut names = Vec::new();
    for (file, name) in [
        ("llm-probe-recording.rules.yml", "recording.yml"),
        ("llm-probe-alerts.rules.yml", "alerts.yml"),
    ] {
        let text = std::fs::read_to_string(prom.join(file)).unwrap();
        let (text, n) = scale_rules(&text, TIME_SCALE, file);
        assert!(n >= 20, "{file}: only {n} durations rewritten");
        std::fs::write(dir.join(name), text).unwrap();
        names.push(name.to_string());
    }
    names
}

/// Starts Prometheus (1 s scrape and evaluation interval) with the test rules, scraping
/// `targets` as job `llm-probe`, and waits until it is ready.
pub async fn start(dir: &Path, targets: &[Scrape<'_>]) -> Prometheus {
    require_tool("prometheus");
    let rules = write_test_rules(dir);
    Prometheus::start_scraping(dir, &rules, targets).await
}

/// [`start_one`] sending its alerts to the Alertmanager at `am` (`host:port`).
pub async fn start_alerting(dir: &Path, addr: std::net::SocketAddr, am: &str) -> Prometheus {
    require_tool("prometheus");
    let rules = write_test_rules(dir);
    let options = crate::common::prometheus::Options {
        alertmanager: Some(am),
        ..Default::default()
    };
    Prometheus::start_options(dir, &rules, &[Scrape { addr, labels: &[] }], &options).await
}

/// [`start`] scraping one exporter at `addr`, without extra target labels.
pub async fn start_one(dir: &Path, addr: std::net::SocketAddr) -> Prometheus {
    start(dir, &[Scrape { addr, labels: &[] }]).await
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

/// Waits until alert `name` fires for `target` (at most 180 s: the scaled windows, guards and
/// `for:` of the slower alerts take a minute or two; panics with the states seen).
pub async fn wait_until_firing(p: &Prometheus, name: &str, target: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(180);
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
            "{name} did not fire for {target} within 180 s (states seen: {seen:?})"
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

/// Polls Prometheus's active alerts (every 500 ms, at most 240 s) until each
/// `(alertname, replica)` of `want` fires. Every active alert is shown to `each` first (which
/// may assert on it); a replica alert (`LlmProbeReplica…`) naming a replica outside `named`
/// fails at once. Panics with the replica alerts seen when time runs out.
pub async fn wait_for_replica_alerts(
    p: &Prometheus,
    want: &[(&str, &str)],
    named: &[&str],
    mut each: impl FnMut(&Value),
) {
    let want: std::collections::BTreeSet<(String, String)> = want
        .iter()
        .map(|(a, r)| (a.to_string(), r.to_string()))
        .collect();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(240);
    let mut seen = std::collections::BTreeSet::new();
    loop {
        let active = api(p, "/api/v1/alerts", &[]).await;
        let mut firing = std::collections::BTreeSet::new();
        for a in active["alerts"].as_array().unwrap() {
            each(a);
            let name = a["labels"]["alertname"].as_str().unwrap_or("");
            let replica = a["labels"]["replica"].as_str().unwrap_or("");
            if name.starts_with("LlmProbeReplica") {
                assert!(
                    named.contains(&replica),
                    "a replica alert names a replica it must not: {a}"
                );
                seen.insert(format!("{name} {replica} {}", a["state"]));
            }
            if a["state"] == "firing" {
                firing.insert((name.to_string(), replica.to_string()));
            }
        }
        if want.is_subset(&firing) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "not every expected replica alert fired; seen: {seen:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}
