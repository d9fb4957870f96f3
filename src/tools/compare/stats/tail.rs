//! The tail of a sample and how it moved: a seeded bootstrap interval of the relative change of a
//! tail quantile (the P95 an SLO states).
//!
//! - [`bootstrap_tail_change`]: the percentile-bootstrap interval of
//!   `Q_after(q) / Q_before(q) − 1`, resampling requests of each run independently, with the
//!   quantile estimated by an [`Estimator`]: type 7 ([`crate::stats::quantile_type7`]) or
//!   Harrell–Davis ([`crate::stats::harrell_davis`]). Which estimator and which confidence the
//!   verdict uses was chosen by simulation (`compare::calibration`, BENCHMARKS.md §6b): linear
//!   interpolation at `1 − α/2`; Harrell–Davis, better calibrated at 95 %, called 1.2 % of A/A
//!   pairs a regression at `1 − α/2`, above the 1 % bound.

use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64Mcg;

use crate::stats::harrell_davis::{harrell_davis_weights, weighted};
use crate::stats::quantile_type7;

/// How a quantile is estimated from a sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Estimator {
    /// Linear interpolation between two order statistics (NumPy's default, Hyndman–Fan 7).
    Interpolated,
    /// The Harrell–Davis weighted mean of all order statistics
    /// ([`crate::stats::harrell_davis::harrell_davis`]).
    HarrellDavis,
}

/// The relative change of one quantile, with its interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TailChange {
    /// The quantile (0.95 for P95).
    pub q: f64,
    /// BEFORE's estimate.
    pub before: f64,
    /// AFTER's estimate.
    pub after: f64,
    /// `after / before − 1`.
    pub change: f64,
    /// Lower end of the bootstrap interval of the change.
    pub low: f64,
    /// Upper end.
    pub high: f64,
    /// The interval's confidence.
    pub confidence: f64,
}

/// A seeded quantile estimator over samples of one size (the Harrell–Davis weights computed
/// once per size).
struct QuantileOf {
    estimator: Estimator,
    q: f64,
    weights: Vec<f64>,
}

impl QuantileOf {
    fn new(estimator: Estimator, q: f64, n: usize) -> QuantileOf {
        let weights = match estimator {
            Estimator::HarrellDavis => harrell_davis_weights(n, q),
            Estimator::Interpolated => Vec::new(),
        };
        QuantileOf {
            estimator,
            q,
            weights,
        }
    }

    fn of(&self, sorted: &[f64]) -> f64 {
        match self.estimator {
            Estimator::HarrellDavis => weighted(sorted, &self.weights),
            Estimator::Interpolated => quantile_type7(sorted, self.q).unwrap_or(f64::NAN),
        }
    }
}

/// One quantile to follow through a bootstrap: which, and estimated how.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spec {
    /// The quantile, `0 < q < 1` (0.95 for P95).
    pub q: f64,
    /// Its estimator.
    pub estimator: Estimator,
}

/// The bootstrap distribution of one quantile's relative change (see [`bootstrap_changes`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Changes {
    /// The quantile and estimator.
    pub spec: Spec,
    /// BEFORE's estimate on the whole sample.
    pub before: f64,
    /// AFTER's estimate on the whole sample.
    pub after: f64,
    /// The resampled relative changes `after* / before* − 1`, ascending.
    pub resampled: Vec<f64>,
}

impl Changes {
    /// `after / before − 1`.
    pub fn change(&self) -> f64 {
        self.after / self.before - 1.0
    }

    /// The percentile interval at `confidence`: the `(1 ± confidence)/2` quantiles of the
    /// resampled changes, with the estimates.
    pub fn interval(&self, confidence: f64) -> TailChange {
        let tail = (1.0 - confidence) / 2.0;
        TailChange {
            q: self.spec.q,
            before: self.before,
            after: self.after,
            change: self.change(),
            low: quantile_type7(&self.resampled, tail).unwrap_or(f64::NAN),
            high: quantile_type7(&self.resampled, 1.0 - tail).unwrap_or(f64::NAN),
            confidence,
        }
    }
}

/// The seeded bootstrap distributions of the relative change of each quantile in `specs` (one
/// resampling shared by all, so the same `seed` gives the same answer): `resamples` times each
/// run is resampled with replacement (same size) and every change recomputed. `None` (per spec)
/// when a sample is empty, `resamples` is 0, or BEFORE's estimate is not positive in the sample
/// or in a resample (no relative change exists).
pub fn bootstrap_changes(
    before: &[f64],
    after: &[f64],
    specs: &[Spec],
    resamples: usize,
    seed: u64,
) -> Vec<Option<Changes>> {
    if before.is_empty() || after.is_empty() || resamples == 0 {
        return vec![None; specs.len()];
    }
    let (mut b, mut a) = (before.to_vec(), after.to_vec());
    b.sort_unstable_by(f64::total_cmp);
    a.sort_unstable_by(f64::total_cmp);
    let on_b: Vec<QuantileOf> = specs
        .iter()
        .map(|s| QuantileOf::new(s.estimator, s.q, b.len()))
        .collect();
    let on_a: Vec<QuantileOf> = specs
        .iter()
        .map(|s| QuantileOf::new(s.estimator, s.q, a.len()))
        .collect();
    let mut rng = Pcg64Mcg::seed_from_u64(seed);
    let mut changes: Vec<Vec<f64>> = vec![Vec::with_capacity(resamples); specs.len()];
    let mut undefined = vec![false; specs.len()];
    let (mut rb, mut ra) = (vec![0.0; b.len()], vec![0.0; a.len()]);
    for _ in 0..resamples {
        resample_sorted(&b, &mut rb, &mut rng);
        resample_sorted(&a, &mut ra, &mut rng);
        for (i, (qb, qa)) in on_b.iter().zip(&on_a).enumerate() {
            let (vb, va) = (qb.of(&rb), qa.of(&ra));
            if vb > 0.0 && va.is_finite() {
                changes[i].push(va / vb - 1.0);
            } else {
                undefined[i] = true;
            }
        }
    }
    changes
        .into_iter()
        .zip(undefined)
        .zip(specs.iter().zip(on_b.iter().zip(&on_a)))
        .map(|((mut c, undefined), (spec, (qb, qa)))| {
            let (vb, va) = (qb.of(&b), qa.of(&a));
            if undefined || vb <= 0.0 || !va.is_finite() {
                return None;
            }
            c.sort_unstable_by(f64::total_cmp);
            Some(Changes {
                spec: *spec,
                before: vb,
                after: va,
                resampled: c,
            })
        })
        .collect()
}

/// Percentile-bootstrap intervals at `confidence` of the relative change of the `q` quantile,
/// one per estimator in `estimators` ([`bootstrap_changes`] with one [`Spec`] per estimator).
pub fn bootstrap_tail_change(
    before: &[f64],
    after: &[f64],
    q: f64,
    estimators: &[Estimator],
    resamples: usize,
    seed: u64,
    confidence: f64,
) -> Vec<Option<TailChange>> {
    let specs: Vec<Spec> = estimators
        .iter()
        .map(|&estimator| Spec { q, estimator })
        .collect();
    bootstrap_changes(before, after, &specs, resamples, seed)
        .into_iter()
        .map(|c| c.map(|c| c.interval(confidence)))
        .collect()
}

/// Fill `out` with `from.len()` draws from `from` with replacement, sorted ascending.
fn resample_sorted(from: &[f64], out: &mut [f64], rng: &mut Pcg64Mcg) {
    for slot in out.iter_mut() {
        *slot = from[rng.random_range(0..from.len())];
    }
    out.sort_unstable_by(f64::total_cmp);
}

#[cfg(test)]
mod tests;
