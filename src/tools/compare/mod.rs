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

#[cfg(test)]
mod calibration;
pub mod window;

use crate::bench::level::Criterion;
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

    /// The label in the text table and summary: `TTFT`, `TTFOT` (time to first output
    /// token), `TPOT`, `ITL`, `E2E`, `tok/s`.
    pub fn short_label(self) -> &'static str {
        match self {
            Metric::TimeToFirstOutputToken => "TTFOT",
            Metric::OutputTokensPerSecond => "tok/s",
            m => m.label(),
        }
    }

    /// Which way is worse.
    pub fn direction(self) -> Direction {
        match self {
            Metric::OutputTokensPerSecond => Direction::HigherIsBetter,
            _ => Direction::HigherIsWorse,
        }
    }

    /// The quantile an SLO states for this metric, judged as the row's tail: the P95 of a
    /// latency, the P5 of output tokens/s (bench's SLA criteria, `slo.ttft_p95` and
    /// `slo.output_tokens_per_second_min` on the P5).
    pub fn tail_quantile(self) -> f64 {
        match self.direction() {
            Direction::HigherIsWorse => 0.95,
            Direction::HigherIsBetter => 0.05,
        }
    }

    /// `P95` or `P5`: the name of [`Metric::tail_quantile`].
    pub fn tail_label(self) -> &'static str {
        match self.direction() {
            Direction::HigherIsWorse => "P95",
            Direction::HigherIsBetter => "P5",
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
    /// `--fail-on inconclusive`: exit [`EXIT_INCONCLUSIVE`] when nothing regressed but a row
    /// is inconclusive.
    pub fail_on_inconclusive: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            rule: Rule::default(),
            force: false,
            resamples: 2000,
            seed: 17,
            lengths: selection::TYPICAL_LENGTHS.to_vec(),
            fail_on_inconclusive: false,
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
    /// Bootstrap interval (confidence `1 − alpha`) of each percentile's relative change
    /// ([`stats::tail::bootstrap_changes`], linear interpolation); `None` where a side has too few
    /// requests for the percentile's order-statistic interval (a P99 needs about 370).
    pub change_ci: [Option<(f64, f64)>; 3],
    /// U test and Hodges–Lehmann evidence (`None`: a side has no values).
    pub evidence: Option<Evidence>,
    /// The median's verdict from `evidence` (`None` without evidence).
    pub median_verdict: Option<Verdict>,
    /// The change of the SLO quantile ([`Metric::tail_quantile`], linear interpolation as
    /// bench's percentiles) with its bootstrap interval at [`verdict::tail_confidence`]; `None`
    /// when a side has no values.
    pub tail: Option<stats::tail::TailChange>,
    /// The tail's verdict ([`verdict::judge_tail`]).
    pub tail_verdict: Option<Verdict>,
    /// The row's verdict: [`verdict::combine`] of the median's and the tail's (`None` when
    /// neither could be judged).
    pub verdict: Option<Verdict>,
    /// Which parts gave `verdict`: `"P50"` (the median), `"P95"`/`"P5"` (the tail).
    pub verdict_by: Vec<&'static str>,
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

/// The SLA capacity of both runs, side by side (bench runs that state it).
#[derive(Debug, Clone, PartialEq)]
pub struct CapacityChange {
    /// BEFORE's capacity (`None`: its first level already broke the SLA).
    pub before: Option<LevelKey>,
    /// AFTER's capacity.
    pub after: Option<LevelKey>,
    /// Where AFTER broke the SLA (`None`: every level met it).
    pub after_broken_at: Option<LevelKey>,
    /// What broke there, described with the objective (e.g. `TTFT P95 > 300 ms`).
    pub after_broken_by: Vec<String>,
    /// Whether AFTER's interval at the breaking level crosses the objective (the knee is not
    /// established there; the drop may be noise).
    pub after_straddles: bool,
    /// `regression` when the capacity dropped (4 → 2, 4 → none), `improvement` when it rose,
    /// `~` otherwise.
    pub verdict: Verdict,
}

/// A level's load for ordering capacities: `None` (no level met the SLA) below every level.
fn capacity_rank(k: Option<LevelKey>) -> Option<f64> {
    match k {
        None => Some(f64::NEG_INFINITY),
        Some(LevelKey::Concurrency(c)) => Some(c as f64),
        Some(LevelKey::Rate(r)) => Some(r),
        Some(LevelKey::PromptTokens(t)) => Some(t as f64),
        Some(LevelKey::Single) => None,
    }
}

/// A bench criterion with the objective from `sla`.
fn describe_criterion(criterion: Criterion, sla: &input::Sla) -> String {
    match criterion {
        Criterion::TtftP95 => match sla.ttft_p95 {
            Some(s) => format!("TTFT P95 > {} ms", report::number(s * 1e3)),
            None => "TTFT P95 above its objective".into(),
        },
        Criterion::OutputTokensPerSecondP5 => match sla.output_tokens_per_second_min {
            Some(m) => format!("tokens/s P5 < {}", report::number(m)),
            None => "tokens/s P5 below its floor".into(),
        },
        Criterion::FailureRatio => match sla.max_failure_ratio {
            Some(m) => format!("failure ratio > {}", report::number(m * 100.0) + " %"),
            None => "failure ratio above its maximum".into(),
        },
    }
}

/// The capacities side by side; `None` when a run states none, or the runs' levels are of
/// different kinds (concurrency, rate, prompt length). A prompt-length sweep's capacity is the
/// longest prompt within the SLA.
pub fn compare_capacity(before: &Run, after: &Run) -> Option<CapacityChange> {
    let (b, a) = (before.sla.as_ref()?, after.sla.as_ref()?);
    let kind = |k: Option<LevelKey>| match k {
        Some(LevelKey::Rate(_)) => 1,
        Some(LevelKey::PromptTokens(_)) => 2,
        _ => 0,
    };
    let kb = b.capacity.or(b.broken_at);
    let ka = a.capacity.or(a.broken_at);
    if kind(kb) != kind(ka) {
        return None;
    }
    let (rb, ra) = (capacity_rank(b.capacity)?, capacity_rank(a.capacity)?);
    let verdict = if ra < rb {
        Verdict::Regression
    } else if ra > rb {
        Verdict::Improvement
    } else {
        Verdict::NoChange
    };
    Some(CapacityChange {
        before: b.capacity,
        after: a.capacity,
        after_broken_at: a.broken_at,
        after_broken_by: a
            .broken_by
            .iter()
            .map(|c| describe_criterion(*c, a))
            .collect(),
        after_straddles: a.straddles.iter().any(|(k, _)| Some(*k) == a.broken_at),
        verdict,
    })
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
    /// The SLA capacities side by side (bench runs stating them).
    pub capacity: Option<CapacityChange>,
}

/// `compare`'s exit status when nothing regressed but a row is inconclusive and
/// `--fail-on inconclusive` was given.
pub const EXIT_INCONCLUSIVE: u8 = 3;

impl Comparison {
    /// Whether any row is a regression, or the SLA capacity dropped (`compare` then exits 1).
    pub fn has_regression(&self) -> bool {
        self.levels.iter().any(|l| {
            l.rows
                .iter()
                .any(|r| r.verdict == Some(Verdict::Regression))
                || matches!(l.failures.test, Some((Verdict::Regression, _)))
        }) || self
            .capacity
            .as_ref()
            .is_some_and(|c| c.verdict == Verdict::Regression)
    }

    /// The inconclusive rows as `(level, metric)`.
    pub fn inconclusive(&self) -> Vec<(LevelKey, &Row)> {
        self.levels
            .iter()
            .flat_map(|l| l.rows.iter().map(move |r| (l.key, r)))
            .filter(|(_, r)| matches!(r.verdict, Some(Verdict::Inconclusive { .. })))
            .collect()
    }

    /// The exit status: 1 on a regression; [`EXIT_INCONCLUSIVE`] when `fail_on_inconclusive`
    /// and a row is inconclusive; else 0.
    pub fn exit_status(&self, fail_on_inconclusive: bool) -> u8 {
        if self.has_regression() {
            1
        } else if fail_on_inconclusive && !self.inconclusive().is_empty() {
            EXIT_INCONCLUSIVE
        } else {
            0
        }
    }
}

/// Why two runs were not compared.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// Different setups (scenario, prompt size, `max_tokens`): each entry names what differs.
    #[error("the runs are not comparable: {}; compare like with like, or pass --force", .0.join("; "))]
    Setup(Vec<String>),
    /// No level is in both runs (levels are matched by concurrency, rate or prompt length).
    #[error(
        "no level is in both runs (BEFORE has {before}; AFTER has {after}): levels are matched \
         by concurrency, rate or prompt length, and a probe-once collection only matches \
         another one; run both with the same --concurrency, --rate or --prompt-tokens"
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

/// Whether `run` is a prompt-length sweep (`bench --prompt-tokens`): its levels are keyed by
/// the generated prompt's size.
pub fn by_prompt_length(run: &Run) -> bool {
    (run.levels.iter()).any(|l| matches!(l.key, LevelKey::PromptTokens(_)))
}

/// What differs between the runs' setups (scenario, prompt size, `max_tokens`): described. A
/// prompt-length sweep states the prompt size per level, so the run's (its first level's) is
/// not compared: its levels are matched by size, and each level's count is checked in
/// [`prompt_count_warnings`].
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
    if !by_prompt_length(before) && !by_prompt_length(after) {
        out.extend(size_difference(
            "prompt tokens",
            &before.prompt_tokens,
            &after.prompt_tokens,
            PROMPT_TOLERANCE,
        ));
    }
    out.extend(size_difference(
        "max_tokens",
        &before.max_tokens,
        &after.max_tokens,
        0.0,
    ));
    out
}

/// A warning per prompt-length level both runs have where the server counted the same generated
/// prompt differently (by more than [`PROMPT_TOLERANCE`]): another tokenizer or chat template,
/// so the same words are a different amount of prefill.
fn prompt_count_warnings(before: &Run, after: &Run) -> Vec<String> {
    let mut out = Vec::new();
    for b in &before.levels {
        let LevelKey::PromptTokens(t) = b.key else {
            continue;
        };
        let Some(a) = after.levels.iter().find(|a| a.key == b.key) else {
            continue;
        };
        if let (Some(x), Some(y)) = (b.counted_prompt(), a.counted_prompt()) {
            if (x - y).abs() > PROMPT_TOLERANCE * x.max(y) {
                out.push(format!(
                    "at prompt {t} tokens the server counted {} tokens BEFORE and {} AFTER: the tokenizer or the chat template changed, so the same prompt is another amount of prefill",
                    report::number(x),
                    report::number(y)
                ));
            }
        }
    }
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
    warnings.extend(prompt_count_warnings(before, after));
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
    let capacity = compare_capacity(before, after);
    if let (Some(b), Some(a)) = (&before.sla, &after.sla) {
        if b.ttft_p95 != a.ttft_p95
            || b.output_tokens_per_second_min != a.output_tokens_per_second_min
            || b.max_failure_ratio != a.max_failure_ratio
        {
            warnings.push(
                "the runs were judged against different SLOs: their SLA capacities are not \
                 comparable"
                    .into(),
            );
        }
    }
    Ok(Comparison {
        options: options.clone(),
        levels,
        unmatched,
        warnings,
        selection,
        capacity,
    })
}

fn compare_level(before: &Level, after: &Level, options: &Options) -> LevelComparison {
    let rows = Metric::ALL
        .iter()
        .filter_map(|&metric| {
            let (b, a) = (before.values(metric), after.values(metric));
            if b.is_empty() && a.is_empty() {
                return None;
            }
            // A non-reasoning model's first output token is its first token: a row only
            // where it differs from TTFT's.
            if metric == Metric::TimeToFirstOutputToken
                && b == before.values(Metric::Ttft)
                && a == after.values(Metric::Ttft)
            {
                return None;
            }
            Some(judge_row(metric, b, a, options))
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

/// One metric's row from its values in each run: percentiles with their order-statistic
/// intervals, the median's evidence and verdict, the percentile changes with bootstrap
/// intervals (one resampling), the tail verdict and the combined verdict.
pub fn judge_row(metric: Metric, mut b: Vec<f64>, mut a: Vec<f64>, options: &Options) -> Row {
    use stats::tail::{Estimator, Spec};
    let alpha = options.rule.alpha;
    let evidence = verdict::evidence(&b, &a, alpha);
    let median_verdict = evidence
        .as_ref()
        .map(|e| verdict::judge(e, metric.direction(), options.rule));
    let mut specs: Vec<Spec> = QUANTILES
        .iter()
        .map(|&q| Spec {
            q,
            estimator: Estimator::Interpolated,
        })
        .collect();
    let tail_q = metric.tail_quantile();
    let tail_index = match QUANTILES.iter().position(|&q| q == tail_q) {
        Some(i) => i,
        None => {
            specs.push(Spec {
                q: tail_q,
                estimator: Estimator::Interpolated,
            });
            specs.len() - 1
        }
    };
    let changes = stats::tail::bootstrap_changes(&b, &a, &specs, options.resamples, options.seed);
    b.sort_by(f64::total_cmp);
    a.sort_by(f64::total_cmp);
    let pct = |s: &[f64]| QUANTILES.map(|q| crate::stats::quantile_type7(s, q));
    // An interval where the sample bounds both sides, else none.
    let ci = |s: &[f64]| {
        QUANTILES.map(|q| match crate::stats::quantile_ci(s, q, 1.0 - alpha) {
            [Some(low), Some(high)] => Some((low, high)),
            _ => None,
        })
    };
    let (before_ci, after_ci) = (ci(&b), ci(&a));
    let change_ci = [0, 1, 2].map(|i| {
        let supported = before_ci[i].is_some() && after_ci[i].is_some();
        let t = changes[i].as_ref()?.interval(1.0 - alpha);
        supported.then_some((t.low, t.high))
    });
    let tail = changes[tail_index]
        .as_ref()
        .map(|c| c.interval(verdict::tail_confidence(alpha)));
    let tail_verdict = tail
        .as_ref()
        .map(|t| verdict::judge_tail(t, b.len().max(a.len()), metric.direction(), options.rule));
    let mut parts = Vec::new();
    if let Some(v) = median_verdict {
        parts.push(("P50", v));
    }
    if let Some(v) = tail_verdict {
        parts.push((metric.tail_label(), v));
    }
    let (verdict, verdict_by) = if parts.is_empty() {
        (None, Vec::new())
    } else {
        let (v, by) = verdict::combine(&parts);
        (Some(v), by)
    };
    Row {
        metric,
        n_before: b.len(),
        n_after: a.len(),
        before: pct(&b),
        after: pct(&a),
        before_ci,
        after_ci,
        change_ci,
        evidence,
        median_verdict,
        tail,
        tail_verdict,
        verdict,
        verdict_by,
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

/// What makes `compare` exit non-zero besides an unreadable or incomparable run (`--fail-on`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FailOn {
    /// Exit 1 on a regression (a row, a failure ratio or an SLA capacity drop).
    Regression,
    /// Also exit 3 when nothing regressed but a row is inconclusive (too few requests to
    /// tell): for CI gates that must not pass on too little evidence.
    Inconclusive,
}

/// `llm-probe compare`: read both runs, compare, print in `output`'s format to stdout (warnings
/// also to stderr in the JSON format, whose stdout is the document alone). Exit status: 0 without
/// a regression, 1 with any (a row, a failure ratio or the SLA capacity), 2 when a run cannot be
/// read or the runs are not comparable, [`EXIT_INCONCLUSIVE`] (3) with `--fail-on inconclusive`
/// when nothing regressed but a row is inconclusive.
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
    ExitCode::from(c.exit_status(options.fail_on_inconclusive))
}

#[cfg(test)]
mod hostile_prometheus_tests;
#[cfg(test)]
mod tests;
