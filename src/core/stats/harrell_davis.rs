//! The Harrell–Davis quantile estimator (Harrell & Davis 1982, "A new distribution-free quantile
//! estimator", Biometrika 69): a weighted mean of every order statistic with Beta weights
//! `W_i = I_{i/n}(a, b) − I_{(i−1)/n}(a, b)`, `a = (n + 1) q`, `b = (n + 1)(1 − q)`, `I` the
//! regularized incomplete Beta function ([`inc_beta`]). Smoother than one or two order
//! statistics, so its bootstrap distribution is not lumpy; the estimator Wilcox's shift function
//! (`qcomhd`) compares. `compare`'s calibration weighs it against type 7
//! ([`super::quantile_type7`]); no percentile a user sees is estimated with it.

/// The regularized incomplete Beta function `I_x(a, b)` for `a, b > 0`, `x ∈ [0, 1]`: the
/// continued fraction of Numerical Recipes §6.4 (modified Lentz), using the symmetry
/// `I_x(a, b) = 1 − I_{1−x}(b, a)` where it converges faster. Absolute error below 1e-12.
pub fn inc_beta(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let ln_front =
        libm::lgamma(a + b) - libm::lgamma(a) - libm::lgamma(b) + a * x.ln() + b * (1.0 - x).ln();
    let front = ln_front.exp();
    if x < (a + 1.0) / (a + b + 2.0) {
        front * beta_fraction(a, b, x) / a
    } else {
        1.0 - front * beta_fraction(b, a, 1.0 - x) / b
    }
}

/// The continued fraction of `I_x(a, b)` (Numerical Recipes `betacf`).
fn beta_fraction(a: f64, b: f64, x: f64) -> f64 {
    const TINY: f64 = 1e-300;
    let (qab, qap, qam) = (a + b, a + 1.0, a - 1.0);
    let mut c = 1.0;
    let mut d = 1.0 - qab * x / qap;
    if d.abs() < TINY {
        d = TINY;
    }
    d = 1.0 / d;
    let mut h = d;
    for m in 1..=10_000 {
        let m = f64::from(m);
        let m2 = 2.0 * m;
        let aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1.0 + aa * d;
        if d.abs() < TINY {
            d = TINY;
        }
        c = 1.0 + aa / c;
        if c.abs() < TINY {
            c = TINY;
        }
        d = 1.0 / d;
        h *= d * c;
        let aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1.0 + aa * d;
        if d.abs() < TINY {
            d = TINY;
        }
        c = 1.0 + aa / c;
        if c.abs() < TINY {
            c = TINY;
        }
        d = 1.0 / d;
        let del = d * c;
        h *= del;
        if (del - 1.0).abs() < 1e-15 {
            break;
        }
    }
    h
}

/// The Harrell–Davis weights of the `q` quantile (`0 < q < 1`) for a sample of `n ≥ 1`: one per
/// order statistic, summing to 1.
pub fn harrell_davis_weights(n: usize, q: f64) -> Vec<f64> {
    let nf = n as f64;
    let (a, b) = ((nf + 1.0) * q, (nf + 1.0) * (1.0 - q));
    let mut previous = 0.0;
    (1..=n)
        .map(|i| {
            let next = inc_beta(a, b, i as f64 / nf);
            let w = next - previous;
            previous = next;
            w
        })
        .collect()
}

/// The Harrell–Davis estimate of the `q` quantile (`0 < q < 1`) of an ascending `sorted` sample;
/// `None` when it is empty.
pub fn harrell_davis(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    Some(weighted(sorted, &harrell_davis_weights(sorted.len(), q)))
}

/// The weighted sum of an ascending `sorted` sample with `weights` (one per order statistic, as
/// [`harrell_davis_weights`] gives them for its size): its Harrell–Davis estimate.
pub fn weighted(sorted: &[f64], weights: &[f64]) -> f64 {
    sorted.iter().zip(weights).map(|(x, w)| x * w).sum()
}
