//! The derived numbers of one probe, as defined in `DESIGN.md` §2 ("Derived per probe").

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
    // Server numbers are untrusted input: negative, NaN or absurd values are unknown.
    let secs = |s: Option<f64>| s.and_then(|s| Duration::try_from_secs_f64(s).ok());
    let server_prefill = secs(obs.server_timings.prompt_seconds);
    let ttft_overhead = server_prefill.map(|prefill| {
        let load = secs(obs.server_timings.load_seconds).unwrap_or_default();
        ttft.saturating_sub(prefill.saturating_add(load))
    });
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
        ttft_split: TtftSplit::new(ttft, &obs.server_timings),
    })
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
    if m.token_count_source == TokenCountSource::Events {
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
        // A server that claims more than the client saw: clamped at zero, never negative.
        o.server_timings.prompt_seconds = Some(0.9);
        assert_eq!(measure(&o).unwrap().ttft_overhead, Some(Duration::ZERO));
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
}
