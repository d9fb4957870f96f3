//! Every protocol adapter behind the shared decoders, under property tests (run in CI): random
//! bytes and random, plausible JSON event streams split at random points never panic, never
//! count more token events than there were events, and give the same outcome however the bytes
//! are split; the numbers of a success agree with the instants the reads had (one read: all zero;
//! one read per millisecond: TTFT ≤ E2E ≤ the last read, the ITLs add up to the token span and
//! TPOT × (N − 1) is that span). Bounded memory follows from the decoders' caps (tested in
//! decode_*.rs).

use std::time::{Duration, Instant, SystemTime};

use llm_probe::config::Protocol;
use llm_probe::measure::{FailureReason, Observations, ProbeOutcome};
use llm_probe::probe::{Limits, StreamReader};
use proptest::prelude::*;

/// Feeds `reads`, read `i` at `sent + i` ms, and concludes (the end of the body one millisecond
/// after the last read).
fn run(protocol: Protocol, reads: &[&[u8]]) -> ProbeOutcome {
    let t0 = Instant::now();
    let mut obs = Observations::new(t0);
    let limits = Limits {
        max_event_bytes: 4096,
        max_token_events: 500,
        ..Limits::default()
    };
    let mut reader = StreamReader::new(protocol, &limits);
    let mut failure = None;
    let mut ended = false;
    // Each read gets its own instant, 1 ms apart. As the probe does: after the end it keeps
    // reading (its drain), and what follows the terminal event is only checked.
    let at = |i: usize| t0 + Duration::from_millis(i as u64);
    for (i, read) in reads.iter().enumerate() {
        match reader.feed(read, at(i), &mut obs) {
            Ok(false) => {}
            Ok(true) => ended = true,
            Err(f) => {
                assert!(!ended, "a failure after the end");
                failure = Some(f);
                break;
            }
        }
    }
    if failure.is_none() {
        failure = reader.finish(at(reads.len()), &mut obs).err();
        assert!(!(ended && failure.is_some()), "a failure after the end");
    }
    ProbeOutcome::conclude(
        "t".into(),
        "s".into(),
        "m".into(),
        SystemTime::now(),
        obs,
        failure,
    )
}

/// What must not depend on how the bytes were split.
fn summary(o: &ProbeOutcome) -> (Option<FailureReason>, usize, Option<u64>, Vec<&'static str>) {
    (
        o.failure_reason(),
        o.observations.timeline.token_events.len(),
        o.result.as_ref().ok().map(|m| m.output_tokens),
        o.observations
            .anomalies
            .iter()
            .map(|a| a.as_str())
            .collect(),
    )
}

fn split<'a>(bytes: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let mut points: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    points.push(0);
    points.push(bytes.len());
    points.sort_unstable();
    points.windows(2).map(|w| &bytes[w[0]..w[1]]).collect()
}

/// A JSON value built from the field names and shapes the adapters read, so random streams
/// reach deep paths (choices, deltas, usage, errors, typed events, NDJSON done lines).
fn json_value() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        (-5i64..100_000).prop_map(serde_json::Value::from),
        (-1.0e3f64..1.0e6).prop_map(serde_json::Value::from),
        prop::sample::select(vec![
            "",
            "a",
            "é",
            "[DONE]",
            "stop",
            "error",
            "text_delta",
            "thinking_delta",
            "response.output_text.delta",
            "response.completed",
            "message_stop",
            "content_block_delta",
            "message_delta",
            "response.failed",
            "length",
            "tool_use",
            "thinking",
            "reasoning.text",
            "STOP",
            "SAFETY",
            "function_call",
            "response.output_item.added"
        ])
        .prop_map(serde_json::Value::from),
    ];
    let keys = prop::sample::select(vec![
        "candidates",
        "parts",
        "thought",
        "finishReason",
        "usageMetadata",
        "candidatesTokenCount",
        "thoughtsTokenCount",
        "promptFeedback",
        "blockReason",
        "functionCall",
        "reasoning_details",
        "summary",
        "name",
        "item",
        "content_block",
        "choices",
        "delta",
        "content",
        "reasoning_content",
        "reasoning",
        "text",
        "usage",
        "completion_tokens",
        "prompt_tokens",
        "output_tokens",
        "input_tokens",
        "error",
        "message",
        "type",
        "finish_reason",
        "index",
        "tool_calls",
        "function",
        "arguments",
        "timings",
        "predicted_n",
        "prompt_ms",
        "model",
        "done",
        "eval_count",
        "prompt_eval_duration",
        "token",
        "special",
        "details",
        "generated_tokens",
        "stop",
        "response",
        "thinking",
        "partial_json",
        "generated_text",
        "system_fingerprint",
        "load_duration",
    ]);
    leaf.prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
            prop::collection::btree_map(keys.clone(), inner, 0..5).prop_map(|m| {
                serde_json::Value::Object(m.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
            }),
        ]
    })
}

/// A stream of events in the protocol's framing: SSE (optionally with `event:` lines) or NDJSON.
fn stream_bytes(protocol: Protocol, events: &[(Option<&str>, serde_json::Value)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (event, v) in events {
        if protocol == Protocol::Ollama {
            out.extend_from_slice(format!("{v}\n").as_bytes());
        } else {
            if let Some(e) = event {
                out.extend_from_slice(format!("event: {e}\n").as_bytes());
            }
            out.extend_from_slice(format!("data: {v}\n\n").as_bytes());
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic_and_split_does_not_matter(
        bytes in prop::collection::vec(any::<u8>(), 0..2048),
        cuts in prop::collection::vec(any::<usize>(), 0..12),
    ) {
        for &protocol in Protocol::ALL {
            let whole = run(protocol, &[&bytes]);
            let parts = run(protocol, &split(&bytes, &cuts));
            prop_assert_eq!(summary(&whole), summary(&parts), "{:?}", protocol);
        }
    }

    #[test]
    fn random_json_events_never_panic_and_stay_bounded(
        events in prop::collection::vec(
            (prop::option::of(prop::sample::select(vec!["message_start", "content_block_delta", "message_delta",
                "message_stop", "error", "ping", "response.output_text.delta", "response.completed",
                "response.reasoning_text.delta", "response.failed"])), json_value()),
            0..24,
        ),
        cuts in prop::collection::vec(any::<usize>(), 0..12),
    ) {
        for &protocol in Protocol::ALL {
            let bytes = stream_bytes(protocol, &events);
            let whole = run(protocol, &[&bytes]);
            prop_assert!(whole.observations.timeline.token_events.len() <= events.len());
            if let Ok(m) = &whole.result {
                prop_assert!(m.output_tokens >= 1, "a success has at least one token");
                // One read at the instant the request was sent: nothing took any time.
                prop_assert_eq!(m.ttft, Duration::ZERO);
                prop_assert_eq!(m.e2e, Duration::ZERO);
                prop_assert_eq!(m.tpot, None, "no span to divide");
                prop_assert!(m.inter_token_latencies.iter().all(|d| d.is_zero()));
            }
            let reads = split(&bytes, &cuts);
            let parts = run(protocol, &reads);
            prop_assert_eq!(summary(&whole), summary(&parts), "{:?}", protocol);
            if let Ok(m) = &parts.result {
                prop_assert!(m.ttft <= m.e2e);
                prop_assert!(m.e2e <= Duration::from_millis(reads.len() as u64));
                prop_assert_eq!(m.inter_token_latencies.len(), m.token_events - 1);
                let span: Duration = m.inter_token_latencies.iter().sum();
                match m.tpot {
                    Some(tpot) => {
                        let gaps = (m.output_tokens - 1) as f64;
                        prop_assert!((tpot.as_secs_f64() * gaps - span.as_secs_f64()).abs() < 1e-6, "TPOT {:?} × {} ≠ span {:?}", tpot, gaps, span);
                    }
                    None => prop_assert!(m.output_tokens < 2 || span.is_zero()),
                }
            }
        }
    }
}
