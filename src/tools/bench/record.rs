//! One request of a load test as measured: the probe's [`Measurement`] re-based on the
//! request's scheduled send time (open loop: no coordinated omission) and its failure reason.

use std::time::Duration;

use crate::measure::{FailureReason, Measurement, ProbeOutcome};

/// The numbers of one successful request; latencies in seconds from the **scheduled** send.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// TTFT + lateness.
    pub ttft: f64,
    /// Time to first output token + lateness.
    pub time_to_first_output_token: Option<f64>,
    /// TPOT (not affected by lateness).
    pub tpot: Option<f64>,
    /// E2E + lateness.
    pub e2e: f64,
    /// Output tokens (N, from the server's count when it gave one).
    pub output_tokens: u64,
    /// Prompt tokens the server reported, if it did.
    pub prompt_tokens: Option<u64>,
    /// The server's own count of generated tokens besides usage (llama.cpp
    /// `timings.predicted_n`, Ollama `eval_count`, TGI `generated_tokens`), if it gave one.
    pub server_output_tokens: Option<u64>,
    /// Per-request output tokens per second (1 / TPOT).
    pub output_tokens_per_second: Option<f64>,
    /// Every gap between token events, seconds.
    pub inter_token_latencies: Vec<f64>,
    /// Prefill speed seen by the client, prompt tokens per second of TTFT (a generated prompt
    /// only; from the actual send, as the daemon's).
    pub prefill_tokens_per_second: Option<f64>,
    /// Prefill speed by the server's own clock, where it reports its prefill time.
    pub server_prefill_tokens_per_second: Option<f64>,
}

/// One request of one level.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestRecord {
    /// Index of the level in the plan.
    pub level: usize,
    /// Order of sending within the level (0-based).
    pub index: u64,
    /// Excluded from the statistics (`--warmup`).
    pub warmup: bool,
    /// Scheduled send, from the level's start.
    pub scheduled: Duration,
    /// How late the generator actually sent it (`sent − scheduled`; 0 in closed loop, where a
    /// request is due when it is sent).
    pub lateness: Duration,
    /// When the request ended (success or failure), from the level's start.
    pub ended: Duration,
    /// The measurement, or the failure reason and its detail.
    pub result: Result<Sample, (FailureReason, String)>,
}

impl Sample {
    /// `m` with its latencies moved from the actual to the scheduled send (`+ lateness`).
    pub fn from_measurement(
        m: &Measurement,
        lateness: Duration,
        prompt: Option<u64>,
        server_output_tokens: Option<u64>,
    ) -> Sample {
        let late = |d: Duration| (d + lateness).as_secs_f64();
        Sample {
            ttft: late(m.ttft),
            time_to_first_output_token: m.time_to_first_output_token.map(late),
            tpot: m.tpot.map(|d| d.as_secs_f64()),
            e2e: late(m.e2e),
            output_tokens: m.output_tokens,
            prompt_tokens: prompt,
            server_output_tokens,
            output_tokens_per_second: m.output_tokens_per_second,
            inter_token_latencies: m
                .inter_token_latencies
                .iter()
                .map(Duration::as_secs_f64)
                .collect(),
            prefill_tokens_per_second: m.prefill_tokens_per_second,
            server_prefill_tokens_per_second: m.server_prefill_tokens_per_second,
        }
    }
}

impl RequestRecord {
    /// The record of `outcome`, sent `lateness` after `scheduled` and ended at `ended`.
    pub fn new(
        level: usize,
        index: u64,
        warmup: bool,
        scheduled: Duration,
        lateness: Duration,
        ended: Duration,
        outcome: &ProbeOutcome,
    ) -> Self {
        let obs = &outcome.observations;
        let (prompt, server) = (obs.usage.prompt_tokens, obs.server_timings.predicted_tokens);
        let result = match &outcome.result {
            Ok(m) => Ok(Sample::from_measurement(m, lateness, prompt, server)),
            Err(f) => Err((f.reason, f.detail.clone())),
        };
        RequestRecord {
            level,
            index,
            warmup,
            scheduled,
            lateness,
            ended,
            result,
        }
    }
}
