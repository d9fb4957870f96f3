//! How `compare` prints a [`Comparison`]: an aligned terminal table, markdown (for a PR
//! comment) or JSON (`"schema": "llm-probe.compare/v1"`). Strings from the run files pass
//! through [`terminal_safe`] (text, markdown) or [`crate::report::json_text`] (JSON).

use serde_json::{json, Value};

use super::input::{LevelKey, Run};
use super::selection::{workload, Estimate, Selection};
use super::{Comparison, FailureRow, Metric, Row, QUANTILES};
use crate::sanitize::terminal_safe;

/// The JSON schema name of `compare --output json`.
pub const SCHEMA: &str = "llm-probe.compare/v1";

pub(super) fn pct(x: f64) -> String {
    if x.is_infinite() {
        return if x > 0.0 {
            "+∞ %".into()
        } else {
            "−∞ %".into()
        };
    }
    format!("{:+.1} %", x * 100.0)
}

pub(super) fn interval(low: Option<f64>, high: Option<f64>) -> String {
    match (low, high) {
        (Some(l), Some(h)) => format!("[{:+.1}, {:+.1}] %", l * 100.0, h * 100.0),
        _ => "[unbounded: too few requests]".into(),
    }
}

fn value(metric: Metric, v: Option<f64>) -> String {
    match v {
        None => "-".into(),
        Some(v) if metric.is_seconds() => format!("{:.1}", v * 1e3),
        Some(v) => format!("{v:.1}"),
    }
}

fn unit(metric: Metric) -> &'static str {
    if metric.is_seconds() {
        "ms"
    } else {
        "tok/s"
    }
}

pub(super) fn p_value(p: f64) -> String {
    if p < 1e-4 {
        format!("{p:.0e}")
    } else {
        format!("{p:.4}")
    }
}

const HEADER: [&str; 9] = [
    "metric",
    "n",
    "P50 before → after",
    "P95 before → after",
    "P99 before → after",
    "P95 change [CI]",
    "shift [CI]",
    "p",
    "verdict",
];

fn row_cells(r: &Row) -> Vec<String> {
    let pair = |i: usize| {
        format!(
            "{} → {} {}",
            value(r.metric, r.before[i]),
            value(r.metric, r.after[i]),
            unit(r.metric)
        )
    };
    let p95_change = match (r.before[1], r.after[1]) {
        (Some(b), Some(a)) if b != 0.0 => format!(
            "{} {}",
            pct(a / b - 1.0),
            r.change_ci[1].map_or("[-]".into(), |(l, h)| interval(Some(l), Some(h)))
        ),
        _ => "-".into(),
    };
    let (shift, p) = r.evidence.as_ref().map_or(("-".into(), "-".into()), |e| {
        (
            format!("{} {}", pct(e.change), interval(e.low, e.high)),
            p_value(e.p_value),
        )
    });
    vec![
        r.metric.label().into(),
        format!("{}/{}", r.n_before, r.n_after),
        pair(0),
        pair(1),
        pair(2),
        p95_change,
        shift,
        p,
        r.verdict
            .map_or("n/a (no values on one side)".into(), |v| v.label()),
    ]
}

pub(super) fn failure_cells(f: &FailureRow) -> Vec<String> {
    let ratio = |(sent, failed): (u64, u64)| {
        if sent == 0 {
            "-".into()
        } else {
            format!("{failed} ({:.1} %)", failed as f64 / sent as f64 * 100.0)
        }
    };
    let (verdict, p) = match &f.test {
        Some((v, t)) => (v.label(), p_value(t.p_value)),
        None => ("n/a (nothing sent)".into(), "-".into()),
    };
    vec![
        "failure ratio".into(),
        format!("{}/{} sent", f.before.0, f.after.0),
        format!("{} → {}", ratio(f.before), ratio(f.after)),
        String::new(),
        String::new(),
        String::new(),
        String::new(),
        p,
        verdict,
    ]
}

fn level_title(key: LevelKey) -> String {
    key.to_string()
}

fn run_title(run: &Run) -> String {
    terminal_safe(&format!(
        "{} (target {}, model {}, scenario {})",
        run.path.display(),
        run.target.as_deref().unwrap_or("?"),
        run.model.as_deref().unwrap_or("?"),
        run.scenario.as_deref().unwrap_or("?"),
    ))
    .into_owned()
}

fn method_line(c: &Comparison) -> String {
    let confidence = (1.0 - c.options.rule.alpha) * 100.0;
    format!(
        "P95 change: relative change of the P95 with its {confidence:.0} % bootstrap interval \
         (over requests, {} resamples, seed {}). Shift: Hodges–Lehmann shift relative to BEFORE's \
         median with its {confidence:.0} % distribution-free interval. p: two-sided Mann–Whitney \
         U test, tie-corrected (failure ratio: two-proportion z-test). Verdict: α = {}, \
         threshold {:.0} %.",
        c.options.resamples,
        c.options.seed,
        c.options.rule.alpha,
        c.options.rule.threshold * 100.0,
    )
}

pub(super) fn aligned(rows: &[Vec<String>]) -> String {
    let columns = rows.first().map_or(0, Vec::len);
    let widths: Vec<usize> = (0..columns)
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for r in rows {
        let line: Vec<String> = r
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c}{}", " ".repeat(w - c.chars().count())))
            .collect();
        out += line.join("  ").trim_end();
        out.push('\n');
    }
    out
}

pub(super) fn markdown_table(rows: &[Vec<String>]) -> String {
    let mut out = String::new();
    for (i, r) in rows.iter().enumerate() {
        let cells: Vec<String> = r.iter().map(|c| c.replace('|', "\\|")).collect();
        out += &format!("| {} |\n", cells.join(" | "));
        if i == 0 {
            out += &format!("|{}\n", "---|".repeat(r.len()));
        }
    }
    out
}

fn table_rows(level: &super::LevelComparison) -> Vec<Vec<String>> {
    let mut rows = vec![HEADER.map(String::from).to_vec()];
    rows.extend(level.rows.iter().map(row_cells));
    rows.push(failure_cells(&level.failures));
    rows
}

fn estimate_text(e: &Estimate, scale: f64, digits: usize) -> String {
    match (e.low, e.high) {
        (Some(l), Some(h)) => format!(
            "{:.d$} [{:.d$}, {:.d$}]",
            e.value * scale,
            l * scale,
            h * scale,
            d = digits
        ),
        _ => format!("{:.d$} [interval open]", e.value * scale, d = digits),
    }
}

fn selection_text(s: &Selection, before: &Run, after: &Run) -> String {
    let name = |r: &Run| terminal_safe(r.path.to_string_lossy().as_ref()).into_owned();
    let mut out = format!(
        "\nChoosing between the endpoints (E2E ≈ TTFT + (N − 1) × TPOT, medians; 95 % bootstrap intervals):\n  BEFORE {}: TTFT {:.1} ms, TPOT {:.2} ms (n = {})\n  AFTER  {}: TTFT {:.1} ms, TPOT {:.2} ms (n = {})\n",
        terminal_safe(&s.before.label),
        s.before.ttft * 1e3,
        s.before.tpot * 1e3,
        s.before.n,
        terminal_safe(&s.after.label),
        s.after.ttft * 1e3,
        s.after.tpot * 1e3,
        s.after.n,
    );
    match &s.crossover {
        Some(c) => {
            let (short, long) = if s.before.ttft < s.after.ttft {
                ("BEFORE", "AFTER")
            } else {
                ("AFTER", "BEFORE")
            };
            out += &format!(
                "  Crossover at {} output tokens: {short} is faster for shorter answers, {long} for longer ones.\n",
                estimate_text(c, 1.0, 1)
            );
        }
        None => {
            let faster = if s.before.ttft <= s.after.ttft && s.before.tpot <= s.after.tpot {
                name(before)
            } else {
                name(after)
            };
            out +=
                &format!("  No crossover: {faster} is at least as fast at every output length.\n");
        }
    }
    let mut rows = vec![vec![
        "output tokens".to_string(),
        "typical of".into(),
        "BEFORE E2E ms".into(),
        "AFTER E2E ms".into(),
    ]];
    for l in &s.lengths {
        rows.push(vec![
            l.tokens.to_string(),
            workload(l.tokens).into(),
            estimate_text(&l.before, 1e3, 0),
            estimate_text(&l.after, 1e3, 0),
        ]);
    }
    for r in &rows {
        out += &format!("  {:<14} {:<24} {:<28} {}\n", r[0], r[1], r[2], r[3]);
    }
    out
}

fn preamble(c: &Comparison, before: &Run, after: &Run) -> String {
    let mut out = format!(
        "BEFORE {}\nAFTER  {}\n",
        run_title(before),
        run_title(after)
    );
    for w in &c.warnings {
        out += &format!("warning: {}\n", terminal_safe(w));
    }
    for u in &c.unmatched {
        out += &format!("not compared: {}\n", terminal_safe(u));
    }
    out
}

/// The terminal table: a header naming both runs and the rule, then one table per level.
pub fn to_text(c: &Comparison, before: &Run, after: &Run) -> String {
    let mut out = preamble(c, before, after);
    out += &method_line(c);
    out.push('\n');
    for level in &c.levels {
        out += &format!("\n{}\n", level_title(level.key));
        out += &aligned(&table_rows(level));
    }
    if let Some(s) = &c.selection {
        out += &selection_text(s, before, after);
    }
    out += &summary_line(c);
    out
}

fn summary_line(c: &Comparison) -> String {
    if c.has_regression() {
        "\nRESULT: regression (exit status 1)\n".into()
    } else {
        "\nRESULT: no regression\n".into()
    }
}

/// Markdown for a PR comment: the same tables as [`to_text`].
pub fn to_markdown(c: &Comparison, before: &Run, after: &Run) -> String {
    let mut out = String::from("### llm-probe compare\n\n");
    // The preamble holds names and identities from the files: shown, never rendered.
    for line in preamble(c, before, after).lines() {
        out += &format!("- {}\n", crate::sanitize::markdown_text(line));
    }
    out += &format!("\n{}\n", method_line(c));
    for level in &c.levels {
        out += &format!("\n#### {}\n\n", level_title(level.key));
        out += &markdown_table(&table_rows(level));
    }
    if let Some(s) = &c.selection {
        out += &code_block(selection_text(s, before, after).trim_start());
    }
    out += &format!("\n**{}**\n", summary_line(c).trim());
    out
}

/// `text` as a fenced code block whose fence is longer than any run of backticks inside, so a
/// name from a file cannot close it early (CommonMark §4.5).
fn code_block(text: &str) -> String {
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest.max(2) + 1);
    format!("\n{fence}\n{text}{fence}\n")
}

/// `{p50, p95, p99}` with each percentile's order-statistic interval as `p50_ci` … (`null`: too
/// few requests for one).
fn quantile_object(v: &[Option<f64>; 3], ci: &[Option<(f64, f64)>; 3]) -> Value {
    let ci = |i: usize| ci[i].map(|(l, h)| vec![l, h]);
    json!({
        "p50": v[0], "p95": v[1], "p99": v[2],
        "p50_ci": ci(0), "p95_ci": ci(1), "p99_ci": ci(2),
        "ci_method": "order statistics",
    })
}

/// The `failure_ratio` object of a level (or a window's scenario): counts, p-value, verdict.
pub(crate) fn failure_json(f: &super::FailureRow) -> Value {
    json!({
        "sent_before": f.before.0, "failed_before": f.before.1,
        "sent_after": f.after.0, "failed_after": f.after.1,
        "p_value": f.test.as_ref().map(|t| t.1.p_value),
        "verdict": f.test.as_ref().map(|t| t.0.name()),
    })
}

fn row_json(r: &Row) -> Value {
    let ci = |i: usize| r.change_ci[i].map(|(l, h)| vec![l, h]);
    json!({
        "n_before": r.n_before,
        "n_after": r.n_after,
        "before": quantile_object(&r.before, &r.before_ci),
        "after": quantile_object(&r.after, &r.after_ci),
        "change_ci": { "p50": ci(0), "p95": ci(1), "p99": ci(2) },
        "change_ci_method": "bootstrap",
        "mann_whitney_p": r.evidence.as_ref().map(|e| e.p_value),
        "hodges_lehmann": r.evidence.as_ref().map(|e| json!({
            "shift": e.shift.estimate,
            "low": e.shift.low,
            "high": e.shift.high,
            "relative": e.change,
            "relative_low": e.low,
            "relative_high": e.high,
            "before_median": e.before_median,
        })),
        "verdict": r.verdict.map(|v| v.name()),
        "verdict_label": r.verdict.map(|v| v.label()),
        "more_requests": match r.verdict {
            Some(super::verdict::Verdict::Inconclusive { more_requests }) => Some(more_requests),
            _ => None,
        },
    })
}

fn run_json(r: &Run) -> Value {
    json!({
        "file": r.path.to_string_lossy(),
        "kind": match r.kind { super::input::RunKind::Bench => "bench", super::input::RunKind::ProbeOnce => "probe-once" },
        "target": r.target,
        "model": r.model,
        "scenario": r.scenario,
        "prompt_tokens": r.prompt_tokens,
        "max_tokens": r.max_tokens,
        "endpoint_identity": {
            "response_model": r.identity.response_model,
            "system_fingerprint": r.identity.system_fingerprint,
            "server_header": r.identity.server_header,
            "server_version": r.identity.server_version,
        },
    })
}

fn estimate_json(e: &Estimate) -> Value {
    json!({ "value": e.value, "low": e.low, "high": e.high })
}

/// The JSON document (`schema` [`SCHEMA`]): `before`/`after` run metadata, `rule`,
/// `warnings`, `unmatched_levels`, `levels[]` (`concurrency`, `rate`, one object per metric
/// named as the daemon's metrics, `failure_ratio`), `selection` (or null) and `regression`.
pub fn to_json(c: &Comparison, before: &Run, after: &Run) -> Value {
    let levels: Vec<Value> = c
        .levels
        .iter()
        .map(|l| {
            let mut o = serde_json::Map::new();
            let (conc, rate) = match l.key {
                LevelKey::Concurrency(n) => (Some(n), None),
                LevelKey::Rate(r) => (None, Some(r)),
                LevelKey::Single => (None, None),
            };
            o.insert("concurrency".into(), json!(conc));
            o.insert("rate".into(), json!(rate));
            for r in &l.rows {
                o.insert(r.metric.json_name().into(), row_json(r));
            }
            o.insert("failure_ratio".into(), failure_json(&l.failures));
            Value::Object(o)
        })
        .collect();
    let selection = c.selection.as_ref().map(|s| {
        json!({
            "before": { "label": s.before.label, "ttft_seconds": s.before.ttft, "tpot_seconds": s.before.tpot, "n": s.before.n },
            "after": { "label": s.after.label, "ttft_seconds": s.after.ttft, "tpot_seconds": s.after.tpot, "n": s.after.n },
            "crossover_output_tokens": s.crossover.as_ref().map(estimate_json),
            "expected_e2e_seconds": s.lengths.iter().map(|l| json!({
                "output_tokens": l.tokens,
                "before": estimate_json(&l.before),
                "after": estimate_json(&l.after),
            })).collect::<Vec<_>>(),
        })
    });
    json!({
        "schema": SCHEMA,
        "before": run_json(before),
        "after": run_json(after),
        "rule": {
            "alpha": c.options.rule.alpha,
            "threshold": c.options.rule.threshold,
            "test": "mann-whitney-u two-sided tie-corrected, continuity-corrected normal approximation",
            "shift": "hodges-lehmann with moses interval, relative to before median",
            "bootstrap_resamples": c.options.resamples,
            "seed": c.options.seed,
            "quantiles": QUANTILES,
        },
        "warnings": c.warnings,
        "unmatched_levels": c.unmatched,
        "levels": levels,
        "selection": selection,
        "regression": c.has_regression(),
    })
}
