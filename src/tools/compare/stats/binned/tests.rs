use super::*;
use crate::compare::stats::mann_whitney_u;

const INF: f64 = f64::INFINITY;
/// A slice of the daemon's TTFT layout (seconds).
const BOUNDS: [f64; 6] = [0.1, 0.2, 0.25, 0.3, 0.4, INF];

fn hist(counts: &[u64]) -> Histogram {
    Histogram::from_counts(&BOUNDS, counts).unwrap()
}

/// The observations of `counts`, each at its bucket's upper bound (`+Inf`: 1.0): data with
/// exactly the ties the bins imply.
fn expand(counts: &[u64]) -> Vec<f64> {
    BOUNDS
        .iter()
        .zip(counts)
        .flat_map(|(&b, &c)| std::iter::repeat_n(if b.is_finite() { b } else { 1.0 }, c as usize))
        .collect()
}

#[test]
fn cumulative_counts_become_bucket_counts_and_are_made_monotonic() {
    // As Prometheus returns them: any order, `le` spelled as numbers, a dip (0.3 below 0.25)
    // raised as histogram_quantile's monotonicity fix does.
    let h = Histogram::from_cumulative(&[
        (INF, 20.0),
        (0.25, 12.0),
        (0.1, 0.0),
        (0.3, 11.0),
        (0.2, 5.0),
        (0.4, 19.6),
    ])
    .unwrap();
    assert_eq!(h.upper_bounds(), &BOUNDS);
    assert_eq!(h.counts(), &[0, 5, 7, 0, 8, 0]);
    assert_eq!(h.total(), 20);
}

#[test]
fn malformed_buckets_are_errors_not_numbers() {
    assert_eq!(Histogram::from_cumulative(&[]), Err(HistogramError::Empty));
    assert_eq!(
        Histogram::from_cumulative(&[(0.1, 1.0), (0.2, 2.0)]),
        Err(HistogramError::NoInf)
    );
    assert!(matches!(
        Histogram::from_cumulative(&[(0.1, -1.0), (INF, 2.0)]),
        Err(HistogramError::BadCount { .. })
    ));
    assert!(matches!(
        Histogram::from_cumulative(&[(0.1, 1.0), (0.1, 1.0), (INF, 2.0)]),
        Err(HistogramError::BadBound(_))
    ));
    assert!(matches!(
        Histogram::from_cumulative(&[(f64::NAN, 1.0), (INF, 2.0)]),
        Err(HistogramError::BadBound(_))
    ));
}

#[test]
fn quantiles_are_histogram_quantile_of_the_buckets() {
    // The definition and its known answers are `crate::stats::histogram`'s; a histogram asks it
    // of its own buckets.
    for counts in [
        [0, 0, 100, 0, 0, 0],
        [0, 90, 0, 0, 0, 10],
        [0, 0, 90, 0, 10, 0],
    ] {
        let h = hist(&counts);
        for q in [0.0, 0.3, 0.5, 0.95, 0.99, 1.5] {
            assert_eq!(
                h.quantile(q),
                histogram_quantile(&BOUNDS, &counts, q),
                "{q}"
            );
        }
    }
    // Rank 95 of 100 with 90 below (0.3, 0.4] holding 10 → 0.3 + 0.1 × 5/10.
    let p95 = hist(&[0, 0, 90, 0, 10, 0]).quantile(0.95).unwrap();
    assert_eq!((p95.lower, p95.upper), (0.3, 0.4));
    assert!((p95.value - 0.35).abs() < 1e-12);
    assert_eq!(hist(&[0; 6]).quantile(0.5), None);
}

#[test]
fn multinomial_resampling_keeps_the_total_and_the_shares() {
    let counts = [0u64, 300, 500, 150, 50, 0];
    let n: u64 = counts.iter().sum();
    let mut rng = Pcg64Mcg::seed_from_u64(7);
    let mut out = [0u64; 6];
    let draws = 4000;
    let mut sum = [0f64; 6];
    let mut sum_sq = [0f64; 6];
    for _ in 0..draws {
        multinomial_resample(&counts, &mut out, &mut rng);
        assert_eq!(
            out.iter().sum::<u64>(),
            n,
            "a resample keeps the window's total"
        );
        assert_eq!((out[0], out[5]), (0, 0), "an empty bucket stays empty");
        for i in 0..6 {
            sum[i] += out[i] as f64;
            sum_sq[i] += (out[i] * out[i]) as f64;
        }
    }
    for i in 1..5 {
        let p = counts[i] as f64 / n as f64;
        let mean = sum[i] / draws as f64;
        let var = sum_sq[i] / draws as f64 - mean * mean;
        let (want_mean, want_var) = (n as f64 * p, n as f64 * p * (1.0 - p));
        // Standard error of the mean over 4000 draws: √(var/4000) ≤ 0.25; of the variance ≈ 2.3 %.
        assert!(
            (mean - want_mean).abs() < 1.5,
            "bucket {i}: mean {mean} vs {want_mean}"
        );
        assert!(
            (var / want_var - 1.0).abs() < 0.1,
            "bucket {i}: variance {var} vs multinomial {want_var}"
        );
    }
}

#[test]
fn bootstrap_reproduces_the_bucket_of_a_known_percentile() {
    // 1,000 probes: the P95 (rank 950) is well inside (0.3, 0.4] (cumulative 900 below, 990 at
    // its bound): every resample's P95 stays in that bucket, so the interval is within it.
    let before = hist(&[0, 0, 900, 0, 90, 10]);
    let after = hist(&[0, 0, 600, 300, 90, 10]);
    let iv = bootstrap_quantiles(&before, &after, &[0.5, 0.95], 2000, 17, 0.95);
    let (lo, hi) = iv.before[1].unwrap();
    assert!(0.3 <= lo && lo < hi && hi <= 0.4, "P95 interval {lo}..{hi}");
    let p95 = before.quantile(0.95).unwrap().value;
    assert!(lo <= p95 && p95 <= hi);
    // The P50 of AFTER (rank 500 of the 600 in (0.2, 0.25]) is resampled around 0.2417.
    let (lo, hi) = iv.after[0].unwrap();
    let p50 = after.quantile(0.5).unwrap().value;
    assert!(
        lo < p50 && p50 < hi && 0.2 <= lo && hi <= 0.25,
        "{lo}..{hi} vs {p50}"
    );
    // Its relative change against BEFORE's P50 (0.2 + 0.05 × 500/900): an interval around it.
    let truth = p50 / before.quantile(0.5).unwrap().value - 1.0;
    let (lo, hi) = iv.change[0].unwrap();
    assert!(lo < truth && truth < hi, "{lo}..{hi} vs {truth}");
    // Seeded: the same seed gives the same intervals, another seed others.
    assert_eq!(
        iv,
        bootstrap_quantiles(&before, &after, &[0.5, 0.95], 2000, 17, 0.95)
    );
    assert_ne!(
        iv,
        bootstrap_quantiles(&before, &after, &[0.5, 0.95], 2000, 18, 0.95)
    );
}

#[test]
fn bootstrap_refuses_different_layouts() {
    let a = hist(&[0, 1, 2, 3, 0, 0]);
    let b = Histogram::from_counts(&[0.2, INF], &[3, 3]).unwrap();
    let iv = bootstrap_quantiles(&a, &b, &[0.5], 2000, 1, 0.95);
    assert_eq!(iv.change, vec![None]);
    // On their common layout it works.
    let (ca, cb) = common_layout(&a, &b);
    assert_eq!(ca.upper_bounds(), &[0.2, INF]);
    assert_eq!(ca.counts(), &[1, 5]);
    assert_eq!(cb, b);
    assert!(bootstrap_quantiles(&ca, &cb, &[0.5], 2000, 1, 0.95).change[0].is_some());
}

#[test]
fn binned_u_test_equals_the_unbinned_test_on_tied_data_and_scipy() {
    let x = [0u64, 5, 12, 3, 0, 0];
    let y = [0u64, 1, 4, 9, 6, 1];
    let binned = mann_whitney_binned(&x, &y).unwrap();
    let unbinned = mann_whitney_u(&expand(&x), &expand(&y)).unwrap();
    assert_eq!(binned.u_x, unbinned.u_x);
    assert!((binned.p_value - unbinned.p_value).abs() < 1e-15);
    // SciPy 1.17.1 on the same tied observations (each at its bucket's bound, +Inf as 1.0):
    // /tmp/scipyvenv/bin/python -c "from scipy.stats import mannwhitneyu;
    //   b=[0.1,0.2,0.25,0.3,0.4,1.0]; x=[0,5,12,3,0,0]; y=[0,1,4,9,6,1];
    //   xs=[v for v,c in zip(b,x) for _ in range(c)]; ys=[v for v,c in zip(b,y) for _ in range(c)];
    //   r=mannwhitneyu(xs,ys,method='asymptotic',use_continuity=True); print(r.statistic, repr(r.pvalue))"
    // → "67.0 np.float64(9.752406527529343e-05)"
    assert_eq!(binned.u_x, 67.0);
    assert!(
        (binned.p_value - 9.752406527529343e-05).abs() < 1e-15,
        "{binned:?}"
    );
    // Everything in one bucket: all ties, p = 1.
    let same = mann_whitney_binned(&[0, 0, 7, 0, 0, 0], &[0, 0, 9, 0, 0, 0]).unwrap();
    assert_eq!(same.p_value, 1.0);
    // An empty side or misaligned layouts: no test.
    assert_eq!(mann_whitney_binned(&[0; 6], &y), None);
    assert_eq!(mann_whitney_binned(&x, &y[..5]), None);
}

#[test]
fn shares_beyond_a_threshold_are_counted_at_a_bucket_bound() {
    let h = hist(&[1, 2, 3, 4, 5, 6]);
    // 0.3 is a bound: above it are the (0.3, 0.4] and +Inf buckets.
    let s = share_above(&h, 0.3).unwrap();
    assert_eq!((s.bound, s.beyond, s.total), (0.3, 11, 21));
    // 0.28 is not: counted at the nearest bound, 0.3, and says so.
    assert_eq!(share_above(&h, 0.28).unwrap().bound, 0.3);
    // A floor: at or below 0.2.
    let s = share_at_or_below(&h, 0.2).unwrap();
    assert_eq!((s.bound, s.beyond), (0.2, 3));
    let only_inf = Histogram::from_counts(&[INF], &[3]).unwrap();
    assert_eq!(share_above(&only_inf, 0.3), None);
}
