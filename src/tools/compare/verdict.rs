//! The verdict of one row of `compare` (one metric at one level): `regression`, `improvement`,
//! `~` (no significant change) or `inconclusive — needs ≈ N more requests`.
//!
//! The rule, for a metric sampled once per request (TTFT, TPOT, E2E, …):
//! 1. The evidence: the two-sided Mann–Whitney U test's p-value, and the Hodges–Lehmann shift
//!    `after − before` with its Moses interval at confidence `1 − α`, both divided by the median
//!    of BEFORE to give a relative change `c` and interval `[lo, hi]`
//!    ([`crate::compare::stats`]).
//! 2. Direction: `worse = c` when a higher value is worse (TTFT, TPOT, ITL, E2E), `worse = −c`
//!    when a higher value is better (output tokens/s).
//! 3. Too few requests for an interval at `1 − α` (an end is unbounded): `inconclusive`,
//!    whatever the p-value (the normal approximation is no basis for a handful of requests).
//! 4. Significant (`p < α`): `regression` when `worse > threshold`, `improvement` when
//!    `worse < −threshold`, otherwise `~` (a real change, but within the threshold).
//! 5. Not significant: `inconclusive` when the interval still reaches beyond the threshold on
//!    either side (`lo < −threshold` or `hi > threshold`); otherwise `~`.
//!
//! The estimate of "N more requests" ([`more_requests`]) assumes the interval narrows as
//! `1/√n` around the same estimate when both runs grow by the same factor `f`: the factor that
//! brings the open end of the interval inside the threshold (or, when the estimate itself is
//! beyond the threshold, that makes the interval exclude 0), and `N = (f − 1) × max(n_before,
//! n_after)` more requests in each run, rounded up to two significant digits.
//!
//! Failure ratios ([`judge_failures`]) use the two-proportion z-test: `regression` when `p < α`
//! and the ratio rose by more than the threshold relative to BEFORE (any rise from 0 counts),
//! `improvement` for the mirror image, `~` otherwise (no `inconclusive`: a failure ratio has no
//! useful interval from a handful of failures).

use super::stats::{self, Shift};

/// Which way is worse for a metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Latencies: TTFT, time to first output token, TPOT, ITL, E2E, failure ratio.
    HigherIsWorse,
    /// Rates: output tokens per second.
    HigherIsBetter,
}

/// `--alpha` and `--threshold`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rule {
    /// Significance level of the tests, and `1 − alpha` the confidence of the intervals.
    pub alpha: f64,
    /// Smallest relative change that is news (0.10 = 10 %).
    pub threshold: f64,
}

impl Default for Rule {
    /// `--alpha 0.05 --threshold 10%`.
    fn default() -> Self {
        Rule {
            alpha: 0.05,
            threshold: 0.10,
        }
    }
}

/// The verdict of one row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Significantly worse by more than the threshold.
    Regression,
    /// Significantly better by more than the threshold.
    Improvement,
    /// No significant change, or a significant change within the threshold (printed `~`).
    NoChange,
    /// Not significant, but the interval still includes a change beyond the threshold: about
    /// `more_requests` more requests in each run would settle it.
    Inconclusive {
        /// Estimated additional requests per run (see the module docs).
        more_requests: u64,
    },
}

impl Verdict {
    /// The short label: `regression`, `improvement`, `~` or `inconclusive — needs ≈ N more requests`.
    pub fn label(&self) -> String {
        match self {
            Verdict::Regression => "regression".into(),
            Verdict::Improvement => "improvement".into(),
            Verdict::NoChange => "~".into(),
            Verdict::Inconclusive { more_requests } => {
                let s = if *more_requests == 1 { "" } else { "s" };
                format!("inconclusive — needs ≈ {more_requests} more request{s}")
            }
        }
    }

    /// A stable machine name for JSON: `regression`, `improvement`, `no_change`, `inconclusive`.
    pub fn name(&self) -> &'static str {
        match self {
            Verdict::Regression => "regression",
            Verdict::Improvement => "improvement",
            Verdict::NoChange => "no_change",
            Verdict::Inconclusive { .. } => "inconclusive",
        }
    }
}

/// The evidence behind a per-request metric's verdict.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Evidence {
    /// Two-sided Mann–Whitney p-value.
    pub p_value: f64,
    /// Hodges–Lehmann shift `after − before` in the metric's unit, with its interval.
    pub shift: Shift,
    /// Median of BEFORE, the base of the relative change.
    pub before_median: f64,
    /// `shift.estimate / before_median`.
    pub change: f64,
    /// Relative interval ends (`None`: unbounded, the samples are too small).
    pub low: Option<f64>,
    /// As `low`.
    pub high: Option<f64>,
    /// Sample sizes.
    pub n_before: usize,
    /// As `n_before`.
    pub n_after: usize,
}

/// Test `after` against `before` (finite values, one per request): U test, Hodges–Lehmann shift
/// at confidence `1 − alpha`, relative to BEFORE's median. `None` when either sample is empty or
/// BEFORE's median is not positive (no relative change can be formed).
pub fn evidence(before: &[f64], after: &[f64], alpha: f64) -> Option<Evidence> {
    let u = stats::mann_whitney_u(before, after)?;
    let shift = stats::hodges_lehmann(before, after, 1.0 - alpha)?;
    let before_median = crate::stats::median(before)?;
    if before_median <= 0.0 || !before_median.is_finite() {
        return None;
    }
    Some(Evidence {
        p_value: u.p_value,
        shift,
        before_median,
        change: shift.estimate / before_median,
        low: shift.low.map(|v| v / before_median),
        high: shift.high.map(|v| v / before_median),
        n_before: before.len(),
        n_after: after.len(),
    })
}

/// The verdict for `e` under `rule` (the rule in the module docs).
pub fn judge(e: &Evidence, direction: Direction, rule: Rule) -> Verdict {
    let sign = match direction {
        Direction::HigherIsWorse => 1.0,
        Direction::HigherIsBetter => -1.0,
    };
    let worse = sign * e.change;
    let (Some(lo), Some(hi)) = (e.low, e.high) else {
        // Too few requests for any interval: the U test's normal approximation is no basis.
        return Verdict::Inconclusive {
            more_requests: more_requests(e, rule),
        };
    };
    if e.p_value < rule.alpha {
        return if worse > rule.threshold {
            Verdict::Regression
        } else if worse < -rule.threshold {
            Verdict::Improvement
        } else {
            Verdict::NoChange
        };
    }
    if lo >= -rule.threshold && hi <= rule.threshold {
        Verdict::NoChange
    } else {
        Verdict::Inconclusive {
            more_requests: more_requests(e, rule),
        }
    }
}

/// Requests to add to each run before an inconclusive row is likely to be settled (the module
/// docs give the model). With an unbounded interval: how many more the smaller run needs for
/// the interval at `1 − alpha` to exist at all.
pub fn more_requests(e: &Evidence, rule: Rule) -> u64 {
    let (Some(lo), Some(hi)) = (e.low, e.high) else {
        let smaller = e.n_before.min(e.n_after).max(1);
        let mut k = smaller;
        // Bounded: at a confidence that rounds to 1 no sample size gives an interval.
        while !interval_exists(k, k, 1.0 - rule.alpha) && k < smaller.saturating_add(1 << 20) {
            k += 1;
        }
        return round_up_2_significant(((k - smaller) as f64).max(1.0));
    };
    more_requests_for(e.change, lo, hi, e.n_before.max(e.n_after), rule)
}

/// Requests to add to each run (the larger has `n`) before the relative change `c` with
/// interval `[lo, hi]` is likely to be settled under `rule` (the `1/√n` model of the module docs).
pub fn more_requests_for(c: f64, lo: f64, hi: f64, n: usize, rule: Rule) -> u64 {
    let n = n as f64;
    let t = rule.threshold;
    // The factor f by which the sample must grow so the interval, narrowed by √f around c,
    // settles the row: excludes 0 when c is beyond the threshold, else excludes ±threshold.
    let mut factor: f64 = 1.0;
    if c >= t {
        factor = ((c - lo) / c).powi(2);
    } else if c <= -t {
        factor = ((hi - c) / -c).powi(2);
    } else {
        if hi > t {
            factor = factor.max(((hi - c) / (t - c)).powi(2));
        }
        if lo < -t {
            factor = factor.max(((c - lo) / (c + t)).powi(2));
        }
    }
    if !factor.is_finite() {
        // The estimate is 0 and beyond a threshold of 0: no finite sample settles it; say "many".
        factor = 100.0;
    }
    round_up_2_significant(((factor - 1.0) * n).max(1.0))
}

/// Whether [`stats::hodges_lehmann`] gives a bounded interval for samples of `m` and `n`.
fn interval_exists(m: usize, n: usize, confidence: f64) -> bool {
    let mn = (m * n) as f64;
    let z = stats::normal_quantile(0.5 + confidence / 2.0);
    (mn / 2.0 - z * (mn * (m + n + 1) as f64 / 12.0).sqrt()).floor() >= 1.0
}

/// `x` rounded up to two significant digits (e.g. 1234 → 1300, 87.2 → 88).
fn round_up_2_significant(x: f64) -> u64 {
    let x = x.ceil();
    if x < 100.0 {
        return x as u64;
    }
    let scale = 10f64.powi(x.log10().floor() as i32 - 1);
    ((x / scale).ceil() * scale) as u64
}

/// The confidence of the tail intervals the verdict rests on: `1 − α/2`. The overall verdict
/// of a row is a regression when the median **or** the tail quantile regressed, two chances to
/// be wrong, so each gets half of `α` (Bonferroni); the simulation of BENCHMARKS.md §6b chose
/// this (at `1 − α` an A/A pair was called a regression 0.9–2 % of the time).
pub fn tail_confidence(alpha: f64) -> f64 {
    1.0 - alpha / 2.0
}

/// The tail verdict of a row: the change of its SLO quantile (P95 of a latency, P5 of tokens/s)
/// with a bootstrap interval ([`stats::tail`]), judged as the median is: the interval excludes
/// 0 (significant) and the change, made "worse"-signed by `direction`, is beyond the threshold →
/// `regression` / `improvement`; significant within the threshold → `~`. Not significant: the
/// tail guards against regressions, so it is `inconclusive` only while its interval still
/// reaches beyond the threshold on the worse side (else `~`), with the requests it needs by the
/// `1/√n` model of the module docs. `n` is the larger run's sample size.
pub fn judge_tail(
    t: &stats::tail::TailChange,
    n: usize,
    direction: Direction,
    rule: Rule,
) -> Verdict {
    let sign = match direction {
        Direction::HigherIsWorse => 1.0,
        Direction::HigherIsBetter => -1.0,
    };
    let worse = sign * t.change;
    // The interval, signed so that up is worse.
    let (worse_low, worse_high) = if sign > 0.0 {
        (t.low, t.high)
    } else {
        (-t.high, -t.low)
    };
    if !(t.low.is_finite() && t.high.is_finite()) {
        return Verdict::Inconclusive {
            more_requests: round_up_2_significant(n.max(1) as f64),
        };
    }
    if t.low > 0.0 || t.high < 0.0 {
        return if worse > rule.threshold {
            Verdict::Regression
        } else if worse < -rule.threshold {
            Verdict::Improvement
        } else {
            Verdict::NoChange
        };
    }
    // The tail guards against regressions: it is inconclusive only while a regression beyond
    // the threshold is still inside its interval.
    if worse_high <= rule.threshold {
        return Verdict::NoChange;
    }
    let (c, th) = (worse, rule.threshold);
    let factor = if c >= th {
        // Beyond the threshold but not significant: the interval must come off 0.
        ((c - worse_low) / c).powi(2)
    } else {
        // The upper end must come inside the threshold.
        ((worse_high - c) / (th - c)).powi(2)
    };
    let factor = if factor.is_finite() { factor } else { 100.0 };
    Verdict::Inconclusive {
        more_requests: round_up_2_significant(((factor - 1.0) * n as f64).max(1.0)),
    }
}

/// A row's verdict from its parts (`("P50", median verdict)`, `("P95", tail verdict)`): a
/// regression when any part regressed; else inconclusive when any part is (needing the most
/// requests any part needs); else an improvement when any part improved; else `~`. With the
/// names of the parts that gave it (empty for `~`).
pub fn combine(parts: &[(&'static str, Verdict)]) -> (Verdict, Vec<&'static str>) {
    let named = |pred: &dyn Fn(&Verdict) -> bool| -> Vec<&'static str> {
        parts
            .iter()
            .filter(|(_, v)| pred(v))
            .map(|(n, _)| *n)
            .collect()
    };
    let regressed = named(&|v| *v == Verdict::Regression);
    if !regressed.is_empty() {
        return (Verdict::Regression, regressed);
    }
    let more = parts
        .iter()
        .filter_map(|(_, v)| match v {
            Verdict::Inconclusive { more_requests } => Some(*more_requests),
            _ => None,
        })
        .max();
    if let Some(more_requests) = more {
        return (
            Verdict::Inconclusive { more_requests },
            named(&|v| matches!(v, Verdict::Inconclusive { .. })),
        );
    }
    let improved = named(&|v| *v == Verdict::Improvement);
    if !improved.is_empty() {
        return (Verdict::Improvement, improved);
    }
    (Verdict::NoChange, Vec::new())
}

/// The verdict for failure ratios (`failed`/`sent` per run) by the two-proportion z-test (the
/// rule in the module docs), with the test itself. `None` when a run sent nothing.
pub fn judge_failures(
    failed_before: u64,
    sent_before: u64,
    failed_after: u64,
    sent_after: u64,
    rule: Rule,
) -> Option<(Verdict, stats::ProportionTest)> {
    let t = stats::two_proportion_z_test(failed_before, sent_before, failed_after, sent_after)?;
    let relative = if t.before > 0.0 {
        t.after / t.before - 1.0
    } else if t.after > 0.0 {
        f64::INFINITY
    } else {
        0.0
    };
    let verdict = if t.p_value >= rule.alpha {
        Verdict::NoChange
    } else if relative > rule.threshold {
        Verdict::Regression
    } else if relative < -rule.threshold {
        Verdict::Improvement
    } else {
        Verdict::NoChange
    };
    Some((verdict, t))
}

#[cfg(test)]
mod tests;
