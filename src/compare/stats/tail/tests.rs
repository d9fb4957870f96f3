use super::*;

fn close(a: f64, b: f64, tol: f64) {
    assert!((a - b).abs() <= tol, "{a} vs {b} (tolerance {tol})");
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

#[test]
fn bootstrap_tail_change_is_seeded_and_finds_a_scaled_tail() {
    let before: Vec<f64> = (1..=200).map(|i| f64::from(i) / 200.0).collect();
    let after: Vec<f64> = before.iter().map(|x| x * 1.5).collect();
    let est = [Estimator::HarrellDavis, Estimator::Interpolated];
    let r = bootstrap_tail_change(&before, &after, 0.95, &est, 500, 7, 0.95);
    assert_eq!(
        r,
        bootstrap_tail_change(&before, &after, 0.95, &est, 500, 7, 0.95)
    );
    for t in r {
        let t = t.unwrap();
        close(t.change, 0.5, 1e-9);
        assert!(t.low < 0.5 && 0.5 < t.high && t.low > 0.2, "{t:?}");
    }
    assert_eq!(
        bootstrap_tail_change(&[], &after, 0.95, &est, 500, 7, 0.95),
        vec![None, None]
    );
    // BEFORE all zeros: no relative change.
    assert_eq!(
        bootstrap_tail_change(&[0.0; 5], &after, 0.95, &est[..1], 50, 7, 0.95),
        vec![None]
    );
}

/// Known answers from SciPy 1.17 (venv as in `stats/tests.rs`):
/// `scipy.special.betainc(190.95, 10.05, 0.93)`, `betainc(2.5, 7.5, 0.2)` and
/// `scipy.stats.mstats.hdquantiles(A, [0.5, 0.95])` of the 12 values of `stats/tests.rs`'s `A`.
#[test]
fn harrell_davis_matches_scipy() {
    close(inc_beta(190.95, 10.05, 0.93), 0.10374262676759348, 1e-12);
    close(inc_beta(2.5, 7.5, 0.2), 0.40123869824719194, 1e-12);
    let mut a = vec![
        0.210, 0.198, 0.205, 0.230, 0.199, 0.215, 0.205, 0.220, 0.202, 0.240, 0.211, 0.207,
    ];
    a.sort_by(f64::total_cmp);
    close(harrell_davis(&a, 0.5).unwrap(), 0.2087545114422313, 1e-12);
    close(harrell_davis(&a, 0.95).unwrap(), 0.2373671844761733, 1e-12);
}
