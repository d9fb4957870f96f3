//! How `compare --prometheus.url` prints a [`WindowComparison`]: an aligned terminal table per
//! scenario, markdown, or JSON (`"schema": "llm-probe.compare.prometheus/v1"`). Label values
//! from Prometheus pass through [`terminal_safe`] (text), [`markdown_text`] (markdown) or
//! [`crate::report::json_text`] (JSON).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

use super::buckets::{BucketRow, ScenarioComparison, SloRow};
use super::from_prometheus::WindowComparison;
use super::prometheus::{show_identity, Identity};
use super::report::{
    failure_cells, interval, p_value, pct, ChangeIntervals, FailureRatio, PerMetric,
};
use super::window::{human, rfc3339};
use super::{Metric, QUANTILES};
use crate::bench::table::{aligned, markdown_table};
use crate::sanitize::{markdown_text, terminal_safe};
use crate::stats::histogram::BinnedQuantile;

/// The JSON schema name of `compare --prometheus.url … --output json`.
pub const SCHEMA: &str = "llm-probe.compare.prometheus/v1";

const HEADER: [&str; 9] = [
    "metric",
    "probes",
    "P50 before → after",
    "P95 before → after",
    "P99 before → after",
    "P50 change [CI]",
    "P95 change [CI]",
    "p",
    "verdict",
];

/// A value in the table's unit (ms or tokens/s), at most 3 decimals, no trailing zeros.
fn number(metric: Metric, x: f64) -> String {
    if x.is_infinite() {
        return "+Inf".into();
    }
    let v = if metric.is_seconds() { x * 1e3 } else { x };
    let r = (v * 1000.0).round() / 1000.0;
    format!("{r}")
}

/// `ms` for a metric in seconds, else `tok/s`.
pub(crate) fn unit(metric: Metric) -> &'static str {
    if metric.is_seconds() {
        "ms"
    } else {
        "tok/s"
    }
}

/// `225 in 200–250` (interpolated value, bucket; ms for seconds, else tokens/s); `> 60000` in
/// the +Inf bucket; `-` for `None`.
pub(crate) fn quantile_cell(metric: Metric, q: Option<BinnedQuantile>) -> String {
    match q {
        None => "-".into(),
        Some(q) if q.upper.is_infinite() => format!("> {}", number(metric, q.lower)),
        Some(q) => format!(
            "{:.1} in {}–{}",
            if metric.is_seconds() {
                q.value * 1e3
            } else {
                q.value
            },
            number(metric, q.lower),
            number(metric, q.upper)
        ),
    }
}

fn change_cell(r: &BucketRow, i: usize) -> String {
    match (r.before[i], r.after[i]) {
        (Some(b), Some(a)) if b.value != 0.0 => format!(
            "{} {}",
            pct(a.value / b.value - 1.0),
            r.change_ci[i].map_or("[-]".into(), |(l, h)| interval(Some(l), Some(h)))
        ),
        _ => "-".into(),
    }
}

fn row_cells(r: &BucketRow) -> Vec<String> {
    let pair = |i: usize| {
        format!(
            "{} → {} {}",
            quantile_cell(r.metric, r.before[i]),
            quantile_cell(r.metric, r.after[i]),
            unit(r.metric)
        )
    };
    let label = if r.coarsened {
        format!("{} (coarsened)", r.metric.label())
    } else {
        r.metric.label().into()
    };
    vec![
        label,
        format!("{}/{}", r.n_before, r.n_after),
        pair(0),
        pair(1),
        pair(2),
        change_cell(r, 0),
        change_cell(r, 1),
        r.u_test.map_or("-".into(), |u| p_value(u.p_value)),
        r.verdict
            .map_or("n/a (no probes on one side)".into(), |v| v.label()),
    ]
}

fn slo_title(s: &SloRow) -> String {
    let exact = if s.before.bound == s.threshold {
        String::new()
    } else {
        format!(
            ", counted at bucket bound {}",
            number(s.metric, s.before.bound)
        )
    };
    match s.metric {
        Metric::OutputTokensPerSecond => {
            format!("tokens/s ≤ floor {}{exact}", number(s.metric, s.threshold))
        }
        m => format!(
            "{} > SLO {} {}{exact}",
            m.label(),
            number(m, s.threshold),
            unit(m)
        ),
    }
}

fn slo_cells(s: &SloRow) -> Vec<String> {
    let share = |x: &super::stats::binned::Share| {
        if x.total == 0 {
            "-".into()
        } else {
            format!(
                "{} ({:.1} %)",
                x.beyond,
                x.beyond as f64 / x.total as f64 * 100.0
            )
        }
    };
    let (verdict, p) = match &s.test {
        Some((v, t)) => (v.label(), p_value(t.p_value)),
        None => ("n/a (no probes on one side)".into(), "-".into()),
    };
    vec![
        slo_title(s),
        format!("{}/{}", s.before.total, s.after.total),
        format!("{} → {}", share(&s.before), share(&s.after)),
        String::new(),
        String::new(),
        String::new(),
        String::new(),
        p,
        verdict,
    ]
}

fn table_rows(s: &ScenarioComparison) -> Vec<Vec<String>> {
    let mut rows = vec![HEADER.map(String::from).to_vec()];
    rows.extend(s.rows.iter().map(row_cells));
    rows.extend(s.slo.iter().map(slo_cells));
    rows.push(failure_cells(&s.failures));
    rows
}

/// "TTFT P95 between 200 and 250 ms before (≈ 247.5), between 300 and 400 ms after (≈ 395.0)":
/// what the bucket resolution allows, said plainly for the TTFT P95 (or the first row).
fn resolution_line(s: &ScenarioComparison) -> Option<String> {
    let r = s
        .rows
        .iter()
        .find(|r| r.metric == Metric::Ttft)
        .or(s.rows.first())?;
    let side = |q: Option<BinnedQuantile>| match q {
        None => "unknown".to_string(),
        Some(q) if q.upper.is_infinite() => format!(
            "above {} {} (the +Inf bucket: no upper bound)",
            number(r.metric, q.lower),
            unit(r.metric)
        ),
        Some(q) => format!(
            "between {} and {} {} (interpolated ≈ {})",
            number(r.metric, q.lower),
            number(r.metric, q.upper),
            unit(r.metric),
            number(r.metric, q.value)
        ),
    };
    Some(format!(
        "Bucket resolution: {} P95 {} before, {} after.",
        r.metric.label(),
        side(r.before[1]),
        side(r.after[1])
    ))
}

fn identity_line(id: &Identity) -> String {
    terminal_safe(&show_identity(id)).into_owned()
}

fn preamble(c: &WindowComparison) -> Vec<String> {
    let mut out = vec![format!(
        "Prometheus {}, target {}{}",
        terminal_safe(&c.url),
        terminal_safe(&format!("{:?}", c.target)),
        c.scenario.as_ref().map_or(String::new(), |s| format!(
            ", scenario {}",
            terminal_safe(&format!("{s:?}"))
        ))
    )];
    if let Some(ch) = &c.change {
        out.push(format!(
            "Endpoint change (llm_probe_endpoint_info): after {} (last sample of the old label set), by {} (first sample of the new one)",
            rfc3339(ch.last_old),
            rfc3339(ch.first_new)
        ));
        out.push(format!("  old: {}", identity_line(&ch.old)));
        out.push(format!("  new: {}", identity_line(&ch.new)));
    }
    if let Some((before, after)) = &c.identities {
        let list = |ids: &Vec<Identity>| match ids.len() {
            0 => "none seen".to_string(),
            _ => ids
                .iter()
                .map(identity_line)
                .collect::<Vec<_>>()
                .join(" | "),
        };
        out.push(format!("BEFORE endpoint: {}", list(before)));
        out.push(format!("AFTER  endpoint: {}", list(after)));
    }
    if let Some((before, after)) = &c.replicas {
        let list = |r: &Vec<String>| terminal_safe(&r.join(", ")).into_owned();
        out.push(
            "By identity (--by-identity): one window, the replicas split by what they run".into(),
        );
        out.push(format!(
            "BEFORE replicas ({}): {}",
            before.len(),
            list(before)
        ));
        out.push(format!(
            "AFTER  replicas ({}): {}",
            after.len(),
            list(after)
        ));
    }
    let probes = |f: fn(&ScenarioComparison) -> u64| -> u64 { c.scenarios.iter().map(f).sum() };
    out.push(format!(
        "BEFORE {} → {} ({}): {} probes",
        rfc3339(c.before.0),
        rfc3339(c.before.1),
        human(c.before.1 - c.before.0),
        probes(|s| s.failures.before.0)
    ));
    out.push(format!(
        "AFTER  {} → {} ({}{}): {} probes",
        rfc3339(c.after.0),
        rfc3339(c.after.1),
        human(c.after.1 - c.after.0),
        c.settle.map_or(String::new(), |s| format!(
            ", after a settle-in of {}",
            human(s)
        )),
        probes(|s| s.failures.after.0)
    ));
    for w in &c.warnings {
        out.push(format!("warning: {}", terminal_safe(w)));
    }
    for n in &c.not_compared {
        out.push(format!("not compared: {}", terminal_safe(n)));
    }
    out
}

fn method_line(c: &WindowComparison) -> String {
    let confidence = (1.0 - c.options.rule.alpha) * 100.0;
    format!(
        "From histogram buckets: each percentile is the bucket it lies in and the value \
         interpolated within it (as histogram_quantile). Change: relative change of the \
         interpolated percentile with its {confidence:.0} % multinomial bootstrap interval over \
         the bucket counts ({} resamples, seed {}). p: two-sided Mann–Whitney U test on the \
         binned data (each bucket a group of ties, tie-corrected); shares beyond the SLO and \
         failure ratio: two-proportion z-test. Verdict (on the P50 change): α = {}, threshold \
         {:.0} %. Probes: successful probes with a value, BEFORE/AFTER. ITL is not compared (its \
         histogram counts token gaps, not probes).",
        c.options.resamples,
        c.options.seed,
        c.options.rule.alpha,
        c.options.rule.threshold * 100.0,
    )
}

fn summary_result(c: &WindowComparison) -> &'static str {
    if c.has_regression() {
        "RESULT: regression (exit status 1)"
    } else {
        "RESULT: no regression"
    }
}

/// A binned percentile in few characters: `248 in 200–250` (ms for seconds, else tokens/s),
/// `> 60000` in the +Inf bucket, `–` without one.
fn short_quantile(metric: Metric, q: Option<BinnedQuantile>) -> String {
    let scale = |x: f64| if metric.is_seconds() { x * 1e3 } else { x };
    let round = |x: f64| {
        let v = scale(x);
        if v.abs() >= 100.0 {
            format!("{v:.0}")
        } else {
            super::report::number(v)
        }
    };
    match q {
        None => "–".into(),
        Some(q) if q.upper.is_infinite() => format!("> {}", round(q.lower)),
        Some(q) => format!(
            "{} in {}–{}",
            round(q.value),
            round(q.lower),
            round(q.upper)
        ),
    }
}

/// The relative change of percentile `i` with its interval: `+56 [+40, +71]`.
fn short_change_cell(r: &BucketRow, i: usize) -> String {
    match (r.before[i], r.after[i], r.change_ci[i]) {
        (Some(b), Some(a), ci) if b.value != 0.0 => {
            let p = |x: f64| {
                let v = x * 100.0;
                let t = if v.abs() >= 10.0 {
                    format!("{v:+.0}")
                } else {
                    format!("{v:+.1}")
                };
                t.replace('-', "−")
            };
            match ci {
                Some((l, h)) => format!("{} [{}, {}]", p(a.value / b.value - 1.0), p(l), p(h)),
                None => format!("{} [–, –]", p(a.value / b.value - 1.0)),
            }
        }
        _ => "–".into(),
    }
}

fn verdict_cell(v: Option<super::verdict::Verdict>) -> String {
    use super::verdict::Verdict;
    match v {
        None => "n/a (no probes on one side)".into(),
        Some(Verdict::NoChange) => "~".into(),
        Some(Verdict::Inconclusive { more_requests }) => {
            format!("inconclusive: ≈ {more_requests} more")
        }
        Some(v) => v.name().into(),
    }
}

const TEXT_HEADER: [&str; 6] = [
    "metric",
    "P50 before → after",
    "Δ P50 % [CI]",
    "P95 (bucket) before → after",
    "Δ P95 % [CI]",
    "verdict",
];

/// The shares of probes beyond each SLO, one line each: `TTFT > 300 ms: 0/12 → 12/12 probes
/// (0 % → 100 %), p 1e-6, regression`.
fn slo_lines(s: &ScenarioComparison) -> String {
    let mut out = String::new();
    for slo in &s.slo {
        let share = |x: &super::stats::binned::Share| {
            if x.total == 0 {
                "–".into()
            } else {
                format!("{}/{}", x.beyond, x.total)
            }
        };
        let pct = |x: &super::stats::binned::Share| {
            if x.total == 0 {
                "–".into()
            } else {
                format!(
                    "{} %",
                    super::report::number(x.beyond as f64 / x.total as f64 * 100.0)
                )
            }
        };
        let (verdict, p) = match &slo.test {
            Some((v, t)) => (verdict_cell(Some(*v)), format!("p {}", p_value(t.p_value))),
            None => (verdict_cell(None), "p –".into()),
        };
        let title = match slo.metric {
            Metric::OutputTokensPerSecond => {
                format!("tok/s ≤ {}", number(slo.metric, slo.before.bound))
            }
            m => format!(
                "{} > {} {}",
                m.short_label(),
                number(m, slo.before.bound),
                unit(m)
            ),
        };
        out += &super::report::wrap(
            &format!(
                "SLO share {title}: {} → {} probes ({} → {}), {p}, {verdict}",
                share(&slo.before),
                share(&slo.after),
                pct(&slo.before),
                pct(&slo.after)
            ),
            120,
            "  ",
        );
    }
    out
}

fn text_rows(s: &ScenarioComparison) -> Vec<Vec<String>> {
    let mut rows = vec![TEXT_HEADER.map(String::from).to_vec()];
    for r in &s.rows {
        let label = if r.coarsened {
            format!("{}*", r.metric.short_label())
        } else {
            r.metric.short_label().into()
        };
        let p50 = |q: Option<BinnedQuantile>| match q {
            None => "–".to_string(),
            Some(q) if q.upper.is_infinite() => format!("> {}", number(r.metric, q.lower)),
            Some(q) => short_quantile(r.metric, Some(q))
                .split(" in ")
                .next()
                .unwrap_or_default()
                .to_string(),
        };
        rows.push(vec![
            label,
            format!(
                "{} → {} {}",
                p50(r.before[0]),
                p50(r.after[0]),
                unit(r.metric)
            ),
            short_change_cell(r, 0),
            format!(
                "{} → {} {}",
                short_quantile(r.metric, r.before[1]),
                short_quantile(r.metric, r.after[1]),
                unit(r.metric)
            ),
            short_change_cell(r, 1),
            verdict_cell(r.verdict),
        ]);
    }
    let f = &s.failures;
    let (verdict, p) = match &f.test {
        Some((v, t)) => (verdict_cell(Some(*v)), format!("p {}", p_value(t.p_value))),
        None => ("n/a (nothing sent)".into(), "–".into()),
    };
    rows.push(vec![
        "failed".into(),
        format!(
            "{}/{} → {}/{}",
            f.before.1, f.before.0, f.after.1, f.after.0
        ),
        String::new(),
        p,
        String::new(),
        verdict,
    ]);
    rows
}

/// The one-line verdict first, e.g. `REGRESSION: TTFT median +56 %, TTFT > 300 ms 0 % → 100 %;
/// TPOT, E2E, tok/s, failures unchanged` (scenarios named when there are several).
pub fn summary(c: &WindowComparison) -> String {
    use super::verdict::Verdict;
    let several = c.scenarios.len() > 1;
    let mut changed = Vec::new();
    let mut unchanged = Vec::new();
    let (mut improved, mut inconclusive) = (false, false);
    for s in &c.scenarios {
        let prefix = if several {
            format!("{}: ", terminal_safe(&s.scenario))
        } else {
            String::new()
        };
        for r in &s.rows {
            let change = r.evidence.as_ref().map_or(String::new(), |e| {
                format!(" {} %", super::report::short_pct_text(e.change))
            });
            match r.verdict {
                Some(Verdict::Regression) => {
                    changed.push(format!("{prefix}{} median{change}", r.metric.short_label()))
                }
                Some(Verdict::Improvement) => {
                    improved = true;
                    changed.push(format!(
                        "{prefix}better: {} median{change}",
                        r.metric.short_label()
                    ))
                }
                Some(Verdict::Inconclusive { .. }) => {
                    inconclusive = true;
                    changed.push(format!("{prefix}{} inconclusive", r.metric.short_label()))
                }
                _ => unchanged.push(format!("{prefix}{}", r.metric.short_label())),
            }
        }
        for slo in &s.slo {
            let pct = |x: &super::stats::binned::Share| {
                super::report::number(x.beyond as f64 / x.total.max(1) as f64 * 100.0)
            };
            let what = match slo.metric {
                Metric::OutputTokensPerSecond => {
                    format!("tok/s ≤ {}", number(slo.metric, slo.before.bound))
                }
                m => format!(
                    "{} > {} {}",
                    m.short_label(),
                    number(m, slo.before.bound),
                    unit(m)
                ),
            };
            if let Some(v @ (Verdict::Regression | Verdict::Improvement)) =
                slo.test.as_ref().map(|t| t.0)
            {
                improved |= v == Verdict::Improvement;
                changed.push(format!(
                    "{prefix}{}{what} {} % → {} %",
                    if v == Verdict::Improvement {
                        "better: "
                    } else {
                        ""
                    },
                    pct(&slo.before),
                    pct(&slo.after)
                ))
            }
        }
        match s.failures.test.as_ref().map(|t| t.0) {
            Some(Verdict::Regression) => changed.push(format!("{prefix}failures up")),
            Some(Verdict::Improvement) => {
                improved = true;
                changed.push(format!("{prefix}better: failures down"))
            }
            _ => unchanged.push(format!("{prefix}failures")),
        }
    }
    if !unchanged.is_empty() {
        changed.push(format!("{} unchanged", unchanged.join(", ")));
    }
    let head = if c.has_regression() {
        "REGRESSION"
    } else if inconclusive {
        "INCONCLUSIVE"
    } else if improved {
        "IMPROVEMENT"
    } else {
        "NO CHANGE"
    };
    format!("{head}: {}", changed.join("; "))
}

/// Every symbol of the text table, explained once.
fn text_legend(c: &WindowComparison) -> String {
    let confidence = super::report::number((1.0 - c.options.rule.alpha) * 100.0);
    let t = super::report::number(c.options.rule.threshold * 100.0);
    [
        format!(
            "P50, P95: interpolated within the histogram bucket as histogram_quantile does; \"248 in 200–250\" is \
             somewhere between the bucket bounds 200 and 250, interpolated ≈ 248. Δ: the relative change, [{confidence} % \
             multinomial bootstrap interval over the bucket counts, {} resamples, seed {}].",
            c.options.resamples, c.options.seed
        ),
        format!(
            "verdict (on the median, with the binned Mann–Whitney U test): regression / improvement beyond ±{t} %; ~: \
             no change beyond ±{t} %; inconclusive: the interval still reaches beyond ±{t} %, ≈ N more probes per window \
             settle it. SLO share: the probes beyond the SLO's bucket bound (the windows' tail test), \
             two-proportion z-test, as failed. *: compared on the bucket bounds both windows share. –: no value. ITL is \
             not compared (its histogram counts token gaps, not probes)."
        ),
    ]
    .iter()
    .map(|l| super::report::wrap(l, 120, "  "))
    .collect()
}

/// The terminal report: the summary first, then the windows, a table per scenario within 120
/// columns (the wide one is `--output markdown`), and the legend.
pub fn to_text(c: &WindowComparison) -> String {
    let mut out = super::report::wrap(&summary(c), 120, "  ");
    out.push('\n');
    for line in preamble(c) {
        out += &super::report::wrap(&line, 120, "    ");
    }
    for s in &c.scenarios {
        out += &format!(
            "\nscenario {}\n",
            terminal_safe(&format!("{:?}", s.scenario))
        );
        out += &aligned(&text_rows(s));
        out += &slo_lines(s);
        if let Some(line) = resolution_line(s) {
            out += &super::report::wrap(&line, 120, "  ");
        }
    }
    out.push('\n');
    out += &text_legend(c);
    out += &format!("\n{}\n", summary_result(c));
    out
}

/// Markdown for a PR comment or an incident note: the same tables as [`to_text`].
pub fn to_markdown(c: &WindowComparison) -> String {
    let mut out = String::from("### llm-probe compare (Prometheus)\n\n");
    out += &format!("**{}**\n\n", markdown_text(&summary(c)));
    // The preamble holds label values from Prometheus: shown, never rendered.
    for line in preamble(c) {
        out += &format!("- {}\n", markdown_text(line.trim_start()));
    }
    out += &format!("\n{}\n", method_line(c));
    for s in &c.scenarios {
        out += &format!("\n#### scenario {}\n\n", markdown_text(&s.scenario));
        out += &markdown_table(&table_rows(s));
        if let Some(line) = resolution_line(s) {
            out += &format!("\n{line}\n");
        }
    }
    out += &format!("\n**{}**\n", summary_result(c));
    out
}

/// `compare --prometheus.url … --output json` (`schema` [`SCHEMA`]; its JSON Schema, generated
/// from these types, is docs/schemas/compare-prometheus.schema.json). Keys are written in
/// serde_json's order (sorted).
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(
    title = "llm-probe.compare.prometheus/v1",
    description = "`llm-probe compare --prometheus.url … --output json`"
)]
pub struct WindowReport<'a> {
    /// `llm-probe.compare.prometheus/v1`.
    #[schemars(extend("const" = SCHEMA))]
    pub schema: &'static str,
    /// Where the histograms came from.
    pub source: Source<'a>,
    /// The endpoint change compared around (`--around-change`), else `null`.
    pub change: Option<ChangeReport<'a>>,
    /// The endpoint label sets seen in each of `--before`/`--after` (with `--by-identity`: the
    /// old and the new one), else `null`.
    pub identities: Option<Identities<'a>>,
    /// With `--by-identity`: the replicas on each side, else `null`.
    pub replicas: Option<ReplicaSides<'a>>,
    /// The BEFORE window.
    pub before: Window,
    /// The AFTER window.
    pub after: AfterWindow,
    /// The objectives the shares were counted against.
    pub slo: SloReport,
    /// How the rows were judged.
    pub rule: WindowRule,
    /// Warnings for the reader.
    pub warnings: &'a [String],
    /// Scenarios with probes in only one window.
    pub not_compared: &'a [String],
    /// One object per scenario with probes in both windows.
    pub scenarios: Vec<ScenarioReport<'a>>,
    /// The one-line verdict.
    pub summary: String,
    /// Something regressed (exit status 1).
    pub regression: bool,
}

/// `source`: the Prometheus URL (redacted), the target and `--scenario`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Source<'a> {
    /// The Prometheus URL, credentials redacted.
    pub prometheus_url: &'a str,
    /// The target.
    pub target: &'a str,
    /// `--scenario`, else `null`.
    pub scenario: Option<&'a str>,
}

/// An endpoint label set (`llm_probe_endpoint_info`'s labels).
pub type LabelSet<'a> = BTreeMap<&'a str, &'a str>;

fn label_set(id: &Identity) -> LabelSet<'_> {
    id.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
}

/// `change`: the last change of the endpoint identity, Unix seconds.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ChangeReport<'a> {
    /// The last sample of the old label set.
    pub last_old: f64,
    /// The first sample of the new label set.
    pub first_new: f64,
    /// `last_old` in RFC 3339.
    pub last_old_rfc3339: String,
    /// `first_new` in RFC 3339.
    pub first_new_rfc3339: String,
    /// The old label set.
    pub old: LabelSet<'a>,
    /// The new label set.
    pub new: LabelSet<'a>,
}

/// `identities`: the label sets seen in each window.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Identities<'a> {
    /// BEFORE's.
    pub before: Vec<LabelSet<'a>>,
    /// AFTER's.
    pub after: Vec<LabelSet<'a>>,
}

/// `replicas`: the `replica` labels of each side of a `--by-identity` comparison.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ReplicaSides<'a> {
    /// The replicas running the old identity (BEFORE).
    pub before: &'a [String],
    /// The replicas running the new identity (AFTER).
    pub after: &'a [String],
}

/// A window `(start, end]`, Unix seconds and RFC 3339.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Window {
    /// Start, Unix seconds.
    pub start: f64,
    /// End, Unix seconds.
    pub end: f64,
    /// Start in RFC 3339.
    pub start_rfc3339: String,
    /// End in RFC 3339.
    pub end_rfc3339: String,
}

impl Window {
    fn of((start, end): (f64, f64)) -> Self {
        Window {
            start,
            end,
            start_rfc3339: rfc3339(start),
            end_rfc3339: rfc3339(end),
        }
    }
}

/// The AFTER window and the settle-in skipped before it.
#[derive(Debug, Serialize, JsonSchema)]
pub struct AfterWindow {
    /// The window.
    #[serde(flatten)]
    pub window: Window,
    /// The settle-in skipped (`--around-change`), seconds, else `null`.
    pub settle_seconds: Option<f64>,
}

/// `slo`: the objectives and where the TTFT one came from.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SloReport {
    /// TTFT objective, seconds.
    pub ttft_seconds: Option<f64>,
    /// Output tokens per second floor.
    pub output_tokens_per_second: Option<f64>,
    /// `--slo` or `llm_probe_slo_time_to_first_token_seconds`.
    pub ttft_source: &'static str,
}

/// `rule`: the significance level, threshold, test and bootstrap settings.
#[derive(Debug, Serialize, JsonSchema)]
pub struct WindowRule {
    /// `--alpha`.
    pub alpha: f64,
    /// `--threshold`, relative.
    pub threshold: f64,
    /// The test.
    pub test: &'static str,
    /// What the verdict judges.
    pub change: &'static str,
    /// `--resamples`.
    pub bootstrap_resamples: usize,
    /// `--seed`.
    pub seed: u64,
    /// The percentiles reported.
    pub quantiles: [f64; 3],
}

/// One item of `scenarios[]`: one object per metric, the SLO shares, the failure ratio.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ScenarioReport<'a> {
    /// The scenario.
    pub scenario: &'a str,
    /// The rows.
    #[serde(flatten)]
    pub metrics: PerMetric<BucketRowReport>,
    /// The shares beyond each objective.
    pub slo: Vec<SloShare>,
    /// The failure ratio's row.
    pub failure_ratio: FailureRatio,
}

/// A metric's row from the windows' buckets.
#[derive(Debug, Serialize, JsonSchema)]
pub struct BucketRowReport {
    /// BEFORE's probes with a value.
    pub n_before: u64,
    /// AFTER's probes with a value.
    pub n_after: u64,
    /// BEFORE's percentiles.
    pub before: BinnedPercentiles,
    /// AFTER's percentiles.
    pub after: BinnedPercentiles,
    /// Bootstrap intervals of each percentile's relative change.
    pub change_ci: ChangeIntervals,
    /// `multinomial bootstrap over bucket counts`.
    pub ci_method: &'static str,
    /// The binned Mann–Whitney U statistic.
    pub mann_whitney_u: Option<f64>,
    /// Its p-value.
    pub mann_whitney_p: Option<f64>,
    /// The interpolated median's relative change.
    pub p50_change: Option<f64>,
    /// The verdict.
    pub verdict: Option<&'static str>,
    /// The verdict as the tables print it.
    pub verdict_label: Option<String>,
    /// Inconclusive: about how many more probes per window would settle it.
    pub more_requests: Option<u64>,
    /// Compared on the bucket bounds both windows share.
    pub coarsened: bool,
}

/// P50, P95 and P99 of a window's buckets, each `null` without probes.
#[derive(Debug, Serialize, JsonSchema)]
pub struct BinnedPercentiles {
    /// Median.
    pub p50: Option<BinnedPercentile>,
    /// 95th percentile.
    pub p95: Option<BinnedPercentile>,
    /// 99th percentile.
    pub p99: Option<BinnedPercentile>,
}

/// A percentile interpolated in its bucket, with the bucket and its interval.
#[derive(Debug, Serialize, JsonSchema)]
pub struct BinnedPercentile {
    /// Interpolated as `histogram_quantile`.
    pub value: f64,
    /// The bucket's lower bound.
    pub bucket_lower: f64,
    /// The bucket's upper bound (`null`: the `+Inf` bucket).
    pub bucket_upper: Option<f64>,
    /// Its bootstrap interval `[low, high]`.
    pub ci: Option<[f64; 2]>,
}

fn binned(q: &[Option<BinnedQuantile>; 3], ci: &[Option<(f64, f64)>; 3]) -> BinnedPercentiles {
    let one = |i: usize| {
        q[i].map(|q| BinnedPercentile {
            value: q.value,
            bucket_lower: q.lower,
            bucket_upper: q.upper.is_finite().then_some(q.upper),
            ci: ci[i].map(|(l, h)| [l, h]),
        })
    };
    BinnedPercentiles {
        p50: one(0),
        p95: one(1),
        p99: one(2),
    }
}

/// `slo[]`: the share of probes beyond an objective before and after.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SloShare {
    /// The metric (`ttft_seconds`, `output_tokens_per_second`).
    pub metric: &'static str,
    /// The objective.
    pub threshold: f64,
    /// The bucket bound counted at.
    pub bucket_bound: f64,
    /// `above` (latencies) or `at_or_below` (tokens/s).
    pub side: &'static str,
    /// BEFORE's share.
    pub before: ShareCount,
    /// AFTER's share.
    pub after: ShareCount,
    /// The two-proportion z-test's p-value.
    pub p_value: Option<f64>,
    /// The verdict.
    pub verdict: Option<&'static str>,
}

/// Probes beyond the objective of all probes.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ShareCount {
    /// Probes beyond the objective.
    pub beyond: u64,
    /// All probes with a value.
    pub total: u64,
}

fn row_report(r: &BucketRow) -> BucketRowReport {
    BucketRowReport {
        n_before: r.n_before,
        n_after: r.n_after,
        before: binned(&r.before, &r.before_ci),
        after: binned(&r.after, &r.after_ci),
        change_ci: ChangeIntervals::of(&r.change_ci),
        ci_method: "multinomial bootstrap over bucket counts",
        mann_whitney_u: r.u_test.map(|u| u.u_x),
        mann_whitney_p: r.u_test.map(|u| u.p_value),
        p50_change: r.evidence.map(|e| e.change),
        verdict: r.verdict.map(|v| v.name()),
        verdict_label: r.verdict.map(|v| v.label()),
        more_requests: super::report::more_requests(r.verdict),
        coarsened: r.coarsened,
    }
}

fn slo_share(s: &SloRow) -> SloShare {
    SloShare {
        metric: s.metric.json_name(),
        threshold: s.threshold,
        bucket_bound: s.before.bound,
        side: if s.metric == Metric::OutputTokensPerSecond {
            "at_or_below"
        } else {
            "above"
        },
        before: ShareCount {
            beyond: s.before.beyond,
            total: s.before.total,
        },
        after: ShareCount {
            beyond: s.after.beyond,
            total: s.after.total,
        },
        p_value: s.test.as_ref().map(|t| t.1.p_value),
        verdict: s.test.as_ref().map(|t| t.0.name()),
    }
}

/// The JSON report ([`WindowReport`]): `source` (redacted URL, target, scenario), `change` (or
/// null; `--around-change`), `identities` (or null; the endpoint label sets seen in each of
/// `--before`/`--after`, or the two of `--by-identity`), `replicas` (or null; each side's with
/// `--by-identity`), `before`/`after` windows, `slo`, `rule`, `warnings`, `not_compared`,
/// `scenarios[]` (`scenario`, one object per metric named as in `compare`'s JSON, `slo[]`,
/// `failure_ratio`) and `regression`.
pub fn report(c: &WindowComparison) -> WindowReport<'_> {
    let scenarios = (c.scenarios.iter())
        .map(|s| {
            let mut metrics = PerMetric::default();
            for r in &s.rows {
                metrics.set(r.metric, row_report(r));
            }
            ScenarioReport {
                scenario: &s.scenario,
                metrics,
                slo: s.slo.iter().map(slo_share).collect(),
                failure_ratio: FailureRatio::from(&s.failures),
            }
        })
        .collect();
    WindowReport {
        schema: SCHEMA,
        source: Source {
            prometheus_url: &c.url,
            target: &c.target,
            scenario: c.scenario.as_deref(),
        },
        change: c.change.as_ref().map(|ch| ChangeReport {
            last_old: ch.last_old,
            first_new: ch.first_new,
            last_old_rfc3339: rfc3339(ch.last_old),
            first_new_rfc3339: rfc3339(ch.first_new),
            old: label_set(&ch.old),
            new: label_set(&ch.new),
        }),
        identities: c.identities.as_ref().map(|(b, a)| Identities {
            before: b.iter().map(label_set).collect(),
            after: a.iter().map(label_set).collect(),
        }),
        replicas: c.replicas.as_ref().map(|(b, a)| ReplicaSides {
            before: b,
            after: a,
        }),
        before: Window::of(c.before),
        after: AfterWindow {
            window: Window::of(c.after),
            settle_seconds: c.settle,
        },
        slo: SloReport {
            ttft_seconds: c.slo.ttft,
            output_tokens_per_second: c.slo.tokens_per_second,
            ttft_source: if c.slo_from_flag {
                "--slo"
            } else {
                "llm_probe_slo_time_to_first_token_seconds"
            },
        },
        rule: WindowRule {
            alpha: c.options.rule.alpha,
            threshold: c.options.rule.threshold,
            test: "mann-whitney-u on binned data, two-sided, tie-corrected, continuity-corrected normal approximation",
            change: "interpolated P50, relative, multinomial bootstrap interval",
            bootstrap_resamples: c.options.resamples,
            seed: c.options.seed,
            quantiles: QUANTILES,
        },
        warnings: &c.warnings,
        not_compared: &c.not_compared,
        scenarios,
        summary: summary(c),
        regression: c.has_regression(),
    }
}

/// The JSON document of [`report`], keys in serde_json's order (sorted).
pub fn to_json(c: &WindowComparison) -> Value {
    serde_json::to_value(report(c)).expect("a window comparison serializes")
}
