//! The dashboards type-checked against Grafana's published dashboard types (`@grafana/schema`,
//! pinned in dashboards/schema-check/package-lock.json) with `tsc`: wrong types and unknown keys
//! fail. Also: the committed JSON is what dashboards/build.mjs generates.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::dashboards::{npm_ci, require_tool, root, run, text};

fn generate_and_tsc(dir: &Path, dashboards: &Path) -> std::process::Output {
    let out = run(Command::new("node")
        .arg("generate.mjs")
        .env("DASHBOARD_DIR", dashboards)
        .current_dir(dir));
    assert!(out.status.success(), "generate.mjs failed:\n{}", text(&out));
    run(Command::new("npx")
        .args(["--no-install", "tsc", "--noEmit", "-p", "."])
        .current_dir(dir))
}

#[test]
fn dashboards_type_check_against_grafana_schema() {
    require_tool("node");
    require_tool("npm");
    let dir = root().join("dashboards/schema-check");
    npm_ci(&dir, &["@grafana/schema", "typescript"]);

    // Negative control first: an unknown key and a wrong type must be reported.
    let tmp = tempfile::tempdir().unwrap();
    let src = root().join("dashboards/grafana/llm-probe-target.json");
    let mut d: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&src).unwrap()).unwrap();
    let ts = d["panels"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|p| p["type"] == "timeseries")
        .unwrap();
    ts["options"]["legend"]["placment"] = "bottom".into();
    ts["fieldConfig"]["defaults"]["custom"]["lineWidth"] = "thick".into();
    std::fs::write(
        tmp.path().join("broken.json"),
        serde_json::to_string(&d).unwrap(),
    )
    .unwrap();
    let out = generate_and_tsc(&dir, tmp.path());
    let t = text(&out);
    assert!(
        !out.status.success()
            && t.contains("placment")
            && t.contains("is not assignable to type 'number'"),
        "tsc should reject an unknown key and a wrong type:\n{t}"
    );

    // The shipped dashboards.
    let out = generate_and_tsc(&dir, &root().join("dashboards/grafana"));
    assert!(
        out.status.success(),
        "the dashboards do not match @grafana/schema:\n{}",
        text(&out)
    );
}

#[test]
fn committed_dashboards_are_what_build_mjs_generates() {
    require_tool("node");
    let out = run(Command::new("node")
        .args(["dashboards/build.mjs", "--check"])
        .current_dir(root()));
    assert!(out.status.success(), "{}", text(&out));
}
