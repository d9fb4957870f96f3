use super::*;

fn close(a: f64, b: f64, tol: f64) {
    assert!((a - b).abs() <= tol, "{a} vs {b} (tolerance {tol})");
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
