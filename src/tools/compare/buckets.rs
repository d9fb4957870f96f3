//! Comparing two windows of histogram bucket counts (`compare --prometheus.url`): one
//! [`BucketRow`] per metric, the share of probes beyond the SLO ([`SloRow`]) and the failure
//! ratio, per scenario. Pure: the data comes from [`super::prometheus::fetch_window`].
//!
//! The verdict is [`super::verdict::judge`]'s rule, fed with binned evidence: the p-value of the
//! binned U test ([`binned::mann_whitney_binned`]) and, as the change and its interval, the
//! relative change of the interpolated median with its multinomial-bootstrap interval
//! ([`binned::bootstrap_quantiles`]) — a Hodges–Lehmann shift needs the observations, which
//! buckets do not keep.

use super::stats::binned::{self, Histogram, Share};
use super::stats::{MannWhitney, ProportionTest, Shift};
use super::verdict::{self, Evidence, Verdict};
use super::{FailureRow, Metric, Options, QUANTILES};
use crate::stats::histogram::BinnedQuantile;

/// One window's data for one scenario.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ScenarioData {
    /// Bucket counts per metric, in [`Metric::ALL`] order (metrics without buckets left out).
    pub histograms: Vec<(Metric, Histogram)>,
    /// Probes finished in the window (`llm_probe_probes_total`).
    pub probes: u64,
    /// Of those, failed (`llm_probe_probe_failures_total`).
    pub failures: u64,
}

impl ScenarioData {
    /// The histogram of `metric`, if any.
    pub fn histogram(&self, metric: Metric) -> Option<&Histogram> {
        self.histograms
            .iter()
            .find(|(m, _)| *m == metric)
            .map(|(_, h)| h)
    }

    /// Successful probes: the observations of the TTFT histogram (0 without one).
    pub fn successful_probes(&self) -> u64 {
        self.histogram(Metric::Ttft).map_or(0, Histogram::total)
    }
}

/// The target's objectives (from its SLO gauges or `--slo`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Slo {
    /// TTFT objective, seconds: the share of probes above it is compared.
    pub ttft: Option<f64>,
    /// Output tokens per second floor: the share of probes at or below it is compared.
    pub tokens_per_second: Option<f64>,
}

/// One metric of one scenario, before vs after.
#[derive(Debug, Clone, PartialEq)]
pub struct BucketRow {
    /// The metric.
    pub metric: Metric,
    /// Observations (probes with a value) in BEFORE.
    pub n_before: u64,
    /// As `n_before`, for AFTER.
    pub n_after: u64,
    /// P50, P95, P99 of BEFORE ([`QUANTILES`]): bucket and interpolated value.
    pub before: [Option<BinnedQuantile>; 3],
    /// As `before`, for AFTER.
    pub after: [Option<BinnedQuantile>; 3],
    /// Multinomial-bootstrap interval (confidence `1 − alpha`) of each BEFORE percentile.
    pub before_ci: [Option<(f64, f64)>; 3],
    /// As `before_ci`, for AFTER.
    pub after_ci: [Option<(f64, f64)>; 3],
    /// Multinomial-bootstrap interval of each percentile's relative change.
    pub change_ci: [Option<(f64, f64)>; 3],
    /// The binned U test (`None`: a side has no observations).
    pub u_test: Option<MannWhitney>,
    /// The evidence the verdict was formed from (see the module docs).
    pub evidence: Option<Evidence>,
    /// The verdict (`None` without evidence).
    pub verdict: Option<Verdict>,
    /// The two windows had different bucket layouts and were compared on the bounds they share.
    pub coarsened: bool,
}

/// The share of probes beyond an objective, before vs after.
#[derive(Debug, Clone, PartialEq)]
pub struct SloRow {
    /// TTFT (share above) or output tokens/s (share at or below the floor).
    pub metric: Metric,
    /// The objective.
    pub threshold: f64,
    /// BEFORE's share (its `bound` is the bucket bound counted at).
    pub before: Share,
    /// AFTER's share.
    pub after: Share,
    /// The two-proportion test and verdict (`None`: a side has no observations).
    pub test: Option<(Verdict, ProportionTest)>,
}

/// One scenario, before vs after.
#[derive(Debug, Clone, PartialEq)]
pub struct ScenarioComparison {
    /// The scenario name.
    pub scenario: String,
    /// One row per metric with buckets in either window.
    pub rows: Vec<BucketRow>,
    /// Shares beyond the objectives that are known.
    pub slo: Vec<SloRow>,
    /// Probes finished and failed, with the two-proportion verdict.
    pub failures: FailureRow,
}

impl ScenarioComparison {
    /// Whether any row is a regression.
    pub fn has_regression(&self) -> bool {
        self.rows
            .iter()
            .any(|r| r.verdict == Some(Verdict::Regression))
            || self
                .slo
                .iter()
                .any(|s| matches!(s.test, Some((Verdict::Regression, _))))
            || matches!(self.failures.test, Some((Verdict::Regression, _)))
    }
}

fn three<T: Copy>(v: &[T]) -> [T; 3] {
    [v[0], v[1], v[2]]
}

/// Compare one metric's bucket counts.
pub fn compare_histograms(
    metric: Metric,
    before: &Histogram,
    after: &Histogram,
    options: &Options,
) -> BucketRow {
    let (b, a) = binned::common_layout(before, after);
    let coarsened =
        b.upper_bounds() != before.upper_bounds() || a.upper_bounds() != after.upper_bounds();
    let confidence = 1.0 - options.rule.alpha;
    let iv = binned::bootstrap_quantiles(
        &b,
        &a,
        &QUANTILES,
        options.resamples,
        options.seed,
        confidence,
    );
    let q = |h: &Histogram| QUANTILES.map(|q| h.quantile(q));
    let (before_q, after_q) = (q(&b), q(&a));
    let u_test = binned::mann_whitney_binned(b.counts(), a.counts());
    let evidence = match (u_test, before_q[0], after_q[0]) {
        (Some(u), Some(b50), Some(a50)) if b50.value > 0.0 => {
            let m = b50.value;
            let (low, high) = iv.change[0].map_or((None, None), |(l, h)| (Some(l), Some(h)));
            Some(Evidence {
                p_value: u.p_value,
                shift: Shift {
                    estimate: a50.value - m,
                    low: low.map(|l| l * m),
                    high: high.map(|h| h * m),
                },
                before_median: m,
                change: a50.value / m - 1.0,
                low,
                high,
                n_before: b.total() as usize,
                n_after: a.total() as usize,
            })
        }
        _ => None,
    };
    let verdict = evidence
        .as_ref()
        .map(|e| verdict::judge(e, metric.direction(), options.rule));
    BucketRow {
        metric,
        n_before: b.total(),
        n_after: a.total(),
        before: before_q,
        after: after_q,
        before_ci: three(&iv.before),
        after_ci: three(&iv.after),
        change_ci: three(&iv.change),
        u_test,
        evidence,
        verdict,
        coarsened,
    }
}

/// The share beyond `threshold` in both windows with its verdict (share above for latencies,
/// at or below for tokens/s). `None` when a histogram has no finite bound.
pub fn compare_shares(
    metric: Metric,
    threshold: f64,
    before: &Histogram,
    after: &Histogram,
    options: &Options,
) -> Option<SloRow> {
    let share = |h: &Histogram| match metric.direction() {
        verdict::Direction::HigherIsWorse => binned::share_above(h, threshold),
        verdict::Direction::HigherIsBetter => binned::share_at_or_below(h, threshold),
    };
    let (b, a) = (share(before)?, share(after)?);
    Some(SloRow {
        metric,
        threshold,
        before: b,
        after: a,
        test: verdict::judge_failures(b.beyond, b.total, a.beyond, a.total, options.rule),
    })
}

/// Compare one scenario's two windows: every metric with buckets in both, the shares beyond
/// `slo`, and the failure ratio.
pub fn compare_scenario(
    scenario: &str,
    before: &ScenarioData,
    after: &ScenarioData,
    slo: &Slo,
    options: &Options,
) -> ScenarioComparison {
    let rows = Metric::ALL
        .iter()
        .filter_map(|&m| {
            Some(compare_histograms(
                m,
                before.histogram(m)?,
                after.histogram(m)?,
                options,
            ))
        })
        .collect();
    let objectives = [
        (Metric::Ttft, slo.ttft),
        (Metric::OutputTokensPerSecond, slo.tokens_per_second),
    ];
    let slo_rows = objectives
        .iter()
        .filter_map(|&(m, threshold)| {
            compare_shares(
                m,
                threshold?,
                before.histogram(m)?,
                after.histogram(m)?,
                options,
            )
        })
        .collect();
    ScenarioComparison {
        scenario: scenario.to_string(),
        rows,
        slo: slo_rows,
        failures: FailureRow {
            before: (before.probes, before.failures),
            after: (after.probes, after.failures),
            test: verdict::judge_failures(
                before.failures,
                before.probes,
                after.failures,
                after.probes,
                options.rule,
            ),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const B: [f64; 6] = [0.1, 0.2, 0.25, 0.3, 0.4, f64::INFINITY];

    fn data(ttft: &[u64], probes: u64, failures: u64) -> ScenarioData {
        ScenarioData {
            histograms: vec![(Metric::Ttft, Histogram::from_counts(&B, ttft).unwrap())],
            probes,
            failures,
        }
    }

    #[test]
    fn a_slower_ttft_is_a_regression_with_its_shares_beyond_the_slo() {
        // 200 ms → 300 ms as the daemon's buckets record them: (0.2, 0.25] → (0.3, 0.4].
        let before = data(&[0, 0, 60, 0, 0, 0], 60, 0);
        let after = data(&[0, 0, 0, 0, 55, 0], 55, 0);
        let slo = Slo {
            ttft: Some(0.3),
            tokens_per_second: None,
        };
        let c = compare_scenario("chat", &before, &after, &slo, &Options::default());
        let ttft = &c.rows[0];
        assert_eq!((ttft.n_before, ttft.n_after), (60, 55));
        assert_eq!(ttft.verdict, Some(Verdict::Regression));
        let e = ttft.evidence.unwrap();
        // Interpolated medians: 0.225 → 0.35.
        assert!((e.change - (0.35 / 0.225 - 1.0)).abs() < 1e-9, "{e:?}");
        assert!(e.p_value < 1e-10);
        let (b50, a50) = (ttft.before[0].unwrap(), ttft.after[0].unwrap());
        assert_eq!(
            (b50.lower, b50.upper, a50.lower, a50.upper),
            (0.2, 0.25, 0.3, 0.4)
        );
        let s = &c.slo[0];
        assert_eq!(
            (s.before.beyond, s.after.beyond, s.before.bound),
            (0, 55, 0.3)
        );
        assert!(matches!(s.test, Some((Verdict::Regression, _))));
        assert!(c.has_regression());
        // No failures on either side: `~`.
        assert!(matches!(c.failures.test, Some((Verdict::NoChange, _))));
    }

    #[test]
    fn the_same_distribution_is_no_change() {
        let w = data(&[0, 10, 50, 30, 10, 0], 100, 0);
        let c = compare_scenario("chat", &w, &w, &Slo::default(), &Options::default());
        assert_eq!(c.rows[0].verdict, Some(Verdict::NoChange));
        assert!(c.slo.is_empty(), "no objective known: no share rows");
        assert!(!c.has_regression());
    }

    #[test]
    fn different_layouts_are_compared_on_their_shared_bounds() {
        let before = Histogram::from_counts(&B, &[0, 0, 60, 0, 0, 0]).unwrap();
        let after = Histogram::from_counts(&[0.2, 0.3, f64::INFINITY], &[0, 0, 50]).unwrap();
        let r = compare_histograms(Metric::Ttft, &before, &after, &Options::default());
        assert!(r.coarsened);
        assert_eq!(r.verdict, Some(Verdict::Regression));
    }
}
