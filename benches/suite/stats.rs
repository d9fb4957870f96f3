//! Percentiles and Markdown rows.

/// Nearest-rank percentile of sorted values (p in 0..=100).
pub fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// A named sample of values in milliseconds.
pub struct Dist {
    pub name: String,
    pub v: Vec<f64>,
}

impl Dist {
    pub fn new(name: impl Into<String>) -> Dist {
        Dist {
            name: name.into(),
            v: Vec::new(),
        }
    }

    pub fn push(&mut self, ms: f64) {
        self.v.push(ms);
    }

    /// `(n, min, p50, p99, max)`.
    pub fn summary(&mut self) -> (usize, f64, f64, f64, f64) {
        self.v.sort_by(f64::total_cmp);
        let v = &self.v;
        (
            v.len(),
            v.first().copied().unwrap_or(f64::NAN),
            pct(v, 50.0),
            pct(v, 99.0),
            v.last().copied().unwrap_or(f64::NAN),
        )
    }

    pub fn p99(&mut self) -> f64 {
        self.summary().3
    }
}

pub const HEADER: &str =
    "| quantity | n | min ms | P50 ms | P99 ms | max ms |\n|---|---:|---:|---:|---:|---:|";

/// One Markdown row.
pub fn row(d: &mut Dist) -> String {
    let (n, min, p50, p99, max) = d.summary();
    format!(
        "| {} | {n} | {min:.3} | {p50:.3} | {p99:.3} | {max:.3} |",
        d.name
    )
}

/// Milliseconds of a signed difference of two durations in seconds.
pub fn ms(secs: f64) -> f64 {
    secs * 1e3
}

/// A classic histogram of a text-format `/metrics` body: `(le, cumulative count)` of every
/// `{name}_bucket` line (one series: the first one's buckets, in order), or empty if absent.
pub fn buckets(body: &str, name: &str) -> Vec<(f64, f64)> {
    let prefix = format!("{name}_bucket{{");
    let mut out: Vec<(f64, f64)> = Vec::new();
    for line in body.lines().filter(|l| l.starts_with(&prefix)) {
        let Some(le) = line.split("le=\"").nth(1).and_then(|s| s.split('"').next()) else {
            continue;
        };
        let le = if le == "+Inf" {
            f64::INFINITY
        } else {
            le.parse().expect("a bucket bound")
        };
        let count: f64 = line
            .rsplit(' ')
            .next()
            .and_then(|v| v.parse().ok())
            .expect("a bucket count");
        if out.last().is_some_and(|&(prev, _)| le <= prev) {
            break; // the next series
        }
        out.push((le, count));
    }
    out
}

/// Prometheus's `histogram_quantile(q, …)` of cumulative `buckets` (`q` in 0..=1), in the
/// buckets' unit: linear interpolation inside the bucket holding rank `q × count`; the highest
/// finite bound when it falls in `+Inf`. NaN without observations.
pub fn histogram_quantile(q: f64, buckets: &[(f64, f64)]) -> f64 {
    let Some(&(_, total)) = buckets.last() else {
        return f64::NAN;
    };
    if total == 0.0 {
        return f64::NAN;
    }
    let rank = q * total;
    let (mut lower, mut below) = (0.0, 0.0);
    for &(le, count) in buckets {
        if count >= rank {
            if le.is_infinite() {
                return lower;
            }
            if count == below {
                return le;
            }
            return lower + (le - lower) * (rank - below) / (count - below);
        }
        (lower, below) = (le, count);
    }
    lower
}
