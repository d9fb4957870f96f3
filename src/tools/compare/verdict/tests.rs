use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64Mcg;

use super::*;

fn ev(p_value: f64, change: f64, low: f64, high: f64, n: usize) -> Evidence {
    Evidence {
        p_value,
        shift: Shift {
            estimate: change,
            low: Some(low),
            high: Some(high),
        },
        before_median: 1.0,
        change,
        low: Some(low),
        high: Some(high),
        n_before: n,
        n_after: n,
    }
}

#[test]
fn significant_changes_beyond_the_threshold_are_directional() {
    let rule = Rule::default();
    let up = ev(0.001, 0.2, 0.15, 0.25, 200);
    assert_eq!(
        judge(&up, Direction::HigherIsWorse, rule),
        Verdict::Regression
    );
    assert_eq!(
        judge(&up, Direction::HigherIsBetter, rule),
        Verdict::Improvement
    );
    let down = ev(0.001, -0.2, -0.25, -0.15, 200);
    assert_eq!(
        judge(&down, Direction::HigherIsWorse, rule),
        Verdict::Improvement
    );
    assert_eq!(
        judge(&down, Direction::HigherIsBetter, rule),
        Verdict::Regression
    );
}

#[test]
fn significant_but_within_threshold_is_no_change() {
    let e = ev(0.001, 0.05, 0.03, 0.07, 2000);
    assert_eq!(
        judge(&e, Direction::HigherIsWorse, Rule::default()),
        Verdict::NoChange
    );
    // The same evidence with a 4 % threshold is news.
    let strict = Rule {
        alpha: 0.05,
        threshold: 0.04,
    };
    assert_eq!(
        judge(&e, Direction::HigherIsWorse, strict),
        Verdict::Regression
    );
}

#[test]
fn not_significant_with_a_wide_interval_is_inconclusive_with_an_estimate() {
    // change 0, interval ±20 % from 50 per run: the interval must shrink to ±10 %, i.e. by 2,
    // so 4× the requests: 150 more per run.
    let e = ev(0.5, 0.0, -0.2, 0.2, 50);
    assert_eq!(
        judge(&e, Direction::HigherIsWorse, Rule::default()),
        Verdict::Inconclusive { more_requests: 150 }
    );
    assert_eq!(
        judge(&e, Direction::HigherIsWorse, Rule::default()).label(),
        "inconclusive — needs ≈ 150 more requests"
    );
    // Estimate +12 % (beyond the threshold) but not significant: the interval must exclude 0,
    // (0.12 − (−0.04)) / 0.12 = 4/3 → f = 16/9 → 0.78 × 50 = 39 more.
    let e = ev(0.2, 0.12, -0.04, 0.28, 50);
    assert_eq!(
        judge(&e, Direction::HigherIsWorse, Rule::default()),
        Verdict::Inconclusive { more_requests: 39 }
    );
}

#[test]
fn not_significant_and_inside_the_threshold_is_no_change() {
    let e = ev(0.4, 0.01, -0.05, 0.07, 200);
    assert_eq!(
        judge(&e, Direction::HigherIsWorse, Rule::default()),
        Verdict::NoChange
    );
}

#[test]
fn unbounded_interval_asks_for_the_minimum_sample() {
    let e = evidence(&[1.0, 2.0], &[1.5, 2.5], 0.05).unwrap();
    assert_eq!((e.low, e.high), (None, None));
    let Verdict::Inconclusive { more_requests } =
        judge(&e, Direction::HigherIsWorse, Rule::default())
    else {
        panic!("expected inconclusive");
    };
    // With k requests per run the interval exists from k = 4 (K = ⌊8 − 1.96·√(16·9/12)⌋ = 1).
    assert!(interval_exists(4, 4, 0.95) && !interval_exists(3, 3, 0.95));
    assert_eq!(more_requests, 2);
    // A tiny but "significant" sample is still inconclusive: 1 vs 6 tied values, p ≈ 0.04.
    let e = evidence(&[0.03], &[0.02; 6], 0.05).unwrap();
    assert!(e.p_value < 0.05 && e.low.is_none());
    assert_eq!(
        judge(&e, Direction::HigherIsWorse, Rule::default()),
        Verdict::Inconclusive { more_requests: 3 }
    );
}

#[test]
fn rounding_keeps_two_significant_digits() {
    assert_eq!(round_up_2_significant(1.0), 1);
    assert_eq!(round_up_2_significant(87.2), 88);
    assert_eq!(round_up_2_significant(1234.0), 1300);
    assert_eq!(round_up_2_significant(150.0), 150);
}

#[test]
fn failure_ratio_verdicts() {
    let rule = Rule::default();
    // 3/200 → 12/200: p = 0.018 (see the stats known answers), ×4 → regression.
    let (v, t) = judge_failures(3, 200, 12, 200, rule).unwrap();
    assert_eq!(v, Verdict::Regression);
    assert!(t.p_value < 0.05);
    assert_eq!(
        judge_failures(12, 200, 3, 200, rule).unwrap().0,
        Verdict::Improvement
    );
    // 5/300 → 5/150: not significant.
    assert_eq!(
        judge_failures(5, 300, 5, 150, rule).unwrap().0,
        Verdict::NoChange
    );
    // From zero to some: infinitely worse relative to BEFORE, significant with enough requests.
    assert_eq!(
        judge_failures(0, 500, 20, 500, rule).unwrap().0,
        Verdict::Regression
    );
    assert!(judge_failures(0, 0, 1, 10, rule).is_none());
}

/// `n` lognormal values with median `median` and log-sd `sigma` (Box–Muller on a seeded PCG).
fn lognormal(rng: &mut Pcg64Mcg, n: usize, median: f64, sigma: f64) -> Vec<f64> {
    (0..n)
        .map(|_| {
            let u1: f64 = 1.0 - rng.random_range(0.0..1.0); // (0, 1]
            let u2: f64 = rng.random_range(0.0..1.0);
            let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
            median * (sigma * z).exp()
        })
        .collect()
}

/// Share of `reps` seeded repetitions (200 per side, σ = 0.25) in which AFTER, scaled by
/// `1 + shift`, is judged a TTFT regression under the default rule.
fn regression_rate(shift: f64, reps: u64, seed: u64) -> f64 {
    let mut regressions = 0;
    for rep in 0..reps {
        let mut rng = Pcg64Mcg::seed_from_u64(seed.wrapping_mul(1_000_003).wrapping_add(rep));
        let before = lognormal(&mut rng, 200, 0.2, 0.25);
        let after = lognormal(&mut rng, 200, 0.2 * (1.0 + shift), 0.25);
        let e = evidence(&before, &after, 0.05).unwrap();
        if judge(&e, Direction::HigherIsWorse, Rule::default()) == Verdict::Regression {
            regressions += 1;
        }
    }
    f64::from(regressions) / reps as f64
}

/// The verdict rule's calibration. The rates are printed (`--nocapture`) and recorded in
/// BENCHMARKS.md; they are deterministic (seeded), so debug and release builds agree.
#[test]
fn calibration_on_lognormal_samples() {
    let same = regression_rate(0.0, 1000, 1);
    let plus15 = regression_rate(0.15, 1000, 2);
    let plus3 = regression_rate(0.03, 1000, 3);
    println!(
        "calibration (lognormal σ=0.25, 200 per side, 1000 repetitions): \
         same → regression {:.1} %, +15 % → {:.1} %, +3 % → {:.1} %",
        same * 100.0,
        plus15 * 100.0,
        plus3 * 100.0
    );
    assert!(same <= 0.01, "same distribution: {same}");
    assert!(plus15 >= 0.90, "+15 %: {plus15}");
    assert!(plus3 <= 0.02, "+3 %: {plus3}");
}

/// An alpha so small that `1 − alpha` rounds to 1 is refused at the command
/// line, and `more_requests` ends for any alpha (the interval never existed and it looped).
#[test]
fn a_tiny_alpha_is_refused_and_more_requests_always_ends() {
    for tiny in ["1e-16", "1e-300", "5e-324", "1e-7"] {
        let e = crate::compare::parse_alpha(tiny).unwrap_err();
        assert!(e.contains("0.000001"), "{tiny}: {e}");
    }
    assert_eq!(crate::compare::parse_alpha("1e-6"), Ok(1e-6));
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut e = ev(0.5, 0.0, 0.0, 0.0, 3);
        (e.low, e.high) = (None, None);
        let rule = Rule {
            alpha: 1e-16,
            threshold: 0.1,
        };
        let _ = tx.send(more_requests(&e, rule));
    });
    let n = rx
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("more_requests ends");
    assert!(n >= 1, "{n}");
}

fn tail(change: f64, low: f64, high: f64) -> stats::tail::TailChange {
    stats::tail::TailChange {
        q: 0.95,
        before: 1.0,
        after: 1.0 + change,
        change,
        low,
        high,
        confidence: 0.975,
    }
}

#[test]
fn the_tail_is_judged_by_its_interval_and_guards_the_worse_side() {
    let rule = Rule::default();
    let up = Direction::HigherIsWorse;
    // +84 % [+13, +228]: significant, beyond the threshold.
    assert_eq!(
        judge_tail(&tail(0.84, 0.13, 2.28), 200, up, rule),
        Verdict::Regression
    );
    // The same change of tokens/s (higher is better) is an improvement.
    assert_eq!(
        judge_tail(
            &tail(0.84, 0.13, 2.28),
            200,
            Direction::HigherIsBetter,
            rule
        ),
        Verdict::Improvement
    );
    // Significant but within the threshold: ~.
    assert_eq!(
        judge_tail(&tail(0.05, 0.01, 0.09), 200, up, rule),
        Verdict::NoChange
    );
    // Not significant, a regression beyond +10 % still possible: inconclusive. The upper end
    // +20 % must come to +10 % around +0 %: the interval must shrink by 2, 4× the requests.
    assert_eq!(
        judge_tail(&tail(0.0, -0.2, 0.2), 200, up, rule),
        Verdict::Inconclusive { more_requests: 600 }
    );
    // Only an improvement beyond the threshold is still possible: ~ (the tail guards the worse side).
    assert_eq!(
        judge_tail(&tail(-0.08, -0.2, 0.05), 200, up, rule),
        Verdict::NoChange
    );
    // Beyond the threshold, not significant: the lower end must come off 0,
    // ((0.2 + 0.2) / 0.2)² = 4 → 600 more.
    assert_eq!(
        judge_tail(&tail(0.2, -0.2, 0.6), 200, up, rule),
        Verdict::Inconclusive { more_requests: 600 }
    );
}

#[test]
fn a_row_regresses_when_the_median_or_the_tail_does_and_says_which() {
    use Verdict::*;
    let i = |n| Inconclusive { more_requests: n };
    assert_eq!(
        combine(&[("P50", NoChange), ("P95", Regression)]),
        (Regression, vec!["P95"])
    );
    assert_eq!(
        combine(&[("P50", Regression), ("P95", Regression)]),
        (Regression, vec!["P50", "P95"])
    );
    assert_eq!(
        combine(&[("P50", Regression), ("P95", i(40))]),
        (Regression, vec!["P50"])
    );
    assert_eq!(
        combine(&[("P50", i(10)), ("P95", i(40))]),
        (i(40), vec!["P50", "P95"])
    );
    assert_eq!(
        combine(&[("P50", Improvement), ("P95", i(40))]),
        (i(40), vec!["P95"])
    );
    assert_eq!(
        combine(&[("P50", Improvement), ("P5", NoChange)]),
        (Improvement, vec!["P50"])
    );
    assert_eq!(
        combine(&[("P50", NoChange), ("P95", NoChange)]),
        (NoChange, vec![])
    );
}
