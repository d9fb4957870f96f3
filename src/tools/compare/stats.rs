//! The statistics of `compare`: pure functions over samples (no IO, no clock, no global RNG).
//!
//! - [`mann_whitney_u`]: the two-sided Mann–Whitney U test, tie-corrected normal approximation
//!   with continuity correction (SciPy's `mannwhitneyu(method="asymptotic")`).
//! - [`hodges_lehmann`]: the Hodges–Lehmann shift estimate (median of all pairwise differences
//!   `after − before`) with its distribution-free interval (Moses: order statistics of the
//!   pairwise differences, critical rank from the normal approximation of U).
//! - [`bootstrap_relative_change`]: seeded percentile-bootstrap interval of the relative change
//!   of percentiles, resampling requests.
//! - [`two_proportion_z_test`]: pooled two-proportion z-test for failure ratios.
//! - [`binned`]: the same questions asked of histogram bucket counts (Prometheus windows).
//!
//! The percentiles themselves, their order-statistic intervals and the median are
//! [`crate::stats`]'s (type 7, as bench's), like every quantile definition.
//!
//! Samples are slices of finite `f64` values (callers drop unknown values first); every function
//! returns `None` instead of a made-up number when the samples cannot support the result.

use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64Mcg;

use crate::stats::quantile_type7;

pub mod binned;
pub mod tail;

/// The result of [`mann_whitney_u`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MannWhitney {
    /// U of the first sample (`x`): its rank sum minus `n_x (n_x + 1) / 2`, mid-ranks for ties
    /// (SciPy's `statistic`).
    pub u_x: f64,
    /// The standard score of `max(U_x, U_y)` after continuity correction (0 when all values tie).
    pub z: f64,
    /// Two-sided p-value, in `[0, 1]`.
    pub p_value: f64,
}

/// Two-sided Mann–Whitney U test of `x` against `y`: the normal approximation with the tie
/// correction of the variance and a continuity correction of 0.5, as SciPy's
/// `mannwhitneyu(x, y, method="asymptotic", use_continuity=True)`. `None` when either sample is
/// empty. When every value ties the p-value is 1.
pub fn mann_whitney_u(x: &[f64], y: &[f64]) -> Option<MannWhitney> {
    if x.is_empty() || y.is_empty() {
        return None;
    }
    let (n1, n2) = (x.len() as f64, y.len() as f64);
    let mut all: Vec<(f64, bool)> = x
        .iter()
        .map(|&v| (v, true))
        .chain(y.iter().map(|&v| (v, false)))
        .collect();
    all.sort_by(|a, b| a.0.total_cmp(&b.0));
    // Mid-ranks (1-based) and the tie term Σ(t³ − t).
    let (mut rank_sum_x, mut tie_term) = (0.0, 0.0);
    let mut i = 0;
    while i < all.len() {
        let mut j = i;
        while j + 1 < all.len() && all[j + 1].0 == all[i].0 {
            j += 1;
        }
        let t = (j - i + 1) as f64;
        let mid_rank = (i + j) as f64 / 2.0 + 1.0;
        rank_sum_x += mid_rank * all[i..=j].iter().filter(|(_, from_x)| *from_x).count() as f64;
        tie_term += t * t * t - t;
        i = j + 1;
    }
    Some(u_test_from_ranks(n1, n2, rank_sum_x, tie_term))
}

/// The U test from the rank sum of the first sample (`n1` values, mid-ranks for ties) and the
/// tie term `Σ(t³ − t)` over the groups of tied values: shared by [`mann_whitney_u`] and the
/// binned test ([`binned::mann_whitney_binned`], where every bin is one group of ties).
pub(crate) fn u_test_from_ranks(n1: f64, n2: f64, rank_sum_x: f64, tie_term: f64) -> MannWhitney {
    let n = n1 + n2;
    let u_x = rank_sum_x - n1 * (n1 + 1.0) / 2.0;
    let u_y = n1 * n2 - u_x;
    let mean = n1 * n2 / 2.0;
    let variance = n1 * n2 / 12.0 * ((n + 1.0) - tie_term / (n * (n - 1.0)));
    if variance <= 0.0 || !variance.is_finite() {
        return MannWhitney {
            u_x,
            z: 0.0,
            p_value: 1.0,
        };
    }
    let z = (u_x.max(u_y) - mean - 0.5) / variance.sqrt();
    let p_value = (2.0 * normal_sf(z)).clamp(0.0, 1.0);
    MannWhitney { u_x, z, p_value }
}

/// A shift estimate with its confidence interval, in the samples' unit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shift {
    /// Hodges–Lehmann estimate: the median of all differences `after_j − before_i`.
    pub estimate: f64,
    /// Lower end of the interval; `None` when the samples are too small for the confidence.
    pub low: Option<f64>,
    /// Upper end of the interval; `None` as for `low`.
    pub high: Option<f64>,
}

/// Hodges–Lehmann estimate of the shift `after − before` and its distribution-free interval at
/// `confidence` (e.g. 0.95), after Moses: with the `m·n` pairwise differences sorted and
/// `K = ⌊m·n/2 − z·√(m·n·(m+n+1)/12)⌋` (`z` the two-sided normal quantile), the interval is
/// `[D(K), D(m·n+1−K)]` (1-based order statistics). When `K < 1` the interval is unbounded
/// (`low`/`high` are `None`). `None` when either sample is empty.
///
/// Exact for any sample size without forming the `m·n` differences: each order statistic is
/// found by bisecting on the value with an `O(m + n)` count of the differences below it
/// (`kth_difference`).
pub fn hodges_lehmann(before: &[f64], after: &[f64], confidence: f64) -> Option<Shift> {
    if before.is_empty() || after.is_empty() {
        return None;
    }
    let mut b = before.to_vec();
    let mut a = after.to_vec();
    b.sort_unstable_by(f64::total_cmp);
    a.sort_unstable_by(f64::total_cmp);
    let (m, n) = (b.len(), a.len());
    let total = m * n;
    let estimate = if total % 2 == 1 {
        kth_difference(&b, &a, total / 2 + 1)
    } else {
        (kth_difference(&b, &a, total / 2) + kth_difference(&b, &a, total / 2 + 1)) / 2.0
    };
    let mn = total as f64;
    let z = normal_quantile(0.5 + confidence / 2.0);
    let k = (mn / 2.0 - z * (mn * (m + n + 1) as f64 / 12.0).sqrt()).floor();
    let (low, high) = if k >= 1.0 {
        let k = k as usize;
        (
            Some(kth_difference(&b, &a, k)),
            Some(kth_difference(&b, &a, total + 1 - k)),
        )
    } else {
        (None, None)
    };
    Some(Shift {
        estimate,
        low,
        high,
    })
}

/// How many differences `a_j − b_i` are `≤ v` (both slices ascending), in `O(m + n)`: as
/// `b_i` grows every difference falls, so the boundary in `a` only moves forward.
fn count_differences_le(b: &[f64], a: &[f64], v: f64) -> usize {
    let mut j = 0;
    let mut count = 0;
    for &bi in b {
        while j < a.len() && a[j] - bi <= v {
            j += 1;
        }
        count += j;
    }
    count
}

/// At most this many differences are gathered and selected directly in [`kth_difference`].
const GATHER_LIMIT: usize = 4096;

/// The `k`-th smallest (1-based, `1 ≤ k ≤ m·n`) of the differences `a_j − b_i`, both slices
/// ascending and non-empty: bisect the value range, keeping `count(≤ lo) < k ≤ count(≤ hi)`,
/// until few differences lie in `(lo, hi]` (then gather and select them) or `lo` and `hi` are
/// adjacent floating-point values (then the answer is `hi`).
fn kth_difference(b: &[f64], a: &[f64], k: usize) -> f64 {
    kth_difference_gathering(b, a, k, GATHER_LIMIT)
}

/// [`kth_difference`] gathering at most `limit` differences (tests use small limits to exercise
/// the bisection on small samples).
fn kth_difference_gathering(b: &[f64], a: &[f64], k: usize, limit: usize) -> f64 {
    let mut lo = a[0] - b[b.len() - 1];
    if count_differences_le(b, a, lo) >= k {
        return lo;
    }
    let mut hi = a[a.len() - 1] - b[0];
    let mut below = count_differences_le(b, a, lo);
    let mut upto = b.len() * a.len();
    while upto - below > limit {
        let mid = lo + (hi - lo) / 2.0;
        if mid <= lo || mid >= hi {
            return hi;
        }
        let c = count_differences_le(b, a, mid);
        if c >= k {
            (hi, upto) = (mid, c);
        } else {
            (lo, below) = (mid, c);
        }
    }
    let mut between: Vec<f64> = Vec::with_capacity(upto - below);
    for &bi in b {
        // Within a row the differences ascend with `a`: the ones in (lo, hi] are contiguous.
        let from = a.partition_point(|aj| aj - bi <= lo);
        let to = a.partition_point(|aj| aj - bi <= hi);
        between.extend(a[from..to].iter().map(|aj| aj - bi));
    }
    order_statistic(&mut between, k - below)
}

/// The `k`-th smallest value (1-based) of `v`, reordering `v`.
fn order_statistic(v: &mut [f64], k: usize) -> f64 {
    *v.select_nth_unstable_by(k - 1, |a, b| a.total_cmp(b)).1
}

/// Seeded percentile-bootstrap intervals of the relative change `Q_after(q) / Q_before(q) − 1`
/// for each quantile in `qs`: `resamples` times, each sample is resampled with replacement
/// (independently, same size), the quantiles ([`quantile_type7`]) recomputed, and the interval is
/// the `(1 ± confidence)/2` quantiles of the resampled changes. One entry per `q`; `None` where a
/// sample is empty, `resamples` is 0 or a resampled `before` quantile is 0 (the change is then
/// undefined). The same `seed` gives the same intervals.
pub fn bootstrap_relative_change(
    before: &[f64],
    after: &[f64],
    qs: &[f64],
    resamples: usize,
    seed: u64,
    confidence: f64,
) -> Vec<Option<(f64, f64)>> {
    if before.is_empty() || after.is_empty() || resamples == 0 {
        return vec![None; qs.len()];
    }
    let mut rng = Pcg64Mcg::seed_from_u64(seed);
    let mut changes: Vec<Vec<f64>> = vec![Vec::with_capacity(resamples); qs.len()];
    let mut undefined = vec![false; qs.len()];
    let (mut rb, mut ra) = (vec![0.0; before.len()], vec![0.0; after.len()]);
    for _ in 0..resamples {
        resample_sorted(before, &mut rb, &mut rng);
        resample_sorted(after, &mut ra, &mut rng);
        for (i, &q) in qs.iter().enumerate() {
            let (b, a) = (quantile_type7(&rb, q), quantile_type7(&ra, q));
            match (b, a) {
                (Some(b), Some(a)) if b != 0.0 => changes[i].push(a / b - 1.0),
                _ => undefined[i] = true,
            }
        }
    }
    changes
        .into_iter()
        .zip(undefined)
        .map(|(mut c, undefined)| {
            if undefined {
                return None;
            }
            c.sort_by(f64::total_cmp);
            let tail = (1.0 - confidence) / 2.0;
            Some((quantile_type7(&c, tail)?, quantile_type7(&c, 1.0 - tail)?))
        })
        .collect()
}

/// Fill `out` with `from.len()` draws from `from` with replacement, sorted ascending.
fn resample_sorted(from: &[f64], out: &mut [f64], rng: &mut Pcg64Mcg) {
    for slot in out.iter_mut() {
        *slot = from[rng.random_range(0..from.len())];
    }
    out.sort_unstable_by(f64::total_cmp);
}

/// The result of [`two_proportion_z_test`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProportionTest {
    /// `failed_before / n_before`.
    pub before: f64,
    /// `failed_after / n_after`.
    pub after: f64,
    /// Standard score of `after − before` under the pooled proportion (0 when it is 0 or 1).
    pub z: f64,
    /// Two-sided p-value, in `[0, 1]`; 1 when the pooled proportion is 0 or 1 (no variation).
    pub p_value: f64,
}

/// Two-sided pooled two-proportion z-test: `z = (p_a − p_b) / √(p̂(1 − p̂)(1/n_b + 1/n_a))` with
/// `p̂` the pooled proportion. `None` when either count is 0 or a failure count exceeds its total.
pub fn two_proportion_z_test(
    failed_before: u64,
    n_before: u64,
    failed_after: u64,
    n_after: u64,
) -> Option<ProportionTest> {
    if n_before == 0 || n_after == 0 || failed_before > n_before || failed_after > n_after {
        return None;
    }
    let (nb, na) = (n_before as f64, n_after as f64);
    let (pb, pa) = (failed_before as f64 / nb, failed_after as f64 / na);
    let pooled = (failed_before + failed_after) as f64 / (nb + na);
    let se = (pooled * (1.0 - pooled) * (1.0 / nb + 1.0 / na)).sqrt();
    let (z, p_value) = if se > 0.0 {
        let z = (pa - pb) / se;
        (z, (2.0 * normal_sf(z.abs())).clamp(0.0, 1.0))
    } else {
        (0.0, 1.0)
    };
    Some(ProportionTest {
        before: pb,
        after: pa,
        z,
        p_value,
    })
}

/// Upper tail of the standard normal distribution, `P(Z > z)`.
pub fn normal_sf(z: f64) -> f64 {
    0.5 * libm::erfc(z / std::f64::consts::SQRT_2)
}

/// The standard normal quantile `Φ⁻¹(p)` for `0 < p < 1` (Acklam's rational approximation,
/// refined by one Halley step against [`normal_sf`]: relative error below 1e-12).
pub fn normal_quantile(p: f64) -> f64 {
    if p <= 0.0 {
        return f64::NEG_INFINITY;
    }
    if p >= 1.0 {
        return f64::INFINITY;
    }
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    let tail = |q: f64| {
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    let x = if p < 0.02425 {
        tail((-2.0 * p.ln()).sqrt())
    } else if p > 1.0 - 0.02425 {
        -tail((-2.0 * (1.0 - p).ln()).sqrt())
    } else {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    };
    // One Halley step: e = Φ(x) − p.
    let e = (1.0 - normal_sf(x)) - p;
    let u = e * (2.0 * std::f64::consts::PI).sqrt() * (x * x / 2.0).exp();
    x - u / (1.0 + x * u / 2.0)
}

#[cfg(test)]
mod tests;
