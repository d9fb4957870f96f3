//! Helpers shared by the `dash_*` and `rules_*` tests: paths of the shipped dashboards and rules,
//! external tools that must exist (a missing tool fails the test, with how to install it), and
//! every PromQL expression the dashboards and rules contain.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_yaml::Value as Yaml;

/// The repository root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `dashboards/prometheus/*.rules.yml`, sorted.
pub fn rule_files() -> Vec<PathBuf> {
    files_in(&root().join("dashboards/prometheus"), ".rules.yml")
}

/// `dashboards/grafana/*.json`, sorted.
pub fn dashboard_files() -> Vec<PathBuf> {
    files_in(&root().join("dashboards/grafana"), ".json")
}

/// Files in `dir` whose name ends with `suffix`, sorted; panics if there are none.
pub fn files_in(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .collect();
    v.sort();
    assert!(!v.is_empty(), "no *{suffix} in {}", dir.display());
    v
}

/// How to install each external tool the tests use.
fn install_hint(tool: &str) -> &'static str {
    match tool {
        "promtool" | "prometheus" => "install it with `apt-get install prometheus` (Debian/Ubuntu; provides /usr/bin/prometheus and /usr/bin/promtool) or put the official release's binaries on PATH",
        "npm" | "npx" | "node" => "install Node.js 20+ with npm (e.g. `apt-get install nodejs npm`)",
        _ => "install it and put it on PATH",
    }
}

/// Fails the test (never skips it) when `tool` is not runnable.
pub fn require_tool(tool: &str) {
    let ok = Command::new(tool)
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    assert!(
        ok,
        "`{tool}` is required by this test but is not runnable; {}",
        install_hint(tool)
    );
}

/// Runs `cmd`, returning its output; panics if it cannot start.
pub fn run(cmd: &mut Command) -> Output {
    cmd.output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"))
}

/// `npm ci` in `dir`, unless its node_modules already holds the lock's install of every package
/// in `packages` (npm writes node_modules/.package-lock.json).
pub fn npm_ci(dir: &Path, packages: &[&str]) {
    let fresh =
        std::fs::read_to_string(dir.join("node_modules/.package-lock.json")).is_ok_and(|s| {
            packages
                .iter()
                .all(|p| s.contains(&format!("\"node_modules/{p}\"")))
        });
    if fresh {
        return;
    }
    let out = run(Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund"])
        .current_dir(dir));
    assert!(out.status.success(), "npm ci failed:\n{}", text(&out));
}

/// stdout + stderr of `out` as text.
pub fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Parses a YAML file.
pub fn read_yaml(path: &Path) -> Yaml {
    let s = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_yaml::from_str(&s).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Parses a JSON file.
pub fn read_json(path: &Path) -> serde_json::Value {
    let s = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&s).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every rule (recording or alerting) of a rule file, as YAML mappings.
pub fn rules_of(file: &Yaml) -> Vec<&Yaml> {
    file["groups"]
        .as_sequence()
        .expect("groups")
        .iter()
        .flat_map(|g| g["rules"].as_sequence().expect("rules").iter())
        .collect()
}

/// One PromQL expression found in a dashboard: where it is and the text.
#[derive(Debug, Clone)]
pub struct DashExpr {
    /// `file: panel "title" (id N) refId X`, or the variable / annotation name.
    pub place: String,
    /// The expression as written, template variables included.
    pub expr: String,
    /// Where Grafana runs it: an instant query (a stat's or table's `instant: true`), a range
    /// query (time series, heatmaps, annotations), or as a variable's series selector.
    pub kind: QueryKind,
}

/// How Grafana runs a dashboard expression.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueryKind {
    Instant,
    Range,
    /// A template variable's series selector (`label_values(selector, label)`, `query_result(…)`).
    Variable,
}

/// A `label_values(selector, label)` template variable.
#[derive(Debug, Clone)]
pub struct LabelValuesVar {
    pub name: String,
    pub selector: String,
    pub label: String,
}

/// The query text of each query-type template variable: (name, query).
fn query_variables(dash: &serde_json::Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for v in dash["templating"]["list"].as_array().into_iter().flatten() {
        if v["type"] != "query" {
            continue;
        }
        let q = match &v["query"] {
            serde_json::Value::String(s) => s.clone(),
            o => o["query"].as_str().unwrap_or("").to_string(),
        };
        out.push((v["name"].as_str().unwrap_or("").to_string(), q));
    }
    out
}

/// The dashboard's `label_values(selector, label)` variables.
pub fn label_values_vars(dash: &serde_json::Value) -> Vec<LabelValuesVar> {
    query_variables(dash)
        .into_iter()
        .filter_map(|(name, q)| {
            let inner = q.strip_prefix("label_values(")?.strip_suffix(')')?;
            let (sel, label) = inner
                .rsplit_once(',')
                .expect("label_values(selector, label)");
            Some(LabelValuesVar {
                name,
                selector: sel.trim().to_string(),
                label: label.trim().to_string(),
            })
        })
        .collect()
}

/// Every PromQL expression in a dashboard: panel targets (rows' nested panels included),
/// annotation queries and query variables (`label_values(…)`'s metric argument, `query_result(…)`'s query).
pub fn dashboard_exprs(path: &Path, dash: &serde_json::Value) -> Vec<DashExpr> {
    let file = path.file_name().unwrap().to_string_lossy().to_string();
    let mut out = Vec::new();
    for p in all_panels(dash) {
        for t in p["targets"].as_array().into_iter().flatten() {
            if let Some(e) = t["expr"].as_str() {
                out.push(DashExpr {
                    place: format!(
                        "{file}: panel {:?} (id {}) refId {}",
                        p["title"].as_str().unwrap_or(""),
                        p["id"],
                        t["refId"].as_str().unwrap_or("?")
                    ),
                    expr: e.to_string(),
                    kind: if t["instant"] == true && t["range"] != true {
                        QueryKind::Instant
                    } else {
                        QueryKind::Range
                    },
                });
            }
        }
    }
    for a in dash["annotations"]["list"].as_array().into_iter().flatten() {
        if let Some(e) = a["target"]["expr"].as_str() {
            out.push(DashExpr {
                place: format!("{file}: annotation {:?}", a["name"].as_str().unwrap_or("")),
                expr: e.to_string(),
                kind: QueryKind::Range,
            });
        }
    }
    for v in label_values_vars(dash) {
        out.push(DashExpr {
            place: format!("{file}: variable {}", v.name),
            expr: v.selector,
            kind: QueryKind::Variable,
        });
    }
    for (name, q) in query_variables(dash) {
        if let Some(inner) = q
            .strip_prefix("query_result(")
            .and_then(|r| r.strip_suffix(')'))
        {
            out.push(DashExpr {
                place: format!("{file}: variable {name}"),
                expr: inner.to_string(),
                kind: QueryKind::Variable,
            });
        }
    }
    out
}

/// Every panel of a dashboard, the panels nested in collapsed rows included.
pub fn all_panels(dash: &serde_json::Value) -> Vec<&serde_json::Value> {
    let mut out = Vec::new();
    for p in dash["panels"].as_array().into_iter().flatten() {
        out.push(p);
        for q in p["panels"].as_array().into_iter().flatten() {
            out.push(q);
        }
    }
    out
}

/// `expr` with Grafana's template variables replaced by values that keep it valid PromQL.
pub fn substitute_grafana_vars(expr: &str) -> String {
    let mut s = expr.to_string();
    for (var, val) in [
        ("$__rate_interval", "5m"),
        ("$__interval", "1m"),
        ("$__range", "1h"),
        ("${target:regex}", ".*"),
        ("${model:regex}", ".*"),
        ("${scenario:regex}", ".*"),
        ("${location:regex}", ".*"),
        ("$target", ".*"),
        ("$model", ".*"),
        ("$scenario", ".*"),
        ("$location", ".*"),
        ("$quantile", "0.95"),
    ] {
        s = s.replace(var, val);
    }
    assert!(
        !s.contains('$'),
        "unknown template variable left in {expr:?} after substitution: {s:?}"
    );
    s
}

/// Every metric or recording-rule name an expression refers to: identifiers containing
/// `llm_probe` outside string literals (so label values never count).
pub fn names_in(expr: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut chars = expr.chars().peekable();
    let mut cur = String::new();
    let flush = |cur: &mut String, names: &mut Vec<String>| {
        if cur.contains("llm_probe") && !names.contains(cur) {
            names.push(cur.clone());
        }
        cur.clear();
    };
    while let Some(c) = chars.next() {
        match c {
            '"' | '\'' | '`' => {
                flush(&mut cur, &mut names);
                // skip the string literal (backslash escapes included)
                while let Some(d) = chars.next() {
                    if d == '\\' {
                        chars.next();
                    } else if d == c {
                        break;
                    }
                }
            }
            c if c.is_ascii_alphanumeric() || c == '_' || c == ':' => cur.push(c),
            _ => flush(&mut cur, &mut names),
        }
    }
    flush(&mut cur, &mut names);
    names
}
