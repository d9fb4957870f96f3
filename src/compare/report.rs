//! How `compare` prints a [`Comparison`]: an aligned terminal table, markdown (for a PR
//! comment) or JSON (`"schema": "llm-probe.compare/v1"`). Strings from the run files pass
//! through [`terminal_safe`] (text, markdown) or [`crate::report::json_text`] (JSON).

use serde_json::{json, Value};

use super::input::{LevelKey, Run};
use super::selection::{workload, Estimate, Selection};
use super::verdict::Verdict;
use super::{Comparison, FailureRow, Metric, Row, QUANTILES};
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

/// The level as the summary names it: `C=4`, `2/s`, or `all`.
pub(crate) fn level_short(key: LevelKey) -> String {
    match key {
        LevelKey::Concurrency(c) => format!("C={c}"),
        LevelKey::Rate(r) => format!("{}/s", number(r)),
        LevelKey::Single => "all".into(),
    }
}

/// A capacity: `4`, `2/s` or `none`.
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
        "median_verdict": r.median_verdict.map(|v| v.name()),
        "tail": r.tail.as_ref().map(|t| json!({
            "quantile": t.q,
            "estimator": "linear interpolation",
            "before": t.before,
            "after": t.after,
            "relative": t.change,
            "relative_low": t.low,
            "relative_high": t.high,
            "confidence": t.confidence,
            "verdict": r.tail_verdict.map(|v| v.name()),
            "more_requests": match r.tail_verdict {
                Some(Verdict::Inconclusive { more_requests }) => Some(more_requests),
                _ => None,
            },
        })),
        "verdict": r.verdict.map(|v| v.name()),
        "verdict_by": r.verdict_by,
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
            "tail": "p95 (p5 of tokens/s), percentile bootstrap at 1 - alpha/2",
            "fail_on_inconclusive": c.options.fail_on_inconclusive,
        },
        "warnings": c.warnings,
        "unmatched_levels": c.unmatched,
        "levels": levels,
        "selection": selection,
        "sla_capacity": c.capacity.as_ref().map(|k| {
            let key = |k: Option<LevelKey>| match k {
                Some(LevelKey::Concurrency(n)) => json!({"concurrency": n, "rate": null}),
                Some(LevelKey::Rate(r)) => json!({"concurrency": null, "rate": r}),
                _ => Value::Null,
            };
            json!({
                "before": key(k.before),
                "after": key(k.after),
                "after_broken_at": key(k.after_broken_at),
                "after_broken_by": k.after_broken_by,
                "after_straddles": k.after_straddles,
                "verdict": k.verdict.name(),
            })
        }),
        "summary": summary(c),
        "regression": c.has_regression(),
        "inconclusive": !c.inconclusive().is_empty(),
        "exit_status": c.exit_status(c.options.fail_on_inconclusive),
    })
}
