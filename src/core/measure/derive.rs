//! The derived numbers of one probe, as defined in docs/measurement.md ("Marks and definitions").

use std::time::Duration;

use super::observations::{Anomaly, Observations};
use super::split::TtftSplit;

/// Where N (output tokens) came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenCountSource {
    /// The usage object of the stream (`usage.completion_tokens`, Anthropic `output_tokens`).
    Usage,
    /// Another count of the server's own (llama.cpp `timings.predicted_n`, Ollama `eval_count`,
    /// TGI `details.generated_tokens`).
    Server,
    /// The number of token-bearing events (the server gave no count).
    Events,
}

impl TokenCountSource {
    /// `usage`, `server` or `events`.
    pub fn as_str(self) -> &'static str {
        match self {
            TokenCountSource::Usage => "usage",
            TokenCountSource::Server => "server",
            TokenCountSource::Events => "events",
        }
    }
}

/// The numbers of one successful probe. All durations are measured on the monotonic clock.
#[derive(Debug, Clone, PartialEq)]
pub struct Measurement {
    /// TTFT = `first_token − sent` (reasoning text counts as a token).
    pub ttft: Duration,
    /// Time to first output token = `first_output − sent`; `None` when only reasoning arrived
    /// (e.g. `max_tokens` ran out inside the reasoning).
    pub time_to_first_output_token: Option<Duration>,
    /// TPOT = `(last_token − first_token) / (N − 1)`; `None` when N < 2 or every token arrived in
    /// one read (the span is zero, so there is nothing to divide).
    pub tpot: Option<Duration>,
    /// Output tokens per second = `(N − 1) / (last_token − first_token)` = 1 / TPOT, tokens/s.
    pub output_tokens_per_second: Option<f64>,
    /// E2E = `ended − sent`.
    pub e2e: Duration,
    /// N, output tokens (reasoning included).
    pub output_tokens: u64,
    /// Where N came from.
    pub token_count_source: TokenCountSource,
    /// Token-bearing events seen (a chunk carrying k tokens is one event).
    pub token_events: usize,
    /// Every gap between consecutive token-bearing events, in order: `token_events − 1` values.
    pub inter_token_latencies: Vec<Duration>,
    /// The server's own prompt processing (prefill) time, when it reports one (llama.cpp
    /// `timings.prompt_ms`, Ollama `prompt_eval_duration`).
    pub server_prefill: Option<Duration>,
    /// TTFT minus everything the server says it spent before the first token (model load +
    /// prefill): network, TLS, gateways and queueing in front of the server. Clamped at zero;
    /// `None` without [`Measurement::server_prefill`].
    pub ttft_overhead: Option<Duration>,
    /// TTFT split into the server's reported queue wait, model load and prefill and the rest
    /// (docs/measurement.md "TTFT split"); empty when the server reported none of them.
    pub ttft_split: TtftSplit,
    /// Prefill speed seen by the client, prompt tokens per second of TTFT: the tokens the
    /// server had to prefill (its prompt count, else the generated size, less its cached
    /// tokens) divided by TTFT. Only for a generated long prompt (`prompt_tokens:`), where
    /// prefill dominates TTFT; see `prefill_speeds`.
    pub prefill_tokens_per_second: Option<f64>,
    /// Prefill speed by the server's own clock: the tokens it says it evaluated (llama.cpp
    /// `timings.prompt_n`, Ollama `prompt_eval_count`), else the same count as above, divided by
    /// [`Measurement::server_prefill`]. Only for a generated long prompt.
    pub server_prefill_tokens_per_second: Option<f64>,
}

/// Tokens a server may credibly generate beyond twice the request's token limit.
pub const OUTPUT_ALLOWANCE: u64 = 64;
/// Tokens one token event may credibly carry (speculative decoding, a server's chunking).
pub const MAX_TOKENS_PER_EVENT: u64 = 16;
/// Prompt tokens a server may credibly count beyond the request body's bytes: a chat template,
/// a hidden system prompt, tool definitions rendered as text.
pub const PROMPT_ALLOWANCE: u64 = 65_536;

/// The largest output count the server may credibly report for `obs`: twice the request's
/// token limit plus [`OUTPUT_ALLOWANCE`] (a limit the body did not show: `u32::MAX`), or
/// [`MAX_TOKENS_PER_EVENT`] per token event, whichever is larger.
pub fn output_count_limit(obs: &Observations) -> u64 {
    let asked = obs.asked.output_tokens.unwrap_or(u32::MAX.into());
    let events = obs.timeline.token_events.len() as u64;
    (asked.saturating_mul(2).saturating_add(OUTPUT_ALLOWANCE))
        .max(events.saturating_mul(MAX_TOKENS_PER_EVENT))
}

/// The largest prompt count the server may credibly report for `obs`: the request body's bytes
/// (every prompt token stands for at least one of them) plus [`PROMPT_ALLOWANCE`]; an unknown
/// body counts as `u32::MAX` bytes.
pub fn prompt_count_limit(obs: &Observations) -> u64 {
    let bytes = obs.asked.body_bytes.unwrap_or(u32::MAX.into());
    bytes.saturating_add(PROMPT_ALLOWANCE)
}

/// Forgets the counts the server reported that are far above what the probe asked for (see
/// `output_count_limit`, `prompt_count_limit`; cached prompt tokens above the prompt's
/// limit or above the prompt's own count too): a server that says it generated 2^64 − 1
/// tokens for a 16-token request is as wrong as one that counts fewer tokens than it streamed, and its number must reach no
/// histogram, counter or cost. Returns whether a count was forgotten (the caller records
/// [`Anomaly::CountAboveRequest`]).
pub fn discard_incredible_counts(obs: &mut Observations) -> bool {
    let (output, prompt) = (output_count_limit(obs), prompt_count_limit(obs));
    let forget = |n: &mut Option<u64>, limit: u64| {
        let above = n.is_some_and(|n| n > limit);
        if above {
            *n = None;
        }
        above
    };
    let output_forgotten = forget(&mut obs.usage.completion_tokens, output)
        | forget(&mut obs.server_timings.predicted_tokens, output);
    let prompt_forgotten = forget(&mut obs.usage.prompt_tokens, prompt)
        | forget(&mut obs.server_timings.prompt_tokens, prompt);
    // Cached prompt tokens are part of the prompt: no more of them than the prompt has.
    let cached = obs.usage.prompt_tokens.map_or(prompt, |n| n.min(prompt));
    let cached_forgotten = forget(&mut obs.usage.cached_prompt_tokens, cached);
    obs.output_count_forgotten |= output_forgotten;
    output_forgotten || prompt_forgotten || cached_forgotten
}

/// N and its source: the server's usage when present, else another server count, else the
/// number of token-bearing events. Every token-bearing event carries at least one token, so a
/// server count below the number of events (0 included) is impossible and not believed: the
/// events are counted instead (and [`derived_anomalies`] reports `count_below_events`).
pub fn output_tokens(obs: &Observations) -> (u64, TokenCountSource) {
    let events = obs.timeline.token_events.len() as u64;
    let credible = |n: Option<u64>| n.filter(|&n| n >= events);
    if let Some(n) = credible(obs.usage.completion_tokens) {
        (n, TokenCountSource::Usage)
    } else if let Some(n) = credible(obs.server_timings.predicted_tokens) {
        (n, TokenCountSource::Server)
    } else {
        (events, TokenCountSource::Events)
    }
}

/// Derives the per-probe numbers from a finished stream.
///
/// Returns `None` when there is nothing to measure: no token-bearing event (the caller reports
/// `empty_stream`) or no `ended` mark (the stream did not finish). Pure: no clock is read.
pub fn measure(obs: &Observations) -> Option<Measurement> {
    let tl = &obs.timeline;
    let first = tl.first_token()?;
    let last = tl.last_token()?;
    let ended = tl.ended?;
    let (n, token_count_source) = output_tokens(obs);
    let span = last.saturating_duration_since(first);
    let (tpot, output_tokens_per_second) = if n >= 2 && !span.is_zero() {
        let gaps = n - 1;
        let tpot = Duration::from_secs_f64(span.as_secs_f64() / gaps as f64);
        (Some(tpot), Some(gaps as f64 / span.as_secs_f64()))
    } else {
        (None, None)
    };
    let ttft = first.saturating_duration_since(tl.sent);
    // Server numbers are untrusted input: negative, NaN or absurd values are unknown, and so is
    // a part longer than the whole TTFT it must lie inside (the split's one rule).
    let ttft_split = TtftSplit::new(ttft, &obs.server_timings);
    let server_prefill = ttft_split.engine_prefill;
    let ttft_overhead = server_prefill.map(|prefill| {
        let load = ttft_split.model_load.unwrap_or_default();
        ttft.saturating_sub(prefill.saturating_add(load))
    });
    let (prefill_tokens_per_second, server_prefill_tokens_per_second) =
        prefill_speeds(obs, ttft, server_prefill);
    let inter_token_latencies = tl
        .token_events
        .windows(2)
        .map(|w| w[1].at.saturating_duration_since(w[0].at))
        .collect();
    Some(Measurement {
        ttft,
        time_to_first_output_token: tl
            .first_output()
            .map(|t| t.saturating_duration_since(tl.sent)),
        tpot,
        output_tokens_per_second,
        e2e: ended.saturating_duration_since(tl.sent),
        output_tokens: n,
        token_count_source,
        token_events: tl.token_events.len(),
        inter_token_latencies,
        server_prefill,
        ttft_overhead,
        ttft_split,
        prefill_tokens_per_second,
        server_prefill_tokens_per_second,
    })
}

/// The highest prefill speed believed, tokens per second: above it a count or a clock is wrong
/// (the fastest accelerators prefill a few hundred thousand tokens a second).
pub const MAX_PREFILL_TOKENS_PER_SECOND: f64 = 1e8;

/// The prefill speeds of a probe that sent a generated prompt ([`Asked::prompt_tokens`]):
/// `(prompt tokens / TTFT, prompt tokens evaluated / server prefill)`. The prompt count is the
/// server's when it reported one (it counts the chat template too), else the generated size;
/// cached tokens are taken off, as they were not prefilled. `None` without a generated prompt,
/// with nothing left to prefill, a zero time, or a speed above
/// `MAX_PREFILL_TOKENS_PER_SECOND`.
pub fn prefill_speeds(
    obs: &Observations,
    ttft: Duration,
    server_prefill: Option<Duration>,
) -> (Option<f64>, Option<f64>) {
    let Some(sent) = obs.asked.prompt_tokens else {
        return (None, None);
    };
    let prompt = obs.usage.prompt_tokens.unwrap_or(sent);
    let cached = obs.usage.cached_prompt_tokens.unwrap_or(0);
    let prefilled = prompt.saturating_sub(cached);
    let speed = |tokens: u64, over: Duration| {
        let v = tokens as f64 / over.as_secs_f64();
        (tokens > 0 && !over.is_zero() && v <= MAX_PREFILL_TOKENS_PER_SECOND).then_some(v)
    };
    let evaluated = obs.server_timings.prompt_tokens.unwrap_or(prefilled);
    (
        speed(prefilled, ttft),
        server_prefill.and_then(|p| speed(evaluated, p)),
    )
}

/// A server's prompt count below this share of a generated prompt's size is
/// [`Anomaly::PromptTruncated`]: the common tokenizers count about 1.1 tokens per word of it,
/// so no tokenizer difference comes near.
pub const PROMPT_TRUNCATED_BELOW: f64 = 0.75;

/// True when the server counted far fewer prompt tokens than the generated prompt has (below
/// `PROMPT_TRUNCATED_BELOW` of it): it cut the prompt, to its context most likely.
pub fn prompt_truncated(obs: &Observations) -> bool {
    match (obs.asked.prompt_tokens, obs.usage.prompt_tokens) {
        // A count of 0 is a server (or gateway) that does not count, not a prompt cut to nothing.
        (Some(sent), Some(counted)) if counted > 0 => {
            (counted as f64) < PROMPT_TRUNCATED_BELOW * sent as f64
        }
        _ => false,
    }
}

/// Window at the end of a stream inside which "most tokens arrived" marks a collapsed stream.
pub const COLLAPSE_WINDOW: Duration = Duration::from_millis(5);
/// Fewest token events for which collapse is judged (short answers legitimately arrive fast).
pub const COLLAPSE_MIN_EVENTS: usize = 8;

/// Anomalies that follow from the numbers rather than from single events: a collapsed stream
/// (at least [`COLLAPSE_MIN_EVENTS`] events and 90 % of them within [`COLLAPSE_WINDOW`] of the
/// last one: a buffering proxy, TTFT ≈ E2E), multi-token events (the server counted more tokens
/// than events, beyond the one end-of-sequence token that carries no text), a server count below
/// the number of token events (impossible, so N was counted from events), and missing usage
/// (N had to be counted from events because the server gave no count).
pub fn derived_anomalies(obs: &Observations, m: &Measurement) -> Vec<Anomaly> {
    let mut out = Vec::new();
    if prompt_truncated(obs) {
        out.push(Anomaly::PromptTruncated);
    }
    let events = &obs.timeline.token_events;
    if events.len() >= COLLAPSE_MIN_EVENTS {
        let last = events[events.len() - 1].at;
        let tenth = events.len() / 10;
        if last.saturating_duration_since(events[tenth].at) <= COLLAPSE_WINDOW {
            out.push(Anomaly::CollapsedStream);
        }
    }
    // One token more than events is the end-of-sequence token: servers count it, none streams
    // text for it (llama.cpp on `finish_reason: "stop"`).
    if m.token_count_source != TokenCountSource::Events
        && m.output_tokens > m.token_events as u64 + 1
    {
        out.push(Anomaly::MultiTokenEvents);
    }
    // An output count above the request was already reported as `count_above_request`; a
    // prompt count above it says nothing about the output count.
    let above = obs.output_count_forgotten;
    if m.token_count_source == TokenCountSource::Events && !above {
        let reported = [
            obs.usage.completion_tokens,
            obs.server_timings.predicted_tokens,
        ];
        if reported
            .iter()
            .flatten()
            .any(|&n| n < m.token_events as u64)
        {
            out.push(Anomaly::CountBelowEvents);
        } else {
            out.push(Anomaly::MissingUsage);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::measure::TokenKind;
    use crate::measure::TokenKind::{Output, Reasoning};
    use crate::measure::Usage;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Observations with `sent` at t0 and tokens at the given offsets (ms) and kinds.
    fn obs(tokens: &[(u64, TokenKind)], ended_ms: u64, usage: Option<u64>) -> Observations {
        let t0 = Instant::now();
        let mut o = Observations::new(t0);
        for &(at, kind) in tokens {
            o.token(t0 + ms(at), kind);
        }
        o.timeline.ended = Some(t0 + ms(ended_ms));
        o.usage.completion_tokens = usage;
        o
    }

    #[test]
    fn prefill_speed_is_prompt_tokens_less_cached_over_ttft() {
        let toks: Vec<_> = (0..4).map(|i| (500 + 10 * i, Output)).collect();
        let mut o = obs(&toks, 600, Some(4));
        // A written prompt: no speed.
        let m = measure(&o).unwrap();
        assert_eq!(m.prefill_tokens_per_second, None);
        // A generated prompt of 4,000 tokens, no server count: 4,000 / 0.5 s.
        o.asked.prompt_tokens = Some(4000);
        let m = measure(&o).unwrap();
        assert_eq!(m.prefill_tokens_per_second, Some(8000.0));
        assert_eq!(m.server_prefill_tokens_per_second, None);
        // The server's count (template included) wins; its cached tokens were not prefilled.
        o.usage.prompt_tokens = Some(4100);
        o.usage.cached_prompt_tokens = Some(100);
        assert_eq!(measure(&o).unwrap().prefill_tokens_per_second, Some(8000.0));
        // The server's own prefill time, over the tokens it says it evaluated.
        o.server_timings.prompt_seconds = Some(0.4);
        o.server_timings.prompt_tokens = Some(3000);
        let m = measure(&o).unwrap();
        assert_eq!(m.server_prefill, Some(ms(400)));
        assert_eq!(m.server_prefill_tokens_per_second, Some(7500.0));
        // Everything cached: nothing was prefilled, no speed (not infinity, not zero).
        o.usage.cached_prompt_tokens = Some(4100);
        o.server_timings.prompt_tokens = None;
        let m = measure(&o).unwrap();
        assert_eq!(m.prefill_tokens_per_second, None);
        assert_eq!(m.server_prefill_tokens_per_second, None);
    }

    #[test]
    fn an_absurd_prefill_speed_is_unknown() {
        // 10^9 tokens in 1 ms of TTFT is a wrong count or clock, not a speed.
        let mut o = obs(&[(1, Output)], 2, Some(1));
        o.asked.prompt_tokens = Some(1_000_000);
        o.usage.prompt_tokens = Some(1_000_000_000);
        assert_eq!(measure(&o).unwrap().prefill_tokens_per_second, None);
        o.usage.prompt_tokens = Some(u64::MAX);
        assert_eq!(measure(&o).unwrap().prefill_tokens_per_second, None);
    }

    #[test]
    fn a_prompt_count_far_below_the_generated_size_is_prompt_truncated() {
        let toks: Vec<_> = (0..2).map(|i| (100 + 10 * i, Output)).collect();
        let mut o = obs(&toks, 200, Some(2));
        o.usage.prompt_tokens = Some(2048);
        let anomalies = |o: &Observations| derived_anomalies(o, &measure(o).unwrap());
        // A written prompt: nothing to compare with.
        assert!(!anomalies(&o).contains(&Anomaly::PromptTruncated));
        o.asked.prompt_tokens = Some(8000);
        assert!(anomalies(&o).contains(&Anomaly::PromptTruncated));
        // At three quarters (a tokenizer that counts fewer tokens) it is believed.
        o.usage.prompt_tokens = Some(6000);
        assert!(!anomalies(&o).contains(&Anomaly::PromptTruncated));
        o.usage.prompt_tokens = Some(5999);
        assert!(anomalies(&o).contains(&Anomaly::PromptTruncated));
        // No count, or 0 (a server that does not count): unknown, not an anomaly of this kind.
        o.usage.prompt_tokens = None;
        assert!(!anomalies(&o).contains(&Anomaly::PromptTruncated));
        o.usage.prompt_tokens = Some(0);
        assert!(!anomalies(&o).contains(&Anomaly::PromptTruncated));
    }

    #[test]
    fn formulas_on_an_even_stream() {
        // TTFT 200 ms, then 49 gaps of 20 ms, [DONE] 5 ms after the last token, usage N = 50.
        let toks: Vec<_> = (0..50).map(|i| (200 + 20 * i, Output)).collect();
        let m = measure(&obs(&toks, 200 + 20 * 49 + 5, Some(50))).unwrap();
        assert_eq!(m.ttft, ms(200));
        assert_eq!(m.time_to_first_output_token, Some(ms(200)));
        assert_eq!(m.tpot, Some(ms(20)));
        assert!((m.output_tokens_per_second.unwrap() - 50.0).abs() < 1e-9);
        assert_eq!(m.e2e, ms(1185));
        assert_eq!(m.output_tokens, 50);
        assert_eq!(m.token_count_source, TokenCountSource::Usage);
        assert_eq!(m.inter_token_latencies.len(), 49);
        assert!(m.inter_token_latencies.iter().all(|&g| g == ms(20)));
        // The seed's rule of thumb E2E ≈ TTFT + N / speed holds within one token time.
        let approx = m.ttft.as_secs_f64() + 50.0 / m.output_tokens_per_second.unwrap();
        assert!((m.e2e.as_secs_f64() - approx).abs() <= 0.020 + 1e-9);
    }

    #[test]
    fn table_of_edge_cases() {
        struct Case {
            name: &'static str,
            tokens: Vec<(u64, TokenKind)>,
            ended: u64,
            usage: Option<u64>,
            ttft: Option<u64>,
            ttfo: Option<Option<u64>>,
            tpot_us: Option<Option<u64>>,
            n: u64,
            source: TokenCountSource,
        }
        let cases = vec![
            Case {
                name: "reasoning first: TTFT at the reasoning, TTFO at the answer",
                tokens: vec![
                    (100, Reasoning),
                    (110, Reasoning),
                    (300, Output),
                    (310, Output),
                ],
                ended: 320,
                usage: Some(4),
                ttft: Some(100),
                ttfo: Some(Some(300)),
                tpot_us: Some(Some(70_000)),
                n: 4,
                source: TokenCountSource::Usage,
            },
            Case {
                name: "max_tokens ran out inside the reasoning: no TTFO, TTFT still there",
                tokens: vec![(100, Reasoning), (120, Reasoning)],
                ended: 121,
                usage: Some(2),
                ttft: Some(100),
                ttfo: Some(None),
                tpot_us: Some(Some(20_000)),
                n: 2,
                source: TokenCountSource::Usage,
            },
            Case {
                name: "multi-token chunks: N from usage, TPOT divides by N-1 not by events",
                tokens: vec![(100, Output), (200, Output), (300, Output)],
                ended: 300,
                usage: Some(9),
                ttft: Some(100),
                ttfo: Some(Some(100)),
                tpot_us: Some(Some(25_000)),
                n: 9,
                source: TokenCountSource::Usage,
            },
            Case {
                name: "no usage: N counted from events",
                tokens: vec![(50, Output), (60, Output), (70, Output)],
                ended: 80,
                usage: None,
                ttft: Some(50),
                ttfo: Some(Some(50)),
                tpot_us: Some(Some(10_000)),
                n: 3,
                source: TokenCountSource::Events,
            },
            Case {
                name: "usage 0 with tokens is not believed",
                tokens: vec![(50, Output), (60, Output)],
                ended: 60,
                usage: Some(0),
                ttft: Some(50),
                ttfo: Some(Some(50)),
                tpot_us: Some(Some(10_000)),
                n: 2,
                source: TokenCountSource::Events,
            },
            Case {
                name: "single token: no TPOT",
                tokens: vec![(50, Output)],
                ended: 55,
                usage: Some(1),
                ttft: Some(50),
                ttfo: Some(Some(50)),
                tpot_us: Some(None),
                n: 1,
                source: TokenCountSource::Usage,
            },
            Case {
                name: "all tokens in one read: zero span, no TPOT, no tokens/s",
                tokens: vec![(50, Output), (50, Output), (50, Output)],
                ended: 50,
                usage: Some(3),
                ttft: Some(50),
                ttfo: Some(Some(50)),
                tpot_us: Some(None),
                n: 3,
                source: TokenCountSource::Usage,
            },
            Case {
                name: "no token at all: nothing to measure",
                tokens: vec![],
                ended: 10,
                usage: Some(0),
                ttft: None,
                ttfo: None,
                tpot_us: None,
                n: 0,
                source: TokenCountSource::Usage,
            },
        ];
        for c in cases {
            let o = obs(&c.tokens, c.ended, c.usage);
            let m = measure(&o);
            assert_eq!(m.as_ref().map(|m| m.ttft), c.ttft.map(ms), "{}", c.name);
            let Some(m) = m else { continue };
            assert_eq!(
                m.time_to_first_output_token,
                c.ttfo.unwrap().map(ms),
                "{}",
                c.name
            );
            assert_eq!(
                m.tpot,
                c.tpot_us.unwrap().map(Duration::from_micros),
                "{}",
                c.name
            );
            assert_eq!(
                m.output_tokens_per_second.is_some(),
                m.tpot.is_some(),
                "{}",
                c.name
            );
            if let (Some(t), Some(r)) = (m.tpot, m.output_tokens_per_second) {
                assert!(
                    (t.as_secs_f64() * r - 1.0).abs() < 1e-9,
                    "{}: tps = 1/TPOT",
                    c.name
                );
            }
            assert_eq!(m.output_tokens, c.n, "{}", c.name);
            assert_eq!(m.token_count_source, c.source, "{}", c.name);
            assert_eq!(
                m.inter_token_latencies.len(),
                c.tokens.len() - 1,
                "{}",
                c.name
            );
        }
    }

    #[test]
    fn server_count_is_used_when_usage_is_absent() {
        let mut o = obs(&[(10, Output), (20, Output)], 20, None);
        o.server_timings.predicted_tokens = Some(5);
        let m = measure(&o).unwrap();
        assert_eq!(
            (m.output_tokens, m.token_count_source),
            (5, TokenCountSource::Server)
        );
    }

    #[test]
    fn server_prefill_splits_ttft() {
        let mut o = obs(&[(250, Output), (260, Output)], 260, Some(2));
        let m = measure(&o).unwrap();
        assert_eq!((m.server_prefill, m.ttft_overhead), (None, None));
        o.server_timings.prompt_seconds = Some(0.2);
        let m = measure(&o).unwrap();
        assert_eq!(m.server_prefill, Some(ms(200)));
        assert_eq!(m.ttft_overhead, Some(ms(50)));
        // Ollama: model load is server time too, not overhead.
        o.server_timings.load_seconds = Some(0.03);
        assert_eq!(measure(&o).unwrap().ttft_overhead, Some(ms(20)));
        // Parts that each fit but together exceed TTFT: clamped at zero, never negative.
        o.server_timings.prompt_seconds = Some(0.24);
        assert_eq!(measure(&o).unwrap().ttft_overhead, Some(Duration::ZERO));
        o.server_timings.load_seconds = None;
        // A prefill longer than the whole TTFT cannot lie inside it (a unit mistake, 1e15 ms
        // from llama.cpp, 1e24 ns from Ollama): unknown, with no overhead derived from it.
        for absurd in [0.9, 1e12, 1e15, 1e24, f64::MAX] {
            o.server_timings.prompt_seconds = Some(absurd);
            let m = measure(&o).unwrap();
            assert_eq!(
                (m.server_prefill, m.ttft_overhead),
                (None, None),
                "{absurd}"
            );
            // What a Duration can hold is counted as the split's excess; the rest is no number.
            assert_eq!(
                m.ttft_split.excess > Duration::ZERO,
                absurd <= 1e15,
                "{absurd}"
            );
        }
        // Nonsense is unknown.
        o.server_timings.prompt_seconds = Some(-1.0);
        assert_eq!(measure(&o).unwrap().server_prefill, None);
    }

    #[test]
    fn unfinished_stream_is_not_measured() {
        let mut o = obs(&[(10, Output)], 0, Some(1));
        o.timeline.ended = None;
        assert!(measure(&o).is_none());
    }

    #[test]
    fn anomalies_from_numbers() {
        // 20 tokens: the first at 100 ms, the other 19 within 2 ms at the end → collapsed.
        let mut toks = vec![(100, Output)];
        toks.extend((0..19).map(|i| (1000 + i / 10, Output)));
        let o = obs(&toks, 1002, Some(20));
        let m = measure(&o).unwrap();
        assert_eq!(derived_anomalies(&o, &m), vec![Anomaly::CollapsedStream]);

        // An even stream is not collapsed; usage > events flags multi-token events.
        let toks: Vec<_> = (0..10).map(|i| (100 + 20 * i, Output)).collect();
        let o = obs(&toks, 300, Some(40));
        let m = measure(&o).unwrap();
        assert_eq!(derived_anomalies(&o, &m), vec![Anomaly::MultiTokenEvents]);

        let o = obs(&toks, 300, None);
        let m = measure(&o).unwrap();
        assert_eq!(derived_anomalies(&o, &m), vec![Anomaly::MissingUsage]);

        // A server count below the events is impossible: N from events, and said so.
        let o = obs(&toks, 300, Some(5));
        let m = measure(&o).unwrap();
        assert_eq!(
            (m.output_tokens, m.token_count_source),
            (10, TokenCountSource::Events)
        );
        assert_eq!(derived_anomalies(&o, &m), vec![Anomaly::CountBelowEvents]);

        // Usage one above events: the end-of-sequence token, not multi-token events.
        let o = obs(&toks, 300, Some(11));
        let m = measure(&o).unwrap();
        assert_eq!(derived_anomalies(&o, &m), vec![]);
    }

    #[test]
    fn the_request_body_names_its_token_limit() {
        use crate::measure::Asked;
        use serde_json::json;
        let of = |body: serde_json::Value| Asked::of(&body, Some(100)).output_tokens;
        assert_eq!(of(json!({"max_tokens": 16, "temperature": 0.5})), Some(16));
        // Nested spellings, and the largest limit wins (a thinking budget included).
        let gemini = json!({"generationConfig": {"maxOutputTokens": 64,
            "thinkingConfig": {"thinkingBudget": 512}}});
        assert_eq!(of(gemini), Some(512));
        assert_eq!(of(json!({"options": {"num_predict": 7}})), Some(7));
        assert_eq!(
            of(json!({"max_tokens": 16, "max_completion_tokens": 4000})),
            Some(4000)
        );
        // Numbers under other keys, negative or fractional limits name no limit.
        let none = json!({"seed": 99999, "thinkingBudget": -1, "max_tokens": 1.5, "logit_bias": {"50256": 5}});
        assert_eq!(of(none), None);
        assert_eq!(Asked::of(&json!({}), Some(100)).body_bytes, Some(100));
    }

    #[test]
    fn counts_far_above_the_request_are_forgotten_and_said_so() {
        use crate::measure::Asked;
        let toks: Vec<_> = (0..5).map(|i| (100 + 20 * i, Output)).collect();
        let asked = Asked {
            output_tokens: Some(16),
            body_bytes: Some(200),
            ..Asked::default()
        };
        let with = |usage: u64, prompt: u64, cached: u64, predicted: u64| {
            let mut o = obs(&toks, 300, Some(usage));
            o.asked = asked;
            o.usage.prompt_tokens = Some(prompt);
            o.usage.cached_prompt_tokens = Some(cached);
            o.server_timings.predicted_tokens = Some(predicted);
            o
        };
        // At the limits (2 × 16 + 64 output, 200 + 65,536 prompt), everything is believed.
        let mut o = with(96, 65_736, 65_736, 96);
        assert!(!discard_incredible_counts(&mut o));
        assert_eq!(o.usage.completion_tokens, Some(96));
        assert_eq!(o.usage.prompt_tokens, Some(65_736));
        // One above, or 2^64 − 1, is not.
        for (usage, prompt) in [(97, 65_737), (u64::MAX, u64::MAX)] {
            let mut o = with(usage, prompt, prompt, usage);
            assert!(discard_incredible_counts(&mut o));
            assert_eq!(o.usage, Usage::default(), "{usage}");
            assert_eq!(o.server_timings.predicted_tokens, None);
            o.anomaly(Anomaly::CountAboveRequest);
            let m = measure(&o).unwrap();
            assert_eq!(
                (m.output_tokens, m.token_count_source),
                (5, TokenCountSource::Events)
            );
            // Bounded rates: 4 gaps over 80 ms.
            assert_eq!(m.output_tokens_per_second, Some(50.0));
            // Not also "missing usage": the server gave one, it was not believed.
            assert_eq!(derived_anomalies(&o, &m), vec![]);
        }
        // Each count is judged on its own: a fine output count survives an absurd prompt.
        let mut o = with(20, u64::MAX, 3, 20);
        assert!(discard_incredible_counts(&mut o));
        assert_eq!(o.usage.completion_tokens, Some(20));
        assert_eq!(
            (o.usage.prompt_tokens, o.usage.cached_prompt_tokens),
            (None, Some(3))
        );
        // More cached tokens than the prompt has are not believed; as many are.
        let mut o = with(20, 50, 51, 20);
        assert!(discard_incredible_counts(&mut o));
        assert_eq!(
            (o.usage.prompt_tokens, o.usage.cached_prompt_tokens),
            (Some(50), None)
        );
        let mut o = with(20, 50, 50, 20);
        assert!(!discard_incredible_counts(&mut o));
        // Many tokens per event are believed up to 16 an event, whatever the request said.
        let many: Vec<_> = (0..100).map(|i| (100 + i, Output)).collect();
        let mut o = obs(&many, 300, Some(1600));
        o.asked = asked;
        assert!(!discard_incredible_counts(&mut o));
        // An unknown request still bounds a count: 2 × (2^32 − 1) + 64.
        let mut o = obs(&toks, 300, Some(u64::MAX));
        assert!(discard_incredible_counts(&mut o));
        let mut o = obs(&toks, 300, Some(8_589_934_654));
        assert!(!discard_incredible_counts(&mut o));
    }

    #[test]
    fn an_absurd_prompt_count_does_not_hide_a_missing_output_count() {
        let toks: Vec<_> = (0..5).map(|i| (100 + 20 * i, Output)).collect();
        let mut o = obs(&toks, 300, None);
        o.usage.prompt_tokens = Some(u64::MAX);
        assert!(discard_incredible_counts(&mut o));
        o.anomaly(Anomaly::CountAboveRequest);
        let m = measure(&o).unwrap();
        assert_eq!(derived_anomalies(&o, &m), vec![Anomaly::MissingUsage]);
        // And a zero output count beside it is still below the events.
        let mut o = obs(&toks, 300, Some(0));
        o.usage.prompt_tokens = Some(u64::MAX);
        assert!(discard_incredible_counts(&mut o));
        let m = measure(&o).unwrap();
        assert_eq!(derived_anomalies(&o, &m), vec![Anomaly::CountBelowEvents]);
    }
}
