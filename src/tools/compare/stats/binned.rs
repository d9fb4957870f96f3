//! Statistics over binned data: the bucket counts of a classic Prometheus histogram over a time
//! window (how many observations fell in each bucket `(lower, upper]`). Pure functions, no IO.
//!
//! A bucket count says how many observations lie between two bounds, not where: every question
//! is answered at the resolution of the buckets, and says so.
//! - [`Histogram::quantile`]: the bucket a quantile lies in, and the value Prometheus's
//!   `histogram_quantile` interpolates linearly within it (so the number matches the dashboards;
//!   the definition is [`crate::stats::histogram`]'s).
//! - [`bootstrap_quantiles`]: seeded intervals of each window's quantiles and of their relative
//!   change, by resampling the bucket counts (a multinomial draw of the window's total with the
//!   observed bucket shares, sampled as a chain of binomials: `O(buckets)` per resample, whatever
//!   the number of observations).
//! - [`mann_whitney_binned`]: the U test with every bucket one group of ties (mid-ranks and the
//!   tie correction of [`super::mann_whitney_u`]); equal to that test on data where each
//!   observation is replaced by its bucket.
//! - [`share_above`] / [`share_at_or_below`]: how many observations lie beyond a threshold (an
//!   SLO), counted exactly at a bucket bound.

use rand::SeedableRng;
use rand_distr::{Binomial, Distribution};
use rand_pcg::Pcg64Mcg;

use super::{u_test_from_ranks, MannWhitney};
use crate::stats::histogram::{histogram_quantile, BinnedQuantile};
use crate::stats::quantile_type7;

/// Observation counts per bucket of one classic histogram over a window.
#[derive(Debug, Clone, PartialEq)]
pub struct Histogram {
    /// Upper bounds, strictly ascending, the last `+Inf`.
    upper: Vec<f64>,
    /// Observations per bucket (not cumulative): `counts[i]` lie in `(upper[i − 1], upper[i]]`.
    counts: Vec<u64>,
}

/// The largest count taken as a number of observations: 2^53, the last integer an `f64` (a
/// Prometheus sample) holds exactly. Larger counts (a broken exporter or a hostile Prometheus)
/// are refused: sums of them would overflow.
pub const MAX_COUNT: f64 = 9_007_199_254_740_992.0;

/// The most buckets a histogram is taken with: the daemon's have a few dozen (the fixed bounds
/// and each target's SLO thresholds). More (a hostile or broken Prometheus) are refused, as the
/// bootstrap's work grows with them.
pub const MAX_BUCKETS: usize = 1000;

/// Why bucket counts do not make a [`Histogram`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum HistogramError {
    /// No buckets at all.
    #[error("no buckets")]
    Empty,
    /// The `+Inf` bucket (the total) is missing.
    #[error("no +Inf bucket (the total count): the bucket series are incomplete")]
    NoInf,
    /// A bound is NaN, or two buckets have the same bound.
    #[error("bucket bound {0} is NaN or repeated")]
    BadBound(f64),
    /// More than [`MAX_BUCKETS`] buckets.
    #[error("{0} buckets, more than the {max} a histogram is taken with (llm-probe's have a few dozen)", max = MAX_BUCKETS)]
    TooManyBuckets(usize),
    /// A count is negative, not finite or above [`MAX_COUNT`].
    #[error("bucket le={le} has count {count}, not a number of observations (0 to 2^53)")]
    BadCount {
        /// The bucket's bound.
        le: f64,
        /// Its count.
        count: f64,
    },
}

impl Histogram {
    /// From cumulative counts `(le, count)` in any order, as the `_bucket` series carry them:
    /// rounded to whole observations and made monotonic as `histogram_quantile` does (a
    /// cumulative count below an earlier one is raised to it). Errors: no buckets, no `+Inf`
    /// bucket, a NaN or repeated bound, a negative or non-finite count.
    pub fn from_cumulative(buckets: &[(f64, f64)]) -> Result<Histogram, HistogramError> {
        if buckets.is_empty() {
            return Err(HistogramError::Empty);
        }
        if buckets.len() > MAX_BUCKETS {
            return Err(HistogramError::TooManyBuckets(buckets.len()));
        }
        let mut sorted = buckets.to_vec();
        sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut upper = Vec::with_capacity(sorted.len());
        let mut counts = Vec::with_capacity(sorted.len());
        let mut below = 0u64;
        for (i, &(le, count)) in sorted.iter().enumerate() {
            if le.is_nan() || (i > 0 && sorted[i - 1].0 == le) {
                return Err(HistogramError::BadBound(le));
            }
            if !(0.0..=MAX_COUNT).contains(&count) {
                return Err(HistogramError::BadCount { le, count });
            }
            let cumulative = (count.round() as u64).max(below);
            upper.push(le);
            counts.push(cumulative - below);
            below = cumulative;
        }
        if upper.last() != Some(&f64::INFINITY) {
            return Err(HistogramError::NoInf);
        }
        Ok(Histogram { upper, counts })
    }

    /// From per-bucket counts over `upper` bounds (ascending, the last `+Inf`). Errors as
    /// [`Histogram::from_cumulative`]; the lengths must match (else [`HistogramError::Empty`]).
    pub fn from_counts(upper: &[f64], counts: &[u64]) -> Result<Histogram, HistogramError> {
        if upper.len() != counts.len() {
            return Err(HistogramError::Empty);
        }
        let mut cumulative = 0u64;
        let pairs: Vec<(f64, f64)> = upper
            .iter()
            .zip(counts)
            .map(|(&le, &c)| {
                cumulative += c;
                (le, cumulative as f64)
            })
            .collect();
        Histogram::from_cumulative(&pairs)
    }

    /// Upper bounds, ascending, the last `+Inf`.
    pub fn upper_bounds(&self) -> &[f64] {
        &self.upper
    }

    /// Observations per bucket, aligned with [`Histogram::upper_bounds`].
    pub fn counts(&self) -> &[u64] {
        &self.counts
    }

    /// All observations.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The `q` quantile (`0 ≤ q ≤ 1`) as `histogram_quantile(q, …)` computes it
    /// ([`crate::stats::histogram::histogram_quantile`] of its buckets); `None` without
    /// observations, with fewer than two buckets or `q` outside `[0, 1]`.
    pub fn quantile(&self, q: f64) -> Option<BinnedQuantile> {
        histogram_quantile(&self.upper, &self.counts, q)
    }

    /// This histogram on the coarser `bounds` (each one of its own bounds, `+Inf` included):
    /// the counts of the merged buckets add up. `None` when a bound is not one of its own.
    pub fn coarsen(&self, bounds: &[f64]) -> Option<Histogram> {
        let mut counts = vec![0u64; bounds.len()];
        let mut j = 0;
        for (&u, &c) in self.upper.iter().zip(&self.counts) {
            while j < bounds.len() && bounds[j] < u {
                j += 1;
            }
            *counts.get_mut(j)? += c;
        }
        bounds
            .iter()
            .all(|b| self.upper.contains(b))
            .then(|| Histogram::from_counts(bounds, &counts).ok())
            .flatten()
    }
}

/// Both histograms on the bounds they share (`+Inf` always is one): unchanged when their
/// layouts are equal, else each coarsened (e.g. an SLO threshold added to one window's buckets).
pub fn common_layout(a: &Histogram, b: &Histogram) -> (Histogram, Histogram) {
    if a.upper == b.upper {
        return (a.clone(), b.clone());
    }
    let shared: Vec<f64> = a
        .upper
        .iter()
        .copied()
        .filter(|u| b.upper.contains(u))
        .collect();
    // Both have +Inf, so `shared` is a valid layout of each.
    let coarse = |h: &Histogram| h.coarsen(&shared).unwrap_or_else(|| h.clone());
    (coarse(a), coarse(b))
}

/// Counts drawn from the multinomial distribution of `counts.sum()` trials with the shares
/// `counts[i] / sum`, into `out` (the same length): a chain of binomial draws, each bucket's
/// count from those not yet placed with its share of the remaining probability.
fn multinomial_resample(counts: &[u64], out: &mut [u64], rng: &mut Pcg64Mcg) {
    let total: u64 = counts.iter().sum();
    let (mut left_n, mut left_count) = (total, total);
    for (slot, &c) in out.iter_mut().zip(counts) {
        *slot = if left_n == 0 || c == 0 {
            0
        } else if c >= left_count {
            left_n
        } else {
            let p = c as f64 / left_count as f64;
            Binomial::new(left_n, p).map_or(0, |d| d.sample(rng))
        };
        left_n -= *slot;
        left_count -= c;
    }
}

/// Seeded intervals from [`bootstrap_quantiles`], one entry per quantile asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct QuantileIntervals {
    /// Interval of BEFORE's interpolated quantile (`None`: no observations).
    pub before: Vec<Option<(f64, f64)>>,
    /// As `before`, for AFTER.
    pub after: Vec<Option<(f64, f64)>>,
    /// Interval of the relative change `after / before − 1` (`None`: no observations, or a
    /// resampled BEFORE quantile was 0).
    pub change: Vec<Option<(f64, f64)>>,
}

/// Percentile-bootstrap intervals at `confidence` for each `q` in `qs`: `resamples` times, each
/// window's counts are redrawn (`multinomial_resample`, independently, same totals), the
/// quantiles recomputed ([`Histogram::quantile`]), and the interval is the `(1 ± confidence)/2`
/// quantiles of the resampled values. Both histograms must share their layout
/// ([`common_layout`]); with different layouts or no resamples every interval is `None`. The
/// same `seed` gives the same intervals.
///
/// The intervals cannot be narrower than the bucket resolution allows: a quantile that stays in
/// one bucket in every resample moves only by the interpolation within that bucket.
pub fn bootstrap_quantiles(
    before: &Histogram,
    after: &Histogram,
    qs: &[f64],
    resamples: usize,
    seed: u64,
    confidence: f64,
) -> QuantileIntervals {
    let none = || vec![None; qs.len()];
    if before.upper != after.upper || resamples == 0 {
        return QuantileIntervals {
            before: none(),
            after: none(),
            change: none(),
        };
    }
    let mut rng = Pcg64Mcg::seed_from_u64(seed);
    let k = before.upper.len();
    let (mut rb, mut ra) = (vec![0u64; k], vec![0u64; k]);
    let mut vb: Vec<Vec<f64>> = vec![Vec::with_capacity(resamples); qs.len()];
    let mut va = vb.clone();
    let mut vc = vb.clone();
    let mut change_undefined = vec![false; qs.len()];
    for _ in 0..resamples {
        multinomial_resample(&before.counts, &mut rb, &mut rng);
        multinomial_resample(&after.counts, &mut ra, &mut rng);
        for (i, &q) in qs.iter().enumerate() {
            let b = histogram_quantile(&before.upper, &rb, q).map(|x| x.value);
            let a = histogram_quantile(&after.upper, &ra, q).map(|x| x.value);
            vb[i].extend(b);
            va[i].extend(a);
            match (b, a) {
                (Some(b), Some(a)) if b != 0.0 => vc[i].push(a / b - 1.0),
                _ => change_undefined[i] = true,
            }
        }
    }
    let tail = (1.0 - confidence) / 2.0;
    let interval = |mut v: Vec<f64>, defined: bool| -> Option<(f64, f64)> {
        if !defined || v.len() < resamples {
            return None;
        }
        v.sort_by(f64::total_cmp);
        Some((quantile_type7(&v, tail)?, quantile_type7(&v, 1.0 - tail)?))
    };
    QuantileIntervals {
        before: vb.into_iter().map(|v| interval(v, true)).collect(),
        after: va.into_iter().map(|v| interval(v, true)).collect(),
        change: vc
            .into_iter()
            .zip(change_undefined)
            .map(|(v, undefined)| interval(v, !undefined))
            .collect(),
    }
}

/// Two-sided Mann–Whitney U test of `x` against `y` on bucket counts over the same layout
/// (aligned slices): every bucket is one group of ties, ranked at its mid-rank, with the tie
/// correction of the variance and the continuity correction of [`super::mann_whitney_u`] — the
/// same result as that test on the observations with each replaced by its bucket. `None` when
/// the lengths differ or either side has no observations.
pub fn mann_whitney_binned(x: &[u64], y: &[u64]) -> Option<MannWhitney> {
    if x.len() != y.len() {
        return None;
    }
    let (n1, n2): (u64, u64) = (x.iter().sum(), y.iter().sum());
    if n1 == 0 || n2 == 0 {
        return None;
    }
    let (mut below, mut rank_sum_x, mut tie_term) = (0.0f64, 0.0f64, 0.0f64);
    for (&a, &b) in x.iter().zip(y) {
        let t = (a + b) as f64;
        if t == 0.0 {
            continue;
        }
        // Ranks below + 1 … below + t: their mean.
        let mid_rank = below + (t + 1.0) / 2.0;
        rank_sum_x += mid_rank * a as f64;
        tie_term += t * t * t - t;
        below += t;
    }
    Some(u_test_from_ranks(
        n1 as f64, n2 as f64, rank_sum_x, tie_term,
    ))
}

/// How many observations of a window lie beyond a threshold, counted at a bucket bound.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Share {
    /// The bucket bound counted at: the threshold itself when it is a bound (the daemon adds
    /// each target's SLO thresholds to the buckets), else the nearest finite bound.
    pub bound: f64,
    /// Observations beyond `bound`.
    pub beyond: u64,
    /// All observations.
    pub total: u64,
}

/// The finite bound nearest to `threshold` (the lower one on a tie); `None` without one.
fn nearest_bound(h: &Histogram, threshold: f64) -> Option<(usize, f64)> {
    h.upper
        .iter()
        .copied()
        .enumerate()
        .filter(|(_, u)| u.is_finite())
        .min_by(|a, b| (a.1 - threshold).abs().total_cmp(&(b.1 - threshold).abs()))
}

/// Observations above `threshold` (a latency SLO): those not in a bucket with bound ≤ the
/// [`Share::bound`] used. `None` when the histogram has no finite bound.
pub fn share_above(h: &Histogram, threshold: f64) -> Option<Share> {
    let (i, bound) = nearest_bound(h, threshold)?;
    let at_or_below: u64 = h.counts[..=i].iter().sum();
    Some(Share {
        bound,
        beyond: h.total() - at_or_below,
        total: h.total(),
    })
}

/// Observations at or below `threshold` (a floor such as the tokens/s SLO): those in buckets
/// with bound ≤ the [`Share::bound`] used. `None` when the histogram has no finite bound.
pub fn share_at_or_below(h: &Histogram, threshold: f64) -> Option<Share> {
    let (i, bound) = nearest_bound(h, threshold)?;
    Some(Share {
        bound,
        beyond: h.counts[..=i].iter().sum(),
        total: h.total(),
    })
}

#[cfg(test)]
mod tests;
