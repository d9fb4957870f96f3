//! `llm-probe compare BEFORE AFTER`: is AFTER slower than BEFORE, by how much, how sure?
//!
//! - [`input`] reads the two runs (bench JSON or probe-once JSON lines);
//! - [`stats`] holds the statistics (pure functions);
//! - [`verdict`] the rule that turns them into `regression` / `improvement` / `~` /
//!   `inconclusive`;
//! - [`selection`] the expected E2E and crossover output length between two endpoints;
//! - [`report`] the terminal table, markdown and JSON.
//!
//! From Prometheus (`--prometheus.url`): [`prometheus`] reads two windows' histogram buckets
//! (and finds the last endpoint change), [`window`] parses the windows, [`buckets`] compares the
//! bucket counts with [`stats::binned`], [`from_prometheus`] runs the command.
//!
//! This module matches the runs' levels, checks the runs are comparable and builds one
//! [`Row`] per (level, metric).

pub mod buckets;
pub(crate) mod buckets_report;
pub mod from_prometheus;
pub mod input;
pub mod prometheus;
pub mod report;
pub mod selection;
pub mod stats;
pub mod verdict;
pub mod window;

use input::{Level, LevelKey, Run};
use verdict::{Direction, Evidence, Rule, Verdict};

/// The per-request metrics compared, named as the daemon's metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// Time to first token, seconds.
    Ttft,
    /// Time to first output (non-reasoning) token, seconds.
    TimeToFirstOutputToken,
    /// Time per output token, seconds.
    Tpot,
    /// Inter-token latency, seconds: the request's own ITL summary (see [`input`]).
    Itl,
    /// End-to-end latency, seconds.
    E2e,
    /// Output tokens per second of the request.
    OutputTokensPerSecond,
}

impl Metric {
    /// Every metric, in report order.
    pub const ALL: [Metric; 6] = [
        Metric::Ttft,
        Metric::TimeToFirstOutputToken,
        Metric::Tpot,
        Metric::Itl,
        Metric::E2e,
        Metric::OutputTokensPerSecond,
    ];

    /// Position in [`Metric::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// The JSON field name (the daemon's metric name).
    pub fn json_name(self) -> &'static str {
        match self {
            Metric::Ttft => "ttft_seconds",
            Metric::TimeToFirstOutputToken => "time_to_first_output_token_seconds",
            Metric::Tpot => "tpot_seconds",
            Metric::Itl => "inter_token_latency_seconds",
            Metric::E2e => "e2e_seconds",
            Metric::OutputTokensPerSecond => "output_tokens_per_second",
        }
    }

    /// The short label in tables.
    pub fn label(self) -> &'static str {
        match self {
            Metric::Ttft => "TTFT",
            Metric::TimeToFirstOutputToken => "first output token",
            Metric::Tpot => "TPOT",
            Metric::Itl => "ITL",
            Metric::E2e => "E2E",
            Metric::OutputTokensPerSecond => "tokens/s",
        }
    }

    /// Which way is worse.
    pub fn direction(self) -> Direction {
        match self {
            Metric::OutputTokensPerSecond => Direction::HigherIsBetter,
            _ => Direction::HigherIsWorse,
        }
    }

    /// Whether values are seconds (else tokens per second).
    pub fn is_seconds(self) -> bool {
        self != Metric::OutputTokensPerSecond
    }
}

/// The percentiles reported per row.
pub const QUANTILES: [f64; 3] = [0.5, 0.95, 0.99];

/// `compare`'s options.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// `--alpha` and `--threshold`.
    pub rule: Rule,
    /// Compare runs of different scenarios, prompt sizes or `max_tokens` anyway.
    pub force: bool,
    /// Bootstrap resamples for the percentile-change intervals (≥ 2,000 on the command line).
    pub resamples: usize,
    /// Bootstrap seed.
    pub seed: u64,
    /// Output lengths (tokens) for the expected E2E between two endpoints.
    pub lengths: Vec<u32>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            rule: Rule::default(),
            force: false,
            resamples: 2000,
            seed: 17,
            lengths: selection::TYPICAL_LENGTHS.to_vec(),
        }
    }
}

/// One metric at one level.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The metric.
    pub metric: Metric,
    /// Successful requests with a value, per run.
    pub n_before: usize,
    /// As `n_before`.
    pub n_after: usize,
    /// P50, P95, P99 of BEFORE ([`QUANTILES`]); `None` without values.
    pub before: [Option<f64>; 3],
    /// As `before`, for AFTER.
    pub after: [Option<f64>; 3],
    /// Distribution-free interval (order statistics, confidence `1 − alpha`) of each BEFORE
    /// percentile; `None` where the sample is too small (e.g. a P99 of 30 requests).
    pub before_ci: [Option<(f64, f64)>; 3],
    /// As `before_ci`, for AFTER.
    pub after_ci: [Option<(f64, f64)>; 3],
    /// Bootstrap interval (confidence `1 − alpha`) of each percentile's relative change.
    pub change_ci: [Option<(f64, f64)>; 3],
    /// U test and Hodges–Lehmann evidence (`None`: a side has no values).
    pub evidence: Option<Evidence>,
    /// The verdict (`None` when there is no evidence).
    pub verdict: Option<Verdict>,
}

/// The failure-ratio row of a level.
#[derive(Debug, Clone, PartialEq)]
pub struct FailureRow {
    /// `(sent, failed)` per run.
    pub before: (u64, u64),
    /// As `before`.
    pub after: (u64, u64),
    /// The two-proportion test and verdict (`None` when a run sent nothing).
    pub test: Option<(Verdict, stats::ProportionTest)>,
}

/// One level present in both runs.
#[derive(Debug, Clone, PartialEq)]
pub struct LevelComparison {
    /// The level.
    pub key: LevelKey,
    /// One row per metric with values in either run.
    pub rows: Vec<Row>,
    /// Failure ratios.
    pub failures: FailureRow,
}

/// The whole comparison.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    /// The options used.
    pub options: Options,
    /// Levels in both runs, in BEFORE's order.
    pub levels: Vec<LevelComparison>,
    /// Levels only one run has (not compared).
    pub unmatched: Vec<String>,
    /// Warnings for the reader (same endpoint identity, forced comparison, …).
    pub warnings: Vec<String>,
    /// When the runs are different targets or models: expected E2E and crossover.
    pub selection: Option<selection::Selection>,
}

impl Comparison {
    /// Whether any row is a regression (`compare` then exits 1).
    pub fn has_regression(&self) -> bool {
        self.levels.iter().any(|l| {
            l.rows
                .iter()
                .any(|r| r.verdict == Some(Verdict::Regression))
                || matches!(l.failures.test, Some((Verdict::Regression, _)))
        })
    }
}

/// Why two runs were not compared.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// Different setups (scenario, prompt size, `max_tokens`): each entry names what differs.
    #[error("the runs are not comparable: {}; compare like with like, or pass --force", .0.join("; "))]
    Setup(Vec<String>),
    /// No level is in both runs (levels are matched by concurrency or rate).
    #[error(
        "no level is in both runs (BEFORE has {before}; AFTER has {after}): levels are matched \
         by concurrency or rate, and a probe-once collection only matches another one; run both \
         with the same --concurrency or --rate"
    )]
    NoCommonLevel {
        /// BEFORE's levels, listed.
        before: String,
        /// AFTER's levels, listed.
        after: String,
    },
    /// Every common level is empty on one side: nothing was measured there to judge.
    #[error(
        "nothing to compare: {side} has no request in any level both runs share (a run \
         interrupted before its first request ended, or every request was a warm-up); rerun it"
    )]
    Empty {
        /// `BEFORE`, `AFTER` or `BEFORE and AFTER`.
        side: &'static str,
    },
}

/// What differs between the runs' setups (scenario, prompt size, `max_tokens`): described.
fn setup_differences(before: &Run, after: &Run) -> Vec<String> {
    let mut out = Vec::new();
    let show = |v: &Option<String>| v.clone().unwrap_or_else(|| "unknown".into());
    if before.scenario != after.scenario {
        out.push(format!(
            "scenario {} vs {}",
            show(&before.scenario),
            show(&after.scenario)
        ));
    }
    out.extend(size_difference(
        "prompt tokens",
        &before.prompt_tokens,
        &after.prompt_tokens,
        PROMPT_TOLERANCE,
    ));
    out.extend(size_difference(
        "max_tokens",
        &before.max_tokens,
        &after.max_tokens,
        0.0,
    ));
    out
}

/// Prompt sizes within this relative difference count as the same (each probe's nonce and the
/// server's tokenizer move a reported prompt size by a few tokens).
pub const PROMPT_TOLERANCE: f64 = 0.05;

/// `"{what} {before} vs {after}"` when both runs state the size and the values differ (numbers:
/// by more than `tolerance`, relative to the larger).
fn size_difference(
    what: &str,
    before: &Option<serde_json::Value>,
    after: &Option<serde_json::Value>,
    tolerance: f64,
) -> Option<String> {
    let (b, a) = (before.as_ref()?, after.as_ref()?);
    let same = match (b.as_f64(), a.as_f64()) {
        (Some(x), Some(y)) => (x - y).abs() <= tolerance * x.abs().max(y.abs()),
        _ => b == a,
    };
    (!same).then(|| format!("{what} {b} vs {a}"))
}

/// Compare `after` with `before`: refuse different setups unless `options.force`, match levels
/// by concurrency or rate, and judge every metric and the failure ratio of each level.
pub fn compare(before: &Run, after: &Run, options: &Options) -> Result<Comparison, Refusal> {
    let mut warnings = Vec::new();
    let differences = setup_differences(before, after);
    if !differences.is_empty() {
        if !options.force {
            return Err(Refusal::Setup(differences));
        }
        warnings.push(format!(
            "compared with --force although {}",
            differences.join("; ")
        ));
    }
    let different_endpoint = before.target != after.target || before.model != after.model;
    if !different_endpoint && !before.identity.is_empty() && before.identity == after.identity {
        warnings.push(
            "the endpoint identity (response model, fingerprint, server, version) did not \
             change between the runs: is AFTER really after the upgrade?"
                .into(),
        );
    }
    let mut levels = Vec::new();
    let mut unmatched = Vec::new();
    let (mut before_empty, mut after_empty) = (true, true);
    for b in &before.levels {
        match after.levels.iter().find(|a| a.key == b.key) {
            Some(a) => {
                before_empty &= b.sent_failed().0 == 0;
                after_empty &= a.sent_failed().0 == 0;
                levels.push(compare_level(b, a, options))
            }
            None => unmatched.push(format!("{} (BEFORE only)", b.key)),
        }
    }
    for a in &after.levels {
        if !before.levels.iter().any(|b| b.key == a.key) {
            unmatched.push(format!("{} (AFTER only)", a.key));
        }
    }
    if levels.is_empty() {
        let list = |r: &Run| {
            let keys: Vec<String> = r.levels.iter().map(|l| l.key.to_string()).collect();
            if keys.is_empty() {
                "no levels".to_string()
            } else {
                keys.join(", ")
            }
        };
        return Err(Refusal::NoCommonLevel {
            before: list(before),
            after: list(after),
        });
    }
    if before_empty || after_empty {
        let side = match (before_empty, after_empty) {
            (true, true) => "BEFORE and AFTER",
            (true, false) => "BEFORE",
            _ => "AFTER",
        };
        return Err(Refusal::Empty { side });
    }
    let selection = different_endpoint
        .then(|| selection::select(before, after, options))
        .flatten();
    Ok(Comparison {
        options: options.clone(),
        levels,
        unmatched,
        warnings,
        selection,
    })
}

fn compare_level(before: &Level, after: &Level, options: &Options) -> LevelComparison {
    let alpha = options.rule.alpha;
    let rows = Metric::ALL
        .iter()
        .filter_map(|&metric| {
            let (mut b, mut a) = (before.values(metric), after.values(metric));
            if b.is_empty() && a.is_empty() {
                return None;
            }
            let evidence = verdict::evidence(&b, &a, alpha);
            let verdict = evidence
                .as_ref()
                .map(|e| verdict::judge(e, metric.direction(), options.rule));
            let cis = stats::bootstrap_relative_change(
                &b,
                &a,
                &QUANTILES,
                options.resamples,
                options.seed,
                1.0 - alpha,
            );
            b.sort_by(f64::total_cmp);
            a.sort_by(f64::total_cmp);
            let pct = |s: &[f64]| QUANTILES.map(|q| stats::percentile(s, q));
            let ci = |s: &[f64]| QUANTILES.map(|q| stats::percentile_ci(s, q, 1.0 - alpha));
            Some(Row {
                metric,
                n_before: b.len(),
                n_after: a.len(),
                before: pct(&b),
                after: pct(&a),
                before_ci: ci(&b),
                after_ci: ci(&a),
                change_ci: [cis[0], cis[1], cis[2]],
                evidence,
                verdict,
            })
        })
        .collect();
    let (sb, fb) = before.sent_failed();
    let (sa, fa) = after.sent_failed();
    LevelComparison {
        key: before.key,
        rows,
        failures: FailureRow {
            before: (sb, fb),
            after: (sa, fa),
            test: verdict::judge_failures(fb, sb, fa, sa, options.rule),
        },
    }
}

/// The smallest `--alpha` accepted: below it `1 − alpha` is too close to 1 for the normal
/// quantiles (and, from about 1e-16, rounds to 1, where no interval exists at any sample size).
pub const MIN_ALPHA: f64 = 1e-6;

/// Parse `--alpha`: a number from [`MIN_ALPHA`] to below 0.5.
pub fn parse_alpha(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(a) if (MIN_ALPHA..0.5).contains(&a) => Ok(a),
        _ => Err(format!(
            "{s:?} is not a significance level; give a number from 0.000001 to below 0.5, e.g. 0.05"
        )),
    }
}

/// Parse `--threshold`: `10%` or `0.1`, from 0 to 1000 %.
pub fn parse_threshold(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let v = match t.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|v| v / 100.0),
        None => t.parse::<f64>(),
    };
    match v {
        Ok(v) if (0.0..=10.0).contains(&v) => Ok(v),
        _ => Err(format!(
            "{s:?} is not a threshold; give a relative change such as 10% or 0.1 (0 to 1000 %)"
        )),
    }
}

/// Output formats of `llm-probe compare` (`--output`), for runs and Prometheus windows alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// An aligned table per level.
    Text,
    /// Markdown tables (for a pull-request comment).
    Markdown,
    /// One JSON document (`"schema": "llm-probe.compare/v1"`; from Prometheus:
    /// `"llm-probe.compare.prometheus/v1"`).
    Json,
}

/// `llm-probe compare`: read both runs, compare, print in `output`'s format to stdout (warnings
/// also to stderr in the JSON format, whose stdout is the document alone). Exit status: 0 without
/// a regression, 1 with any, 2 when a run cannot be read or the runs are not comparable.
pub fn run(
    before: &std::path::Path,
    after: &std::path::Path,
    options: &Options,
    output: Output,
) -> std::process::ExitCode {
    use crate::logging::{stderr_line, stdout_text};
    use std::process::ExitCode;
    let runs = input::read_run(before).and_then(|b| Ok((b, input::read_run(after)?)));
    let (b, a) = match runs {
        Ok(r) => r,
        Err(e) => {
            stderr_line(format_args!(
                "llm-probe compare: {}",
                crate::sanitize::terminal_safe(&e.to_string())
            ));
            return ExitCode::from(2);
        }
    };
    let c = match compare(&b, &a, options) {
        Ok(c) => c,
        Err(refusal) => {
            stderr_line(format_args!(
                "llm-probe compare: {}",
                crate::sanitize::terminal_safe(&refusal.to_string())
            ));
            return ExitCode::from(2);
        }
    };
    match output {
        Output::Text => stdout_text(report::to_text(&c, &b, &a)),
        Output::Markdown => stdout_text(report::to_markdown(&c, &b, &a)),
        Output::Json => {
            for w in &c.warnings {
                stderr_line(format_args!(
                    "llm-probe compare: warning: {}",
                    crate::sanitize::terminal_safe(w)
                ));
            }
            stdout_text(crate::report::json_text(&report::to_json(&c, &b, &a), true))
        }
    }
    if c.has_regression() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

#[cfg(test)]
mod hostile_prometheus_tests;
#[cfg(test)]
mod tests;
