//! Probe outcomes made up in the test, for feeding `Metrics` known numbers without a stream.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use llm_probe::measure::{Measurement, Observations, ProbeOutcome, TokenCountSource};

/// A successful probe of (`local`, `m`, `chat`) with TTFT `ttft` and fixed other numbers:
/// TPOT 20 ms (50 tokens/s), 4 tokens, gaps of 19, 20 and 21 ms, E2E = TTFT + 60 ms.
pub fn success(ttft: Duration) -> ProbeOutcome {
    let ms = Duration::from_millis;
    ProbeOutcome {
        target: Arc::from("local"),
        scenario: Arc::from("chat"),
        model: Arc::from("m"),
        replica: Arc::from(""),
        started_at: SystemTime::now(),
        observations: Observations::new(Instant::now()),
        result: Ok(Measurement {
            ttft,
            time_to_first_output_token: Some(ttft),
            tpot: Some(ms(20)),
            output_tokens_per_second: Some(50.0),
            e2e: ttft + ms(60),
            output_tokens: 4,
            token_count_source: TokenCountSource::Server,
            token_events: 4,
            inter_token_latencies: vec![ms(19), ms(20), ms(21)],
            server_prefill: None,
            ttft_overhead: None,
            ttft_split: Default::default(),
            prefill_tokens_per_second: None,
            server_prefill_tokens_per_second: None,
        }),
    }
}
