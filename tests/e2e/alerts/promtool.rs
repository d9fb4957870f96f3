//! The shipped Prometheus rules (`dashboards/prometheus/*.rules.yml`) checked with the real
//! `promtool`: syntax and templates (`check rules`), unit tests (`test rules`, fixtures in
//! `tests/fixtures/rules/`), and that every alert has a unit test where it fires and one where
//! it stays silent, plus the annotations a person paged at night needs.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use common::dashboards::{read_yaml, require_tool, root, rule_files, rules_of, run, text};
use serde_yaml::Value as Yaml;

#[test]
fn every_rule_file_passes_promtool_check_rules() {
    require_tool("promtool");
    for f in rule_files() {
        let out = run(Command::new("promtool").arg("check").arg("rules").arg(&f));
        let t = text(&out);
        assert!(
            out.status.success() && t.contains("SUCCESS"),
            "promtool check rules {}:\n{t}",
            f.display()
        );
    }
}

/// The rules with every `description`, `runbook_url` and `dashboard_url` annotation removed: the
/// unit tests compare annotations exactly, and spelling whole runbook paragraphs and links into
/// each fixture would bury what is tested (the links are checked below). Summaries (which render
/// `$labels` and `$value`) stay and are compared.
fn without_descriptions(file: &Yaml) -> Yaml {
    let mut f = file.clone();
    for g in f["groups"].as_sequence_mut().unwrap() {
        for r in g["rules"].as_sequence_mut().unwrap() {
            if let Some(a) = r.get_mut("annotations").and_then(Yaml::as_mapping_mut) {
                for k in ["description", "runbook_url", "dashboard_url"] {
                    a.remove(k);
                }
            }
        }
    }
    f
}

fn fixtures() -> Vec<std::path::PathBuf> {
    common::dashboards::files_in(&root().join("tests/fixtures/rules"), ".test.yml")
}

#[test]
fn promtool_unit_tests_pass() {
    require_tool("promtool");
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("rules")).unwrap();
    for f in rule_files() {
        let y = without_descriptions(&read_yaml(&f));
        std::fs::write(
            dir.path().join("rules").join(f.file_name().unwrap()),
            serde_yaml::to_string(&y).unwrap(),
        )
        .unwrap();
    }
    // The fixtures run side by side (the week-long regression cases take the longest).
    let failures: Vec<String> = std::thread::scope(|scope| {
        let runs: Vec<_> = fixtures()
            .into_iter()
            .map(|fx| {
                let dst = dir.path().join(fx.file_name().unwrap());
                std::fs::copy(&fx, &dst).unwrap();
                let cwd = dir.path().to_path_buf();
                scope.spawn(move || {
                    let out = run(Command::new("promtool")
                        .arg("test")
                        .arg("rules")
                        .arg(&dst)
                        .current_dir(&cwd));
                    (!out.status.success()).then(|| format!("{}:\n{}", fx.display(), text(&out)))
                })
            })
            .collect();
        runs.into_iter().filter_map(|r| r.join().unwrap()).collect()
    });
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_alert_has_a_firing_and_a_silent_unit_test() {
    let mut alerts = BTreeSet::new();
    for f in rule_files() {
        for r in rules_of(&read_yaml(&f)) {
            if let Some(a) = r["alert"].as_str() {
                alerts.insert(a.to_string());
            }
        }
    }
    assert!(alerts.len() >= 10, "{alerts:?}");
    // alert name -> (has a test where it fires, has a test where it does not)
    let mut seen: BTreeMap<String, (bool, bool)> = BTreeMap::new();
    for fx in fixtures() {
        let y = read_yaml(&fx);
        for t in y["tests"].as_sequence().unwrap() {
            for a in t["alert_rule_test"].as_sequence().into_iter().flatten() {
                let name = a["alertname"].as_str().unwrap().to_string();
                assert!(
                    alerts.contains(&name),
                    "{}: unit test of unknown alert {name}",
                    fx.display()
                );
                let fires = a["exp_alerts"].as_sequence().is_some_and(|s| !s.is_empty());
                let e = seen.entry(name).or_default();
                if fires {
                    e.0 = true;
                } else {
                    e.1 = true;
                }
            }
        }
    }
    let missing: Vec<String> = alerts
        .iter()
        .filter_map(|a| match seen.get(a) {
            Some((true, true)) => None,
            Some((f, s)) => Some(format!("{a}: fires tested {f}, silent tested {s}")),
            None => Some(format!("{a}: no unit test")),
        })
        .collect();
    assert!(missing.is_empty(), "{missing:#?}");
}

/// The `### Name` headings of docs/alerting.md, as the anchors GitHub makes of them (lower case).
fn runbook_anchors() -> BTreeSet<String> {
    let doc = std::fs::read_to_string(root().join("docs/alerting.md")).unwrap();
    doc.lines()
        .filter_map(|l| l.strip_prefix("### "))
        .map(|h| h.trim().trim_matches('`').to_lowercase())
        .collect()
}

#[test]
fn every_alert_says_what_happened_and_what_to_do() {
    let anchors = runbook_anchors();
    let doc = std::fs::read_to_string(root().join("docs/alerting.md")).unwrap();
    for f in rule_files() {
        for r in rules_of(&read_yaml(&f)) {
            let Some(name) = r["alert"].as_str() else {
                continue;
            };
            let a = &r["annotations"];
            let summary = a["summary"].as_str().unwrap_or("");
            let description = a["description"].as_str().unwrap_or("");
            assert!(!summary.is_empty(), "{name}: no summary");
            assert!(
                description.len() > 120,
                "{name}: the description should say what happened and what to check"
            );
            let sev = r["labels"]["severity"].as_str().unwrap_or("");
            assert!(
                ["critical", "warning", "info"].contains(&sev),
                "{name}: severity {sev:?}"
            );
            // The runbook link points at this alert's heading, which exists.
            let runbook = a["runbook_url"].as_str().unwrap_or("");
            let anchor = name.to_lowercase();
            assert!(
                runbook.ends_with(&format!("docs/alerting.md#{anchor}")),
                "{name}: runbook_url {runbook:?}"
            );
            assert!(
                anchors.contains(&anchor),
                "{name}: no `### {name}` heading in docs/alerting.md"
            );
            // The alert table row.
            assert!(
                doc.lines().any(|l| l.starts_with(&format!("| [`{name}`]"))),
                "{name}: no row in the alert table of docs/alerting.md"
            );
            let dashboard = a["dashboard_url"].as_str().unwrap_or("");
            assert!(
                dashboard.contains("/d/llm-probe-"),
                "{name}: dashboard_url {dashboard:?}"
            );
        }
    }
}

/// No SLO threshold is written into a rule file. The SLO alerts compare
/// with the exported llm_probe_slo_* gauges; a number such as 0.3 or 30 (the default TTFT SLO and
/// tokens/s floor) or any `le` bucket matcher with a number would be a hard-coded threshold.
#[test]
fn no_rule_hard_codes_an_slo_threshold() {
    for f in rule_files() {
        let y = read_yaml(&f);
        for r in rules_of(&y) {
            let expr = r["expr"].as_str().unwrap_or("");
            let name = r["alert"].as_str().or(r["record"].as_str()).unwrap_or("");
            // A bucket matcher `le="<number>"` / `le=~"…"` (`le!="+Inf"` is allowed: it names no bound).
            for (i, _) in expr.match_indices("le=") {
                let label_start =
                    i == 0 || !expr[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_');
                let value = expr[i + 3..]
                    .trim_start_matches('~')
                    .trim_start_matches('"');
                assert!(
                    !label_start || !value.starts_with(|c: char| c.is_ascii_digit() || c == '.'),
                    "{}: {name} matches a bucket by its bound: {expr}",
                    f.display()
                );
            }
            // Every number literal that is not part of a duration or a metric name.
            let mut tokens = Vec::new();
            let mut cur = String::new();
            for c in expr.chars().chain([' ']) {
                if c.is_ascii_alphanumeric() || c == '.' || c == '_' || c == ':' {
                    cur.push(c);
                } else if !cur.is_empty() {
                    tokens.push(std::mem::take(&mut cur));
                }
            }
            for t in tokens {
                if let Ok(v) = t.parse::<f64>() {
                    assert!(
                        v != 0.3 && v != 30.0,
                        "{}: {name} hard-codes {t}: {expr}",
                        f.display()
                    );
                }
            }
        }
    }
}

/// The runbook and dashboard bases are options of the generator (`node dashboards/build.mjs
/// --runbook-base … --dashboard-base … --out DIR`): every alert links to the given bases, and the
/// repository's files are left alone.
#[test]
fn the_link_bases_are_settable_where_the_rules_are_generated() {
    require_tool("node");
    let dir = tempfile::tempdir().unwrap();
    let before =
        std::fs::read_to_string(root().join("dashboards/prometheus/llm-probe-alerts.rules.yml"))
            .unwrap();
    let out = run(Command::new("node")
        .arg(root().join("dashboards/build.mjs"))
        .args(["--runbook-base", "https://wiki.example.com/llm"])
        .args(["--dashboard-base", "https://grafana.example.com"])
        .arg("--out")
        .arg(dir.path()));
    assert!(out.status.success(), "{}", text(&out));
    let y = read_yaml(&dir.path().join("llm-probe-alerts.rules.yml"));
    let mut n = 0;
    for r in rules_of(&y) {
        let Some(name) = r["alert"].as_str() else {
            continue;
        };
        n += 1;
        let a = &r["annotations"];
        assert_eq!(
            a["runbook_url"].as_str(),
            Some(format!("https://wiki.example.com/llm#{}", name.to_lowercase()).as_str())
        );
        assert!(
            a["dashboard_url"]
                .as_str()
                .unwrap()
                .starts_with("https://grafana.example.com/d/llm-probe-"),
            "{name}: {:?}",
            a["dashboard_url"]
        );
    }
    assert!(n >= 15, "{n} alerts");
    let after =
        std::fs::read_to_string(root().join("dashboards/prometheus/llm-probe-alerts.rules.yml"))
            .unwrap();
    assert_eq!(
        before, after,
        "--out must not rewrite the repository's files"
    );
}

/// Every TTFT alert carries the `cause` annotation (rendered
/// in tests/fixtures/rules/ttft_split.test.yml: the component that grew, or that the server
/// reveals no split) and its description ends with the same template, so the paged person reads
/// it in the description too (the unit tests strip descriptions, so this ties the two together).
#[test]
fn the_ttft_alerts_name_the_ttft_component_in_their_description() {
    let y = read_yaml(&root().join("dashboards/prometheus/llm-probe-alerts.rules.yml"));
    let mut n = 0;
    for r in rules_of(&y) {
        let Some(name) = r["alert"].as_str() else {
            continue;
        };
        // The SLO alerts generated by dashboards/rules.mjs (they share the page window the cause
        // reads); the baseline and week-over-week TTFT alerts compare other windows.
        if ![
            "LlmProbeTTFTP95AboveSLO",
            "LlmProbeTTFTP95AboveSLOFromOneLocation",
            "LlmProbeTTFTErrorBudgetBurnSlow",
        ]
        .contains(&name)
        {
            continue;
        }
        n += 1;
        let a = &r["annotations"];
        let cause = a["cause"]
            .as_str()
            .unwrap_or_else(|| panic!("{name}: no cause"));
        let description = a["description"].as_str().unwrap();
        assert!(
            description.trim_end().ends_with(cause),
            "{name}: the description does not end with the cause annotation"
        );
        // Reads the recorded component P95 over the page window, keyed by the alert's own pair;
        // names a component reduced to [a-z_]; says so when there is no split.
        assert!(
            cause.contains(
                "target_model_scenario_component:llm_probe_ttft_component_seconds:p95_page_window"
            ),
            "{name}: {cause}"
        );
        assert!(
            cause.contains("target=%q,model=%q,scenario=%q"),
            "{name}: {cause}"
        );
        assert!(
            cause.contains(r#"reReplaceAll "[^a-z_]" """#),
            "{name}: {cause}"
        );
        assert!(cause.contains("the server reveals none"), "{name}: {cause}");
    }
    assert_eq!(n, 3, "three TTFT alerts");
}
