//! Known answers from SciPy 1.17.1 / NumPy 2.4.6, produced by
//! `/tmp/scipyvenv/bin/python tests/fixtures/compare/scipy_reference.py`
//! (venv: `python3 -m venv /tmp/scipyvenv && /tmp/scipyvenv/bin/pip install scipy numpy`).
//! Each value below is that script's output line, quoted beside it; the rest are closed forms
//! and textbook tables.

use super::harrell_davis::{harrell_davis, harrell_davis_weights, inc_beta};
use super::histogram::histogram_quantile;
use super::*;

/// The script's first two samples (`compare`'s tests use them too).
pub(crate) const A: [f64; 12] = [
    0.210, 0.198, 0.205, 0.230, 0.199, 0.215, 0.205, 0.220, 0.202, 0.240, 0.211, 0.207,
];
pub(crate) const B: [f64; 10] = [
    0.245, 0.231, 0.205, 0.260, 0.238, 0.229, 0.251, 0.240, 0.236, 0.270,
];

fn close(a: f64, b: f64, tol: f64) {
    assert!((a - b).abs() <= tol, "{a} vs {b} (tolerance {tol})");
}

/// `A + B`, ascending.
fn a_and_b() -> Vec<f64> {
    let mut s: Vec<f64> = A.iter().chain(B.iter()).copied().collect();
    s.sort_by(f64::total_cmp);
    s
}

#[test]
fn type7_matches_numpy() {
    // "pct [0.2245, 0.25955, 0.2679]": np.percentile(sorted(A + B), [50, 95, 99]).
    let s = a_and_b();
    close(quantile_type7(&s, 0.5).unwrap(), 0.2245, 1e-12);
    close(quantile_type7(&s, 0.95).unwrap(), 0.25955, 1e-12);
    close(quantile_type7(&s, 0.99).unwrap(), 0.2679, 1e-12);
    assert_eq!(quantile_type7(&[], 0.5), None);
    assert_eq!(quantile_type7(&[7.0], 0.99), Some(7.0));
}

#[test]
fn type7_interpolates_like_numpy() {
    let v = [1.0, 2.0, 3.0, 4.0];
    assert_eq!(quantile_type7(&v, 0.5), Some(2.5));
    assert_eq!(quantile_type7(&v, 0.0), Some(1.0));
    assert_eq!(quantile_type7(&v, 1.0), Some(4.0));
    assert!((quantile_type7(&v, 0.95).unwrap() - 3.85).abs() < 1e-12);
    assert_eq!(quantile_type7(&[], 0.5), None);
}

#[test]
fn type7_of_one_to_a_hundred_is_not_nearest_rank() {
    // np.percentile(range(1, 101), [50, 95, 100]) = [50.5, 95.05, 100.0]; nearest rank would
    // give 50 and 95.
    let mut v: Vec<f64> = (1..=100).rev().map(f64::from).collect();
    let [p50, p95, p100] = quantiles_type7(&mut v, [0.5, 0.95, 1.0]);
    assert_eq!(p50, Some(50.5));
    close(p95.unwrap(), 95.05, 1e-12);
    assert_eq!(p100, Some(100.0));
    // Sorted in place, and the same numbers as on a sorted sample.
    assert!(v.windows(2).all(|w| w[0] <= w[1]));
    assert_eq!(p95, quantile_type7(&v, 0.95));
    assert_eq!(quantiles_type7(&mut [3.0], [0.5]), [Some(3.0)]);
    assert_eq!(quantiles_type7(&mut [], [0.5]), [None]);
}

#[test]
fn median_handles_odd_and_even() {
    assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
    assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
    assert_eq!(median(&[]), None);
    // Type 7 at ½, without sorting its input.
    let unsorted: Vec<f64> = A.iter().chain(B.iter()).copied().collect();
    close(median(&unsorted).unwrap(), 0.2245, 1e-12);
    assert_eq!(unsorted[..2], [0.210, 0.198]);
}

#[test]
fn quantile_ci_ranks_match_scipy_binomial() {
    // "ranks n=22 q=0.5 (6, 17)", "ranks n=100 q=0.95 (90, 100)", "ranks n=30 q=0.99 (28, None)",
    // "ranks n=1000 q=0.99 (983, 997)", "ranks n=200 q=0.5 (86, 115)"
    assert_eq!(quantile_ci_ranks(22, 0.5, 0.95), [Some(6), Some(17)]);
    assert_eq!(quantile_ci_ranks(100, 0.95, 0.95), [Some(90), Some(100)]);
    assert_eq!(quantile_ci_ranks(30, 0.99, 0.95), [Some(28), None]);
    assert_eq!(quantile_ci_ranks(1000, 0.99, 0.95), [Some(983), Some(997)]);
    assert_eq!(quantile_ci_ranks(200, 0.5, 0.95), [Some(86), Some(115)]);
    assert_eq!(quantile_ci_ranks(0, 0.5, 0.95), [None, None]);
    assert_eq!(quantile_ci_ranks(10, 1.5, 0.95), [None, None]);
    // Cross-check against scipy.stats.quantile_test(...).confidence_interval(0.95) for the median
    // of A + B: "ConfidenceInterval(low=0.205, high=0.24)".
    assert_eq!(
        quantile_ci(&a_and_b(), 0.5, 0.95),
        [Some(0.205), Some(0.24)]
    );
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
    assert_eq!(c.len(), 5001);
    assert!((c[5000] - 1.0).abs() < 1e-9);
    assert!((c[2500] - 0.5).abs() < 0.02);
    // The degenerate probabilities: all mass at 0, or at n.
    assert_eq!(binomial_cdf(3, 0.0), [1.0, 1.0, 1.0, 1.0]);
    assert_eq!(binomial_cdf(3, 1.0), [0.0, 0.0, 0.0, 1.0]);
}

const INF: f64 = f64::INFINITY;
/// A slice of the daemon's TTFT layout (seconds).
const BOUNDS: [f64; 6] = [0.1, 0.2, 0.25, 0.3, 0.4, INF];

#[test]
fn histogram_quantile_is_prometheus_histogram_quantile() {
    let q = |counts: &[u64], q: f64| histogram_quantile(&BOUNDS, counts, q);
    // 100 observations in (0.2, 0.25]: P50 rank 50 of 100 → 0.2 + 0.05 × 0.5.
    let p50 = q(&[0, 0, 100, 0, 0, 0], 0.5).unwrap();
    assert_eq!((p50.lower, p50.upper), (0.2, 0.25));
    assert!((p50.value - 0.225).abs() < 1e-12, "{p50:?}");
    // The first bucket starts at 0.
    let p = q(&[10, 0, 0, 0, 0, 0], 0.3).unwrap();
    assert_eq!((p.lower, p.upper), (0.0, 0.1));
    assert!((p.value - 0.03).abs() < 1e-12);
    // In the +Inf bucket: the largest finite bound, with an open upper end.
    let p99 = q(&[0, 90, 0, 0, 0, 10], 0.99).unwrap();
    assert_eq!((p99.lower, p99.upper, p99.value), (0.4, INF, 0.4));
    // Across buckets: rank 95 of 100 with 90 below (0.3, 0.4] holding 10 → 0.3 + 0.1 × 5/10.
    let across = [0, 0, 90, 0, 10, 0];
    let p95 = q(&across, 0.95).unwrap();
    assert_eq!((p95.lower, p95.upper), (0.3, 0.4));
    assert!((p95.value - 0.35).abs() < 1e-12);
    // q = 0 with an empty first bucket: a number, not NaN.
    assert!(!q(&across, 0.0).unwrap().value.is_nan());
    // No observations, or q outside [0, 1]: no quantile.
    assert_eq!(q(&[0; 6], 0.5), None);
    assert_eq!(q(&across, 1.5), None);
}

#[test]
fn incomplete_beta_known_answers() {
    // Closed forms: I_x(1, 1) = x; I_x(a, 1) = x^a; I_x(1, b) = 1 − (1 − x)^b.
    for x in [0.0, 0.1, 0.37, 0.5, 0.9, 1.0] {
        close(inc_beta(1.0, 1.0, x), x, 1e-13);
        close(inc_beta(3.5, 1.0, x), x.powf(3.5), 1e-13);
        close(inc_beta(1.0, 4.0, x), 1.0 - (1.0 - x).powi(4), 1e-13);
    }
    // I_0.5(2, 3) = 11/16.
    close(inc_beta(2.0, 3.0, 0.5), 11.0 / 16.0, 1e-13);
    // Symmetry I_x(a, b) = 1 − I_{1−x}(b, a), on both branches of the fraction.
    for (a, b, x) in [
        (190.95, 10.05, 0.93),
        (190.95, 10.05, 0.97),
        (2.5, 7.5, 0.2),
    ] {
        close(inc_beta(a, b, x), 1.0 - inc_beta(b, a, 1.0 - x), 1e-12);
    }
}

#[test]
fn harrell_davis_weights_sum_to_one_and_centre_a_symmetric_sample() {
    for n in [1, 2, 7, 200, 1000] {
        let w = harrell_davis_weights(n, 0.95);
        close(w.iter().sum(), 1.0, 1e-12);
        assert!(w.iter().all(|&x| x >= -1e-15), "{n}");
    }
    let s: Vec<f64> = (1..=11).map(f64::from).collect();
    close(harrell_davis(&s, 0.5).unwrap(), 6.0, 1e-12);
    assert!(harrell_davis(&[], 0.5).is_none());
    // The P95 lies between the two top order statistics' neighbourhood, below the maximum.
    let p95 = harrell_davis(&s, 0.95).unwrap();
    assert!(p95 > 9.5 && p95 < 11.0, "{p95}");
}

/// `scipy.special.betainc(190.95, 10.05, 0.93)`, `betainc(2.5, 7.5, 0.2)` and
/// `scipy.stats.mstats.hdquantiles(A, [0.5, 0.95])`.
#[test]
fn harrell_davis_matches_scipy() {
    close(inc_beta(190.95, 10.05, 0.93), 0.10374262676759348, 1e-12);
    close(inc_beta(2.5, 7.5, 0.2), 0.40123869824719194, 1e-12);
    let mut a = A.to_vec();
    a.sort_by(f64::total_cmp);
    close(harrell_davis(&a, 0.5).unwrap(), 0.2087545114422313, 1e-12);
    close(harrell_davis(&a, 0.95).unwrap(), 0.2373671844761733, 1e-12);
}
