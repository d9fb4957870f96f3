//! How `compare` prints a [`Comparison`]: an aligned terminal table, markdown (for a PR
//! comment) or JSON (`"schema": "llm-probe.compare/v1"`). Strings from the run files pass
//! through [`terminal_safe`] (text, markdown) or [`crate::report::json_text`] (JSON).

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

use super::input::{LevelKey, Run};
use super::selection::{workload, Estimate, Selection};
use super::verdict::Verdict;
use super::{Comparison, FailureRow, Metric, Row, QUANTILES};
use crate::bench::json::LoadKey;
use crate::bench::table::{aligned, markdown_table};
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

/// `x` without trailing zeros: integers as `300`, others with up to 3 significant digits
/// (`0.25`, `12.5`), thousands as `1234` (as the bench charts' ticks,
/// [`crate::bench::chart::tick_label`]); `NaN` and infinities as Rust prints them.
pub(crate) fn number(x: f64) -> String {
    if !x.is_finite() {
        return format!("{x}");
    }
    crate::bench::chart::tick_label(x)
}

/// A value in the table's unit (ms for seconds), 3 significant digits at most (1 decimal below
/// 100, none above).
fn short(metric: Metric, v: f64) -> String {
    let v = if metric.is_seconds() { v * 1e3 } else { v };
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// A relative change in percent, signed, short: `+0.6`, `+84`, `−12`.
fn short_pct(x: f64) -> String {
    if x.is_infinite() {
        return if x > 0.0 {
            "+∞".into()
        } else {
            "−∞".into()
        };
    }
    let p = x * 100.0;
    let t = if p.abs() >= 10.0 {
        format!("{p:+.0}")
    } else {
        format!("{p:+.1}")
    };
    t.replace('-', "−")
}

/// [`short_pct`] for other reports.
pub(crate) fn short_pct_text(x: f64) -> String {
    short_pct(x)
}

/// `+84 [+41, +128]`; an open end is `–`.
fn short_change(change: f64, low: Option<f64>, high: Option<f64>) -> String {
    let end = |e: Option<f64>| e.map_or("–".to_string(), short_pct);
    format!("{} [{}, {}]", short_pct(change), end(low), end(high))
}

/// The level as the summary names it: `C=4`, `2/s`, `4000 tok` (a prompt length), or `all`.
pub(crate) fn level_short(key: LevelKey) -> String {
    match key {
        LevelKey::Concurrency(c) => format!("C={c}"),
        LevelKey::Rate(r) => format!("{}/s", number(r)),
        LevelKey::PromptTokens(t) => format!("{t} tok"),
        LevelKey::Single => "all".into(),
    }
}

/// A capacity: `4`, `2/s`, `4000 tok` or `none`.
fn capacity_short(k: Option<LevelKey>) -> String {
    match k {
        None => "none".into(),
        Some(LevelKey::Concurrency(c)) => c.to_string(),
        Some(k) => level_short(k),
    }
}

/// The verdict cell: `regression (P95)`, `improvement (P50)`, `~`, `inconclusive (P95): ≈ 190 more`.
fn verdict_cell(r: &Row) -> String {
    let by = r.verdict_by.join(", ");
    match r.verdict {
        None => "n/a (no values on one side)".into(),
        Some(Verdict::NoChange) => "~".into(),
        Some(Verdict::Regression) => format!("regression ({by})"),
        Some(Verdict::Improvement) => format!("improvement ({by})"),
        Some(Verdict::Inconclusive { more_requests }) => {
            format!("inconclusive ({by}): ≈ {more_requests} more")
        }
    }
}

const TEXT_HEADER: [&str; 6] = [
    "metric",
    "P50 before → after",
    "Δ P50 % [CI]",
    "P95 before → after",
    "Δ P95 % [CI]",
    "verdict",
];

/// The text table's cells of one row (≤ 120 columns together): P50 (sample median) and the
/// tail quantile (P5 for tokens/s) before → after, their changes, the verdict.
fn text_cells(r: &Row) -> Vec<String> {
    let unit = unit(r.metric);
    let p50 = match (r.before[0], r.after[0]) {
        (Some(b), Some(a)) => format!("{} → {} {unit}", short(r.metric, b), short(r.metric, a)),
        _ => "–".into(),
    };
    let d50 = r
        .evidence
        .as_ref()
        .map_or("–".into(), |e| short_change(e.change, e.low, e.high));
    let (tail, dtail) = match &r.tail {
        Some(t) => (
            format!(
                "{}{} → {}",
                if r.metric.tail_quantile() == 0.95 {
                    ""
                } else {
                    "P5 "
                },
                short(r.metric, t.before),
                short(r.metric, t.after)
            ),
            short_change(t.change, Some(t.low), Some(t.high)),
        ),
        None => ("–".into(), "–".into()),
    };
    vec![
        r.metric.short_label().into(),
        p50,
        d50,
        tail,
        dtail,
        verdict_cell(r),
    ]
}

fn text_failure_cells(f: &FailureRow) -> Vec<String> {
    let ratio = |(sent, failed): (u64, u64)| {
        if sent == 0 {
            "–".into()
        } else {
            format!("{}/{}", failed, sent)
        }
    };
    let share = |(sent, failed): (u64, u64)| {
        if sent == 0 {
            "–".into()
        } else {
            format!("{} %", number(failed as f64 / sent as f64 * 100.0))
        }
    };
    let (verdict, p) = match &f.test {
        Some((v, t)) => (
            match v {
                Verdict::NoChange => "~".to_string(),
                v => v.name().to_string(),
            },
            format!("p {}", p_value(t.p_value)),
        ),
        None => ("n/a (nothing sent)".into(), "–".into()),
    };
    vec![
        "failed".into(),
        format!("{} → {}", ratio(f.before), ratio(f.after)),
        format!("{} → {}", share(f.before), share(f.after)),
        p,
        String::new(),
        verdict,
    ]
}

fn text_table(level: &super::LevelComparison) -> Vec<Vec<String>> {
    let mut rows = vec![TEXT_HEADER.map(String::from).to_vec()];
    rows.extend(level.rows.iter().map(text_cells));
    rows.push(text_failure_cells(&level.failures));
    rows
}

/// Every symbol of the text table, explained once (wrapped to 120 columns).
fn legend(c: &Comparison) -> String {
    let confidence = number((1.0 - c.options.rule.alpha) * 100.0);
    let tail_confidence = number(super::verdict::tail_confidence(c.options.rule.alpha) * 100.0);
    let t = number(c.options.rule.threshold * 100.0);
    let items = [
        format!(
            "P50: the sample median (tokens/s: output tokens per second of each request; other rows in ms). Δ P50: the \
             Hodges–Lehmann shift relative to BEFORE's median, [its {confidence} % distribution-free interval]; p of the \
             Mann–Whitney U test."
        ),
        format!(
            "P95: the 95th percentile, interpolated as bench's (tokens/s: P5, the slow tail). Δ P95: its relative \
             change, [{tail_confidence} % bootstrap interval over requests, {} resamples, seed {}].",
            c.options.resamples, c.options.seed
        ),
        "–: no value: an interval end the sample cannot bound (too few requests), or no requests on one side.".into(),
        format!(
            "verdict: regression / improvement: a change beyond ±{t} % whose interval excludes 0, in the part named \
             (P50 = median, P95/P5 = tail); ~: no change beyond ±{t} %; inconclusive: the interval still reaches \
             beyond ±{t} %; ≈ N more: requests to add to each run to settle it. failed: failed/sent, two-proportion z-test."
        ),
    ];
    items.iter().map(|i| wrap(i, 120, "  ")).collect()
}

/// `text` wrapped at spaces to `width` columns, continuation lines indented by `indent`.
pub(crate) fn wrap(text: &str, width: usize, indent: &str) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        let len = line.chars().count();
        if len > 0 && len + 1 + word.chars().count() > width {
            out += line.trim_end();
            out.push('\n');
            line = indent.to_string();
        } else if len > 0 && line != indent {
            line.push(' ');
        }
        line += word;
    }
    if !line.trim().is_empty() {
        out += line.trim_end();
        out.push('\n');
    }
    out
}

/// The one-line verdict a person reads first, e.g. `REGRESSION: TTFT P95 +84 % (C=1), +61 %
/// (C=2), median unchanged; TPOT, tokens/s, failures unchanged; SLA capacity 4 → none`.
pub fn summary(c: &Comparison) -> String {
    let mut changed: Vec<String> = Vec::new();
    let mut unchanged: Vec<&str> = Vec::new();
    let mut any_improvement = false;
    for metric in Metric::ALL {
        let rows: Vec<(LevelKey, &Row)> = c
            .levels
            .iter()
            .flat_map(|l| {
                l.rows
                    .iter()
                    .filter(|r| r.metric == metric)
                    .map(move |r| (l.key, r))
            })
            .collect();
        if rows.is_empty() {
            continue;
        }
        let mut parts: Vec<String> = Vec::new();
        for (word, kind) in [
            ("", Verdict::Regression),
            ("better: ", Verdict::Improvement),
        ] {
            for part in ["P50", metric.tail_label()] {
                let hits: Vec<String> = rows
                    .iter()
                    .filter(|(_, r)| r.verdict == Some(kind) && r.verdict_by.contains(&part))
                    .filter_map(|(k, r)| {
                        let change = if part == "P50" {
                            r.evidence.as_ref()?.change
                        } else {
                            r.tail.as_ref()?.change
                        };
                        Some(format!("{} % ({})", short_pct(change), level_short(*k)))
                    })
                    .collect();
                if !hits.is_empty() {
                    any_improvement |= kind == Verdict::Improvement;
                    let name = if part == "P50" { "median" } else { part };
                    parts.push(format!("{word}{name} {}", hits.join(", ")));
                }
            }
        }
        let levels_where = |pred: &dyn Fn(&Row) -> bool| -> Vec<String> {
            rows.iter()
                .filter(|(_, r)| pred(r))
                .map(|(k, _)| level_short(*k))
                .collect()
        };
        let inconclusive = |v: Option<Verdict>| matches!(v, Some(Verdict::Inconclusive { .. }));
        let median_moved = rows.iter().any(|(_, r)| {
            matches!(
                r.median_verdict,
                Some(Verdict::Regression | Verdict::Improvement)
            )
        });
        let tail_regressed = rows
            .iter()
            .any(|(_, r)| r.tail_verdict == Some(Verdict::Regression));
        let median_open = levels_where(&|r| inconclusive(r.median_verdict));
        if !median_open.is_empty() {
            parts.push(format!("median inconclusive ({})", median_open.join(", ")));
        } else if tail_regressed && !median_moved {
            parts.push("median unchanged".into());
        }
        let tail_open = levels_where(&|r| inconclusive(r.tail_verdict));
        if !tail_open.is_empty() {
            parts.push(format!(
                "{} inconclusive ({})",
                metric.tail_label(),
                tail_open.join(", ")
            ));
        }
        if parts.is_empty() {
            unchanged.push(metric.short_label());
        } else {
            changed.push(format!("{} {}", metric.short_label(), parts.join(", ")));
        }
    }
    let failures: Vec<String> = c
        .levels
        .iter()
        .filter_map(|l| match &l.failures.test {
            Some((v @ (Verdict::Regression | Verdict::Improvement), t)) => Some(format!(
                "{}failed {} % → {} % ({})",
                if *v == Verdict::Improvement {
                    "better: "
                } else {
                    ""
                },
                number(t.before * 100.0),
                number(t.after * 100.0),
                level_short(l.key)
            )),
            _ => None,
        })
        .collect();
    if failures.is_empty() {
        unchanged.push("failures");
    } else {
        changed.push(failures.join(", "));
    }
    let mut clauses = changed;
    if !unchanged.is_empty() {
        clauses.push(format!("{} unchanged", unchanged.join(", ")));
    }
    if let Some(cap) = &c.capacity {
        clauses.push(format!(
            "SLA capacity {} → {}",
            capacity_short(cap.before),
            capacity_short(cap.after)
        ));
    }
    let head = if c.has_regression() {
        "REGRESSION"
    } else if !c.inconclusive().is_empty() {
        "INCONCLUSIVE"
    } else if any_improvement
        || c.capacity
            .as_ref()
            .is_some_and(|k| k.verdict == Verdict::Improvement)
    {
        "IMPROVEMENT"
    } else {
        "NO CHANGE"
    };
    format!("{head}: {}", clauses.join("; "))
}

/// The inconclusive banner (empty when no row is inconclusive).
fn banner(c: &Comparison) -> String {
    let rows = c.inconclusive();
    if rows.is_empty() {
        return String::new();
    }
    let most = rows
        .iter()
        .filter_map(|(k, r)| match r.verdict {
            Some(Verdict::Inconclusive { more_requests }) => Some((more_requests, *k, r)),
            _ => None,
        })
        .max_by_key(|(m, _, _)| *m);
    let example = most.map_or(String::new(), |(m, k, r)| {
        format!(
            " (the most: {} at {} needs ≈ {m} more requests per run)",
            r.metric.short_label(),
            level_short(k)
        )
    });
    let exit = if c.options.fail_on_inconclusive {
        format!(
            "--fail-on inconclusive: exit status {}",
            super::EXIT_INCONCLUSIVE
        )
    } else {
        format!(
            "a CI gate that must not pass on this passes --fail-on inconclusive (exit status {})",
            super::EXIT_INCONCLUSIVE
        )
    };
    wrap(
        &format!(
            "INCONCLUSIVE: {} row{} had too few requests to tell{example}; {exit}.",
            rows.len(),
            if rows.len() == 1 { "" } else { "s" }
        ),
        120,
        "  ",
    )
}

/// The SLA capacity line (empty without capacities).
fn capacity_text(c: &Comparison) -> String {
    let Some(cap) = &c.capacity else {
        return String::new();
    };
    let mut line = format!(
        "SLA capacity: {} → {}",
        capacity_short(cap.before),
        capacity_short(cap.after)
    );
    match cap.verdict {
        Verdict::Regression => line += " (regression)",
        Verdict::Improvement => line += " (improvement)",
        _ => {}
    }
    if let Some(k) = cap.after_broken_at {
        line += &format!(
            "; AFTER breaks the SLA at {}: {}",
            k,
            if cap.after_broken_by.is_empty() {
                "?".to_string()
            } else {
                cap.after_broken_by.join(", ")
            }
        );
        if cap.after_straddles {
            line += " (its interval there crosses the objective: the knee is not established)";
        }
    } else {
        line += "; AFTER meets the SLA at every level";
    }
    wrap(&format!("{line}."), 120, "  ")
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
        out += &wrap(&format!("warning: {}", terminal_safe(w)), 120, "  ");
    }
    for u in &c.unmatched {
        out += &format!("not compared: {}\n", terminal_safe(u));
    }
    out
}

/// `(sent BEFORE, sent AFTER)` of a level, for its title.
fn level_heading(level: &super::LevelComparison) -> String {
    format!(
        "{} (requests sent {} → {})",
        level_title(level.key),
        level.failures.before.0,
        level.failures.after.0
    )
}

/// The terminal text, lines within 120 columns (but for file names): the summary first, the
/// inconclusive banner, the SLA capacity, the runs, one table per level, the legend.
pub fn to_text(c: &Comparison, before: &Run, after: &Run) -> String {
    let mut out = wrap(&summary(c), 120, "  ");
    out += &banner(c);
    out += &capacity_text(c);
    out.push('\n');
    out += &preamble(c, before, after);
    for level in &c.levels {
        out += &format!("\n{}\n", level_heading(level));
        out += &aligned(&text_table(level));
    }
    out.push('\n');
    out += &legend(c);
    if let Some(s) = &c.selection {
        out += &selection_text(s, before, after);
    }
    out += &format!(
        "\nexit status {}\n",
        c.exit_status(c.options.fail_on_inconclusive)
    );
    out
}

const MARKDOWN_HEADER: [&str; 12] = [
    "metric",
    "n",
    "P50 before → after [CI]",
    "Δ P50 % [CI]",
    "p",
    "P95 before → after",
    "Δ P95 % [CI]",
    "P95 verdict",
    "P99 before → after",
    "Δ P99 % [CI]",
    "P50 verdict",
    "verdict",
];

fn markdown_cells(r: &Row) -> Vec<String> {
    let u = unit(r.metric);
    let with_ci = |v: Option<f64>, ci: Option<(f64, f64)>| match (v, ci) {
        (Some(v), Some((l, h))) => format!(
            "{} [{}, {}]",
            short(r.metric, v),
            short(r.metric, l),
            short(r.metric, h)
        ),
        (Some(v), None) => format!("{} [–]", short(r.metric, v)),
        _ => "–".into(),
    };
    let pair = |i: usize| {
        format!(
            "{} → {} {u}",
            with_ci(r.before[i], r.before_ci[i]),
            with_ci(r.after[i], r.after_ci[i])
        )
    };
    let ci_change = |i: usize| match (r.before[i], r.after[i], r.change_ci[i]) {
        (Some(b), Some(a), Some((l, h))) if b != 0.0 => short_change(a / b - 1.0, Some(l), Some(h)),
        _ => "– (too few requests)".into(),
    };
    let tail = r.tail.as_ref();
    let v = |v: Option<Verdict>| v.map_or("–".into(), |v| v.label());
    let mut cells = text_cells(r);
    let d50 = std::mem::take(&mut cells[2]);
    let verdict = std::mem::take(&mut cells[5]);
    vec![
        r.metric.label().into(),
        format!("{}/{}", r.n_before, r.n_after),
        pair(0),
        d50,
        r.evidence
            .as_ref()
            .map_or("–".into(), |e| p_value(e.p_value)),
        tail.map_or("–".into(), |t| {
            format!(
                "{}{} → {} {u}",
                if r.metric.tail_quantile() == 0.95 {
                    ""
                } else {
                    "P5 "
                },
                short(r.metric, t.before),
                short(r.metric, t.after)
            )
        }),
        tail.map_or("–".into(), |t| {
            short_change(t.change, Some(t.low), Some(t.high))
        }),
        v(r.tail_verdict),
        pair(2),
        ci_change(2),
        v(r.median_verdict),
        verdict,
    ]
}

fn markdown_rows(level: &super::LevelComparison) -> Vec<Vec<String>> {
    let mut rows = vec![MARKDOWN_HEADER.map(String::from).to_vec()];
    rows.extend(level.rows.iter().map(markdown_cells));
    let f = text_failure_cells(&level.failures);
    let mut cells = vec![String::new(); MARKDOWN_HEADER.len()];
    cells[0] = "failed".into();
    cells[1] = f[1].clone();
    cells[2] = f[2].clone();
    cells[4] = f[3].clone();
    cells[11] = f[5].clone();
    rows.push(cells);
    rows
}

/// Markdown for a PR comment: the summary, the banner, the capacity, then wide tables (n, the
/// percentiles' order-statistic intervals, P99 where the sample supports it, each part's verdict).
pub fn to_markdown(c: &Comparison, before: &Run, after: &Run) -> String {
    let mut out = String::from("### llm-probe compare\n\n");
    out += &format!("**{}**\n\n", crate::sanitize::markdown_text(&summary(c)));
    for block in [banner(c), capacity_text(c)] {
        if !block.is_empty() {
            out += &format!(
                "{}\n",
                crate::sanitize::markdown_text(&block.replace("\n  ", " "))
            );
        }
    }
    // The preamble holds names and identities from the files: shown, never rendered.
    for line in preamble(c, before, after).lines() {
        out += &format!("- {}\n", crate::sanitize::markdown_text(line));
    }
    for level in &c.levels {
        out += &format!("\n#### {}\n\n", level_heading(level));
        out += &markdown_table(&markdown_rows(level));
    }
    out += "\n";
    for item in legend(c).split("\n").filter(|l| !l.is_empty()) {
        if let Some(rest) = item.strip_prefix("  ") {
            out = out.trim_end_matches('\n').to_string() + " " + rest + "\n";
        } else {
            out += &format!("- {item}\n");
        }
    }
    out += "- P99 and the [CI] of P50 and P99: order-statistic intervals; Δ P99 only where both runs have enough \
            requests for a P99 interval (about 370).\n";
    if let Some(s) = &c.selection {
        out += &code_block(selection_text(s, before, after).trim_start());
    }
    out += &format!(
        "\n**exit status {}**\n",
        c.exit_status(c.options.fail_on_inconclusive)
    );
    out
}

/// `text` as a fenced code block whose fence is longer than any run of backticks inside, so a
/// name from a file cannot close it early (CommonMark §4.5).
fn code_block(text: &str) -> String {
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest.max(2) + 1);
    format!("\n{fence}\n{text}{fence}\n")
}

/// `compare --output json` (`schema` [`SCHEMA`]; its JSON Schema, generated from these types,
/// is docs/schemas/compare.schema.json). Keys are written in serde_json's order (sorted).
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(
    title = "llm-probe.compare/v1",
    description = "`llm-probe compare BEFORE AFTER --output json`"
)]
pub struct CompareReport<'a> {
    /// `llm-probe.compare/v1`.
    #[schemars(extend("const" = SCHEMA))]
    pub schema: &'static str,
    /// The BEFORE run.
    pub before: RunInfo<'a>,
    /// The AFTER run.
    pub after: RunInfo<'a>,
    /// How the rows were judged.
    pub rule: RuleInfo,
    /// Warnings for the reader.
    pub warnings: &'a [String],
    /// Levels only one run has (not compared).
    pub unmatched_levels: &'a [String],
    /// One object per level both runs have.
    pub levels: Vec<LevelReport>,
    /// Which endpoint answers sooner for typical output lengths (two different endpoints),
    /// else `null`.
    pub selection: Option<SelectionReport<'a>>,
    /// Both runs' SLA capacities (bench runs that state them), else `null`.
    pub sla_capacity: Option<CapacityReport<'a>>,
    /// The one-line verdict.
    pub summary: String,
    /// Something regressed (exit status 1).
    pub regression: bool,
    /// Some row is inconclusive.
    pub inconclusive: bool,
    /// The exit status.
    pub exit_status: u8,
}

/// `before`, `after`: a run's file, kind, names and endpoint identity.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RunInfo<'a> {
    /// The file it was read from.
    pub file: String,
    /// `bench` or `probe-once`.
    pub kind: &'static str,
    /// Target name.
    pub target: Option<&'a str>,
    /// Configured model.
    pub model: Option<&'a str>,
    /// Scenario name.
    pub scenario: Option<&'a str>,
    /// Prompt tokens as the run states them.
    #[schemars(with = "Option<u64>")]
    pub prompt_tokens: Option<&'a Value>,
    /// `max_tokens` as the run states it.
    #[schemars(with = "Option<u64>")]
    pub max_tokens: Option<&'a Value>,
    /// What the endpoint said about itself.
    pub endpoint_identity: IdentityInfo<'a>,
}

/// `endpoint_identity`: each `null` when unknown.
#[derive(Debug, Serialize, JsonSchema)]
pub struct IdentityInfo<'a> {
    /// The model the responses named.
    pub response_model: Option<&'a str>,
    /// OpenAI's `system_fingerprint`.
    pub system_fingerprint: Option<&'a str>,
    /// The `Server` header.
    pub server_header: Option<&'a str>,
    /// The server's version.
    pub server_version: Option<&'a str>,
}

/// `rule`: the significance level, threshold, tests and bootstrap settings.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RuleInfo {
    /// `--alpha`.
    pub alpha: f64,
    /// `--threshold`, relative.
    pub threshold: f64,
    /// The median's test.
    pub test: &'static str,
    /// The median's shift estimate.
    pub shift: &'static str,
    /// `--resamples`.
    pub bootstrap_resamples: usize,
    /// `--seed`.
    pub seed: u64,
    /// The percentiles reported.
    pub quantiles: [f64; 3],
    /// The tail's quantile and interval.
    pub tail: &'static str,
    /// `--fail-on inconclusive`.
    pub fail_on_inconclusive: bool,
}

/// One object per metric, named as the daemon's metrics; a metric without a row is absent.
#[derive(Debug, Serialize, JsonSchema)]
pub struct PerMetric<T> {
    /// TTFT.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttft_seconds: Option<T>,
    /// Time to first output token (where it differs from TTFT).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_to_first_output_token_seconds: Option<T>,
    /// TPOT.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tpot_seconds: Option<T>,
    /// ITL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inter_token_latency_seconds: Option<T>,
    /// E2E.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub e2e_seconds: Option<T>,
    /// Output tokens per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_tokens_per_second: Option<T>,
}

impl<T> Default for PerMetric<T> {
    fn default() -> Self {
        PerMetric {
            ttft_seconds: None,
            time_to_first_output_token_seconds: None,
            tpot_seconds: None,
            inter_token_latency_seconds: None,
            e2e_seconds: None,
            output_tokens_per_second: None,
        }
    }
}

impl<T> PerMetric<T> {
    /// `metric`'s object, under its [`Metric::json_name`].
    pub fn set(&mut self, metric: Metric, value: T) {
        let field = match metric {
            Metric::Ttft => &mut self.ttft_seconds,
            Metric::TimeToFirstOutputToken => &mut self.time_to_first_output_token_seconds,
            Metric::Tpot => &mut self.tpot_seconds,
            Metric::Itl => &mut self.inter_token_latency_seconds,
            Metric::E2e => &mut self.e2e_seconds,
            Metric::OutputTokensPerSecond => &mut self.output_tokens_per_second,
        };
        *field = Some(value);
    }
}

/// One item of `levels[]`: the level, one object per metric, the failure ratio.
#[derive(Debug, Serialize, JsonSchema)]
pub struct LevelReport {
    /// The level's virtual users (bench, closed loop), else `null`.
    pub concurrency: Option<u64>,
    /// The level's rate (bench, open loop), else `null`.
    pub rate: Option<f64>,
    /// The level's generated prompt size (bench, a prompt-length sweep), else `null`.
    pub prompt_tokens_sent: Option<u64>,
    /// The rows.
    #[serde(flatten)]
    pub metrics: PerMetric<RowReport>,
    /// The failure ratio's row.
    pub failure_ratio: FailureRatio,
}

/// A metric's row: percentiles of both runs, their changes, the tests and the verdicts.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RowReport {
    /// BEFORE's requests with a value.
    pub n_before: usize,
    /// AFTER's requests with a value.
    pub n_after: usize,
    /// BEFORE's percentiles.
    pub before: Percentiles,
    /// AFTER's percentiles.
    pub after: Percentiles,
    /// Bootstrap intervals of each percentile's relative change (`null`: too few requests).
    pub change_ci: ChangeIntervals,
    /// `bootstrap`.
    pub change_ci_method: &'static str,
    /// The Mann–Whitney U test's p-value.
    pub mann_whitney_p: Option<f64>,
    /// The Hodges–Lehmann shift and its interval.
    pub hodges_lehmann: Option<HodgesLehmann>,
    /// The median's verdict.
    pub median_verdict: Option<&'static str>,
    /// The SLO quantile's change and verdict.
    pub tail: Option<TailReport>,
    /// The row's verdict.
    pub verdict: Option<&'static str>,
    /// Which parts gave the verdict (`P50`, `P95`, `P5`).
    pub verdict_by: Vec<&'static str>,
    /// The verdict as the tables print it.
    pub verdict_label: Option<String>,
    /// Inconclusive: about how many more requests per run would settle it.
    pub more_requests: Option<u64>,
}

/// `{p50, p95, p99}` with each percentile's order-statistic interval as `p50_ci` … (`null`: too
/// few requests for one).
#[derive(Debug, Serialize, JsonSchema)]
pub struct Percentiles {
    /// Median.
    pub p50: Option<f64>,
    /// 95th percentile.
    pub p95: Option<f64>,
    /// 99th percentile.
    pub p99: Option<f64>,
    /// P50's interval `[low, high]`.
    pub p50_ci: Option<[f64; 2]>,
    /// P95's interval.
    pub p95_ci: Option<[f64; 2]>,
    /// P99's interval.
    pub p99_ci: Option<[f64; 2]>,
    /// `order statistics`.
    pub ci_method: &'static str,
}

/// `change_ci`: each percentile's relative change interval `[low, high]`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ChangeIntervals {
    /// P50's.
    pub p50: Option<[f64; 2]>,
    /// P95's.
    pub p95: Option<[f64; 2]>,
    /// P99's.
    pub p99: Option<[f64; 2]>,
}

impl ChangeIntervals {
    /// The intervals of P50, P95 and P99.
    pub(super) fn of(ci: &[Option<(f64, f64)>; 3]) -> Self {
        let pair = |i: usize| ci[i].map(|(l, h)| [l, h]);
        ChangeIntervals {
            p50: pair(0),
            p95: pair(1),
            p99: pair(2),
        }
    }
}

/// `hodges_lehmann`: the shift (after − before) and its interval, absolute and relative to
/// BEFORE's median.
#[derive(Debug, Serialize, JsonSchema)]
pub struct HodgesLehmann {
    /// The shift.
    pub shift: f64,
    /// Its interval's low end.
    pub low: Option<f64>,
    /// Its interval's high end.
    pub high: Option<f64>,
    /// The shift relative to BEFORE's median.
    pub relative: f64,
    /// The relative interval's low end.
    pub relative_low: Option<f64>,
    /// The relative interval's high end.
    pub relative_high: Option<f64>,
    /// BEFORE's median.
    pub before_median: f64,
}

/// `tail`: the SLO quantile (P95, P5 of tokens/s) of both runs and its relative change.
#[derive(Debug, Serialize, JsonSchema)]
pub struct TailReport {
    /// The quantile.
    pub quantile: f64,
    /// `linear interpolation`.
    pub estimator: &'static str,
    /// BEFORE's.
    pub before: f64,
    /// AFTER's.
    pub after: f64,
    /// The relative change.
    pub relative: f64,
    /// Its bootstrap interval's low end.
    pub relative_low: f64,
    /// Its bootstrap interval's high end.
    pub relative_high: f64,
    /// The interval's confidence.
    pub confidence: f64,
    /// The tail's verdict.
    pub verdict: Option<&'static str>,
    /// Inconclusive: about how many more requests per run would settle it.
    pub more_requests: Option<u64>,
}

/// The `failure_ratio` object of a level (or a window's scenario): counts, p-value, verdict.
#[derive(Debug, Serialize, JsonSchema)]
pub struct FailureRatio {
    /// BEFORE's requests sent.
    pub sent_before: u64,
    /// BEFORE's failed requests.
    pub failed_before: u64,
    /// AFTER's requests sent.
    pub sent_after: u64,
    /// AFTER's failed requests.
    pub failed_after: u64,
    /// The two-proportion z-test's p-value.
    pub p_value: Option<f64>,
    /// The verdict.
    pub verdict: Option<&'static str>,
}

impl From<&FailureRow> for FailureRatio {
    fn from(f: &FailureRow) -> Self {
        FailureRatio {
            sent_before: f.before.0,
            failed_before: f.before.1,
            sent_after: f.after.0,
            failed_after: f.after.1,
            p_value: f.test.as_ref().map(|t| t.1.p_value),
            verdict: f.test.as_ref().map(|t| t.0.name()),
        }
    }
}

/// `selection`: each endpoint's medians, the crossover and the expected E2E per length.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SelectionReport<'a> {
    /// BEFORE's endpoint.
    pub before: EndpointMedians<'a>,
    /// AFTER's endpoint.
    pub after: EndpointMedians<'a>,
    /// The output length where the endpoint with the lower TPOT overtakes the other, tokens.
    pub crossover_output_tokens: Option<EstimateReport>,
    /// Expected E2E per output length.
    pub expected_e2e_seconds: Vec<ExpectedE2e>,
}

/// One endpoint's median TTFT and TPOT.
#[derive(Debug, Serialize, JsonSchema)]
pub struct EndpointMedians<'a> {
    /// `target` / `model`.
    pub label: &'a str,
    /// Median TTFT.
    pub ttft_seconds: f64,
    /// Median TPOT.
    pub tpot_seconds: f64,
    /// Requests with both values.
    pub n: usize,
}

/// An estimate and its 95 % bootstrap interval.
#[derive(Debug, Serialize, JsonSchema)]
pub struct EstimateReport {
    /// The estimate.
    pub value: f64,
    /// The interval's low end.
    pub low: Option<f64>,
    /// The interval's high end.
    pub high: Option<f64>,
}

impl From<&Estimate> for EstimateReport {
    fn from(e: &Estimate) -> Self {
        EstimateReport {
            value: e.value,
            low: e.low,
            high: e.high,
        }
    }
}

/// The expected E2E of both endpoints for one output length.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ExpectedE2e {
    /// Output tokens.
    pub output_tokens: u32,
    /// BEFORE's, seconds.
    pub before: EstimateReport,
    /// AFTER's, seconds.
    pub after: EstimateReport,
}

/// `sla_capacity`: both runs' capacities and where AFTER broke the SLA.
#[derive(Debug, Serialize, JsonSchema)]
pub struct CapacityReport<'a> {
    /// BEFORE's capacity (`null`: its first level broke the SLA).
    pub before: Option<LoadKey>,
    /// AFTER's capacity.
    pub after: Option<LoadKey>,
    /// Where AFTER broke the SLA (`null`: every level met it).
    pub after_broken_at: Option<LoadKey>,
    /// What broke there, with the objective.
    pub after_broken_by: &'a [String],
    /// AFTER's interval at that level crosses the objective.
    pub after_straddles: bool,
    /// `regression`, `improvement` or `~`.
    pub verdict: &'static str,
}

/// A bench level as `{concurrency, rate, prompt_tokens_sent}`; `None` for a probe-once
/// collection's single level.
fn load_key(k: Option<LevelKey>) -> Option<LoadKey> {
    match k? {
        LevelKey::Concurrency(n) => Some(LoadKey {
            concurrency: Some(n),
            ..LoadKey::default()
        }),
        LevelKey::Rate(r) => Some(LoadKey {
            rate: Some(r),
            ..LoadKey::default()
        }),
        LevelKey::PromptTokens(t) => Some(LoadKey {
            prompt_tokens_sent: Some(t),
            ..LoadKey::default()
        }),
        LevelKey::Single => None,
    }
}

fn percentiles(v: &[Option<f64>; 3], ci: &[Option<(f64, f64)>; 3]) -> Percentiles {
    let ci = |i: usize| ci[i].map(|(l, h)| [l, h]);
    Percentiles {
        p50: v[0],
        p95: v[1],
        p99: v[2],
        p50_ci: ci(0),
        p95_ci: ci(1),
        p99_ci: ci(2),
        ci_method: "order statistics",
    }
}

/// The `more_requests` of an inconclusive verdict.
pub(super) fn more_requests(v: Option<Verdict>) -> Option<u64> {
    match v {
        Some(Verdict::Inconclusive { more_requests }) => Some(more_requests),
        _ => None,
    }
}

fn row_report(r: &Row) -> RowReport {
    RowReport {
        n_before: r.n_before,
        n_after: r.n_after,
        before: percentiles(&r.before, &r.before_ci),
        after: percentiles(&r.after, &r.after_ci),
        change_ci: ChangeIntervals::of(&r.change_ci),
        change_ci_method: "bootstrap",
        mann_whitney_p: r.evidence.as_ref().map(|e| e.p_value),
        hodges_lehmann: r.evidence.as_ref().map(|e| HodgesLehmann {
            shift: e.shift.estimate,
            low: e.shift.low,
            high: e.shift.high,
            relative: e.change,
            relative_low: e.low,
            relative_high: e.high,
            before_median: e.before_median,
        }),
        median_verdict: r.median_verdict.map(|v| v.name()),
        tail: r.tail.as_ref().map(|t| TailReport {
            quantile: t.q,
            estimator: "linear interpolation",
            before: t.before,
            after: t.after,
            relative: t.change,
            relative_low: t.low,
            relative_high: t.high,
            confidence: t.confidence,
            verdict: r.tail_verdict.map(|v| v.name()),
            more_requests: more_requests(r.tail_verdict),
        }),
        verdict: r.verdict.map(|v| v.name()),
        verdict_by: r.verdict_by.clone(),
        verdict_label: r.verdict.map(|v| v.label()),
        more_requests: more_requests(r.verdict),
    }
}

fn run_info(r: &Run) -> RunInfo<'_> {
    RunInfo {
        file: r.path.to_string_lossy().into_owned(),
        kind: match r.kind {
            super::input::RunKind::Bench => "bench",
            super::input::RunKind::ProbeOnce => "probe-once",
        },
        target: r.target.as_deref(),
        model: r.model.as_deref(),
        scenario: r.scenario.as_deref(),
        prompt_tokens: r.prompt_tokens.as_ref(),
        max_tokens: r.max_tokens.as_ref(),
        endpoint_identity: IdentityInfo {
            response_model: r.identity.response_model.as_deref(),
            system_fingerprint: r.identity.system_fingerprint.as_deref(),
            server_header: r.identity.server_header.as_deref(),
            server_version: r.identity.server_version.as_deref(),
        },
    }
}

fn endpoint_medians(e: &super::selection::Endpoint) -> EndpointMedians<'_> {
    EndpointMedians {
        label: &e.label,
        ttft_seconds: e.ttft,
        tpot_seconds: e.tpot,
        n: e.n,
    }
}

/// The JSON report ([`CompareReport`]): `before`/`after` run metadata, `rule`, `warnings`,
/// `unmatched_levels`, `levels[]` (`concurrency`, `rate`, `prompt_tokens_sent`, one object per metric named as the
/// daemon's metrics, `failure_ratio`), `selection` (or null) and `regression`.
pub fn report<'a>(c: &'a Comparison, before: &'a Run, after: &'a Run) -> CompareReport<'a> {
    let levels = (c.levels.iter())
        .map(|l| {
            let key = load_key(Some(l.key)).unwrap_or_default();
            let mut metrics = PerMetric::default();
            for r in &l.rows {
                metrics.set(r.metric, row_report(r));
            }
            LevelReport {
                concurrency: key.concurrency,
                rate: key.rate,
                prompt_tokens_sent: key.prompt_tokens_sent,
                metrics,
                failure_ratio: FailureRatio::from(&l.failures),
            }
        })
        .collect();
    let selection = c.selection.as_ref().map(|s| SelectionReport {
        before: endpoint_medians(&s.before),
        after: endpoint_medians(&s.after),
        crossover_output_tokens: s.crossover.as_ref().map(EstimateReport::from),
        expected_e2e_seconds: (s.lengths.iter())
            .map(|l| ExpectedE2e {
                output_tokens: l.tokens,
                before: EstimateReport::from(&l.before),
                after: EstimateReport::from(&l.after),
            })
            .collect(),
    });
    CompareReport {
        schema: SCHEMA,
        before: run_info(before),
        after: run_info(after),
        rule: RuleInfo {
            alpha: c.options.rule.alpha,
            threshold: c.options.rule.threshold,
            test:
                "mann-whitney-u two-sided tie-corrected, continuity-corrected normal approximation",
            shift: "hodges-lehmann with moses interval, relative to before median",
            bootstrap_resamples: c.options.resamples,
            seed: c.options.seed,
            quantiles: QUANTILES,
            tail: "p95 (p5 of tokens/s), percentile bootstrap at 1 - alpha/2",
            fail_on_inconclusive: c.options.fail_on_inconclusive,
        },
        warnings: &c.warnings,
        unmatched_levels: &c.unmatched,
        levels,
        selection,
        sla_capacity: c.capacity.as_ref().map(|k| CapacityReport {
            before: load_key(k.before),
            after: load_key(k.after),
            after_broken_at: load_key(k.after_broken_at),
            after_broken_by: &k.after_broken_by,
            after_straddles: k.after_straddles,
            verdict: k.verdict.name(),
        }),
        summary: summary(c),
        regression: c.has_regression(),
        inconclusive: !c.inconclusive().is_empty(),
        exit_status: c.exit_status(c.options.fail_on_inconclusive),
    }
}

/// The JSON document of [`report`], keys in serde_json's order (sorted).
pub fn to_json(c: &Comparison, before: &Run, after: &Run) -> Value {
    serde_json::to_value(report(c, before, after)).expect("a comparison serializes")
}
