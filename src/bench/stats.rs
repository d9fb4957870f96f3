//! Distribution statistics of one sample set: percentiles (linear interpolation between order
//! statistics, as numpy's default and vLLM's `bench serve`), mean, min, max, and the 95 %
//! distribution-free confidence interval of a percentile from order statistics (binomial). Pure
//! functions, no IO.

use serde::Serialize;

/// Confidence of the percentile intervals.
pub const CONFIDENCE: f64 = 0.95;

/// The summary of one metric over one level; values in the metric's unit (seconds, tokens/s).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Summary {
    /// Samples.
    pub n: usize,
    /// 5th percentile (the floor side of per-request tokens/s).
    pub p5: Option<f64>,
    /// Median.
    pub p50: Option<f64>,
    /// 90th percentile.
    pub p90: Option<f64>,
    /// 95th percentile.
    pub p95: Option<f64>,
    /// 99th percentile.
    pub p99: Option<f64>,
    /// Arithmetic mean.
    pub mean: Option<f64>,
    /// Smallest sample.
    pub min: Option<f64>,
    /// Largest sample.
    pub max: Option<f64>,
    /// 95 % CI of P5: `[low, high]`, a side `null` when too few samples bound it.
    pub p5_ci: [Option<f64>; 2],
    /// 95 % CI of P50.
    pub p50_ci: [Option<f64>; 2],
    /// 95 % CI of P95.
    pub p95_ci: [Option<f64>; 2],
    /// 95 % CI of P99.
    pub p99_ci: [Option<f64>; 2],
}

impl Summary {
    /// Summarises `values` (any order; NaN values are ignored).
    pub fn of(values: &[f64]) -> Summary {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
        v.sort_by(f64::total_cmp);
        if v.is_empty() {
            return Summary::default();
        }
        Summary {
            n: v.len(),
            p5: quantile(&v, 0.05),
            p50: quantile(&v, 0.50),
            p90: quantile(&v, 0.90),
            p95: quantile(&v, 0.95),
            p99: quantile(&v, 0.99),
            mean: Some(v.iter().sum::<f64>() / v.len() as f64),
            min: v.first().copied(),
            max: v.last().copied(),
            p5_ci: quantile_ci(&v, 0.05, CONFIDENCE),
            p50_ci: quantile_ci(&v, 0.50, CONFIDENCE),
            p95_ci: quantile_ci(&v, 0.95, CONFIDENCE),
            p99_ci: quantile_ci(&v, 0.99, CONFIDENCE),
        }
    }
}

/// The `q` quantile (0 ≤ q ≤ 1) of ascending `sorted`, interpolating linearly between the order
/// statistics at rank `q·(n − 1)`. `None` when empty.
pub fn quantile(sorted: &[f64], q: f64) -> Option<f64> {
    let last = sorted.len().checked_sub(1)?;
    let pos = q.clamp(0.0, 1.0) * last as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    let frac = pos - lo as f64;
    Some(sorted[lo] + (sorted[hi] - sorted[lo]) * frac)
}

/// The distribution-free confidence interval of the `q` quantile from ascending `sorted`:
/// order statistics `X(l) ≤ X(u)` with `P(l ≤ B < u) ≥ confidence` for `B ~ Binomial(n, q)`,
/// `α/2` in each tail. A side is `None` when `n` is too small to bound it (e.g. the upper side
/// of P99 below 300 samples).
pub fn quantile_ci(sorted: &[f64], q: f64, confidence: f64) -> [Option<f64>; 2] {
    let n = sorted.len();
    if n == 0 {
        return [None, None];
    }
    let tail = (1.0 - confidence) / 2.0;
    let cdf = binomial_cdf(n, q);
    // Lower: the largest rank l (1-based) with P(B ≤ l − 1) ≤ α/2.
    let lower = (1..=n).take_while(|&l| cdf[l - 1] <= tail).last();
    // Upper: the smallest rank u with P(B ≤ u − 1) ≥ 1 − α/2.
    let upper = (1..=n).find(|&u| cdf[u - 1] >= 1.0 - tail);
    [lower.map(|l| sorted[l - 1]), upper.map(|u| sorted[u - 1])]
}

/// `P(B ≤ k)` for `k = 0..n` and `B ~ Binomial(n, p)`, summed in log space (no underflow of
/// `(1 − p)^n` for large `n`).
fn binomial_cdf(n: usize, p: f64) -> Vec<f64> {
    let p = p.clamp(1e-12, 1.0 - 1e-12);
    let (lp, lq) = (p.ln(), (1.0 - p).ln());
    let mut log_pmf = n as f64 * lq;
    let mut sum = 0.0;
    let mut out = Vec::with_capacity(n + 1);
    for k in 0..=n {
        sum += log_pmf.exp();
        out.push(sum.min(1.0));
        if k < n {
            log_pmf += ((n - k) as f64).ln() - ((k + 1) as f64).ln() + lp - lq;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_interpolate_like_numpy() {
        let v = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(quantile(&v, 0.5), Some(2.5));
        assert_eq!(quantile(&v, 0.0), Some(1.0));
        assert_eq!(quantile(&v, 1.0), Some(4.0));
        assert!((quantile(&v, 0.95).unwrap() - 3.85).abs() < 1e-12);
        assert_eq!(quantile(&[], 0.5), None);
    }

    #[test]
    fn summary_of_unsorted_values() {
        let s = Summary::of(&[3.0, 1.0, 2.0, f64::NAN]);
        assert_eq!(s.n, 3);
        assert_eq!((s.min, s.max, s.mean), (Some(1.0), Some(3.0), Some(2.0)));
        assert_eq!(s.p50, Some(2.0));
        assert_eq!(Summary::of(&[]).p50, None);
    }

    #[test]
    fn median_ci_of_100_samples_is_the_textbook_ranks() {
        // For n = 100 the 95 % CI of the median is X(40)..X(61) (tables of order statistics).
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(quantile_ci(&v, 0.5, 0.95), [Some(40.0), Some(61.0)]);
    }

    #[test]
    fn thirty_samples_cannot_bound_a_p99_from_above() {
        let v: Vec<f64> = (1..=30).map(f64::from).collect();
        let [low, high] = quantile_ci(&v, 0.99, 0.95);
        assert_eq!(high, None);
        assert!(low.is_some());
        // 1000 samples can.
        let v: Vec<f64> = (1..=1000).map(f64::from).collect();
        let [low, high] = quantile_ci(&v, 0.99, 0.95);
        assert!(low.unwrap() < 990.0 && high.unwrap() > 990.0 && high.unwrap() <= 1000.0);
    }

    #[test]
    fn binomial_cdf_sums_to_one_without_underflow() {
        let c = binomial_cdf(5000, 0.5);
        assert!((c[5000] - 1.0).abs() < 1e-9);
        assert!((c[2500] - 0.5).abs() < 0.02);
    }
}
