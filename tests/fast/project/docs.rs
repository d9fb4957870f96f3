//! The documentation cannot drift from the code:
//!
//! - every relative link and `#anchor` in `README.md`, `CONTRIBUTING.md`, `docs/*.md` and
//!   `dashboards/README.md` resolves (anchors as GitHub makes them from headings);
//! - every metric name the docs mention is exported, and every exported metric family is
//!   documented (the exposition of a daemon probing the simulator in-process);
//! - every key the probes file accepts is listed in `docs/configuration.md`, and every key listed
//!   there is accepted (the keys are found by asking the config parser itself, through its
//!   "unknown key … allowed here" errors, so a new field cannot go undocumented);
//! - every alert in `dashboards/prometheus/*.rules.yml` has a runbook heading in
//!   `docs/alerting.md` (`### AlertName`, anchor `#alertname`);
//! - every long flag printed by `--help` of every subcommand appears in `README.md` or `docs/`.
//!
//! Each failure names the file and what is missing.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use llm_probe::simulate::{Fault, Script};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every `.md` file of `docs/`, sorted.
fn docs_pages() -> Vec<PathBuf> {
    let mut pages: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("docs/ exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    pages.sort();
    pages
}

/// The files whose links are checked.
fn linked_files() -> Vec<PathBuf> {
    let mut files = vec![
        root().join("README.md"),
        root().join("CONTRIBUTING.md"),
        root().join("dashboards/README.md"),
    ];
    files.extend(docs_pages());
    files
}

/// The user documentation: `README.md` and `docs/*.md`, as (path, text).
fn user_docs() -> Vec<(PathBuf, String)> {
    let mut files = vec![root().join("README.md")];
    files.extend(docs_pages());
    files.into_iter().map(|p| (p.clone(), read(&p))).collect()
}

fn rel(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap_or(path)
        .display()
        .to_string()
}

/// `text` without fenced code blocks (their lines are replaced by empty ones).
fn prose(text: &str) -> Vec<&str> {
    let mut fenced = false;
    text.lines()
        .map(|l| {
            if l.trim_start().starts_with("```") {
                fenced = !fenced;
                return "";
            }
            if fenced {
                ""
            } else {
                l
            }
        })
        .collect()
}

/// GitHub's anchor for a heading text: inline markup dropped, lower case, every character that
/// is not a letter, digit, `-`, `_` or space removed, spaces turned into `-`.
fn slug(heading: &str) -> String {
    // `[text](url)` → `text`.
    let mut plain = String::new();
    let mut rest = heading;
    while let Some(open) = rest.find('[') {
        let Some(mid) = rest[open..].find("](") else {
            break;
        };
        let Some(close) = rest[open + mid..].find(')') else {
            break;
        };
        plain.push_str(&rest[..open]);
        plain.push_str(&rest[open + 1..open + mid]);
        rest = &rest[open + mid + close + 1..];
    }
    plain.push_str(rest);
    plain
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a Markdown file's headings (duplicates numbered as GitHub does).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    for line in prose(text) {
        let hashes = line.chars().take_while(|c| *c == '#').count();
        if !(1..=6).contains(&hashes) || !line[hashes..].starts_with(' ') {
            continue;
        }
        let s = slug(line[hashes..].trim());
        let n = seen.entry(s.clone()).or_insert(0);
        out.insert(if *n == 0 {
            s.clone()
        } else {
            format!("{s}-{n}")
        });
        *n += 1;
    }
    out
}

/// The targets of the inline links and images `[…](target)` outside code blocks.
fn link_targets(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, line) in prose(text).into_iter().enumerate() {
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let end = after.find(')').unwrap_or(after.len());
            let target = after[..end].split_whitespace().next().unwrap_or("");
            out.push((i + 1, target.to_string()));
            rest = &after[end..];
        }
    }
    out
}

#[test]
fn every_relative_link_and_anchor_resolves() {
    let mut problems = Vec::new();
    for file in linked_files() {
        let text = read(&file);
        let dir = file.parent().unwrap();
        for (line, target) in link_targets(&text) {
            if target.is_empty()
                || target.contains("://")
                || target.starts_with("mailto:")
                || target.starts_with('<')
            {
                continue;
            }
            let (path, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (target.as_str(), None),
            };
            let dest = if path.is_empty() {
                file.clone()
            } else {
                dir.join(path)
            };
            if !dest.exists() {
                problems.push(format!(
                    "{}:{line}: link to {target}: {} does not exist",
                    rel(&file),
                    rel(&dest)
                ));
                continue;
            }
            if let Some(anchor) = anchor {
                if dest.extension().is_none_or(|e| e != "md") {
                    problems.push(format!(
                        "{}:{line}: link to {target}: an anchor into a file that is not Markdown",
                        rel(&file)
                    ));
                } else if !anchors(&read(&dest)).contains(anchor) {
                    problems.push(format!(
                        "{}:{line}: link to {target}: {} has no heading with the anchor #{anchor}",
                        rel(&file),
                        rel(&dest)
                    ));
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "broken links:\n{}",
        problems.join("\n")
    );
}

#[test]
fn every_docs_page_is_on_the_map() {
    let map = read(&root().join("docs/README.md"));
    let readme = read(&root().join("README.md"));
    let mut problems = Vec::new();
    for page in docs_pages() {
        let name = page.file_name().unwrap().to_string_lossy().to_string();
        if name == "README.md" {
            continue;
        }
        if !map.contains(&format!("]({name})")) {
            problems.push(format!("docs/README.md: the map does not link docs/{name}"));
        }
        if !readme.contains(&format!("](docs/{name}")) {
            problems.push(format!("README.md: no link to docs/{name}"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn no_document_points_outside_the_repository() {
    let mut problems = Vec::new();
    let mut files = linked_files();
    files.push(root().join("BENCHMARKS.md"));
    // The team's reference shelf beside the repository (spelled in two parts so that this test
    // is not itself a reference to it).
    let shelf = concat!("..", "/shared");
    for file in files {
        for (n, line) in read(&file).lines().enumerate() {
            if line.contains(shelf) {
                problems.push(format!(
                    "{}:{}: refers to {shelf}, which a clone does not have",
                    rel(&file),
                    n + 1
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Whether `line` names an internal work item (the word "issue" or "acceptance" followed by a
/// number), which means nothing to a reader of the repository.
fn names_work_item(line: &str) -> bool {
    let lower = line.to_lowercase();
    ["issue ", "acceptance "].iter().any(|word| {
        lower
            .match_indices(word)
            .any(|(at, _)| lower[at + word.len()..].starts_with(|c: char| c.is_ascii_digit()))
    })
}

#[test]
fn no_document_refers_to_internal_work_items() {
    assert!(
        names_work_item(&format!("(issue {}, acceptance {})", 10, 3))
            && names_work_item(&format!("(acceptance {})", 3))
            && !names_work_item("an issue to fix")
    );
    let mut problems = Vec::new();
    for file in linked_files() {
        for (n, line) in read(&file).lines().enumerate() {
            if names_work_item(line) {
                problems.push(format!(
                    "{}:{}: refers to an internal work item: {}",
                    rel(&file),
                    n + 1,
                    line.trim()
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The files of the repository's code, tests, rules, dashboards and scripts (not the benchmark
/// records of `benches/results/`, which keep what was measured when, nor fixtures captured from
/// other servers).
fn source_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries {
            let path = e.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                if !["results", "captured", "node_modules", "target"].contains(&name.as_str()) {
                    walk(&path, out);
                }
            } else if [".rs", ".sh", ".mjs", ".yml", ".yaml", ".md", ".py", ".toml"]
                .iter()
                .any(|ext| name.ends_with(ext))
                || name == "run"
                || name == "Dockerfile"
            {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    for dir in [
        "src",
        "tests",
        "benches",
        "dashboards",
        "scripts",
        ".ci",
        "examples",
        "docs",
    ] {
        walk(&root().join(dir), &mut files);
    }
    files.push(root().join("Dockerfile"));
    files.push(root().join("Cargo.toml"));
    files.sort();
    files
}

/// The code, tests and shipped files cite neither a work item nor a file outside the repository
/// (the design notes the project started from are not in it): a reader of the repository can
/// follow every reference.
#[test]
fn no_source_refers_to_work_items_or_files_outside_the_repository() {
    let outside: Vec<String> = ["DESIGN", "PROTOCOLS"]
        .iter()
        .map(|n| format!("{n}.md"))
        .collect();
    let mut problems = Vec::new();
    for file in source_files() {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue; // not text
        };
        for (n, line) in text.lines().enumerate() {
            let cites = outside.iter().find(|o| line.contains(o.as_str()));
            if names_work_item(line) || cites.is_some() {
                problems.push(format!("{}:{}: {}", rel(&file), n + 1, line.trim()));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "references a reader of the repository cannot follow (a work item, or a file outside it):\n{}",
        problems.join("\n")
    );
}

// ---------------------------------------------------------------------------------------------
// Metrics

/// Names that look like metrics but are not: JSON fields of llm-probe's own files.
const NOT_METRICS: &[&str] = &["llm_probe_version"];

/// Whether `c` can be part of a Prometheus metric name (recording rules use `:`).
fn name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

/// Metric names `llm_probe_…` mentioned in `text` (outside recording-rule names such as
/// `target:llm_probe_x:rate5m`), with whether each is a prefix (`llm_probe_baseline_*`).
fn mentioned_metrics(text: &str) -> BTreeSet<(String, bool)> {
    let mut out = BTreeSet::new();
    for (at, _) in text.match_indices("llm_probe_") {
        if text[..at].chars().next_back().is_some_and(name_char) {
            continue;
        }
        let name: String = text[at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        let next = text[at + name.len()..].chars().next();
        if next == Some(':') {
            continue;
        }
        let prefix = next == Some('*') || name.ends_with('_');
        if !NOT_METRICS.contains(&name.as_str()) {
            out.insert((name, prefix));
        }
    }
    out
}

/// The metric families on `/metrics` (their `# TYPE` names) of a daemon probing the simulator
/// with everything that makes a family appear: a successful OpenAI chat probe with a pinned
/// baseline, a llama.cpp-native probe (the server's prefill) and a stream without usage (an
/// anomaly).
async fn exported_families() -> BTreeSet<String> {
    let sim = common::simulator(Script {
        ttft: Duration::from_millis(20),
        itl: Duration::from_millis(2),
        tokens: 4,
        ..Script::default()
    })
    .await;
    let no_usage = common::simulator(Script {
        ttft: Duration::from_millis(20),
        itl: Duration::from_millis(2),
        tokens: 4,
        fault: Fault::NoUsage,
        ..Script::default()
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let baseline = dir.path().join("sim-chat.json");
    std::fs::write(
        &baseline,
        r#"{"schema":"llm-probe.baseline/v1","target":"sim","scenario":"chat","model":"m",
            "measured_at":"2026-11-30T12:00:00.000Z","saved_at":"2026-11-30T12:05:00.000Z",
            "source":{"kind":"bench","file":"run.json","level":"concurrency 1","llm_probe_version":"0.1.0"},
            "endpoint":{"response_model":"m","system_fingerprint":null,"server":null,"server_version":null},
            "samples":10,
            "ttft_seconds":{"p50":0.2,"p95":0.25,"p99":0.26},
            "tpot_seconds":{"p50":0.005,"p95":0.006,"p99":0.007},
            "output_tokens_per_second":{"p50":200.0,"p95":210.0,"p99":220.0},
            "e2e_seconds":{"p50":0.3,"p95":0.35,"p99":0.36}}"#,
    )
    .unwrap();
    let native_base = sim.base_url().trim_end_matches("/v1").to_string();
    let yaml = format!(
        "defaults:\n  interval: 1s\n  timeout: 1s\nscenarios:\n  - name: chat\n    messages: [{{role: user, content: \"Say something.\"}}]\n    max_tokens: 4\ntargets:\n  - name: sim\n    protocol: openai-chat\n    base_url: {}\n    model: m\n    baseline_file: {}\n    cost: {{input_per_million: 1.0, output_per_million: 2.0}}\n  - name: native\n    protocol: llama-cpp\n    base_url: {native_base}\n    model: m\n  - name: nousage\n    protocol: openai-chat\n    base_url: {}\n    model: m\n",
        sim.base_url(),
        baseline.display(),
        no_usage.base_url(),
    );
    let d = common::daemon(common::parse(&yaml)).await;
    // Every family a successful probe exports, so the scrape is not taken between the first
    // series' registration and the rest (a race seen on a loaded machine).
    let wanted = [
        "llm_probe_time_to_first_token_seconds",
        "llm_probe_time_per_output_token_seconds",
        "llm_probe_output_tokens_per_second",
        "llm_probe_server_prefill_seconds",
        "llm_probe_stream_anomalies_total",
    ];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let families = loop {
        let (status, _, text) = common::get(d.addr, "/metrics", None).await;
        assert_eq!(status, 200);
        let families: BTreeSet<String> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .filter_map(|l| l.split_whitespace().next())
            .map(str::to_string)
            .collect();
        if wanted.iter().all(|w| families.contains(*w)) {
            break families;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the daemon did not export {wanted:?} within 60 s; it has {families:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    d.stop().await;
    families
}

/// Families that exist only against servers the simulator does not imitate, with the name they
/// are registered under in `src/exporter/metrics/` (checked, so a rename cannot leave this list stale).
/// The answer-check and tool-call families exist once a probe answers wrong or makes a tool
/// call, which the docs test's clean simulator stream does not.
const CONDITIONAL_FAMILIES: &[(&str, &str)] = &[
    // Responses with rate-limit headers only (hosted APIs).
    ("llm_probe_rate_limit_limit", "\"rate_limit_limit\""),
    ("llm_probe_rate_limit_remaining", "\"rate_limit_remaining\""),
    ("llm_probe_rate_limit_reset_seconds", "\"rate_limit_reset\""),
    // Scenarios with prompt_tokens only (generated long prompts), and targets with a floor.
    (
        "llm_probe_prefill_tokens_per_second",
        "\"prefill_tokens_per_second\"",
    ),
    (
        "llm_probe_server_prefill_tokens_per_second",
        "\"server_prefill_tokens_per_second\"",
    ),
    (
        "llm_probe_slo_prefill_tokens_per_second",
        "\"slo_prefill_tokens_per_second\"",
    ),
    // Scenarios with turns only (multi-turn conversations).
    (
        "llm_probe_turn_time_to_first_token_seconds",
        "\"turn_time_to_first_token\"",
    ),
    (
        "llm_probe_turn_output_tokens_per_second",
        "\"turn_output_tokens_per_second\"",
    ),
    (
        "llm_probe_turn_prompt_tokens_total",
        "\"turn_prompt_tokens\"",
    ),
    (
        "llm_probe_turn_prompt_cached_tokens_total",
        "\"turn_prompt_cached_tokens\"",
    ),
    // Pinned baselines of long-prompt scenarios only.
    (
        "llm_probe_baseline_prefill_tokens_per_second",
        "\"baseline_prefill_tokens_per_second\"",
    ),
    // Targets with replicas: only (replica discovery).
    ("llm_probe_replicas", "\"replicas\""),
    ("llm_probe_replicas_discovered", "\"replicas_discovered\""),
    (
        "llm_probe_replica_discovery_failures_total",
        "\"replica_discovery_failures\"",
    ),
    // Targets with server_metrics_url only (engine metrics beside the probe).
    (
        "llm_probe_server_requests_waiting",
        "\"server_requests_waiting\"",
    ),
    (
        "llm_probe_server_requests_running",
        "\"server_requests_running\"",
    ),
    (
        "llm_probe_server_kv_cache_usage_ratio",
        "\"server_kv_cache_usage_ratio\"",
    ),
    (
        "llm_probe_server_metrics_scrape_failures_total",
        "\"server_metrics_scrape_failures\"",
    ),
    (
        "llm_probe_prompt_cached_tokens_total",
        "\"prompt_cached_tokens\"",
    ),
    (
        "llm_probe_answer_check_failures_total",
        "\"answer_check_failures\"",
    ),
    (
        "llm_probe_time_to_first_tool_call_seconds",
        "\"time_to_first_tool_call\"",
    ),
    (
        "llm_probe_tool_call_arguments_seconds",
        "\"tool_call_arguments\"",
    ),
    (
        "llm_probe_prefix_cache_warm_cold_ratio",
        "\"prefix_cache_warm_cold_ratio\"",
    ),
    (
        "llm_probe_prefix_cache_warm_cached_tokens",
        "\"prefix_cache_warm_cached_tokens\"",
    ),
];

/// Whether the name `mentioned` in the docs is (a series of) an exported family.
fn is_exported(mentioned: &str, prefix: bool, families: &BTreeSet<String>) -> bool {
    if prefix {
        return families.iter().any(|f| f.starts_with(mentioned));
    }
    let stem = ["_bucket", "_count", "_sum", "_created"]
        .iter()
        .find_map(|s| mentioned.strip_suffix(s))
        .unwrap_or(mentioned);
    families.contains(mentioned)
        || families.contains(stem)
        || families.contains(&format!("{mentioned}_total"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_metric_is_documented_and_every_documented_metric_exists() {
    let mut families = exported_families().await;
    let source: String = std::fs::read_dir(root().join("src/exporter/metrics"))
        .expect("src/exporter/metrics/ is readable")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .map(|p| read(&p))
        .collect();
    for (family, registered) in CONDITIONAL_FAMILIES {
        assert!(
            source.contains(registered),
            "src/exporter/metrics/ no longer registers {registered}: update CONDITIONAL_FAMILIES in tests/fast/project/docs.rs"
        );
        families.insert((*family).to_string());
    }
    let mut problems = Vec::new();
    let mut all_docs = user_docs();
    for extra in ["CONTRIBUTING.md", "dashboards/README.md"] {
        all_docs.push((root().join(extra), read(&root().join(extra))));
    }
    for (path, text) in &all_docs {
        for (name, prefix) in mentioned_metrics(text) {
            if !is_exported(&name, prefix, &families) {
                problems.push(format!(
                    "{}: mentions {name}{}, which llm-probe does not export",
                    rel(path),
                    if prefix { "*" } else { "" }
                ));
            }
        }
    }
    let documented: String = user_docs().into_iter().map(|(_, t)| t).collect();
    for family in &families {
        let found = documented.match_indices(family.as_str()).any(|(at, _)| {
            !documented[at + family.len()..]
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
        });
        if !found {
            problems.push(format!(
                "the exported metric {family} is documented nowhere in README.md or docs/ (docs/metrics.md lists them)"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The rows `` | `value` | … `` of the table under `## {heading}` in `text`.
fn table_values(text: &str, heading: &str) -> BTreeSet<String> {
    text.split(&format!("\n## {heading}\n"))
        .nth(1)
        .map(|section| section.split("\n## ").next().unwrap())
        .into_iter()
        .flat_map(str::lines)
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next())
        .map(str::to_string)
        .collect()
}

#[test]
fn every_failure_reason_and_anomaly_is_explained() {
    use llm_probe::measure::{Anomaly, FailureReason};
    let text = read(&root().join("docs/metrics.md"));
    let reasons = table_values(&text, "Failure reasons");
    let kinds = table_values(&text, "Stream anomalies");
    let code_reasons: BTreeSet<String> = FailureReason::ALL
        .iter()
        .map(|r| r.as_str().to_string())
        .collect();
    let code_kinds: BTreeSet<String> = Anomaly::ALL
        .iter()
        .map(|a| a.as_str().to_string())
        .collect();
    let mut problems = Vec::new();
    for (what, code, docs) in [
        ("failure reason", &code_reasons, &reasons),
        ("anomaly kind", &code_kinds, &kinds),
    ] {
        for v in code.difference(docs) {
            problems.push(format!(
                "docs/metrics.md: the {what} `{v}` has no row in its table"
            ));
        }
        for v in docs.difference(code) {
            problems.push(format!(
                "docs/metrics.md: the table lists the {what} `{v}`, which llm-probe does not have"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

// ---------------------------------------------------------------------------------------------
// Configuration keys

const PROBE_KEY: &str = "zzqxdocsprobe";

/// A YAML document that puts `leaf` at `path` (each step a key, `true` when its value is a list
/// of mappings).
fn nested_yaml(path: &[(String, bool)], leaf: &str) -> String {
    let mut value = leaf.to_string();
    for (key, list) in path.iter().rev() {
        value = if *list {
            format!("{{{key}: [{value}]}}")
        } else {
            format!("{{{key}: {value}}}")
        };
    }
    value
}

/// The keys the parser allows in the mapping at `path`, if that is a mapping with fixed keys:
/// read from the error for an unknown key there.
fn allowed_keys(path: &[(String, bool)]) -> Option<Vec<String>> {
    let yaml = nested_yaml(path, &format!("{{{PROBE_KEY}: 1}}"));
    let err = match llm_probe::config::parse(&yaml, "docs-test.yaml", &|_| None) {
        Ok(_) => return None,
        Err(e) => e.to_string(),
    };
    let line = err
        .lines()
        .find(|l| l.contains(&format!("unknown key \"{PROBE_KEY}\"")))?;
    if line.contains("no keys are allowed here") {
        return Some(Vec::new());
    }
    let list = line
        .split_once("allowed here: ")
        .or_else(|| line.split_once("allowed here are: "))
        .unwrap_or_else(|| panic!("cannot read the allowed keys from: {line}"))
        .1
        .trim_end_matches('.');
    Some(list.split(", ").map(str::to_string).collect())
}

/// Every key path the probes file accepts (`targets.tls.ca_file`, list steps without `[]`),
/// found by walking the parser: a key whose value can be a mapping (or a list of mappings) with
/// fixed keys is descended into.
fn accepted_keys() -> BTreeSet<String> {
    fn walk(path: &mut Vec<(String, bool)>, out: &mut BTreeSet<String>) {
        let keys = allowed_keys(path).expect("the parser names the keys allowed here");
        for key in keys {
            path.push((key.clone(), false));
            let as_map = allowed_keys(path);
            let nested = if as_map.is_some() {
                true
            } else {
                path.last_mut().unwrap().1 = true;
                allowed_keys(path).is_some()
            };
            let dotted: Vec<&str> = path.iter().map(|(k, _)| k.as_str()).collect();
            out.insert(dotted.join("."));
            if nested {
                walk(path, out);
            }
            path.pop();
        }
    }
    let mut out = BTreeSet::new();
    walk(&mut Vec::new(), &mut out);
    out
}

/// The keys listed in the first column of the "## Keys" table of `docs/configuration.md`:
/// `` `targets[].tls.cert_file`, `tls.key_file` `` lists `targets.tls.cert_file` and
/// `targets.tls.key_file` (later names are relative to the first one's parent).
fn documented_keys(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let section = text
        .split("\n## Keys")
        .nth(1)
        .expect("docs/configuration.md has a \"## Keys\" section");
    let section = section.split("\n## ").next().unwrap();
    for line in section.lines().filter(|l| l.starts_with("| `")) {
        let first = line[1..].split(" | ").next().unwrap_or("");
        let names: Vec<String> = first
            .split('`')
            .skip(1)
            .step_by(2)
            .map(|n| n.replace("[]", ""))
            .collect();
        let Some(full) = names.first() else { continue };
        let parent = full.rsplit_once('.').map_or("", |(p, _)| p);
        out.insert(full.clone());
        for n in &names[1..] {
            // `tls.key_file` after `targets[].tls.cert_file`: relative to `targets`.
            let base = match n.split_once('.') {
                Some((head, _)) => full
                    .find(&format!(".{head}."))
                    .map_or(parent, |i| &full[..i]),
                None => parent,
            };
            out.insert(if base.is_empty() {
                n.to_string()
            } else {
                format!("{base}.{n}")
            });
        }
    }
    out
}

#[test]
fn the_minimal_file_of_the_configuration_reference_loads() {
    let text = read(&root().join("docs/configuration.md"));
    let yaml = text
        .split("```yaml\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("docs/configuration.md shows a minimal file in a ```yaml block");
    let env = |name: &str| (name == "STAGING_API_KEY").then(|| "sk-docs".to_string());
    if let Err(e) = llm_probe::config::parse(yaml, "docs/configuration.md", &env) {
        panic!("the minimal file of docs/configuration.md does not load:\n{e}");
    }
}

#[test]
fn the_configuration_reference_lists_exactly_the_keys_the_parser_accepts() {
    let accepted = accepted_keys();
    assert!(
        accepted.contains("targets.base_url") && accepted.contains("targets.tls.ca_file"),
        "walking the parser found too little: {accepted:?}"
    );
    let text = read(&root().join("docs/configuration.md"));
    let documented = documented_keys(&text);
    let mut problems = Vec::new();
    for key in &accepted {
        let is_parent = accepted.iter().any(|k| k.starts_with(&format!("{key}.")));
        let listed = documented.contains(key)
            || (is_parent && documented.iter().any(|d| d.starts_with(&format!("{key}."))));
        if !listed {
            problems.push(format!(
                "docs/configuration.md: the probes file accepts `{key}`, but the \"## Keys\" table does not list it"
            ));
        }
    }
    for key in &documented {
        if !accepted.contains(key) {
            problems.push(format!(
                "docs/configuration.md: the \"## Keys\" table lists `{key}`, which the probes file does not accept"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

// ---------------------------------------------------------------------------------------------
// Alerts

#[test]
fn every_alert_has_a_runbook_section() {
    let runbook = root().join("docs/alerting.md");
    let headings = anchors(&read(&runbook));
    let mut problems = Vec::new();
    let mut alerts = 0;
    for entry in std::fs::read_dir(root().join("dashboards/prometheus")).unwrap() {
        let path = entry.unwrap().path();
        if !path.to_string_lossy().ends_with(".rules.yml") {
            continue;
        }
        let doc: serde_yaml::Value = serde_yaml::from_str(&read(&path)).unwrap();
        for group in doc["groups"].as_sequence().into_iter().flatten() {
            for rule in group["rules"].as_sequence().into_iter().flatten() {
                let Some(alert) = rule["alert"].as_str() else {
                    continue;
                };
                alerts += 1;
                if !headings.contains(&alert.to_lowercase()) {
                    problems.push(format!(
                        "{}: the alert {alert} has no runbook heading `### {alert}` (anchor #{}) in docs/alerting.md",
                        rel(&path),
                        alert.to_lowercase()
                    ));
                }
            }
        }
    }
    assert!(alerts > 10, "only {alerts} alerts found");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

// ---------------------------------------------------------------------------------------------
// Command-line flags

fn help(args: &[&str]) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_llm-probe"))
        .args(args)
        .arg("--help")
        .output()
        .expect("llm-probe runs");
    assert!(out.status.success(), "llm-probe {args:?} --help failed");
    String::from_utf8(out.stdout).unwrap()
}

/// The subcommands listed under `Commands:` in a help text (without `help`).
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        // A command's line starts two spaces in; wrapped description lines start further in.
        .filter(|l| l.starts_with("  ") && !l[2..].starts_with(' '))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_string)
        .collect()
}

/// The long flags `--x.y-z` on the option lines of a help text.
fn long_flags(help: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in help.lines().filter(|l| l.trim_start().starts_with('-')) {
        for (at, _) in line.match_indices("--") {
            let flag: String = line[at + 2..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-'))
                .collect();
            let flag = flag.trim_end_matches(['.', '-']);
            if !flag.is_empty() && flag != "help" && flag != "version" {
                out.insert(format!("--{flag}"));
            }
        }
    }
    out
}

/// Whether `flag` occurs in `text` as a whole flag (not as the tail of a longer one).
fn mentions_flag(text: &str, flag: &str) -> bool {
    let part = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_');
    text.match_indices(flag).any(|(at, _)| {
        !text[..at].chars().next_back().is_some_and(part)
            && !text[at + flag.len()..]
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    })
}

#[test]
fn every_long_flag_of_every_subcommand_is_documented() {
    let documented: String = user_docs().into_iter().map(|(_, t)| t).collect();
    let mut problems = Vec::new();
    let mut queue: Vec<Vec<String>> = vec![Vec::new()];
    let mut commands = 0;
    while let Some(cmd) = queue.pop() {
        let args: Vec<&str> = cmd.iter().map(String::as_str).collect();
        let text = help(&args);
        commands += 1;
        for sub in subcommands(&text) {
            let mut next = cmd.clone();
            next.push(sub);
            queue.push(next);
        }
        for flag in long_flags(&text) {
            if !mentions_flag(&documented, &flag) {
                problems.push(format!(
                    "`llm-probe {}` has the flag {flag}, which README.md and docs/ never mention",
                    cmd.join(" ")
                ));
            }
        }
    }
    assert!(commands > 5, "only {commands} commands found");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

// ---------------------------------------------------------------------------------------------
// The checkers themselves

#[test]
fn slugs_follow_github() {
    assert_eq!(slug("HTTP 404 → your base_url"), "http-404--your-base_url");
    assert_eq!(
        slug("4d. Classic vs native histograms"),
        "4d-classic-vs-native-histograms"
    );
    assert_eq!(
        slug("Load testing with `llm-probe bench`"),
        "load-testing-with-llm-probe-bench"
    );
    assert_eq!(slug("See [metrics](metrics.md) now"), "see-metrics-now");
    let a = anchors("# A\n## A\n```\n# not a heading\n```\n### B c\n");
    assert_eq!(
        a.into_iter().collect::<Vec<_>>(),
        ["a", "a-1", "b-c"].map(String::from)
    );
}

#[test]
fn the_checkers_find_what_they_look_for() {
    assert_eq!(
        link_targets("see [x](a.md#b) and ![i](c.svg \"t\")\n```\n[no](d.md)\n```\n"),
        vec![(1, "a.md#b".to_string()), (1, "c.svg".to_string())]
    );
    let m = mentioned_metrics(
        "`llm_probe_a_total`, llm_probe_baseline_*, x:llm_probe_b:rate5m, llm_probe_c{x=\"1\"}",
    );
    assert_eq!(
        m.into_iter().collect::<Vec<_>>(),
        vec![
            ("llm_probe_a_total".to_string(), false),
            ("llm_probe_baseline_".to_string(), true),
            ("llm_probe_c".to_string(), false)
        ]
    );
    let fams: BTreeSet<String> = ["llm_probe_h_seconds", "llm_probe_probes_total"]
        .map(String::from)
        .into();
    assert!(is_exported("llm_probe_h_seconds_bucket", false, &fams));
    assert!(is_exported("llm_probe_probes", false, &fams));
    assert!(!is_exported("llm_probe_h", false, &fams));
    assert!(mentions_flag("use `--config.file F`", "--config.file"));
    assert!(!mentions_flag("use --web.config.file", "--config.file"));
    assert!(!mentions_flag(
        "--shard.index-from-hostname",
        "--shard.index"
    ));
    assert_eq!(
        long_flags("Options:\n      --config.file <FILE>  the file\n  -h, --help  Print help\n"),
        ["--config.file".to_string()].into()
    );
    let keys = documented_keys(
        "x\n## Keys\n| `targets[].tls.cert_file`, `tls.key_file` | x |\n| `targets[].interval`, `timeout` | y |\n## Next\n| `no` | z |\n",
    );
    assert_eq!(
        keys.into_iter().collect::<Vec<_>>(),
        [
            "targets.interval",
            "targets.timeout",
            "targets.tls.cert_file",
            "targets.tls.key_file"
        ]
        .map(String::from)
    );
}
