//! The shipped Prometheus rules (`dashboards/prometheus/*.rules.yml`) checked with the real
//! `promtool`: syntax and templates (`check rules`), unit tests (`test rules`, fixtures in
//! `tests/fixtures/rules/`), and that every alert has a unit test where it fires and one where
//! it stays silent, plus the annotations a person paged at night needs.

mod dash_support;

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use dash_support::{read_yaml, require_tool, root, rule_files, rules_of, run, text};
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

/// The rules with every `description` annotation removed: the unit tests compare annotations
/// exactly, and spelling whole runbook paragraphs into each fixture would bury what is tested.
/// Summaries (which render `$labels` and `$value`) stay and are compared.
fn without_descriptions(file: &Yaml) -> Yaml {
    let mut f = file.clone();
    for g in f["groups"].as_sequence_mut().unwrap() {
        for r in g["rules"].as_sequence_mut().unwrap() {
            if let Some(a) = r.get_mut("annotations").and_then(Yaml::as_mapping_mut) {
                a.remove("description");
            }
        }
    }
    f
}

fn fixtures() -> Vec<std::path::PathBuf> {
    dash_support::files_in(&root().join("tests/fixtures/rules"), ".test.yml")
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
    let mut failures = Vec::new();
    for fx in fixtures() {
        let dst = dir.path().join(fx.file_name().unwrap());
        std::fs::copy(&fx, &dst).unwrap();
        let out = run(Command::new("promtool")
            .arg("test")
            .arg("rules")
            .arg(&dst)
            .current_dir(dir.path()));
        if !out.status.success() {
            failures.push(format!("{}:\n{}", fx.display(), text(&out)));
        }
    }
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

#[test]
fn every_alert_says_what_happened_and_what_to_do() {
    let readme = std::fs::read_to_string(root().join("dashboards/README.md")).unwrap();
    for f in rule_files() {
        for r in rules_of(&read_yaml(&f)) {
            let Some(name) = r["alert"].as_str() else {
                continue;
            };
            let summary = r["annotations"]["summary"].as_str().unwrap_or("");
            let description = r["annotations"]["description"].as_str().unwrap_or("");
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
            assert!(
                readme.contains(&format!("`{name}`")),
                "{name} has no runbook entry in dashboards/README.md"
            );
        }
    }
}
