//! Checks of the dashboards and rules that need no Grafana: every metric name they use is one
//! the exporter really exports (taken from a scrape of the running daemon), every dashboard
//! expression is valid PromQL (wrapped in a recording rule, `promtool check rules`), and a
//! structural lint in the spirit of grafana/dashboard-linter.

use crate::common;

use std::collections::BTreeSet;
use std::process::Command;
use std::time::Duration;

use common::dashboards::{
    all_panels, dashboard_exprs, dashboard_files, names_in, read_json, read_yaml, require_tool,
    rule_files, rules_of, run, substitute_grafana_vars, text,
};
use llm_probe::measure::{Anomaly, ServerTimingSource, ServerTimings, TtftSplit, Turn};
use llm_probe::simulate::Script;

/// Every (place, expression) of the dashboards and the rule files.
fn all_exprs() -> Vec<(String, String)> {
    let mut v = Vec::new();
    for f in dashboard_files() {
        for e in dashboard_exprs(&f, &read_json(&f)) {
            v.push((e.place, e.expr));
        }
    }
    for f in rule_files() {
        for r in rules_of(&read_yaml(&f)) {
            let name = r["record"].as_str().or(r["alert"].as_str()).unwrap();
            v.push((
                format!("{}: {name}", f.display()),
                r["expr"].as_str().unwrap().to_string(),
            ));
        }
    }
    v
}

/// Names recorded by the shipped recording rules.
fn recorded_names() -> BTreeSet<String> {
    rule_files()
        .iter()
        .flat_map(|f| {
            rules_of(&read_yaml(f))
                .into_iter()
                .filter_map(|r| r["record"].as_str().map(String::from))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Sample and family names of an exposition (text or OpenMetrics). A histogram family that has
/// no series yet (e.g. server-side timing, which the simulator does not report) still declares
/// its `_bucket`, `_sum` and `_count` samples.
fn exposed_names(exposition: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in exposition.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut parts = rest.split(' ');
            let name = parts.next().unwrap();
            if parts.next() == Some("histogram") {
                for suffix in ["_bucket", "_sum", "_count"] {
                    names.insert(format!("{name}{suffix}"));
                }
            }
            names.insert(name.to_string());
        } else if !line.starts_with('#') && !line.is_empty() {
            let end = line.find(['{', ' ']).unwrap_or(line.len());
            names.insert(line[..end].to_string());
        }
    }
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_metric_name_used_is_exported_by_the_daemon() {
    let sim = common::simulator(Script {
        ttft: Duration::from_millis(20),
        itl: Duration::from_millis(2),
        tokens: 8,
        // A hosted API's quota it never reaches: the rate-limit gauges.
        rate_limit: 1_000_000,
        ..Script::default()
    })
    .await;
    // A pinned baseline with a long prompt's prefill speed, so that every llm_probe_baseline_*
    // gauge is exported, and a prefill floor (llm_probe_slo_prefill_tokens_per_second).
    let dir = tempfile::tempdir().unwrap();
    let mut baseline: serde_json::Value =
        serde_json::from_str(&common::baseline_json("sim", "chat", 0.25)).unwrap();
    baseline["prefill_tokens_per_second"] =
        serde_json::json!({"p50": 4000.0, "p95": 4500.0, "p99": 4800.0});
    let baseline_file = dir.path().join("sim-chat.baseline.json");
    std::fs::write(&baseline_file, baseline.to_string()).unwrap();
    let cfg = common::parse(&common::yaml(
        &sim.base_url(),
        "1s",
        &common::scenario("chat", 16),
        &format!(
            "    baseline_file: {}\n    slo: {{prefill_tokens_per_second_min: 500}}\n",
            baseline_file.display()
        ),
    ));
    let daemon = common::daemon(cfg).await;
    let mut rx = daemon.subscribe();
    let seen = common::outcomes(&mut rx, 2, Duration::from_secs(20)).await;
    // The simulator reports no cached prompt tokens, no anomalies (well-behaved) and, on this
    // protocol, no server timing, and the
    // exporter only creates those series when they happen: feed the real metrics code one more
    // outcome, a copy of a real one with both, so that their names appear in the scrape.
    let mut extra = (*seen[0]).clone();
    extra.observations.usage.cached_prompt_tokens = Some(3);
    extra.observations.anomalies.push(Anomaly::MissingUsage);
    // Nor is it a multi-turn probe (the llm_probe_turn_* families): two turns, the second
    // served from the cache.
    extra.observations.turns = [(1, 200, 0), (2, 50, 20)]
        .into_iter()
        .map(|(turn, ttft_ms, cached)| Turn {
            turn,
            ttft: Some(Duration::from_millis(ttft_ms)),
            output_tokens_per_second: Some(50.0),
            output_tokens: Some(8),
            prompt_tokens: Some(20 * turn as u64),
            cached_prompt_tokens: Some(cached),
            server_prefill: None,
            failure: None,
        })
        .collect();
    // Nor runs a prefix-cache canary.
    extra.observations.cache_canary = Some(llm_probe::measure::CacheCanary {
        cold_ttft: Duration::from_millis(200),
        warm_ttft: Some(Duration::from_millis(50)),
        warm_cached_tokens: Some(24),
    });
    // Nor does the OpenAI-chat simulator report server-side timing (llama.cpp and Ollama do).
    if let Ok(m) = &mut extra.result {
        m.server_prefill = Some(Duration::from_millis(15));
        m.ttft_overhead = Some(Duration::from_millis(5));
        // And the prefill speeds of a long-prompt scenario (prompt_tokens), by the probe's TTFT
        // and by the server's own prefill time.
        m.prefill_tokens_per_second = Some(4000.0);
        m.server_prefill_tokens_per_second = Some(5000.0);
        // And a TTFT split as vLLM's per-request metrics give it (llm_probe_ttft_component_seconds).
        m.ttft_split = TtftSplit::new(
            m.ttft,
            &ServerTimings {
                queue_seconds: Some(0.002),
                prompt_seconds: Some(0.01),
                source: Some(ServerTimingSource::VllmRequestMetrics),
                ..ServerTimings::default()
            },
        );
    }
    daemon.metrics.observe(&extra);
    // Nor does it answer wrong: one more copy failing an answer check.
    let mut wrong = (*seen[0]).clone();
    wrong.observations.answer.failed_check = Some("contains");
    wrong.result = Err(llm_probe::measure::Failure::new(
        llm_probe::measure::FailureReason::WrongAnswer,
        "check contains: expected \"x\"",
    ));
    daemon.metrics.observe(&wrong);
    let (_, _, plain) = common::get(daemon.addr, "/metrics", None).await;
    let (_, ct, om) = common::get(
        daemon.addr,
        "/metrics",
        Some("application/openmetrics-text; version=1.0.0"),
    )
    .await;
    daemon.stop().await;
    assert!(ct.starts_with("application/openmetrics-text"), "{ct}");

    let exported = exposed_names(&plain);
    // Both formats name the samples the same way (OpenMetrics differs in family names only).
    let om_samples: BTreeSet<String> = om
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| l[..l.find(['{', ' ']).unwrap()].to_string())
        .collect();
    for n in &om_samples {
        assert!(exported.contains(n), "{n} in OpenMetrics but not in text");
    }
    for must in [
        "llm_probe_prompt_cached_tokens_total",
        "llm_probe_stream_anomalies_total",
        "llm_probe_endpoint_info",
    ] {
        assert!(exported.contains(must), "{must} missing from:\n{plain}");
    }

    let recorded = recorded_names();
    let mut unknown = Vec::new();
    let mut used = BTreeSet::new();
    for (place, expr) in all_exprs() {
        for name in names_in(&expr) {
            let ok = if name.contains(':') {
                recorded.contains(&name)
            } else if name == "ALERTS" {
                // Prometheus' own series of its alerts (the fleet dashboard's alert list).
                true
            } else {
                used.insert(name.clone());
                exported.contains(&name)
            };
            if !ok {
                unknown.push(format!("{place}: {name}"));
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "names neither exported by the daemon nor recorded by a rule:\n{}",
        unknown.join("\n")
    );
    // The check must have looked at something: the core histograms are used.
    for n in [
        "llm_probe_time_to_first_token_seconds_bucket",
        "llm_probe_output_tokens_per_second_bucket",
        "llm_probe_probe_failures_total",
        "llm_probe_endpoint_info",
    ] {
        assert!(used.contains(n), "{n} is used nowhere?");
    }
}

#[test]
fn names_in_ignores_label_values_and_finds_recorded_names() {
    let e = r#"sum(rate(llm_probe_probes_total{target="llm_probe_x"}[5m])) / a:llm_probe_y:ratio"#;
    assert_eq!(
        names_in(e),
        vec!["llm_probe_probes_total", "a:llm_probe_y:ratio"]
    );
}

#[test]
fn every_dashboard_expression_is_valid_promql() {
    require_tool("promtool");
    let mut rules = String::from("groups:\n  - name: dashboard-expressions\n    rules:\n");
    let exprs: Vec<_> = dashboard_files()
        .iter()
        .flat_map(|f| dashboard_exprs(f, &read_json(f)))
        .collect();
    assert!(exprs.len() > 30, "only {} expressions found", exprs.len());
    for (i, e) in exprs.iter().enumerate() {
        let expr = substitute_grafana_vars(&e.expr);
        rules.push_str(&format!(
            "      # {}\n      - record: dashboard_expr_{i}\n        expr: {}\n",
            e.place,
            serde_json::to_string(&expr).unwrap()
        ));
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dashboard-exprs.rules.yml");
    std::fs::write(&path, &rules).unwrap();
    let out = run(Command::new("promtool")
        .arg("check")
        .arg("rules")
        .arg(&path));
    assert!(
        out.status.success(),
        "promtool rejects a dashboard expression:\n{}\n{rules}",
        text(&out)
    );
    // Negative control: a broken expression in the same wrapping is rejected.
    std::fs::write(
        &path,
        "groups:\n  - name: x\n    rules:\n      - record: x\n        expr: \"sum(rate(llm_probe_probes_total[5m])\"\n",
    )
    .unwrap();
    let out = run(Command::new("promtool")
        .arg("check")
        .arg("rules")
        .arg(&path));
    assert!(!out.status.success());
}

const STABLE_UIDS: [(&str, &str); 5] = [
    ("llm-probe-fleet-native.json", "llm-probe-fleet-native"),
    ("llm-probe-fleet.json", "llm-probe-fleet"),
    ("llm-probe-regression.json", "llm-probe-regression"),
    ("llm-probe-target-native.json", "llm-probe-target-native"),
    ("llm-probe-target.json", "llm-probe-target"),
];

/// The range windows of the shipped rules (`10m`, `1h`, …): a dashboard may use them as fixed
/// windows, to show what the alerts judge.
fn alert_windows() -> BTreeSet<String> {
    all_exprs()
        .iter()
        .filter(|(place, _)| place.contains(".rules.yml"))
        .flat_map(|(_, e)| ranges(e))
        .collect()
}

/// The fleet dashboards agree with the alerts. Every percentile is per scenario (a
/// `histogram_quantile` aggregates `by (…, scenario, …)`: P95s of different scenarios are never
/// mixed) over a fixed alert window or a recorded series (never `$__rate_interval`, whose few
/// probes swing far wider than what the alerts judge), and the fleet state view exists.
#[test]
fn fleet_percentiles_are_per_scenario_over_alert_windows() {
    let windows = alert_windows();
    assert!(windows.contains("10m"), "{windows:?}");
    let mut checked = 0;
    for f in dashboard_files() {
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        if !name.starts_with("llm-probe-fleet") {
            continue;
        }
        let d = read_json(&f);
        let titles: Vec<String> = all_panels(&d)
            .iter()
            .map(|p| p["title"].as_str().unwrap_or("").to_string())
            .collect();
        for must in [
            "TTFT P95 as a share of the SLO",
            "Firing llm-probe alerts",
            "Oldest last-probe age",
        ] {
            assert!(
                titles.iter().any(|t| t == must),
                "{name}: no {must:?} panel"
            );
        }
        for panel in all_panels(&d) {
            let title = panel["title"].as_str().unwrap_or("");
            for t in panel["targets"].as_array().into_iter().flatten() {
                let expr = t["expr"].as_str().unwrap_or("");
                let is_percentile = expr.contains("histogram_quantile")
                    || expr.contains(":p95_")
                    || expr.contains(":p05_")
                    || expr.contains(":p50_");
                if !is_percentile {
                    continue;
                }
                checked += 1;
                assert!(
                    !expr.contains("$__rate_interval"),
                    "{name}: panel {title:?} computes a percentile over $__rate_interval: {expr}"
                );
                for (i, _) in expr.match_indices("histogram_quantile(") {
                    let rest = &expr[i..];
                    let by = rest
                        .find("by (")
                        .map(|j| &rest[j + 4..j + 4 + rest[j + 4..].find(')').unwrap()]);
                    assert!(
                        by.is_some_and(|b| b.split(',').any(|l| l.trim() == "scenario")),
                        "{name}: panel {title:?} mixes scenarios in a percentile: {expr}"
                    );
                }
                // A recorded percentile series is per scenario; it must not be aggregated away.
                assert!(
                    !(expr.contains(":p95_") && (expr.contains("max(") || expr.contains("avg("))),
                    "{name}: panel {title:?} aggregates recorded percentiles across scenarios: {expr}"
                );
            }
        }
    }
    assert!(checked >= 10, "only {checked} percentile queries checked");
}

/// Range selectors (`[…]`) of an expression, outside string literals.
fn ranges(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_str = None;
    let mut cur: Option<String> = None;
    for c in expr.chars() {
        match (in_str, c) {
            (Some(q), c) if c == q => in_str = None,
            (Some(_), _) => {}
            (None, '"' | '\'' | '`') => in_str = Some(c),
            (None, '[') => cur = Some(String::new()),
            (None, ']') => out.extend(cur.take()),
            (None, c) => {
                if let Some(s) = cur.as_mut() {
                    s.push(c);
                }
            }
        }
    }
    out
}

#[test]
fn dashboards_pass_the_structural_lint() {
    let files = dashboard_files();
    let names: Vec<String> = files
        .iter()
        .map(|f| f.file_name().unwrap().to_string_lossy().to_string())
        .collect();
    assert_eq!(
        names,
        STABLE_UIDS.iter().map(|(f, _)| *f).collect::<Vec<_>>(),
        "dashboard files changed: update STABLE_UIDS deliberately"
    );
    let ds = serde_json::json!({"type": "prometheus", "uid": "${datasource}"});
    let windows = alert_windows();
    let mut problems = Vec::new();
    for (f, (_, uid)) in files.iter().zip(STABLE_UIDS) {
        let d = read_json(f);
        let file = f.file_name().unwrap().to_string_lossy().to_string();
        let mut p = |m: String| problems.push(format!("{file}: {m}"));
        if d["uid"] != uid {
            p(format!("uid {} is not the stable {uid}", d["uid"]));
        }
        if !d["id"].is_null() {
            p("id must be null (Grafana assigns it)".into());
        }
        if d.get("__inputs").is_some() || d.get("__requires").is_some() {
            p("__inputs/__requires break provisioning; use the datasource variable".into());
        }
        let vars = d["templating"]["list"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let var = |n: &str| vars.iter().find(|v| v["name"] == n).cloned();
        match var("datasource") {
            Some(v) if v["type"] == "datasource" && v["query"] == "prometheus" => {}
            _ => p("no `datasource` variable of type datasource/prometheus".into()),
        }
        for n in ["target", "model", "scenario"] {
            match var(n) {
                Some(v) if v["type"] == "query" && v["datasource"] == ds => {}
                _ => p(format!("no query variable `{n}` on ${{datasource}}")),
            }
        }
        for a in d["annotations"]["list"].as_array().into_iter().flatten() {
            if a["datasource"] != ds || a["target"]["datasource"] != ds {
                p(format!("annotation {} not on ${{datasource}}", a["name"]));
            }
        }
        let mut ids = BTreeSet::new();
        for panel in all_panels(&d) {
            let title = panel["title"].as_str().unwrap_or("").to_string();
            let id = panel["id"].as_u64();
            match id {
                Some(id) if ids.insert(id) => {}
                _ => p(format!(
                    "panel {title:?}: id {:?} missing or duplicate",
                    panel["id"]
                )),
            }
            if title.is_empty() {
                p(format!("panel {id:?} has no title"));
            }
            for k in ["x", "y", "w", "h"] {
                if !panel["gridPos"][k].is_u64() {
                    p(format!("panel {title:?}: gridPos.{k} missing"));
                }
            }
            if panel["type"] == "row" {
                continue;
            }
            if panel["datasource"] != ds {
                p(format!(
                    "panel {title:?}: datasource is not ${{datasource}}"
                ));
            }
            if panel["fieldConfig"]["defaults"]["unit"]
                .as_str()
                .is_none_or(str::is_empty)
            {
                p(format!("panel {title:?}: no unit"));
            }
            if panel["description"].as_str().is_none_or(str::is_empty) {
                p(format!("panel {title:?}: no description"));
            }
            let targets = panel["targets"].as_array().cloned().unwrap_or_default();
            if targets.is_empty() {
                p(format!("panel {title:?}: no queries"));
            }
            for t in &targets {
                if t["datasource"] != ds {
                    p(format!(
                        "panel {title:?}: a query is not on ${{datasource}}"
                    ));
                }
                let expr = t["expr"].as_str().unwrap_or("");
                let instant = t["instant"] == true;
                for r in ranges(expr) {
                    let ok = r == "$__rate_interval"
                        || (instant && r == "$__range")
                        || windows.contains(&r);
                    if !ok {
                        p(format!("panel {title:?}: range [{r}] in {expr:?}; use [$__rate_interval] ([$__range] in instant queries), or a window of the alert rules ({windows:?})"));
                    }
                }
                // Every selector of a probe metric honours the target variable.
                for name in names_in(expr) {
                    if name.contains(':') || !name.starts_with("llm_probe_") {
                        continue;
                    }
                    for (i, _) in expr.match_indices(&name) {
                        let after = &expr[i + name.len()..];
                        let sel = after
                            .strip_prefix('{')
                            .and_then(|s| s.split_once('}'))
                            .map(|(s, _)| s);
                        if !sel.is_some_and(|s| s.contains(r#"target=~"$target""#)) {
                            p(format!(
                                "panel {title:?}: {name} without target=~\"$target\""
                            ));
                        }
                    }
                }
                if panel["type"] == "heatmap" && t["format"] != "heatmap" {
                    p(format!(
                        "panel {title:?}: heatmap query without format=heatmap"
                    ));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
