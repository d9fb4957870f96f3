//! Known answers from SciPy 1.17.1 / NumPy 2.4.6, produced by
//! `/tmp/scipyvenv/bin/python tests/fixtures/compare/scipy_reference.py`
//! (venv: `python3 -m venv /tmp/scipyvenv && /tmp/scipyvenv/bin/pip install scipy numpy`).
//! Each value below is that script's output line, quoted beside it.

use super::*;
use crate::stats::tests::{A, B};

const C: [f64; 8] = [1.2, 3.4, 2.2, 5.1, 0.7, 2.9, 4.4, 3.3];
const D: [f64; 7] = [2.5, 3.9, 1.8, 6.0, 4.8, 3.1, 5.5];

fn close(a: f64, b: f64, tol: f64) {
    assert!((a - b).abs() <= tol, "{a} vs {b} (tolerance {tol})");
}

#[test]
fn mann_whitney_matches_scipy_with_ties() {
    // scipy.stats.mannwhitneyu(A, B, method="asymptotic", use_continuity=True):
    // "A,B U=13.5 p=0.002385961417267834"
    let r = mann_whitney_u(&A, &B).unwrap();
    assert_eq!(r.u_x, 13.5);
    close(r.p_value, 0.002385961417267834, 1e-12);
    // "B,A U=106.5 p=0.002385961417267834": symmetric p, U of the first sample.
    let r = mann_whitney_u(&B, &A).unwrap();
    assert_eq!(r.u_x, 106.5);
    close(r.p_value, 0.002385961417267834, 1e-12);
}

#[test]
fn mann_whitney_matches_scipy_without_ties() {
    // "C,D U=18.0 p=0.27158867424337474"
    let r = mann_whitney_u(&C, &D).unwrap();
    assert_eq!(r.u_x, 18.0);
    close(r.p_value, 0.27158867424337474, 1e-12);
}

#[test]
fn mann_whitney_degenerate_inputs() {
    assert!(mann_whitney_u(&[], &[1.0]).is_none());
    assert!(mann_whitney_u(&[1.0], &[]).is_none());
    // All values tie: no evidence of a difference (SciPy's p would clip to 1 as well).
    let r = mann_whitney_u(&[1.0, 1.0, 1.0], &[1.0, 1.0]).unwrap();
    assert_eq!(r.p_value, 1.0);
    assert_eq!(r.u_x, 3.0);
}

#[test]
fn hodges_lehmann_matches_numpy_reference() {
    // "HL A->B (0.030000000000000013, (0.016000000000000014, 0.04100000000000001), 30)"
    let s = hodges_lehmann(&A, &B, 0.95).unwrap();
    close(s.estimate, 0.03, 1e-12);
    close(s.low.unwrap(), 0.016, 1e-12);
    close(s.high.unwrap(), 0.041, 1e-12);
    // "HL C->D (1.0499999999999998, (-0.8999999999999999, 2.7), 11)"
    let s = hodges_lehmann(&C, &D, 0.95).unwrap();
    close(s.estimate, 1.05, 1e-12);
    close(s.low.unwrap(), -0.9, 1e-12);
    close(s.high.unwrap(), 2.7, 1e-12);
    // "HL C->D 0.8 (1.0499999999999998, (-0.2999999999999998, 2.4000000000000004), 16)"
    let s = hodges_lehmann(&C, &D, 0.8).unwrap();
    close(s.low.unwrap(), -0.3, 1e-12);
    close(s.high.unwrap(), 2.4, 1e-12);
}

#[test]
fn hodges_lehmann_too_small_for_an_interval() {
    // m·n = 4: K = ⌊2 − 1.96·√(4·5/12)⌋ < 1 → unbounded.
    let s = hodges_lehmann(&[1.0, 2.0], &[3.0, 4.0], 0.95).unwrap();
    assert_eq!(s.estimate, 2.0);
    assert_eq!((s.low, s.high), (None, None));
    assert!(hodges_lehmann(&[], &[1.0], 0.95).is_none());
}

#[test]
fn hodges_lehmann_is_exact_on_large_samples() {
    // 3000 × 3000 = 9 million differences, never formed: a shift of exactly +1 is found, and the
    // bisection agrees with a brute-force selection on a smaller sample with ties.
    let before: Vec<f64> = (0..3000).map(|i| f64::from(i) / 3000.0).collect();
    let after: Vec<f64> = before.iter().map(|v| v + 1.0).collect();
    let s = hodges_lehmann(&before, &after, 0.95).unwrap();
    close(s.estimate, 1.0, 1e-9);
    assert!(s.low.unwrap() < 1.0 && s.high.unwrap() > 1.0);

    let mut rng = Pcg64Mcg::seed_from_u64(5);
    let mut b: Vec<f64> = (0..150)
        .map(|_| f64::from(rng.random_range(0..40u32)))
        .collect();
    let mut a: Vec<f64> = (0..170)
        .map(|_| f64::from(rng.random_range(3..50u32)) * 0.5)
        .collect();
    b.sort_by(f64::total_cmp);
    a.sort_by(f64::total_cmp);
    let mut all: Vec<f64> = a
        .iter()
        .flat_map(|x| b.iter().map(move |y| x - y))
        .collect();
    all.sort_by(f64::total_cmp);
    for k in [1, 2, 500, 4097, 12_750, 12_751, 25_499, 25_500] {
        assert_eq!(kth_difference(&b, &a, k), all[k - 1], "k = {k}");
    }
}

#[test]
fn two_proportion_matches_reference() {
    // "prop 3/200 vs 12/200 z=2.3686261018551678 p=0.017854292789383008"
    let t = two_proportion_z_test(3, 200, 12, 200).unwrap();
    close(t.z, 2.3686261018551678, 1e-12);
    close(t.p_value, 0.017854292789383008, 1e-12);
    // "prop 5/300 vs 5/150 z=1.1306675421666135 p=0.2581950475839453"
    let t = two_proportion_z_test(5, 300, 5, 150).unwrap();
    close(t.z, 1.1306675421666135, 1e-12);
    close(t.p_value, 0.2581950475839453, 1e-12);
    // No failures on either side: nothing to test.
    assert_eq!(two_proportion_z_test(0, 10, 0, 10).unwrap().p_value, 1.0);
    assert!(two_proportion_z_test(0, 0, 0, 10).is_none());
    assert!(two_proportion_z_test(11, 10, 0, 10).is_none());
}

#[test]
fn normal_quantile_matches_scipy() {
    // "ppf ['1.959963984540054', '2.5758293035489004', '-3.090232306167813', '0.0', '1.2815515655446004']"
    for (p, want) in [
        (0.975, 1.959963984540054),
        (0.995, 2.5758293035489004),
        (0.001, -3.090232306167813),
        (0.5, 0.0),
        (0.9, 1.2815515655446004),
    ] {
        close(normal_quantile(p), want, 1e-12);
    }
}

/// A seeded sample of `n` values, uniform in `[1, 2)`, for the bootstrap tests.
fn uniform_sample(n: usize, seed: u64) -> Vec<f64> {
    let mut rng = Pcg64Mcg::seed_from_u64(seed);
    (0..n).map(|_| 1.0 + rng.random_range(0.0..1.0)).collect()
}

#[test]
fn bootstrap_interval_is_deterministic_and_covers_the_scaled_change() {
    let before = uniform_sample(300, 1);
    let after: Vec<f64> = uniform_sample(300, 2).iter().map(|v| v * 1.2).collect();
    let a = bootstrap_relative_change(&before, &after, &[0.5, 0.95], 2000, 7, 0.95);
    assert_eq!(
        a,
        bootstrap_relative_change(&before, &after, &[0.5, 0.95], 2000, 7, 0.95)
    );
    for ci in &a {
        let (lo, hi) = ci.unwrap();
        assert!(lo < 0.2 && 0.2 < hi, "[{lo}, {hi}] misses +20 %");
        assert!(hi - lo < 0.2, "[{lo}, {hi}] is uninformative");
    }
    // Another seed moves the ends a little, not a lot.
    let b = bootstrap_relative_change(&before, &after, &[0.5], 2000, 8, 0.95);
    close(a[0].unwrap().0, b[0].unwrap().0, 0.02);
}

#[test]
fn bootstrap_undefined_cases() {
    assert_eq!(
        bootstrap_relative_change(&[], &[1.0], &[0.5], 100, 1, 0.95),
        vec![None]
    );
    assert_eq!(
        bootstrap_relative_change(&[0.0, 0.0], &[1.0], &[0.5], 100, 1, 0.95),
        vec![None]
    );
    assert_eq!(
        bootstrap_relative_change(&[1.0], &[1.0], &[0.5], 0, 1, 0.95),
        vec![None]
    );
}

proptest::proptest! {
    /// The bisection finds exactly the k-th smallest pairwise difference, ties included.
    #[test]
    fn kth_difference_equals_brute_force(
        b in proptest::collection::vec(0u8..20, 1..40),
        a in proptest::collection::vec(0u8..20, 1..40),
        pick in 0.0f64..1.0,
    ) {
        let mut b: Vec<f64> = b.into_iter().map(|v| f64::from(v) * 0.1).collect();
        let mut a: Vec<f64> = a.into_iter().map(|v| f64::from(v) * 0.1).collect();
        b.sort_by(f64::total_cmp);
        a.sort_by(f64::total_cmp);
        let mut all: Vec<f64> = a.iter().flat_map(|x| b.iter().map(move |y| x - y)).collect();
        all.sort_by(f64::total_cmp);
        let k = 1 + ((all.len() - 1) as f64 * pick) as usize;
        for limit in [0, 1, 7, GATHER_LIMIT] {
            proptest::prop_assert_eq!(kth_difference_gathering(&b, &a, k, limit), all[k - 1]);
        }
    }
}
