//! Choosing between two endpoints: which one answers sooner for a given output length.
//!
//! With TTFT the time to the first token and TPOT the time per output token after it (docs/measurement.md:
//! `(last − first) / (N − 1)`), an answer of `N` output tokens ends after about
//! `E2E(N) = TTFT + (N − 1) × TPOT`. Two endpoints A and B take equally long at
//! `N* = 1 + (TTFT_B − TTFT_A) / (TPOT_A − TPOT_B)`: the one with the lower TTFT wins below `N*`,
//! the one with the lower TPOT above. (Example: A 0.2 s and 30 tokens/s, B 0.6 s and 60 tokens/s:
//! `N* − 1 = 0.4 s ÷ (1/30 − 1/60) s = 24` tokens after the first, so B wins from 26 tokens.)
//!
//! The estimates use each run's median TTFT and median TPOT; the intervals are a seeded
//! bootstrap over requests (resampling each run's successful requests, both values together).

use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64Mcg;

use super::input::{LevelKey, Run};
use super::Options;
use crate::stats;

/// Default output lengths (tokens): code completion 5–30, chat 20–80, summaries 300–1,000, batch
/// generation 500–2,000.
pub const TYPICAL_LENGTHS: [u32; 8] = [5, 20, 30, 80, 300, 500, 1000, 2000];

/// The workload a length is typical of (for the table).
pub fn workload(tokens: u32) -> &'static str {
    match tokens {
        0..=19 => "code completion",
        20..=30 => "chat / code completion",
        31..=80 => "chat",
        81..=499 => "summary",
        500..=1000 => "summary / batch",
        _ => "batch generation",
    }
}

/// `TTFT + (tokens − 1) × TPOT`, seconds (`tokens` ≥ 1; 0 is treated as 1).
pub fn expected_e2e(ttft: f64, tpot: f64, tokens: u32) -> f64 {
    ttft + f64::from(tokens.max(1) - 1) * tpot
}

/// The output length `N*` (tokens, fractional) at which A and B take equally long:
/// `1 + (ttft_b − ttft_a) / (tpot_a − tpot_b)`. `None` when one endpoint is at least as fast at
/// every length (`N* < 1`, equal TPOT, or values not finite).
pub fn crossover_tokens(ttft_a: f64, tpot_a: f64, ttft_b: f64, tpot_b: f64) -> Option<f64> {
    let n = 1.0 + (ttft_b - ttft_a) / (tpot_a - tpot_b);
    (n.is_finite() && n >= 1.0).then_some(n)
}

/// A value with its interval (`None` ends: not estimable).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    /// The point estimate.
    pub value: f64,
    /// Interval low end.
    pub low: Option<f64>,
    /// Interval high end.
    pub high: Option<f64>,
}

/// One endpoint's medians.
#[derive(Debug, Clone, PartialEq)]
pub struct Endpoint {
    /// `target` / `model` as the run names them.
    pub label: String,
    /// Median TTFT, seconds.
    pub ttft: f64,
    /// Median TPOT, seconds.
    pub tpot: f64,
    /// Requests with both values.
    pub n: usize,
}

/// Expected E2E for one output length.
#[derive(Debug, Clone, PartialEq)]
pub struct LengthRow {
    /// Output tokens.
    pub tokens: u32,
    /// BEFORE's expected E2E, seconds.
    pub before: Estimate,
    /// AFTER's.
    pub after: Estimate,
}

/// The selection section of a comparison.
#[derive(Debug, Clone, PartialEq)]
pub struct Selection {
    /// BEFORE's endpoint.
    pub before: Endpoint,
    /// AFTER's endpoint.
    pub after: Endpoint,
    /// The crossover output length, tokens (`None`: one endpoint is faster at every length).
    pub crossover: Option<Estimate>,
    /// Expected E2E per length.
    pub lengths: Vec<LengthRow>,
}

/// Median TTFT and median TPOT of one run (or one bootstrap resample of it), seconds.
type Medians = (f64, f64);

/// `(TTFT, TPOT)` of every successful request of the run's level `key` that has both.
fn pairs(run: &Run, key: LevelKey) -> Vec<(f64, f64)> {
    let Some(level) = run.levels.iter().find(|l| l.key == key) else {
        return Vec::new();
    };
    level
        .requests
        .iter()
        .filter(|r| r.success)
        .filter_map(|r| {
            let ttft = r.values[super::Metric::Ttft.index()]?;
            let tpot = r.values[super::Metric::Tpot.index()]?;
            (ttft.is_finite() && tpot.is_finite()).then_some((ttft, tpot))
        })
        .collect()
}

/// Median TTFT and median TPOT of `pairs` (non-empty).
fn medians(pairs: &[(f64, f64)]) -> Option<Medians> {
    let ttft: Vec<f64> = pairs.iter().map(|p| p.0).collect();
    let tpot: Vec<f64> = pairs.iter().map(|p| p.1).collect();
    Some((stats::median(&ttft)?, stats::median(&tpot)?))
}

fn label(run: &Run) -> String {
    format!(
        "{} / {}",
        run.target.as_deref().unwrap_or("?"),
        run.model.as_deref().unwrap_or("?")
    )
}

/// The selection section for two runs of different endpoints, from the first level both runs
/// have (else each run's first level: e.g. a probe-once collection against a bench run). `None`
/// when a run has no request with both TTFT and TPOT.
pub fn select(before: &Run, after: &Run, options: &Options) -> Option<Selection> {
    let common = before
        .levels
        .iter()
        .map(|l| l.key)
        .find(|k| after.levels.iter().any(|l| l.key == *k));
    let (kb, ka) = match common {
        Some(k) => (k, k),
        None => (before.levels.first()?.key, after.levels.first()?.key),
    };
    let (pb, pa) = (pairs(before, kb), pairs(after, ka));
    let (mb, ma) = (medians(&pb)?, medians(&pa)?);
    let mut rng = Pcg64Mcg::seed_from_u64(options.seed);
    let resample = |p: &[(f64, f64)], rng: &mut Pcg64Mcg| -> Vec<(f64, f64)> {
        (0..p.len())
            .map(|_| p[rng.random_range(0..p.len())])
            .collect()
    };
    let boots: Vec<(Medians, Medians)> = (0..options.resamples)
        .filter_map(|_| {
            let b = medians(&resample(&pb, &mut rng))?;
            let a = medians(&resample(&pa, &mut rng))?;
            Some((b, a))
        })
        .collect();
    let tail = options.rule.alpha / 2.0;
    let interval = |mut v: Vec<f64>| -> (Option<f64>, Option<f64>) {
        v.sort_by(f64::total_cmp);
        (
            stats::quantile_type7(&v, tail),
            stats::quantile_type7(&v, 1.0 - tail),
        )
    };
    let crossover = crossover_tokens(mb.0, mb.1, ma.0, ma.1).map(|value| {
        let found: Vec<f64> = boots
            .iter()
            .filter_map(|(b, a)| crossover_tokens(b.0, b.1, a.0, a.1))
            .collect();
        // Where more than the tail share of resamples has no crossover, the interval is open.
        let (low, high) = if (found.len() as f64) >= (1.0 - tail) * boots.len() as f64 {
            interval(found)
        } else {
            (None, None)
        };
        Estimate { value, low, high }
    });
    let e2e = |m: Medians, tokens: u32, side: fn(&(Medians, Medians)) -> Medians| {
        let (low, high) = interval(
            boots
                .iter()
                .map(|x| {
                    let s = side(x);
                    expected_e2e(s.0, s.1, tokens)
                })
                .collect(),
        );
        Estimate {
            value: expected_e2e(m.0, m.1, tokens),
            low,
            high,
        }
    };
    let lengths = options
        .lengths
        .iter()
        .map(|&tokens| LengthRow {
            tokens,
            before: e2e(mb, tokens, |x| x.0),
            after: e2e(ma, tokens, |x| x.1),
        })
        .collect();
    Some(Selection {
        before: Endpoint {
            label: label(before),
            ttft: mb.0,
            tpot: mb.1,
            n: pb.len(),
        },
        after: Endpoint {
            label: label(after),
            ttft: ma.0,
            tpot: ma.1,
            n: pa.len(),
        },
        crossover,
        lengths,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crossover_of_the_issue_example_is_24_tokens_after_the_first() {
        // A: TTFT 0.2 s, 30 tokens/s; B: TTFT 0.6 s, 60 tokens/s. Analytic: 0.4 ÷ (1/30 − 1/60) = 24.
        let n = crossover_tokens(0.2, 1.0 / 30.0, 0.6, 1.0 / 60.0).unwrap();
        assert!((n - 1.0 - 24.0).abs() < 1e-9, "{n}");
        // Symmetric in the order of the endpoints.
        let m = crossover_tokens(0.6, 1.0 / 60.0, 0.2, 1.0 / 30.0).unwrap();
        assert!((n - m).abs() < 1e-9);
        // At N*, both take the same time; below it A is faster, above it B.
        let at = |ttft, tpot, n: u32| expected_e2e(ttft, tpot, n);
        assert!((at(0.2, 1.0 / 30.0, 25) - at(0.6, 1.0 / 60.0, 25)).abs() < 1e-9);
        assert!(at(0.2, 1.0 / 30.0, 20) < at(0.6, 1.0 / 60.0, 20));
        assert!(at(0.2, 1.0 / 30.0, 80) > at(0.6, 1.0 / 60.0, 80));
    }

    #[test]
    fn no_crossover_when_one_endpoint_dominates() {
        // Faster first token and faster decode: A wins at every length.
        assert_eq!(crossover_tokens(0.2, 0.01, 0.6, 0.02), None);
        assert_eq!(crossover_tokens(0.2, 0.02, 0.6, 0.02), None);
    }

    #[test]
    fn expected_e2e_counts_decode_steps_after_the_first_token() {
        assert_eq!(expected_e2e(0.5, 0.1, 1), 0.5);
        assert_eq!(expected_e2e(0.5, 0.1, 0), 0.5);
        assert!((expected_e2e(0.5, 0.1, 11) - 1.5).abs() < 1e-12);
    }
}
