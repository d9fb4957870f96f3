//! bench's summary of one sample set: percentiles, mean, min, max, and the 95 %
//! distribution-free confidence interval of each percentile. The definitions are
//! [`crate::stats`]'s: type 7 ([`quantile_type7`], linear interpolation between order
//! statistics, as numpy's default and vLLM's `bench serve`) and the order-statistic interval
//! from the binomial distribution ([`quantile_ci`]). Pure functions, no IO.

use serde::Serialize;

use crate::stats::{quantile_ci, quantile_type7};

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
            p5: quantile_type7(&v, 0.05),
            p50: quantile_type7(&v, 0.50),
            p90: quantile_type7(&v, 0.90),
            p95: quantile_type7(&v, 0.95),
            p99: quantile_type7(&v, 0.99),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_of_unsorted_values() {
        let s = Summary::of(&[3.0, 1.0, 2.0, f64::NAN]);
        assert_eq!(s.n, 3);
        assert_eq!((s.min, s.max, s.mean), (Some(1.0), Some(3.0), Some(2.0)));
        assert_eq!(s.p50, Some(2.0));
        assert_eq!(Summary::of(&[]).p50, None);
    }
}
