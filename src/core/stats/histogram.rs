//! The quantile of histogram bucket counts as Prometheus's `histogram_quantile` computes it: the
//! bucket the rank falls in, and linear interpolation within it. A different definition from
//! the type 7 of raw samples ([`super::quantile_type7`]): a bucket count says how many
//! observations lie between two bounds, not where, so the value is only as fine as the buckets;
//! it matches the dashboards' numbers.

/// A quantile of histogram buckets: the bucket it lies in and the interpolated value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BinnedQuantile {
    /// Lower bound of the bucket (0 for the first bucket when its bound is positive).
    pub lower: f64,
    /// Upper bound of the bucket (`+Inf` for the last).
    pub upper: f64,
    /// Linear interpolation within the bucket, as Prometheus's `histogram_quantile` (in the
    /// `+Inf` bucket: `lower`, the largest finite bound).
    pub value: f64,
}

/// The `q` quantile (`0 ≤ q ≤ 1`) of the per-bucket `counts` (not cumulative: `counts[i]` lie in
/// `(upper[i − 1], upper[i]]`) over the ascending bounds `upper` (the last `+Inf`), as
/// `histogram_quantile(q, …)` computes it: the first bucket whose cumulative count reaches the
/// rank `q·total`, interpolated linearly within it (the first bucket starts at 0 when its bound
/// is positive; in the `+Inf` bucket, the largest finite bound). `None` without observations,
/// with fewer than two buckets or `q` outside `[0, 1]`.
pub fn histogram_quantile(upper: &[f64], counts: &[u64], q: f64) -> Option<BinnedQuantile> {
    if !(0.0..=1.0).contains(&q) || upper.len() < 2 {
        return None;
    }
    let total: u64 = counts.iter().sum();
    if total == 0 {
        return None;
    }
    let rank = q * total as f64;
    let last = upper.len() - 1;
    // The first bucket (before +Inf) whose cumulative count reaches the rank.
    let mut cumulative = 0u64;
    let mut b = last;
    for (i, &c) in counts[..last].iter().enumerate() {
        if (cumulative + c) as f64 >= rank {
            b = i;
            break;
        }
        cumulative += c;
    }
    if b == last {
        let lower = upper[last - 1];
        return Some(BinnedQuantile {
            lower,
            upper: f64::INFINITY,
            value: lower,
        });
    }
    if b == 0 && upper[0] <= 0.0 {
        return Some(BinnedQuantile {
            lower: upper[0],
            upper: upper[0],
            value: upper[0],
        });
    }
    let lower = if b == 0 { 0.0 } else { upper[b - 1] };
    let in_bucket = counts[b] as f64;
    // An empty bucket is only reached for q = 0 (rank 0): the distribution starts at its bound.
    let value = if in_bucket == 0.0 {
        upper[b]
    } else {
        lower + (upper[b] - lower) * ((rank - cumulative as f64) / in_bucket)
    };
    Some(BinnedQuantile {
        lower,
        upper: upper[b],
        value,
    })
}
