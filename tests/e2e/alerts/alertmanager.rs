//! The shipped Alertmanager example (dashboards/alertmanager/alertmanager.example.yml) passes the
//! real `amtool check-config` (Debian `prometheus-alertmanager`), and a broken copy does not; its
//! routes and inhibitions name only alerts and labels the shipped rules produce.

use crate::common;

use std::collections::BTreeSet;
use std::process::Command;

use common::dashboards::{read_yaml, require_tool, root, rule_files, rules_of, run, text};

fn example() -> std::path::PathBuf {
    root().join("dashboards/alertmanager/alertmanager.example.yml")
}

#[test]
fn amtool_check_config_passes_on_the_example_and_fails_on_a_broken_copy() {
    require_tool("amtool");
    let out = run(Command::new("amtool").arg("check-config").arg(example()));
    let t = text(&out);
    assert!(out.status.success() && t.contains("SUCCESS"), "{t}");
    assert!(t.contains("5 inhibit rules"), "{t}");
    // Negative control: a route to a receiver that does not exist is rejected.
    let dir = tempfile::tempdir().unwrap();
    let broken = std::fs::read_to_string(example()).unwrap().replace(
        "receiver: llm-probe-ticket\n  group_by",
        "receiver: nowhere\n  group_by",
    );
    let f = dir.path().join("broken.yml");
    std::fs::write(&f, broken).unwrap();
    let out = run(Command::new("amtool").arg("check-config").arg(&f));
    assert!(!out.status.success(), "{}", text(&out));
}

#[test]
fn every_alert_name_the_example_matches_exists_and_grouping_is_per_target() {
    let mut alerts = BTreeSet::new();
    for f in rule_files() {
        for r in rules_of(&read_yaml(&f)) {
            if let Some(a) = r["alert"].as_str() {
                alerts.insert(a.to_string());
            }
        }
    }
    let am = read_yaml(&example());
    assert_eq!(am["route"]["group_by"][0].as_str(), Some("target"));
    // Each literal alert name in the inhibit rules is a shipped alert.
    let text = std::fs::read_to_string(example()).unwrap();
    for word in text.split(|c: char| !c.is_ascii_alphanumeric()) {
        if word.starts_with("LlmProbe") && word.len() > "LlmProbe".len() {
            assert!(
                alerts.iter().any(|a| a.starts_with(word)),
                "{word} in the Alertmanager example matches no shipped alert"
            );
        }
    }
    // The inhibitions the docs promise.
    let rules = am["inhibit_rules"].as_sequence().unwrap();
    let sources: Vec<String> = rules
        .iter()
        .map(|r| format!("{:?}", r["source_matchers"]))
        .collect();
    for a in [
        "LlmProbeExporterDown",
        "LlmProbeEndpointDown",
        "LlmProbeTTFTP95AboveSLO",
        "LlmProbeReplicaDown",
    ] {
        assert!(
            sources.iter().any(|s| s.contains(a)),
            "{a} inhibits nothing"
        );
    }
}
