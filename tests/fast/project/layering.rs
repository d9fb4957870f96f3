//! The layering of `src/`: the command line sits on top, and the exposition and the
//! schedule sit above what they use. A source scan of `crate::…` paths (and `llm_probe::…` in
//! `main.rs`), comment lines and unit tests (`tests.rs` files, an inline `mod tests`) left out:
//!
//! - no module but `app`, `main` (and `cli` itself) refers to `crate::cli`: lower layers own
//!   their types, `cli` maps flags onto them;
//! - no import cycle, direct or through other modules, between any two top-level modules (in
//!   particular `server` reaches `metrics` and `schedule` reaches `probe`, never the reverse);
//!   `cli` is on no cycle.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Top-level module → (module it refers to → first `file:line` that does).
type Graph = BTreeMap<String, BTreeMap<String, String>>;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The layers of `src/`, lowest first: a module imports only from its own layer and those
/// before it (`lib.rs` and CONTRIBUTING.md, "Layout", describe them).
const LAYERS: [&str; 5] = ["core", "exporter", "simulate", "tools", "command"];

/// The top-level module of a file and its layer: `src/tools/compare/window.rs` →
/// (`compare`, `tools`), `src/core/clock.rs` → (`clock`, `core`), `src/simulate/load.rs` →
/// (`simulate`, `simulate`), `src/main.rs` → (`main`, `command`).
fn module_and_layer(src: &Path, file: &Path) -> (String, &'static str) {
    let rel = file.strip_prefix(src).unwrap();
    let parts: Vec<String> = rel
        .components()
        .map(|c| {
            c.as_os_str()
                .to_string_lossy()
                .trim_end_matches(".rs")
                .to_string()
        })
        .collect();
    let layer = LAYERS.iter().find(|l| **l == parts[0]);
    match (layer, parts.len()) {
        (Some(&"simulate"), _) => ("simulate".into(), "simulate"),
        (Some(layer), n) if n >= 2 => (parts[1].clone(), layer),
        _ if parts[0] == "main" || parts[0] == "lib" => (parts[0].clone(), "command"),
        _ => panic!(
            "{} is in no layer folder of src/ ({LAYERS:?})",
            rel.display()
        ),
    }
}

/// `src/tools/compare/window.rs` → `compare`, `src/core/logging.rs` → `logging`.
fn top_module(src: &Path, file: &Path) -> String {
    module_and_layer(src, file).0
}

fn ident(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// The top-level modules one line of code names through `root::` (`crate::a::b`,
/// `crate::{a, b::c}`, `crate::a::{…}`).
fn referenced(line: &str, root: &str) -> Vec<String> {
    let pat = format!("{root}::");
    let mut found = Vec::new();
    let mut rest = line;
    while let Some(i) = rest.find(&pat) {
        let before = rest[..i].chars().next_back();
        rest = &rest[i + pat.len()..];
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue; // `my_crate::` is not `crate::`
        }
        if let Some(group) = rest.strip_prefix('{') {
            // Top-level items of the group: split on commas outside nested braces.
            let (mut depth, mut start) = (0, 0);
            for (j, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        found.push(ident(group[start..j].trim()).to_string());
                        break;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        found.push(ident(group[start..j].trim()).to_string());
                        start = j + 1;
                    }
                    _ => {}
                }
            }
        } else {
            found.push(ident(rest).to_string());
        }
    }
    found.retain(|m| !m.is_empty() && m != "self");
    found
}

fn graph() -> Graph {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut g = Graph::new();
    for file in files {
        let from = top_module(&src, &file);
        let root = if from == "main" { "llm_probe" } else { "crate" };
        let name = file.file_name().unwrap().to_string_lossy();
        if name == "tests.rs" || name.ends_with("_tests.rs") {
            continue; // unit tests may use any layer to check their module
        }
        let text = std::fs::read_to_string(&file).unwrap();
        let mut lines = text.lines().enumerate().peekable();
        while let Some((n, line)) = lines.next() {
            if line.trim_start().starts_with("//") {
                continue;
            }
            // An inline unit-test module (`#[cfg(test)] mod tests {`, last in its file) may use
            // any layer to check its module.
            if line.trim() == "#[cfg(test)]"
                && lines
                    .peek()
                    .is_some_and(|(_, next)| next.trim_start().starts_with("mod tests {"))
            {
                break;
            }
            for to in referenced(line, root) {
                if to != from {
                    let at = format!("{}:{}", file.strip_prefix(&src).unwrap().display(), n + 1);
                    g.entry(from.clone()).or_default().entry(to).or_insert(at);
                }
            }
        }
    }
    g
}

/// A path of references from `from` to `to` (`[from, …, to]`), if there is one.
fn path(g: &Graph, from: &str, to: &str) -> Option<Vec<String>> {
    let mut parent: BTreeMap<String, String> = BTreeMap::new();
    let mut seen = BTreeSet::from([from.to_string()]);
    let mut queue = std::collections::VecDeque::from([from.to_string()]);
    while let Some(m) = queue.pop_front() {
        for next in g.get(&m).into_iter().flat_map(|e| e.keys()) {
            if seen.insert(next.clone()) {
                parent.insert(next.clone(), m.clone());
                if next == to {
                    let mut p = vec![to.to_string()];
                    while let Some(up) = parent.get(p.last().unwrap()) {
                        p.push(up.clone());
                    }
                    p.reverse();
                    return Some(p);
                }
                queue.push_back(next.clone());
            }
        }
    }
    None
}

/// `a → b → c` with where each step is made.
fn explain(g: &Graph, p: &[String]) -> String {
    p.windows(2)
        .map(|w| format!("{} → {} ({})", w[0], w[1], g[&w[0]][&w[1]]))
        .collect::<Vec<_>>()
        .join(", ")
}

#[test]
fn the_scanner_reads_paths_and_groups() {
    assert_eq!(referenced("use crate::cli::LogFormat;", "crate"), ["cli"]);
    assert_eq!(
        referenced("use crate::{demo, report::{a, b}, self};", "crate"),
        ["demo", "report"]
    );
    assert_eq!(
        referenced(
            "let f = crate::server::negotiate_text(crate::cli::X);",
            "crate"
        ),
        ["server", "cli"]
    );
    assert!(referenced("use my_crate::cli;", "crate").is_empty());
    assert_eq!(referenced("llm_probe::app::run(x)", "llm_probe"), ["app"]);
}

#[test]
fn the_scan_sees_the_known_layers() {
    // Edges that must exist: a scan that found nothing would pass the checks below vacuously.
    let g = graph();
    for (from, to) in [
        ("main", "app"),
        ("app", "cli"),
        ("server", "metrics"),
        ("schedule", "probe"),
        ("daemon", "schedule"),
    ] {
        assert!(
            g.get(from).is_some_and(|e| e.contains_key(to)),
            "the scan does not see {from} → {to}: {g:#?}"
        );
    }
}

#[test]
fn only_app_and_main_import_the_command_line() {
    let g = graph();
    let importers: Vec<String> = g
        .iter()
        .filter(|(from, _)| !["app", "main", "cli"].contains(&from.as_str()))
        .filter_map(|(from, edges)| edges.get("cli").map(|at| format!("{from} ({at})")))
        .collect();
    assert!(
        importers.is_empty(),
        "modules below the command line import crate::cli: {importers:?}; move the type to the \
         module that owns the concept and map the flags onto it in cli.rs"
    );
    if let Some(p) = path(&g, "cli", "cli") {
        panic!("cli is on an import cycle: {}", explain(&g, &p));
    }
}

#[test]
fn no_cycle_between_metrics_and_server_or_schedule_and_probe() {
    let g = graph();
    for (low, high) in [("metrics", "server"), ("probe", "schedule")] {
        assert!(
            path(&g, high, low).is_some(),
            "{high} no longer reaches {low}"
        );
        if let Some(p) = path(&g, low, high) {
            panic!(
                "{low} reaches {high}, which reaches {low}: {}",
                explain(&g, &p)
            );
        }
    }
}

#[test]
fn no_import_cycle_between_top_level_modules() {
    let g = graph();
    let mut cycles = Vec::new();
    for (from, edges) in &g {
        for to in edges.keys() {
            if let Some(back) = path(&g, to, from) {
                let mut cycle = vec![from.clone()];
                cycle.extend(back);
                cycles.push(explain(&g, &cycle));
            }
        }
    }
    assert!(
        cycles.is_empty(),
        "import cycles between top-level modules of src/ (a type that two layers share belongs \
         to the lower one):\n{}",
        cycles.join("\n")
    );
}

/// Every module's layer, from where its files are.
fn layers() -> BTreeMap<String, &'static str> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.iter().map(|f| module_and_layer(&src, f)).collect()
}

#[test]
fn each_layer_imports_only_from_itself_and_the_layers_below() {
    let (g, layer) = (graph(), layers());
    let rank = |l: &str| LAYERS.iter().position(|x| *x == l).unwrap();
    assert_eq!(layer["config"], "core");
    assert_eq!(layer["metrics"], "exporter");
    assert_eq!(layer["compare"], "tools");
    let mut upward = Vec::new();
    for (from, edges) in &g {
        for (to, at) in edges {
            let (Some(lf), Some(lt)) = (layer.get(from), layer.get(to)) else {
                continue; // not a module of src/ (a crate or a macro path)
            };
            if rank(lt) > rank(lf) {
                upward.push(format!("{from} ({lf}) → {to} ({lt}) at {at}"));
            }
        }
    }
    assert!(
        upward.is_empty(),
        "imports from a higher layer (move the shared type down, or the importer up):\n{}",
        upward.join("\n")
    );
}

/// `Metrics` is a handful of groups, each owning its families (`src/exporter/metrics/mod.rs`):
/// a new family goes into a group's file, not into another field here.
#[test]
fn metrics_is_at_most_eight_groups() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/exporter/metrics/mod.rs");
    let text = std::fs::read_to_string(path).unwrap();
    let body = text
        .split_once("pub struct Metrics {")
        .and_then(|(_, rest)| rest.split_once("\n}"))
        .map(|(body, _)| body)
        .expect("src/exporter/metrics/mod.rs defines `pub struct Metrics { … }`");
    let fields: Vec<&str> = body
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with("//") && l.ends_with(',') && l.contains(':'))
        .collect();
    assert!(!fields.is_empty());
    assert!(
        fields.len() <= 8,
        "{} fields: {fields:?}; fold the new families into a group",
        fields.len()
    );
}
