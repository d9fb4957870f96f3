//! The statistics of one level from its request records, and the SLA capacity of a sweep. Pure
//! functions, no IO.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::record::{RequestRecord, Sample};
use super::stats::Summary;
use crate::config::Slo;

/// The load of one level: closed loop (virtual users), open loop (requests per second), or a
/// prompt length (a generated prompt of that size, closed loop at a fixed concurrency).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Load {
    /// C virtual users, each sending its next request when its previous stream ends.
    Concurrency(u32),
    /// Poisson arrivals at this many requests per second.
    Rate(f64),
    /// `--prompt-tokens`: the scenario's messages replaced by a generated prompt of `tokens`
    /// whitespace-separated words ([`crate::config::long_prompt::LongPrompt`], its system
    /// messages kept), sent by `concurrency` virtual users as [`Load::Concurrency`] does.
    Prompt {
        /// The generated prompt's size, tokens (words).
        tokens: u32,
        /// Virtual users (1 by default: TTFT without queueing).
        concurrency: u32,
    },
}

impl Load {
    /// `concurrency 4` / `rate 2 req/s` / `prompt 4000 tokens` (`… at concurrency 2` beyond
    /// one user).
    pub fn label(&self) -> String {
        match self {
            Load::Concurrency(c) => format!("concurrency {c}"),
            Load::Rate(r) => format!("rate {r} req/s"),
            Load::Prompt {
                tokens,
                concurrency: 1,
            } => format!("prompt {tokens} tokens"),
            Load::Prompt {
                tokens,
                concurrency,
            } => format!("prompt {tokens} tokens at concurrency {concurrency}"),
        }
    }

    /// The level's x value on charts.
    pub fn x(&self) -> f64 {
        match *self {
            Load::Concurrency(c) => f64::from(c),
            Load::Rate(r) => r,
            Load::Prompt { tokens, .. } => f64::from(tokens),
        }
    }

    /// The virtual users of a closed-loop level (concurrency or prompt length); `None` for
    /// open loop.
    pub fn users(&self) -> Option<u32> {
        match *self {
            Load::Concurrency(c) | Load::Prompt { concurrency: c, .. } => Some(c),
            Load::Rate(_) => None,
        }
    }

    /// The generated prompt's size of a prompt-length level.
    pub fn prompt_tokens(&self) -> Option<u32> {
        match *self {
            Load::Prompt { tokens, .. } => Some(tokens),
            _ => None,
        }
    }
}

/// Requests of a level (warmup excluded).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Counts {
    /// Requests sent (completed or failed).
    pub sent: u64,
    /// Requests that produced a measurement.
    pub succeeded: u64,
    /// Requests that failed.
    pub failed: u64,
    /// Failures per reason (the daemon's `reason` labels).
    pub failures_by_reason: BTreeMap<&'static str, u64>,
}

/// The statistics of one level.
#[derive(Debug, Clone, PartialEq)]
pub struct LevelStats {
    /// The level's load.
    pub load: Load,
    /// Request counts.
    pub requests: Counts,
    /// TTFT, seconds from the scheduled send.
    pub ttft: Summary,
    /// Time to first output token, seconds.
    pub time_to_first_output_token: Summary,
    /// TPOT, seconds.
    pub tpot: Summary,
    /// Inter-token latency pooled over every gap of every request, seconds.
    pub itl: Summary,
    /// E2E, seconds.
    pub e2e: Summary,
    /// Per-request output tokens per second.
    pub output_tokens_per_second: Summary,
    /// Generator lateness (open loop), seconds.
    pub lateness: Summary,
    /// Prompt tokens as the server counted them (its usage), per successful request.
    pub prompt_tokens: Summary,
    /// Prefill speed seen by the client, prompt tokens per second of TTFT (generated prompts
    /// only: `--prompt-tokens` or a scenario's `prompt_tokens:`).
    pub prefill_tokens_per_second: Summary,
    /// Prefill speed by the server's own clock, where it reports its prefill time.
    pub server_prefill_tokens_per_second: Summary,
    /// Output tokens of all measured requests.
    pub output_tokens: u64,
    /// The measurement window: earliest scheduled send to the last end, seconds.
    pub wall_seconds: f64,
    /// Output tokens across all streams / wall time.
    pub output_throughput: f64,
    /// Succeeded requests / wall time.
    pub request_throughput: f64,
    /// Requests meeting every SLO of the target / wall time.
    pub goodput: f64,
    /// Share of sent requests meeting every SLO (0..1).
    pub slo_attainment: f64,
}

/// Whether one request met every per-request SLO: TTFT ≤ the P95 objective and output tokens/s
/// ≥ the floor (a request with a single token has no rate and is judged on TTFT).
pub fn meets_slo(s: &Sample, slo: &Slo) -> bool {
    s.ttft <= slo.ttft_p95.as_secs_f64()
        && s.output_tokens_per_second
            .is_none_or(|r| r >= slo.output_tokens_per_second_min)
}

/// The statistics of `load` from its `records` (warmup records are skipped).
pub fn level_stats(load: Load, records: &[&RequestRecord], slo: &Slo) -> LevelStats {
    let measured: Vec<&RequestRecord> = records.iter().copied().filter(|r| !r.warmup).collect();
    let mut counts = Counts::default();
    let ok: Vec<&Sample> = measured
        .iter()
        .filter_map(|r| r.result.as_ref().ok())
        .collect();
    for r in &measured {
        counts.sent += 1;
        if let Err((reason, _)) = &r.result {
            counts.failed += 1;
            *counts
                .failures_by_reason
                .entry(reason.as_str())
                .or_default() += 1;
        }
    }
    counts.succeeded = ok.len() as u64;
    let col = |f: &dyn Fn(&Sample) -> Option<f64>| -> Summary {
        Summary::of(&ok.iter().filter_map(|s| f(s)).collect::<Vec<_>>())
    };
    let itls: Vec<f64> = ok
        .iter()
        .flat_map(|s| s.inter_token_latencies.iter().copied())
        .collect();
    let start = measured
        .iter()
        .map(|r| r.scheduled)
        .min()
        .unwrap_or_default();
    let end = measured.iter().map(|r| r.ended).max().unwrap_or_default();
    let wall = end.saturating_sub(start).as_secs_f64();
    let per_sec = |x: f64| if wall > 0.0 { x / wall } else { 0.0 };
    let output_tokens: u64 = ok.iter().map(|s| s.output_tokens).sum();
    let good = ok.iter().filter(|s| meets_slo(s, slo)).count() as f64;
    let lateness: Vec<f64> = measured.iter().map(|r| r.lateness.as_secs_f64()).collect();
    LevelStats {
        load,
        ttft: col(&|s| Some(s.ttft)),
        time_to_first_output_token: col(&|s| s.time_to_first_output_token),
        tpot: col(&|s| s.tpot),
        itl: Summary::of(&itls),
        e2e: col(&|s| Some(s.e2e)),
        output_tokens_per_second: col(&|s| s.output_tokens_per_second),
        lateness: Summary::of(&lateness),
        prompt_tokens: col(&|s| s.prompt_tokens.map(|n| n as f64)),
        prefill_tokens_per_second: col(&|s| s.prefill_tokens_per_second),
        server_prefill_tokens_per_second: col(&|s| s.server_prefill_tokens_per_second),
        output_tokens,
        wall_seconds: wall,
        output_throughput: per_sec(output_tokens as f64),
        request_throughput: per_sec(ok.len() as f64),
        goodput: per_sec(good),
        slo_attainment: if counts.sent > 0 {
            good / counts.sent as f64
        } else {
            0.0
        },
        requests: counts,
    }
}

/// The SLA criteria a level is judged on (in JSON: `ttft_p95`, `output_tokens_per_second_p5`,
/// `failure_ratio`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Criterion {
    /// P95 TTFT above the target's `slo.ttft_p95`.
    TtftP95,
    /// P5 per-request output tokens/s below `slo.output_tokens_per_second_min`.
    OutputTokensPerSecondP5,
    /// Failed / sent above `--max-failure-ratio`.
    FailureRatio,
}

/// How one level stands against the SLA.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// Criteria the level breaks (empty: it meets the SLA).
    pub broken_by: Vec<Criterion>,
    /// Criteria whose 95 % CI crosses the threshold: too few samples to tell.
    pub straddles: Vec<Criterion>,
}

/// Judges `s` against `slo` and the largest acceptable failure ratio.
pub fn verdict(s: &LevelStats, slo: &Slo, max_failure_ratio: f64) -> Verdict {
    let ttft_limit = slo.ttft_p95.as_secs_f64();
    let floor = slo.output_tokens_per_second_min;
    let mut broken_by = Vec::new();
    let mut straddles = Vec::new();
    // No successful request at all breaks the latency criteria too.
    match s.ttft.p95 {
        Some(p) if p <= ttft_limit => {}
        _ => broken_by.push(Criterion::TtftP95),
    }
    if s.output_tokens_per_second.p5.is_some_and(|p| p < floor) {
        broken_by.push(Criterion::OutputTokensPerSecondP5);
    }
    let failure_ratio = if s.requests.sent > 0 {
        s.requests.failed as f64 / s.requests.sent as f64
    } else {
        1.0
    };
    if failure_ratio > max_failure_ratio {
        broken_by.push(Criterion::FailureRatio);
    }
    // A side the sample count cannot bound is taken at the sample's min or max: nothing
    // observed lies beyond it, and judging it unbounded would flag every small level.
    let crosses = |m: &Summary, ci: [Option<f64>; 2], t: f64| {
        let low = ci[0].or(m.min);
        let high = ci[1].or(m.max);
        m.n > 0 && low.is_some_and(|l| l <= t) && high.is_some_and(|h| h >= t)
    };
    if crosses(&s.ttft, s.ttft.p95_ci, ttft_limit) {
        straddles.push(Criterion::TtftP95);
    }
    let tps = &s.output_tokens_per_second;
    if crosses(tps, tps.p5_ci, floor) {
        straddles.push(Criterion::OutputTokensPerSecondP5);
    }
    Verdict {
        broken_by,
        straddles,
    }
}

/// The SLA capacity of a sweep (levels in increasing load order).
#[derive(Debug, Clone, PartialEq)]
pub struct Capacity {
    /// The highest level below the first breaking one that meets the SLA; `None` when the first
    /// level already breaks it.
    pub capacity: Option<Load>,
    /// The first level that breaks the SLA; `None` when every level meets it.
    pub broken_at: Option<Load>,
    /// What broke at `broken_at`.
    pub broken_by: Vec<Criterion>,
    /// Levels whose CI crosses a threshold: the knee is not established there.
    pub straddles: Vec<(Load, Vec<Criterion>)>,
}

/// The SLA capacity from each level's statistics and verdict, in sweep order.
pub fn capacity(levels: &[(LevelStats, Verdict)]) -> Capacity {
    let mut out = Capacity {
        capacity: None,
        broken_at: None,
        broken_by: Vec::new(),
        straddles: Vec::new(),
    };
    for (s, v) in levels {
        if !v.straddles.is_empty() {
            out.straddles.push((s.load, v.straddles.clone()));
        }
        if out.broken_at.is_some() {
            continue;
        }
        if v.broken_by.is_empty() {
            out.capacity = Some(s.load);
        } else {
            out.broken_at = Some(s.load);
            out.broken_by = v.broken_by.clone();
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::measure::FailureReason;

    fn rec(index: u64, ttft: f64, tps: f64, ok: bool) -> RequestRecord {
        let sample = Sample {
            ttft,
            time_to_first_output_token: Some(ttft),
            tpot: Some(1.0 / tps),
            e2e: ttft + 1.0,
            output_tokens: 10,
            prompt_tokens: None,
            server_output_tokens: None,
            output_tokens_per_second: Some(tps),
            inter_token_latencies: vec![0.1, 0.1],
            prefill_tokens_per_second: None,
            server_prefill_tokens_per_second: None,
        };
        RequestRecord {
            level: 0,
            index,
            warmup: index == 0,
            scheduled: Duration::from_secs(index),
            lateness: Duration::ZERO,
            ended: Duration::from_secs(index + 2),
            result: if ok {
                Ok(sample)
            } else {
                Err((FailureReason::HttpStatus, "500".into()))
            },
        }
    }

    #[test]
    fn level_counts_throughput_goodput_and_failures() {
        let rs: Vec<RequestRecord> = vec![
            rec(0, 9.0, 1.0, true), // warmup: ignored
            rec(1, 0.1, 50.0, true),
            rec(2, 0.5, 50.0, true), // misses the TTFT objective
            rec(3, 0.1, 50.0, false),
        ];
        let refs: Vec<&RequestRecord> = rs.iter().collect();
        let s = level_stats(Load::Concurrency(2), &refs, &Slo::default());
        assert_eq!(
            (s.requests.sent, s.requests.succeeded, s.requests.failed),
            (3, 2, 1)
        );
        assert_eq!(s.requests.failures_by_reason["http_status"], 1);
        assert_eq!(s.output_tokens, 20);
        // Window: scheduled 1 s → ended 5 s.
        assert!((s.wall_seconds - 4.0).abs() < 1e-9);
        assert!((s.output_throughput - 5.0).abs() < 1e-9);
        assert!((s.goodput - 0.25).abs() < 1e-9);
        assert!((s.slo_attainment - 1.0 / 3.0).abs() < 1e-9);
        assert_eq!(s.itl.n, 4);
        let v = verdict(&s, &Slo::default(), 0.5);
        assert_eq!(v.broken_by, vec![Criterion::TtftP95]);
    }

    #[test]
    fn capacity_is_the_last_level_before_the_first_break() {
        let slo = Slo::default();
        let level = |c: u32, ttft: f64| {
            let rs: Vec<RequestRecord> = (1..=40).map(|i| rec(i, ttft, 50.0, true)).collect();
            let refs: Vec<&RequestRecord> = rs.iter().collect();
            let s = level_stats(Load::Concurrency(c), &refs, &slo);
            let v = verdict(&s, &slo, 0.0);
            (s, v)
        };
        let cap = capacity(&[level(1, 0.2), level(2, 0.25), level(4, 0.4), level(8, 0.2)]);
        assert_eq!(cap.capacity, Some(Load::Concurrency(2)));
        assert_eq!(cap.broken_at, Some(Load::Concurrency(4)));
        assert_eq!(cap.broken_by, vec![Criterion::TtftP95]);
        assert!(cap.straddles.is_empty());
    }

    #[test]
    fn a_ci_across_the_threshold_straddles() {
        let slo = Slo::default();
        // Eight requests at 250 ms, two at 350 ms: P95 is 350 ms, but 10 samples put the
        // CI's lower end at 250 ms.
        let rs: Vec<RequestRecord> = (1..=10)
            .map(|i| rec(i, if i <= 8 { 0.25 } else { 0.35 }, 50.0, true))
            .collect();
        let refs: Vec<&RequestRecord> = rs.iter().collect();
        let s = level_stats(Load::Rate(1.0), &refs, &slo);
        let v = verdict(&s, &slo, 0.0);
        assert_eq!(v.broken_by, vec![Criterion::TtftP95]);
        assert_eq!(v.straddles, vec![Criterion::TtftP95]);
    }
}
