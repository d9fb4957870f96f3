//! The statistics of samples, in one place: every quantile definition llm-probe uses, each named
//! by its definition, the distribution-free confidence interval of a quantile and the binomial
//! distribution it rests on. Pure functions, no IO. `docs/measurement.md` ("Which percentile")
//! says which definition each percentile a user sees is.
//!
//! | definition | functions | used for |
//! |---|---|---|
//! | Hyndman–Fan type 7: linear interpolation between the order statistics around rank `q·(n − 1)` (NumPy's default, vLLM's `bench serve`) | [`quantile_type7`], [`quantiles_type7`], [`median`] | every percentile of raw samples: `bench`, `compare`, `baseline save` from a run, the status pages and their charts, `demo` |
//! | Prometheus's `histogram_quantile`: linear interpolation within the bucket the rank falls in | [`histogram::histogram_quantile`] | percentiles of histogram bucket counts: `compare` of Prometheus windows, `baseline save --prometheus.url` |
//! | Harrell–Davis: a Beta-weighted mean of every order statistic | [`harrell_davis::harrell_davis`] | `compare`'s calibration of its tail estimator (never shown as a percentile) |
//!
//! - [`quantile_ci`] (and its ranks, [`quantile_ci_ranks`]): the distribution-free confidence
//!   interval of a quantile from order statistics, exact from the binomial distribution
//!   ([`binomial_cdf`]); whatever definition estimates the quantile itself.
//!
//! `tests/fast/project/quantiles.rs` fails when a quantile function over samples is defined
//! outside this module.

pub mod harrell_davis;
pub mod histogram;

/// The `q` quantile (`0 ≤ q ≤ 1`, clamped) of an ascending `sorted` sample by Hyndman–Fan type 7:
/// linear interpolation between the order statistics at `⌊h⌋` and `⌈h⌉`, `h = q·(n − 1)`
/// (0-based; NumPy's default). `None` for an empty sample.
pub fn quantile_type7(sorted: &[f64], q: f64) -> Option<f64> {
    let n = sorted.len();
    if n == 0 {
        return None;
    }
    let h = (n - 1) as f64 * q.clamp(0.0, 1.0);
    let lo = h.floor() as usize;
    let hi = h.ceil() as usize;
    Some(sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo]))
}

/// [`quantile_type7`] at each of `qs` of `values` in any order (sorted in place first).
pub fn quantiles_type7<const N: usize>(values: &mut [f64], qs: [f64; N]) -> [Option<f64>; N] {
    values.sort_by(f64::total_cmp);
    qs.map(|q| quantile_type7(values, q))
}

/// The median of a sample in any order (`None` when empty), without reordering it: type 7 at
/// `q = ½` (the middle value, or the mean of the two middle ones), found by selection rather
/// than a sort.
pub fn median(sample: &[f64]) -> Option<f64> {
    if sample.is_empty() {
        return None;
    }
    let mut v = sample.to_vec();
    let n = v.len();
    let upper = *v.select_nth_unstable_by(n / 2, f64::total_cmp).1;
    if n % 2 == 1 {
        Some(upper)
    } else {
        // After the selection, everything left of position n/2 is ≤ it: the lower middle is their max.
        let lower = v[..n / 2].iter().copied().fold(f64::NEG_INFINITY, f64::max);
        Some((lower + upper) / 2.0)
    }
}

/// Distribution-free interval of the `q` quantile at `confidence` from an ascending `sorted`
/// sample: the order statistics `[X(l), X(u)]` of [`quantile_ci_ranks`]. A side is `None` when
/// the sample is too small to bound it (e.g. the upper side of a P99 from 30 requests).
pub fn quantile_ci(sorted: &[f64], q: f64, confidence: f64) -> [Option<f64>; 2] {
    quantile_ci_ranks(sorted.len(), q, confidence).map(|r| r.map(|r| sorted[r - 1]))
}

/// The 1-based ranks `[l, u]` of [`quantile_ci`] for a sample of `n`: `l` the largest rank such
/// that `P(B ≤ l − 1) ≤ (1 − confidence)/2` and `u` the smallest such that
/// `P(B ≤ u − 1) ≥ 1 − (1 − confidence)/2`, `B ~ Binomial(n, q)`; so each side misses with
/// probability at most `(1 − confidence)/2`. A side is `None` when no such rank exists within
/// the sample; both are for an empty sample or `q` outside `[0, 1]`.
pub fn quantile_ci_ranks(n: usize, q: f64, confidence: f64) -> [Option<usize>; 2] {
    if n == 0 || !(0.0..=1.0).contains(&q) {
        return [None, None];
    }
    let tail = (1.0 - confidence) / 2.0;
    let cdf = binomial_cdf(n, q);
    // cdf[k] = P(B ≤ k). Rank r has P(B ≤ r − 1) = cdf[r − 1].
    let l = (1..=n).rev().find(|&r| cdf[r - 1] <= tail);
    let u = (1..=n).find(|&r| cdf[r - 1] >= 1.0 - tail);
    [l, u]
}

/// `P(B ≤ k)` for `k = 0..=n`, `B ~ Binomial(n, p)`, from log-space probabilities (no underflow
/// of `(1 − p)^n` for large `n`).
pub fn binomial_cdf(n: usize, p: f64) -> Vec<f64> {
    let nf = n as f64;
    let ln_n_fact = libm::lgamma(nf + 1.0);
    let mut acc = 0.0;
    (0..=n)
        .map(|k| {
            let kf = k as f64;
            let pmf = if p <= 0.0 {
                f64::from(u8::from(k == 0))
            } else if p >= 1.0 {
                f64::from(u8::from(k == n))
            } else {
                (ln_n_fact - libm::lgamma(kf + 1.0) - libm::lgamma(nf - kf + 1.0)
                    + kf * p.ln()
                    + (nf - kf) * (1.0 - p).ln())
                .exp()
            };
            acc += pmf;
            acc.min(1.0)
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod tests;
