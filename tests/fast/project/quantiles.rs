//! One implementation per quantile definition: every quantile llm-probe computes is
//! `src/core/stats/`'s, so bench's P95, compare's, a baseline's and the status
//! page's P95 of the same samples cannot drift apart again.
//!
//! The rule, checked by a source scan of `src/` outside `src/core/stats/`
//! (comment lines left out): no `fn` is defined that
//!
//! - has a name that says it computes a quantile: it contains `quantile`, `percentile`,
//!   `median` or `harrell_davis`, or it is a percentile's short name (`p` and digits, alone or
//!   before `_`: `p95`, `p99_of`), and
//! - takes samples: a parameter whose type is a slice or vector of `f64` (`[f64]` or `Vec<f64>`,
//!   by value, by reference or mutable reference, with or without a lifetime). A parameter named
//!   `qs` is the list of quantile levels asked for, not samples.
//!
//! So a caller asks `crate::stats` (type 7 for raw samples, `histogram_quantile` for bucket
//! counts, Harrell–Davis for compare's calibration) and never re-derives one. Allowed: methods
//! that ask `crate::stats` about their own data (`Histogram::quantile(&self, q)`), the normal
//! distribution's quantile function (`normal_quantile(p: f64)`), functions over quantile levels
//! (`bootstrap_quantiles(…, qs: &[f64], …)`) and formatters of finished quantiles.

use std::path::{Path, PathBuf};

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

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Whether a function's name says it computes a quantile.
fn names_a_quantile(name: &str) -> bool {
    let short = name
        .strip_prefix('p')
        .map(|rest| rest.split('_').next().unwrap_or(""))
        .is_some_and(|digits| !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit()));
    short
        || ["quantile", "percentile", "median", "harrell_davis"]
            .iter()
            .any(|w| name.contains(w))
}

/// Whether one parameter (`name: type`) is a sample of `f64` values.
fn is_sample(param: &str) -> bool {
    let Some((name, ty)) = param.split_once(':') else {
        return false; // `self`, `&self`, `&mut self`
    };
    if name.trim().trim_start_matches("mut ").trim() == "qs" {
        return false;
    }
    let ty: String = ty.chars().filter(|c| !c.is_whitespace()).collect();
    let mut ty = ty.trim_start_matches('&');
    if let Some(rest) = ty.strip_prefix('\'') {
        ty = rest.trim_start_matches(is_ident); // a lifetime
    }
    let ty = ty.strip_prefix("mut").unwrap_or(ty);
    ty == "[f64]" || ty == "Vec<f64>"
}

/// The top-level items of a parameter list (commas inside `()`, `<>` and `[]` do not split).
fn split_params(list: &str) -> Vec<&str> {
    let (mut depth, mut start, mut out) = (0i32, 0, Vec::new());
    let mut prev = ' ';
    for (i, c) in list.char_indices() {
        match c {
            '(' | '<' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            '>' if prev != '-' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&list[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        prev = c;
    }
    out.push(&list[start..]);
    out.into_iter().filter(|p| !p.trim().is_empty()).collect()
}

/// Every `fn` of `text` (comment lines left out) whose name says it computes a quantile and that
/// takes samples, as `(line, name)`.
fn quantile_functions(text: &str) -> Vec<(usize, String)> {
    let code: String = text
        .lines()
        .map(|l| {
            if l.trim_start().starts_with("//") {
                ""
            } else {
                l
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = code[from..].find("fn ").map(|i| from + i) {
        from = at + 3;
        if code[..at].chars().next_back().is_some_and(is_ident) {
            continue; // `myfn ` is not `fn `
        }
        let rest = code[from..].trim_start();
        let name_end = rest.find(|c: char| !is_ident(c)).unwrap_or(rest.len());
        let (name, mut rest) = (&rest[..name_end], rest[name_end..].trim_start());
        if name.is_empty() || !names_a_quantile(name) {
            continue;
        }
        if rest.starts_with('<') {
            // Generic parameters: skip to their closing `>` (not the one of a `->`).
            let (mut depth, mut prev, mut end) = (0i32, ' ', rest.len());
            for (i, c) in rest.char_indices() {
                match c {
                    '<' => depth += 1,
                    '>' if prev != '-' => {
                        depth -= 1;
                        if depth == 0 {
                            end = i + 1;
                            break;
                        }
                    }
                    _ => {}
                }
                prev = c;
            }
            rest = rest[end..].trim_start();
        }
        let Some(list) = rest.strip_prefix('(') else {
            continue;
        };
        let mut depth = 1;
        let close = list.char_indices().find_map(|(i, c)| {
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                _ => {}
            }
            (depth == 0).then_some(i)
        });
        let Some(close) = close else { continue };
        if split_params(&list[..close]).into_iter().any(is_sample) {
            found.push((code[..at].matches('\n').count() + 1, name.to_string()));
        }
    }
    found
}

/// One quantile function found: `(file relative to src/, line, name)`.
type Hit = (String, usize, String);

/// The quantile functions of `src/`, split into those inside the statistics module and those
/// outside it.
fn scan() -> (Vec<Hit>, Vec<Hit>) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let (mut inside, mut outside) = (Vec::new(), Vec::new());
    for file in files {
        let rel = file.strip_prefix(&src).unwrap();
        let in_stats = rel.starts_with("core/stats");
        let text = std::fs::read_to_string(&file).unwrap();
        for (line, name) in quantile_functions(&text) {
            let hit = (rel.display().to_string(), line, name);
            if in_stats {
                inside.push(hit);
            } else {
                outside.push(hit);
            }
        }
    }
    (inside, outside)
}

#[test]
fn the_scanner_finds_quantile_functions_over_samples_and_nothing_else() {
    let flagged = |code: &str| -> Vec<String> {
        quantile_functions(code)
            .into_iter()
            .map(|(_, name)| name)
            .collect()
    };
    // The implementations this rule replaced, and other shapes of one.
    for code in [
        "pub fn quantile(values: &mut [f64], q: f64) -> Option<f64> {",
        "pub fn percentile(sorted: &[f64], q: f64) -> Option<f64> {",
        "fn quantile_of(\n    upper: &[f64],\n    counts: &[u64],\n    q: f64,\n) -> Option<B> {",
        "pub fn median(sample: &[f64]) -> Option<f64> {",
        "fn p95(v: Vec<f64>) -> f64 {",
        "fn p99_of<'a>(v: &'a [f64]) -> f64 {",
        "pub(crate) fn harrell_davis<F: Fn(f64) -> f64>(f: F, sorted: &mut [f64]) -> f64 {",
    ] {
        assert_eq!(flagged(code).len(), 1, "not flagged: {code}");
    }
    // Not quantiles of samples.
    for code in [
        "pub fn quantile(&self, q: f64) -> Option<BinnedQuantile> {",
        "pub fn normal_quantile(p: f64) -> f64 {",
        "pub fn bootstrap_quantiles(before: &Histogram, after: &Histogram, qs: &[f64]) -> Q {",
        "fn medians(pairs: &[(f64, f64)]) -> Option<Medians> {",
        "fn quantile_object(v: &[Option<f64>; 3]) -> Value {",
        "fn summarise(values: &[f64]) -> Summary {",
        "pub fn p95_change(&self) -> f64 {",
        "/// fn quantile(v: &[f64]) -> f64",
        "// fn percentile(v: &[f64]) -> f64",
        "let quantile_fn = |v: &[f64]| 0.0;",
    ] {
        assert!(flagged(code).is_empty(), "flagged: {code}");
    }
    // Line numbers count from 1 across multi-line signatures.
    assert_eq!(
        quantile_functions("use x;\n\nfn median(\n    v: &[f64],\n) -> f64 {"),
        [(3, "median".to_string())]
    );
}

#[test]
fn quantiles_over_samples_are_defined_in_the_stats_module_only() {
    let (inside, outside) = scan();
    // The scan sees the module's own definitions: a scan that found nothing would pass vacuously.
    for name in [
        "quantile_type7",
        "quantiles_type7",
        "median",
        "quantile_ci",
        "histogram_quantile",
        "harrell_davis",
    ] {
        assert!(
            inside.iter().any(|(_, _, n)| n == name),
            "the scan does not see crate::stats::{name}: {inside:?}"
        );
    }
    assert!(
        outside.is_empty(),
        "quantile functions over samples outside src/core/stats/: {outside:?}; call the definition \
         in crate::stats (type 7 for raw samples, histogram_quantile for bucket counts) instead, \
         or move a new definition there, named"
    );
}
