//! Every `protocol:` value end to end on bytes: golden streams (real captures and hand-written
//! ones, `tests/fixtures/protocols/README.md`) go through the protocol's decoder and adapter
//! (`probe::StreamReader`, the sans-IO half of the probe loop) fed whole, split in two at every
//! byte offset, and one byte per read; the observations must be the same every way and equal the
//! expected token events, N and its source, terminator, finish, stream error and anomalies, and
//! `ProbeOutcome::conclude` must reach the expected success or failure reason. Then the request
//! each protocol builds: URL, headers, body keys, and the key in exactly one header.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use llm_probe::config::{self, Protocol, Target};
use llm_probe::measure::{
    Anomaly, FailureReason, Identity, Observations, ProbeOutcome, ServerTimings, TokenCountSource,
    TokenKind, Usage,
};
use llm_probe::probe::{Limits, StreamReader};
use llm_probe::protocol::build_request;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");

fn fixture(path: &str) -> Vec<u8> {
    std::fs::read(format!("{FIXTURES}/{path}")).unwrap_or_else(|e| panic!("{path}: {e}"))
}

// ---- the harness ---------------------------------------------------------------------------

/// How the stream's bytes arrive.
#[derive(Debug, Clone, Copy)]
enum Split {
    /// One read.
    Whole,
    /// Two reads, the first ending before byte `k`.
    At(usize),
    /// One read per byte.
    Bytes,
}

fn reads(bytes: &[u8], split: Split) -> Vec<&[u8]> {
    match split {
        Split::Whole => vec![bytes],
        Split::At(k) => vec![&bytes[..k], &bytes[k..]],
        Split::Bytes => bytes.chunks(1).collect(),
    }
}

/// Read `i` (0-based) returns at `t0 + (i + 1) ms`; a clean close follows the last read.
fn read_instant(t0: Instant, i: usize) -> Instant {
    t0 + Duration::from_millis(i as u64 + 1)
}

/// Feeds `bytes` of a `protocol` stream, split as `split`, through the probe's decoder and
/// adapter, then concludes the probe as the probe loop does. The returned outcome holds the
/// observations.
fn run(protocol: Protocol, bytes: &[u8], split: Split) -> ProbeOutcome {
    let t0 = Instant::now();
    let mut obs = Observations::new(t0);
    let mut reader = StreamReader::new(protocol, &Limits::default());
    let reads = reads(bytes, split);
    let mut failure = None;
    let mut ended = false;
    for (i, read) in reads.iter().enumerate() {
        // After the end, the probe keeps reading for a moment (its drain): what follows the
        // terminal event is only checked, whatever read it came in.
        match reader.feed(read, read_instant(t0, i), &mut obs) {
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
        failure = reader.finish(read_instant(t0, reads.len()), &mut obs).err();
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

/// Everything about an outcome that does not depend on when the reads returned. (The collapsed
/// stream anomaly does: a stream in one read is collapsed by definition.)
#[derive(Debug, Clone, PartialEq)]
struct Summary {
    kinds: String,
    result: Result<(u64, TokenCountSource), FailureReason>,
    failure_detail: Option<String>,
    terminated: bool,
    finished: bool,
    stream_error: Option<String>,
    anomalies: Vec<Anomaly>,
    usage: Usage,
    server: ServerTimings,
    identity: Identity,
}

/// Token kinds run-length encoded: `R2 O3` = two reasoning then three output events.
fn kinds(obs: &Observations) -> String {
    let mut runs: Vec<(TokenKind, usize)> = Vec::new();
    for e in &obs.timeline.token_events {
        match runs.last_mut() {
            Some((k, n)) if *k == e.kind => *n += 1,
            _ => runs.push((e.kind, 1)),
        }
    }
    runs.iter()
        .map(|(k, n)| format!("{}{n}", if *k == TokenKind::Output { 'O' } else { 'R' }))
        .collect::<Vec<_>>()
        .join(" ")
}

fn summary(o: &ProbeOutcome) -> Summary {
    let obs = &o.observations;
    Summary {
        kinds: kinds(obs),
        result: o
            .result
            .as_ref()
            .map(|m| (m.output_tokens, m.token_count_source))
            .map_err(|f| f.reason),
        failure_detail: o.result.as_ref().err().map(|f| f.detail.clone()),
        terminated: obs.terminated,
        finished: obs.finished,
        stream_error: obs.stream_error.clone(),
        anomalies: obs
            .anomalies
            .iter()
            .copied()
            .filter(|a| *a != Anomaly::CollapsedStream)
            .collect(),
        usage: obs.usage.clone(),
        server: obs.server_timings.clone(),
        identity: obs.identity.clone(),
    }
}

/// Runs `bytes` whole, split at every offset, and one byte per read; asserts the summaries agree
/// and that every token event completed by the first read is stamped with the first read's
/// instant (and only those). Returns the whole-read outcome.
fn run_every_way(protocol: Protocol, bytes: &[u8], name: &str) -> ProbeOutcome {
    let whole = run(protocol, bytes, Split::Whole);
    let expected = summary(&whole);
    let bytewise = run(protocol, bytes, Split::Bytes);
    assert_eq!(summary(&bytewise), expected, "{name}: one byte per read");
    for k in 0..=bytes.len() {
        let split = run(protocol, bytes, Split::At(k));
        assert_eq!(summary(&split), expected, "{name}: split at byte {k}");
        // Stamping: the tokens the first read completes are exactly those a stream cut after
        // that read would have shown, and they carry the first read's instant.
        let t0 = split.observations.timeline.sent;
        let mut prefix_obs = Observations::new(t0);
        let mut prefix = StreamReader::new(protocol, &Limits::default());
        let _ = prefix.feed(&bytes[..k], read_instant(t0, 0), &mut prefix_obs);
        let in_first = prefix_obs.timeline.token_events.len();
        let events = &split.observations.timeline.token_events;
        assert!(
            events
                .iter()
                .take(in_first)
                .all(|e| e.at == read_instant(t0, 0))
                && events
                    .iter()
                    .skip(in_first)
                    .all(|e| e.at == read_instant(t0, 1)),
            "{name}: split at {k}: tokens stamped with the wrong read"
        );
    }
    whole
}

// ---- expectations --------------------------------------------------------------------------

struct Case {
    protocol: Protocol,
    file: &'static str,
    kinds: &'static str,
    result: Result<(u64, TokenCountSource), FailureReason>,
    terminated: bool,
    finished: bool,
    /// A substring of the stream error, if one is expected.
    error: Option<&'static str>,
    anomalies: &'static [Anomaly],
    /// (prompt tokens, cached prompt tokens) as reported.
    prompt: (Option<u64>, Option<u64>),
    /// Server-reported prefill, seconds.
    prefill: Option<f64>,
}

use Anomaly::{MultiTokenEvents, NonJsonData, TrailingBytes, UnknownEvent};
use FailureReason::{EmptyStream, Overloaded, StreamError, Truncated};
use TokenCountSource::{Events as FromEvents, Server, Usage as FromUsage};

const CASES: &[Case] = &[
    // ---- openai-chat (hand-written; the real captures are in tests/fast/protocols/decode_sse.rs)
    Case {
        protocol: Protocol::OpenAiChat,
        file: "protocols/openai-chat/refusal.sse",
        // `delta.refusal` with `content: null`: the refusal is the output.
        kinds: "O6",
        result: Ok((6, FromUsage)),
        terminated: true,
        finished: true,
        error: None,
        anomalies: &[],
        prompt: (Some(12), None),
        prefill: None,
    },
    Case {
        protocol: Protocol::OpenAiChat,
        file: "protocols/openai-chat/leftover-after-done.sse",
        kinds: "O1",
        result: Ok((1, FromUsage)),
        terminated: true,
        finished: true,
        error: None,
        // A chunk after `[DONE]` is a real leftover, in whatever read it arrives.
        anomalies: &[TrailingBytes],
        prompt: (Some(3), None),
        prefill: None,
    },
    // ---- openai-completions
    Case {
        protocol: Protocol::OpenAiCompletions,
        file: "captured/llama-cpp-completions.txt",
        kinds: "O24",
        result: Ok((24, FromUsage)),
        terminated: true,
        finished: true,
        error: None,
        anomalies: &[],
        prompt: (Some(6), Some(0)),
        prefill: Some(0.08852),
    },
    Case {
        protocol: Protocol::OpenAiCompletions,
        file: "protocols/openai-completions/special-tokens-usage.sse",
        kinds: "O2",
        result: Ok((4, FromUsage)),
        terminated: true,
        finished: true,
        error: None,
        // Four tokens in two text events: one is EOS, one more came without text.
        anomalies: &[Anomaly::MultiTokenEvents],
        prompt: (Some(7), None),
        prefill: None,
    },
    Case {
        protocol: Protocol::OpenAiCompletions,
        file: "protocols/openai-completions/error-after-tokens.sse",
        kinds: "O2",
        result: Err(StreamError),
        terminated: false,
        finished: false,
        error: Some("illegal memory access"),
        anomalies: &[],
        prompt: (None, None),
        prefill: None,
    },
    Case {
        protocol: Protocol::OpenAiCompletions,
        file: "protocols/openai-completions/done-twice.sse",
        kinds: "O1",
        result: Ok((1, FromUsage)),
        terminated: true,
        finished: true,
        error: None,
        // A second `[DONE]` is harmless.
        anomalies: &[],
        prompt: (Some(3), None),
        prefill: None,
    },
    // ---- openai-responses
    Case {
        protocol: Protocol::OpenAiResponses,
        file: "captured/llama-cpp-responses.txt",
        kinds: "O3",
        result: Ok((4, FromUsage)),
        terminated: true,
        finished: true,
        error: None,
        anomalies: &[],
        prompt: (Some(36), Some(35)),
        prefill: Some(0.039633),
    },
    Case {
        protocol: Protocol::OpenAiResponses,
        file: "protocols/openai-responses/reasoning.sse",
        kinds: "R2 O2",
        result: Ok((70, FromUsage)),
        terminated: true,
        finished: true,
        error: None,
        // 70 tokens (64 of them reasoning) in 4 events: only a summary of the reasoning streams.
        anomalies: &[Anomaly::MultiTokenEvents],
        prompt: (Some(20), Some(0)),
        prefill: None,
    },
    Case {
        protocol: Protocol::OpenAiResponses,
        file: "protocols/openai-responses/incomplete.sse",
        kinds: "O2",
        result: Ok((2, FromUsage)),
        terminated: true,
        finished: true,
        error: None,
        anomalies: &[],
        prompt: (Some(5), None),
        prefill: None,
    },
    Case {
        protocol: Protocol::OpenAiResponses,
        file: "protocols/openai-responses/failed.sse",
        kinds: "O1",
        result: Err(StreamError),
        terminated: false,
        finished: false,
        error: Some("The server had an error"),
        anomalies: &[],
        prompt: (None, None),
        prefill: None,
    },
    Case {
        protocol: Protocol::OpenAiResponses,
        file: "protocols/openai-responses/error-event.sse",
        kinds: "",
        result: Err(StreamError),
        terminated: false,
        finished: false,
        error: Some("Rate limit reached"),
        anomalies: &[],
        prompt: (None, None),
        prefill: None,
    },
    Case {
        protocol: Protocol::OpenAiResponses,
        file: "protocols/openai-responses/unknown-types.sse",
        kinds: "O2",
        result: Ok((2, FromUsage)),
        terminated: true,
        finished: true,
        error: None,
        anomalies: &[UnknownEvent],
        prompt: (Some(3), None),
        prefill: None,
    },
    Case {
        protocol: Protocol::OpenAiResponses,
        file: "protocols/openai-responses/litellm-done.sse",
        kinds: "O2",
        result: Ok((2, FromUsage)),
        terminated: true,
        finished: true,
        error: None,
        // LiteLLM's `data: [DONE]` after `response.completed` is harmless.
        anomalies: &[],
        prompt: (Some(5), None),
        prefill: None,
    },
    Case {
        protocol: Protocol::OpenAiResponses,
        file: "protocols/openai-responses/leftover-after-completed.sse",
        kinds: "O2",
        result: Ok((2, FromUsage)),
        terminated: true,
        finished: true,
        error: None,
        anomalies: &[TrailingBytes],
        prompt: (Some(5), None),
        prefill: None,
    },
    // ---- anthropic
    Case {
        protocol: Protocol::Anthropic,
        file: "captured/llama-cpp-anthropic.txt",
        kinds: "O23",
        result: Ok((24, FromUsage)),
        terminated: true,
        finished: true,
        error: None,
        anomalies: &[],
        // input_tokens 12 + cache_read_input_tokens 24.
        prompt: (Some(36), Some(24)),
        prefill: None,
    },
    Case {
        protocol: Protocol::Anthropic,
        file: "captured/llm-mock-api_anthropic.txt",
        kinds: "O10",
        // The mock re-chunks its text into 4-character pieces and reports 5 output tokens for
        // 10 text events: impossible (each event carries a token), so N is counted from the
        // events and the stream says why.
        result: Ok((10, FromEvents)),
        terminated: true,
        finished: true,
        error: None,
        anomalies: &[Anomaly::CountBelowEvents],
        prompt: (Some(10), None),
        prefill: None,
    },
    Case {
        protocol: Protocol::Anthropic,
        file: "captured/mockllm_anthropic.txt",
        // Not Anthropic's format (no event lines, content inside message_delta, [DONE]): no
        // token is read from it, the deviation is flagged, and the probe fails clearly.
        kinds: "",
        result: Err(Truncated),
        terminated: false,
        finished: false,
        error: None,
        anomalies: &[UnknownEvent, NonJsonData],
        prompt: (None, None),
        prefill: None,
    },
    Case {
        protocol: Protocol::Anthropic,
        file: "sse/anthropic-pings.sse",
        kinds: "O2",
        // message_start's output_tokens (1) is a placeholder; the last message_delta says 3.
        result: Ok((3, FromUsage)),
        terminated: true,
        finished: true,
        error: None,
        anomalies: &[],
        prompt: (Some(12), None),
        prefill: None,
    },
    Case {
        protocol: Protocol::Anthropic,
        file: "protocols/anthropic/thinking.sse",
        kinds: "R2 O1",
        result: Ok((31, FromUsage)),
        terminated: true,
        finished: true,
        error: None,
        anomalies: &[Anomaly::MultiTokenEvents],
        prompt: (Some(115), Some(100)),
        prefill: None,
    },
    Case {
        protocol: Protocol::Anthropic,
        file: "protocols/anthropic/api-error-after-tokens.sse",
        kinds: "O1",
        result: Err(StreamError),
        terminated: false,
        finished: false,
        error: Some("api_error: Internal server error"),
        anomalies: &[],
        prompt: (Some(12), None),
        prefill: None,
    },
    Case {
        protocol: Protocol::Anthropic,
        file: "protocols/anthropic/overloaded-after-tokens.sse",
        kinds: "O1",
        result: Err(Overloaded),
        terminated: false,
        finished: false,
        error: Some("overloaded_error: Overloaded"),
        anomalies: &[],
        prompt: (Some(12), None),
        prefill: None,
    },
    Case {
        protocol: Protocol::Anthropic,
        file: "protocols/anthropic/done-after-stop.sse",
        kinds: "O2",
        result: Ok((2, FromUsage)),
        terminated: true,
        finished: true,
        error: None,
        // A keep-alive and a `[DONE]` after `message_stop` are harmless.
        anomalies: &[],
        prompt: (Some(7), None),
        prefill: None,
    },
    // ---- ollama
    Case {
        protocol: Protocol::Ollama,
        file: "protocols/ollama/chat.ndjson",
        kinds: "O3",
        result: Ok((5, Server)),
        terminated: true,
        finished: true,
        error: None,
        anomalies: &[Anomaly::MultiTokenEvents],
        prompt: (Some(26), None),
        prefill: Some(0.1305),
    },
    Case {
        protocol: Protocol::Ollama,
        file: "protocols/ollama/thinking-no-final-newline.ndjson",
        kinds: "R2 O1",
        result: Ok((9, Server)),
        terminated: true,
        finished: true,
        error: None,
        anomalies: &[Anomaly::MultiTokenEvents],
        prompt: (None, None),
        prefill: None,
    },
    Case {
        protocol: Protocol::Ollama,
        file: "protocols/ollama/error.ndjson",
        kinds: "O1",
        result: Err(StreamError),
        terminated: false,
        finished: false,
        error: Some("unexpected EOF"),
        anomalies: &[],
        prompt: (None, None),
        prefill: None,
    },
    Case {
        protocol: Protocol::Ollama,
        file: "protocols/ollama/cut-short.ndjson",
        kinds: "O2",
        result: Err(Truncated),
        terminated: false,
        finished: false,
        error: None,
        anomalies: &[],
        prompt: (None, None),
        prefill: None,
    },
    Case {
        protocol: Protocol::Ollama,
        file: "protocols/ollama/leftover-after-done.ndjson",
        kinds: "O1",
        result: Ok((1, Server)),
        terminated: true,
        finished: true,
        error: None,
        // A line after `done: true` is a real leftover.
        anomalies: &[TrailingBytes],
        prompt: (Some(3), None),
        prefill: None,
    },
    // ---- tgi
    Case {
        protocol: Protocol::Tgi,
        file: "sse/tgi-nospace.sse",
        // Four generated tokens; the special </s> is counted, not stamped.
        kinds: "O3",
        result: Ok((4, Server)),
        terminated: true,
        finished: true,
        error: None,
        anomalies: &[],
        prompt: (None, None),
        prefill: None,
    },
    Case {
        protocol: Protocol::Tgi,
        file: "protocols/tgi/details.sse",
        kinds: "O3",
        result: Ok((4, Server)),
        terminated: true,
        finished: true,
        error: None,
        anomalies: &[],
        prompt: (None, None),
        prefill: None,
    },
    Case {
        protocol: Protocol::Tgi,
        file: "protocols/tgi/error.sse",
        kinds: "O1",
        result: Err(StreamError),
        terminated: false,
        finished: false,
        error: Some("generation: Request failed during generation"),
        anomalies: &[],
        prompt: (None, None),
        prefill: None,
    },
    Case {
        protocol: Protocol::Tgi,
        file: "protocols/tgi/done-after-end.sse",
        kinds: "O1",
        result: Ok((2, Server)),
        terminated: true,
        finished: true,
        error: None,
        anomalies: &[],
        prompt: (None, None),
        prefill: None,
    },
    // ---- azure-openai
    Case {
        protocol: Protocol::AzureOpenAi,
        file: "protocols/azure-openai/filtered-stream.sse",
        kinds: "O2",
        result: Ok((2, FromUsage)),
        terminated: true,
        finished: true,
        error: None,
        anomalies: &[],
        prompt: (Some(10), Some(0)),
        prefill: None,
    },
    Case {
        protocol: Protocol::AzureOpenAi,
        file: "protocols/azure-openai/error-after-tokens.sse",
        kinds: "O1",
        result: Err(StreamError),
        terminated: false,
        finished: false,
        error: Some("The server had an error"),
        anomalies: &[],
        prompt: (None, None),
        prefill: None,
    },
    Case {
        protocol: Protocol::AzureOpenAi,
        file: "protocols/azure-openai/refusal.sse",
        kinds: "O3",
        result: Ok((3, FromUsage)),
        terminated: true,
        finished: true,
        error: None,
        anomalies: &[],
        prompt: (Some(10), None),
        prefill: None,
    },
    // ---- three held-back shapes (typed parts, reasoning_details, tool-call rule)
    Case {
        protocol: Protocol::OpenAiChat,
        file: "protocols/openai-chat/mistral-content-parts.sse",
        // Mistral's `content` list: thinking parts are reasoning, text parts output.
        kinds: "R2 O3",
        result: Ok((15, FromUsage)),
        terminated: true,
        finished: true,
        error: None,
        anomalies: &[MultiTokenEvents],
        prompt: (Some(10), None),
        prefill: None,
    },
    Case {
        protocol: Protocol::OpenAiChat,
        file: "protocols/openai-chat/reasoning-details.sse",
        // Reasoning only in `reasoning_details[]`; a signature-only entry is no token.
        kinds: "R2 O1",
        result: Ok((20, FromUsage)),
        terminated: true,
        finished: true,
        error: None,
        anomalies: &[MultiTokenEvents],
        prompt: (Some(14), None),
        prefill: None,
    },
    Case {
        protocol: Protocol::OpenAiChat,
        file: "protocols/openai-chat/tool-call-name-only.sse",
        // The tool-call rule: the name-only first chunk is an output token event.
        kinds: "O3",
        result: Ok((15, FromUsage)),
        terminated: true,
        finished: true,
        error: None,
        anomalies: &[MultiTokenEvents],
        prompt: (Some(60), None),
        prefill: None,
    },
    Case {
        protocol: Protocol::Anthropic,
        file: "protocols/anthropic/tool-use.sse",
        // The same tool call as openai-chat's: the same token events.
        kinds: "O3",
        result: Ok((15, FromUsage)),
        terminated: true,
        finished: true,
        error: None,
        anomalies: &[MultiTokenEvents],
        prompt: (Some(60), None),
        prefill: None,
    },
    // ---- gemini (AI Studio; CRLF framing, no terminator: the close after finishReason ends it)
    Case {
        protocol: Protocol::Gemini,
        file: "sse/gemini-crlf.sse",
        // The decoder's CRLF fixture, through the adapter: CJK text in a part, N from usage.
        kinds: "O3",
        result: Ok((3, FromUsage)),
        terminated: true,
        finished: true,
        error: None,
        anomalies: &[],
        prompt: (Some(4), None),
        prefill: None,
    },
    Case {
        protocol: Protocol::Gemini,
        file: "protocols/gemini/thinking.sse",
        // N = candidatesTokenCount 9 + thoughtsTokenCount 111.
        kinds: "R2 O2",
        result: Ok((120, FromUsage)),
        terminated: true,
        finished: true,
        error: None,
        anomalies: &[MultiTokenEvents],
        prompt: (Some(11), Some(4)),
        prefill: None,
    },
    Case {
        protocol: Protocol::Gemini,
        file: "protocols/gemini/error-after-tokens.sse",
        kinds: "O1",
        result: Err(StreamError),
        terminated: false,
        finished: false,
        error: Some("UNAVAILABLE (503): The model is overloaded."),
        anomalies: &[],
        prompt: (Some(6), None),
        prefill: None,
    },
    Case {
        protocol: Protocol::Gemini,
        file: "protocols/gemini/prompt-blocked.sse",
        kinds: "",
        result: Err(EmptyStream),
        terminated: true,
        finished: true,
        error: None,
        anomalies: &[],
        prompt: (Some(7), None),
        prefill: None,
    },
    Case {
        protocol: Protocol::Gemini,
        file: "protocols/gemini/safety-mid-stream.sse",
        kinds: "O2",
        result: Ok((3, FromUsage)),
        terminated: true,
        finished: true,
        error: None,
        anomalies: &[],
        prompt: (Some(8), None),
        prefill: None,
    },
    Case {
        protocol: Protocol::Gemini,
        file: "protocols/gemini/cut-short.sse",
        kinds: "O2",
        result: Err(Truncated),
        terminated: false,
        finished: false,
        error: None,
        anomalies: &[],
        prompt: (Some(4), None),
        prefill: None,
    },
    // ---- vertex-gemini (the same stream; LF framing)
    Case {
        protocol: Protocol::VertexGemini,
        file: "protocols/vertex-gemini/function-call.sse",
        kinds: "O1",
        result: Ok((7, FromUsage)),
        terminated: true,
        finished: true,
        error: None,
        anomalies: &[MultiTokenEvents],
        prompt: (Some(30), None),
        prefill: None,
    },
    Case {
        protocol: Protocol::VertexGemini,
        file: "protocols/vertex-gemini/error-after-tokens.sse",
        kinds: "O1",
        result: Err(StreamError),
        terminated: false,
        finished: false,
        error: Some("RESOURCE_EXHAUSTED (429)"),
        anomalies: &[],
        prompt: (None, None),
        prefill: None,
    },
    Case {
        protocol: Protocol::VertexGemini,
        file: "protocols/vertex-gemini/max-tokens.sse",
        kinds: "R1 O1",
        result: Ok((32, FromUsage)),
        terminated: true,
        finished: true,
        error: None,
        anomalies: &[MultiTokenEvents],
        prompt: (Some(5), None),
        prefill: None,
    },
    // ---- llama-cpp (native /completion)
    Case {
        protocol: Protocol::LlamaCpp,
        file: "captured/llama-cpp-native.txt",
        kinds: "O16",
        result: Ok((16, Server)),
        terminated: true,
        finished: true,
        error: None,
        anomalies: &[],
        // `timings.cache_n: 0`: nothing came from the cache, said by the server.
        prompt: (Some(5), Some(0)),
        prefill: Some(0.02646),
    },
    Case {
        protocol: Protocol::LlamaCpp,
        file: "protocols/llama-cpp/error.sse",
        kinds: "O1",
        result: Err(StreamError),
        terminated: false,
        finished: false,
        error: Some("exceeds the available context size"),
        anomalies: &[],
        prompt: (None, None),
        prefill: None,
    },
    Case {
        protocol: Protocol::LlamaCpp,
        file: "protocols/llama-cpp/stop-only.sse",
        kinds: "",
        result: Err(EmptyStream),
        terminated: true,
        finished: true,
        error: None,
        anomalies: &[],
        prompt: (Some(5), None),
        prefill: Some(0.01),
    },
    Case {
        protocol: Protocol::LlamaCpp,
        file: "protocols/llama-cpp/done-after-stop.sse",
        kinds: "O1",
        result: Ok((1, Server)),
        terminated: true,
        finished: true,
        error: None,
        anomalies: &[],
        prompt: (Some(4), None),
        prefill: None,
    },
    // ---- bedrock (AWS's binary event stream; tests/fixtures/eventstream.py writes the files)
    Case {
        protocol: Protocol::Bedrock,
        file: "protocols/bedrock/reasoning-text-tool.eventstream",
        kinds: "R2 O5",
        result: Ok((7, FromUsage)),
        terminated: true,
        finished: true,
        error: None,
        anomalies: &[],
        // inputTokens excludes the cache: 10 + 4 read.
        prompt: (Some(14), Some(4)),
        prefill: None,
    },
    Case {
        protocol: Protocol::Bedrock,
        file: "protocols/bedrock/max-tokens.eventstream",
        kinds: "O3",
        result: Ok((3, FromUsage)),
        terminated: true,
        finished: true,
        error: None,
        anomalies: &[],
        prompt: (Some(7), None),
        prefill: None,
    },
    Case {
        protocol: Protocol::Bedrock,
        file: "protocols/bedrock/throttled-after-tokens.eventstream",
        kinds: "O1",
        result: Err(StreamError),
        terminated: false,
        finished: false,
        error: Some("throttlingException: Too many tokens"),
        anomalies: &[],
        prompt: (None, None),
        prefill: None,
    },
    Case {
        protocol: Protocol::Bedrock,
        file: "protocols/bedrock/cut-inside-frame.eventstream",
        kinds: "O1",
        result: Err(Truncated),
        terminated: false,
        finished: false,
        error: None,
        anomalies: &[TrailingBytes],
        prompt: (None, None),
        prefill: None,
    },
    Case {
        protocol: Protocol::Bedrock,
        file: "protocols/bedrock/bad-crc.eventstream",
        kinds: "O1",
        result: Err(FailureReason::Decode),
        terminated: false,
        finished: false,
        error: None,
        anomalies: &[],
        prompt: (None, None),
        prefill: None,
    },
];

#[test]
fn golden_streams_every_way() {
    for c in CASES {
        let name = format!("{} {}", c.protocol, c.file);
        let o = run_every_way(c.protocol, &fixture(c.file), &name);
        let s = summary(&o);
        assert_eq!(s.kinds, c.kinds, "{name}: token events");
        assert_eq!(
            s.result, c.result,
            "{name}: result ({:?})",
            s.failure_detail
        );
        assert_eq!(s.terminated, c.terminated, "{name}: terminated");
        assert_eq!(s.finished, c.finished, "{name}: finished");
        match (c.error, &s.stream_error) {
            (None, None) => {}
            (Some(want), Some(got)) => assert!(got.contains(want), "{name}: error {got:?}"),
            (want, got) => panic!("{name}: stream error {got:?}, expected {want:?}"),
        }
        if c.result == Err(StreamError) {
            let detail = s.failure_detail.as_deref().unwrap();
            assert!(detail.contains(c.error.unwrap()), "{name}: {detail}");
        }
        assert_eq!(s.anomalies, c.anomalies, "{name}: anomalies");
        assert_eq!(
            (s.usage.prompt_tokens, s.usage.cached_prompt_tokens),
            c.prompt,
            "{name}: prompt tokens"
        );
        assert_eq!(s.server.prompt_seconds, c.prefill, "{name}: server prefill");
        if let (Ok(m), Some(p)) = (&o.result, c.prefill) {
            // A replay is faster than the capture: a prefill longer than the replay's TTFT
            // cannot lie inside it and is not believed.
            let p = Duration::from_secs_f64(p);
            let believed = (p <= m.ttft).then_some(p);
            assert_eq!(m.server_prefill, believed, "{name}");
            assert_eq!(m.ttft_overhead.is_some(), believed.is_some(), "{name}");
        }
    }
}

/// A Bedrock frame whose prelude CRC matches (so the body is an event stream) but whose lengths
/// or headers do not fit fails as a malformed event stream naming what did not fit, whether it
/// is the first frame or follows a good one; never as a body "without any event" with its binary
/// bytes quoted.
#[test]
fn a_bad_first_bedrock_frame_says_what_did_not_fit() {
    use llm_probe::decode::eventstream::{encode, HeaderValue};
    // A prelude (total, headers length) with its CRC, then the message CRC of what came before.
    let frame = |total: u32, headers: u32| {
        let mut b = [total.to_be_bytes(), headers.to_be_bytes()].concat();
        b.extend_from_slice(&crc32fast::hash(&b).to_be_bytes());
        b.extend_from_slice(&crc32fast::hash(&b).to_be_bytes());
        b
    };
    let many: Vec<(String, HeaderValue)> = (0..70)
        .map(|i| (format!("h{i}"), HeaderValue::Bool(true)))
        .collect();
    let many: Vec<(&str, HeaderValue)> =
        many.iter().map(|(n, v)| (n.as_str(), v.clone())).collect();
    let start = encode(
        &[
            (":event-type", HeaderValue::String("messageStart".into())),
            (
                ":content-type",
                HeaderValue::String("application/json".into()),
            ),
            (":message-type", HeaderValue::String("event".into())),
        ],
        br#"{"role":"assistant"}"#,
    );
    let cases = [
        (
            frame(16, 100),
            "lengths do not fit (total 16 bytes, headers 100 bytes)",
        ),
        (
            frame(3, 0),
            "lengths do not fit (total 3 bytes, headers 0 bytes)",
        ),
        (encode(&many, b"{}"), "more than 64 headers"),
    ];
    for (bad, want) in cases {
        for after_a_good_frame in [false, true] {
            let bytes = if after_a_good_frame {
                [start.clone(), bad.clone()].concat()
            } else {
                bad.clone()
            };
            let name = format!("{want} (after a good frame: {after_a_good_frame})");
            let o = run_every_way(Protocol::Bedrock, &bytes, &name);
            let f = o.result.as_ref().expect_err(&name);
            assert_eq!(f.reason, FailureReason::Decode, "{name}: {}", f.detail);
            assert_eq!(
                f.detail,
                format!("the event stream is malformed: a message's {want}")
                    .replace("a message's more", "a message has more"),
                "{name}"
            );
        }
    }
}

/// A lone UTF-16 surrogate escape in a JSON string (`"\ud800"`, as Python's `json.dumps` writes
/// for a string holding half a pair) is valid JSON that has no Unicode character: it is read as
/// U+FFFD and the token counts, on the typed fast path of OpenAI chunks and the general path of
/// the other protocols alike, instead of failing the probe as `decode`.
#[test]
fn a_lone_surrogate_escape_is_a_replacement_character_not_a_failure() {
    let chat = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\\ud800 lone\"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" \\udc00 and \\ud83d\\ude00\"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
        "data: [DONE]\n\n",
    );
    let ollama = concat!(
        "{\"model\":\"m\",\"message\":{\"role\":\"assistant\",\"content\":\"\\ud800 lone\"},\"done\":false}\n",
        "{\"model\":\"m\",\"message\":{\"role\":\"assistant\",\"content\":\"\\\\ud800 \\uDBFF\\u0041\"},\"done\":false}\n",
        "{\"model\":\"m\",\"message\":{\"role\":\"assistant\",\"content\":\"\"},\"done\":true,\"done_reason\":\"stop\",\"eval_count\":2}\n",
    );
    for (p, bytes) in [(Protocol::OpenAiChat, chat), (Protocol::Ollama, ollama)] {
        let o = run_every_way(p, bytes.as_bytes(), p.as_str());
        let s = summary(&o);
        assert_eq!(
            s.result.map(|(n, _)| n),
            Ok(2),
            "{p}: {:?}",
            s.failure_detail
        );
        assert_eq!(s.kinds, "O2", "{p}");
    }
}

#[test]
fn every_new_protocol_has_golden_streams() {
    for p in Protocol::ALL.iter().filter(|p| **p != Protocol::OpenAiChat) {
        let n = CASES.iter().filter(|c| c.protocol == *p).count();
        assert!(n >= 2, "{p} needs a normal and an error stream, has {n}");
        assert!(
            CASES
                .iter()
                .any(|c| c.protocol == *p && c.result == Err(StreamError)),
            "{p} needs its error-inside-200 stream"
        );
    }
    // Every hand-written file is in the table.
    for dir in std::fs::read_dir(format!("{FIXTURES}/protocols")).unwrap() {
        let dir = dir.unwrap();
        if !dir.file_type().unwrap().is_dir() {
            continue;
        }
        for f in std::fs::read_dir(dir.path()).unwrap() {
            let rel = format!(
                "protocols/{}/{}",
                dir.file_name().to_string_lossy(),
                f.unwrap().file_name().to_string_lossy()
            );
            assert!(CASES.iter().any(|c| c.file == rel), "{rel} has no case");
        }
    }
}

#[test]
fn token_instants_are_the_read_instants() {
    // Ollama in three reads: the first completes two lines (one reasoning), the second nothing
    // (half a line), the third the rest.
    let bytes = fixture("protocols/ollama/thinking-no-final-newline.ndjson");
    let second_line_end = bytes
        .windows(2)
        .enumerate()
        .filter(|(_, w)| w == b"\r\n")
        .nth(1)
        .unwrap()
        .0
        + 2;
    let t0 = Instant::now();
    let mut obs = Observations::new(t0);
    let mut r = StreamReader::new(Protocol::Ollama, &Limits::default());
    let ms = |n| t0 + Duration::from_millis(n);
    assert!(!r
        .feed(&bytes[..second_line_end], ms(100), &mut obs)
        .unwrap());
    assert!(!r
        .feed(
            &bytes[second_line_end..second_line_end + 10],
            ms(200),
            &mut obs
        )
        .unwrap());
    assert!(!r
        .feed(&bytes[second_line_end + 10..], ms(300), &mut obs)
        .unwrap());
    // The final line has no newline: it completes at the clean close.
    r.finish(ms(400), &mut obs).unwrap();
    let at: Vec<_> = obs.timeline.token_events.iter().map(|e| e.at).collect();
    assert_eq!(at, [ms(100), ms(100), ms(300)]);
    assert_eq!(obs.timeline.ended, Some(ms(400)));
    assert!(obs.terminated);
}

#[test]
fn server_prefill_and_overhead_from_llama_cpp_native() {
    // Whole stream in one read 80 ms after sent: TTFT 80 ms, server prefill 26.46 ms.
    let bytes = fixture("captured/llama-cpp-native.txt");
    let t0 = Instant::now();
    let mut obs = Observations::new(t0);
    let mut r = StreamReader::new(Protocol::LlamaCpp, &Limits::default());
    assert!(r
        .feed(&bytes, t0 + Duration::from_millis(80), &mut obs)
        .unwrap());
    let o = ProbeOutcome::conclude(
        "t".into(),
        "s".into(),
        "m".into(),
        SystemTime::now(),
        obs,
        None,
    );
    let m = o.result.unwrap();
    assert_eq!(m.server_prefill, Some(Duration::from_secs_f64(0.02646)));
    assert_eq!(
        m.ttft_overhead,
        Some(Duration::from_millis(80) - Duration::from_secs_f64(0.02646))
    );
}

// ---- requests ------------------------------------------------------------------------------

const KEY: &str = "sk-probe-SECRET-7c1d";

fn target(protocol: &str, base_url: &str, extra: &str) -> Arc<Target> {
    let yaml = format!(
        "scenarios:\n  - name: s\n    messages:\n      - {{role: system, content: \"Be brief.\"}}\n      - {{role: user, content: \"Hi\"}}\n    max_tokens: 32\n    extra_body: {{top_p: 0.9}}\ntargets:\n  - name: t\n    protocol: {protocol}\n    base_url: {base_url}\n    model: m1\n    api_key_env: PROBE_KEY\n    temperature: 0.5\n{extra}"
    );
    let cfg = config::parse(&yaml, "<test>", &|n| {
        (n == "PROBE_KEY").then(|| KEY.to_string())
    })
    .unwrap_or_else(|e| panic!("{e}\n{yaml}"));
    cfg.targets[0].clone()
}

struct Shape {
    protocol: &'static str,
    base_url: &'static str,
    extra: &'static str,
    url: &'static str,
    /// The one header that carries the key, and its exact value.
    auth: (&'static str, String),
    /// Other headers that must be present with these values.
    headers: &'static [(&'static str, &'static str)],
    /// Every top-level body key, sorted.
    keys: &'static [&'static str],
    /// (JSON pointer, expected value) pairs.
    values: Vec<(&'static str, serde_json::Value)>,
}

#[test]
fn request_shapes_and_the_key_in_exactly_one_header() {
    use serde_json::json;
    let bearer = ("authorization", format!("Bearer {KEY}"));
    let prompt = json!("[probe n1] Be brief.\n\nHi");
    let shapes = vec![
        Shape {
            protocol: "openai-chat",
            base_url: "http://h:8000/v1",
            extra: "",
            url: "http://h:8000/v1/chat/completions",
            auth: bearer.clone(),
            headers: &[("accept", "text/event-stream")],
            keys: &["max_tokens", "messages", "model", "stream", "stream_options", "temperature", "top_p"],
            values: vec![("/stream_options/include_usage", json!(true)), ("/messages/0/content", json!("[probe n1] Be brief."))],
        },
        Shape {
            protocol: "openai-completions",
            base_url: "http://h:8000/v1/",
            extra: "",
            url: "http://h:8000/v1/completions",
            auth: bearer.clone(),
            headers: &[],
            keys: &["max_tokens", "model", "prompt", "stream", "stream_options", "temperature", "top_p"],
            values: vec![("/prompt", prompt.clone()), ("/max_tokens", json!(32))],
        },
        Shape {
            protocol: "openai-responses",
            base_url: "http://h:8000/v1",
            extra: "",
            url: "http://h:8000/v1/responses",
            auth: bearer.clone(),
            headers: &[],
            keys: &["input", "max_output_tokens", "model", "stream", "temperature", "top_p"],
            values: vec![("/input/1/role", json!("user")), ("/max_output_tokens", json!(32)), ("/stream", json!(true))],
        },
        Shape {
            protocol: "anthropic",
            base_url: "https://api.anthropic.com/v1",
            extra: "",
            url: "https://api.anthropic.com/v1/messages",
            auth: ("x-api-key", KEY.to_string()),
            headers: &[("anthropic-version", "2023-06-01")],
            keys: &["max_tokens", "messages", "model", "stream", "system", "temperature", "top_p"],
            values: vec![
                ("/system", json!("[probe n1] Be brief.")),
                ("/messages", json!([{"role": "user", "content": "Hi"}])),
                ("/max_tokens", json!(32)),
            ],
        },
        Shape {
            protocol: "ollama",
            base_url: "http://h:11434",
            extra: "    extra_body: {options: {num_ctx: 4096, num_predict: 1}}\n",
            url: "http://h:11434/api/chat",
            auth: bearer.clone(),
            headers: &[("accept", "application/x-ndjson")],
            keys: &["messages", "model", "options", "stream", "top_p"],
            values: vec![
                // extra_body adds num_ctx but cannot override num_predict.
                ("/options", json!({"num_predict": 32, "temperature": 0.5, "num_ctx": 4096})),
                ("/stream", json!(true)),
            ],
        },
        Shape {
            protocol: "tgi",
            base_url: "http://h:3000",
            extra: "",
            url: "http://h:3000/generate_stream",
            auth: bearer.clone(),
            headers: &[],
            keys: &["inputs", "parameters", "top_p"],
            values: vec![
                ("/inputs", prompt.clone()),
                ("/parameters", json!({"max_new_tokens": 32, "details": true, "temperature": 0.5, "do_sample": true})),
            ],
        },
        Shape {
            protocol: "azure-openai",
            base_url: "https://res.openai.azure.com",
            extra: "    deployment: gpt4o-prod\n",
            url: "https://res.openai.azure.com/openai/deployments/gpt4o-prod/chat/completions?api-version=2024-10-21",
            auth: ("api-key", KEY.to_string()),
            headers: &[],
            keys: &["max_tokens", "messages", "stream", "stream_options", "temperature", "top_p"],
            values: vec![("/stream_options/include_usage", json!(true))],
        },
        Shape {
            protocol: "llama-cpp",
            base_url: "http://h:8080",
            extra: "",
            url: "http://h:8080/completion",
            auth: bearer.clone(),
            headers: &[],
            keys: &["model", "n_predict", "prompt", "stream", "temperature", "top_p"],
            values: vec![("/prompt", prompt.clone()), ("/n_predict", json!(32))],
        },
        Shape {
            protocol: "gemini",
            base_url: "https://generativelanguage.googleapis.com",
            extra: "",
            url: "https://generativelanguage.googleapis.com/v1beta/models/m1:streamGenerateContent?alt=sse",
            auth: ("x-goog-api-key", KEY.to_string()),
            headers: &[("accept", "text/event-stream")],
            keys: &["contents", "generationConfig", "systemInstruction", "top_p"],
            values: vec![
                ("/systemInstruction", json!({"parts": [{"text": "[probe n1] Be brief."}]})),
                ("/contents", json!([{"role": "user", "parts": [{"text": "Hi"}]}])),
                ("/generationConfig", json!({"maxOutputTokens": 32, "temperature": 0.5})),
            ],
        },
        Shape {
            protocol: "vertex-gemini",
            base_url: "https://us-central1-aiplatform.googleapis.com/v1/projects/p-1/locations/us-central1/",
            extra: "",
            url: "https://us-central1-aiplatform.googleapis.com/v1/projects/p-1/locations/us-central1/publishers/google/models/m1:streamGenerateContent?alt=sse",
            auth: bearer.clone(),
            headers: &[],
            keys: &["contents", "generationConfig", "systemInstruction", "top_p"],
            values: vec![("/generationConfig/maxOutputTokens", json!(32))],
        },
        Shape {
            // A Bedrock API key is a bearer token; without one the request is SigV4-signed
            // (tests/fast/protocols/bedrock.rs).
            protocol: "bedrock",
            base_url: "https://bedrock-runtime.us-east-1.amazonaws.com",
            extra: "",
            url: "https://bedrock-runtime.us-east-1.amazonaws.com/model/m1/converse-stream",
            auth: bearer.clone(),
            headers: &[("accept", "application/vnd.amazon.eventstream")],
            keys: &["inferenceConfig", "messages", "system", "top_p"],
            values: vec![
                ("/system", json!([{"text": "[probe n1] Be brief."}])),
                ("/messages", json!([{"role": "user", "content": [{"text": "Hi"}]}])),
                ("/inferenceConfig", json!({"maxTokens": 32, "temperature": 0.5})),
            ],
        },
    ];
    assert_eq!(shapes.len(), Protocol::ALL.len(), "one shape per protocol");
    for s in shapes {
        let t = target(s.protocol, s.base_url, s.extra);
        let spec = build_request(&t, &t.scenarios[0], Some("n1"));
        let p = s.protocol;
        assert_eq!(spec.url.as_str(), s.url, "{p}");
        let mut keys: Vec<_> = spec.body.as_object().unwrap().keys().cloned().collect();
        keys.sort();
        assert_eq!(keys, s.keys, "{p}: body keys");
        for (ptr, want) in &s.values {
            assert_eq!(spec.body.pointer(ptr), Some(want), "{p}: {ptr}");
        }
        for (name, value) in s.headers {
            assert!(
                spec.headers.iter().any(|(k, v)| k == name && v == value),
                "{p}: header {name}: {value} in {:?}",
                spec.headers.iter().map(|h| &h.0).collect::<Vec<_>>()
            );
        }
        // Identity asked for explicitly: without it a proxy may compress the stream.
        assert_eq!(
            spec.headers
                .iter()
                .filter(|(k, _)| k.eq_ignore_ascii_case("accept-encoding"))
                .collect::<Vec<_>>(),
            [&("accept-encoding".to_string(), "identity".to_string())],
            "{p}"
        );
        // The key: exactly once, in its header, nowhere else.
        let carrying: Vec<_> = spec
            .headers
            .iter()
            .filter(|(_, v)| v.contains(KEY))
            .collect();
        assert_eq!(carrying.len(), 1, "{p}: the key is in exactly one header");
        assert_eq!(
            (carrying[0].0.as_str(), carrying[0].1.clone()),
            (s.auth.0, s.auth.1),
            "{p}"
        );
        assert!(!spec.url.as_str().contains(KEY), "{p}: key in URL");
        assert!(!spec.body.to_string().contains(KEY), "{p}: key in body");
        for other in ["authorization", "x-api-key", "api-key", "x-goog-api-key"]
            .into_iter()
            .filter(|h| *h != s.auth.0)
        {
            assert!(
                !spec.headers.iter().any(|(k, _)| k == other),
                "{p}: unexpected {other} header"
            );
        }
    }
}

#[test]
fn request_details() {
    // Without a key, no auth header at all; TGI sends no temperature for 0 (it rejects 0).
    let yaml = "scenarios:\n  - name: s\n    messages: [{role: user, content: \"Hi\"}]\n    max_tokens: 8\n    temperature: 0\ntargets:\n  - name: t\n    protocol: tgi\n    base_url: http://h:3000\n    model: m\n";
    let cfg = config::parse(yaml, "<test>", &|_| None).unwrap();
    let t = &cfg.targets[0];
    let spec = build_request(t, &t.scenarios[0], None);
    assert_eq!(
        spec.body["parameters"],
        serde_json::json!({"max_new_tokens": 8, "details": true})
    );
    assert_eq!(spec.body["inputs"], "Hi");
    assert!(!spec.headers.iter().any(|(k, _)| k == "authorization"));

    // A configured anthropic-version wins and is not sent twice.
    let t = target(
        "anthropic",
        "http://h/v1",
        "    headers: {Anthropic-Version: \"2024-01-01\"}\n",
    );
    let spec = build_request(&t, &t.scenarios[0], None);
    let versions: Vec<_> = spec
        .headers
        .iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case("anthropic-version"))
        .map(|(_, v)| v.as_str())
        .collect();
    assert_eq!(versions, ["2024-01-01"]);

    // Azure: a custom api_version goes into the query.
    let t = target(
        "azure-openai",
        "https://r.openai.azure.com/",
        "    deployment: d\n    api_version: 2025-01-01-preview\n",
    );
    let spec = build_request(&t, &t.scenarios[0], None);
    assert_eq!(
        spec.url.as_str(),
        "https://r.openai.azure.com/openai/deployments/d/chat/completions?api-version=2025-01-01-preview"
    );
}

#[test]
fn protocol_specific_config_errors() {
    let base = "scenarios:\n  - name: s\n    messages: [{role: user, content: \"Hi\"}]\n    max_tokens: 8\ntargets:\n  - name: t\n    base_url: http://h\n    model: m\n";
    let err = |extra: &str| {
        config::parse(&format!("{base}{extra}"), "f.yaml", &|_| None)
            .err()
            .map(|e| e.to_string())
    };
    assert_eq!(
        err("    protocol: azure-openai\n").as_deref(),
        Some("f.yaml:6:5: targets[0].deployment: target \"t\": deployment is required with protocol azure-openai; set it to the deployment name from the Azure portal (the URL is {base_url}/openai/deployments/{deployment}/chat/completions).")
    );
    assert_eq!(
        err("    protocol: openai-chat\n    deployment: d\n").as_deref(),
        Some("f.yaml:10:17: targets[0].deployment: target \"t\": deployment is only used with protocol azure-openai, and this target's protocol is openai-chat; remove it.")
    );
    assert_eq!(
        err("    protocol: azure-openai\n    deployment: \"a/b\"\n").as_deref(),
        Some("f.yaml:10:17: targets[0].deployment: target \"t\": deployment \"a/b\" is not a valid Azure deployment name; use only letters, digits, \"-\", \"_\" and \".\".")
    );
    assert_eq!(
        err("    protocol: ollama\n    version_path: version\n").as_deref(),
        Some("f.yaml:10:19: targets[0].version_path: target \"t\": version_path \"version\" must be a path on the target's host starting with \"/\", without query or fragment, e.g. /version.")
    );
    assert_eq!(
        err("    protocol: anthropic\n    api_key_env: K\n    headers: {X-Api-Key: k}\n").map(|e| e.contains("both api_key_env and an X-Api-Key header are set, and the API key is sent as the x-api-key header")),
        Some(true)
    );
    assert!(err("    protocol: llama-cpp\n    version_path: /props\n").is_none());
    // Gemini's key header, set by hand beside api_key_env: one of them must go.
    assert_eq!(
        err("    protocol: gemini\n    api_key_env: K\n    headers: {X-Goog-Api-Key: k}\n").map(|e| e.contains("both api_key_env and an X-Goog-Api-Key header are set, and the API key is sent as the x-goog-api-key header")),
        Some(true)
    );
    assert!(err("    protocol: vertex-gemini\n    deployment: d\n")
        .is_some_and(|e| e.contains("deployment is only used with protocol azure-openai")));
}

/// A Bedrock model id of `.` or `..` would be a dot segment of the request path, which URL
/// normalisation removes (percent-encoded or not): the request and its signature would go to
/// `/model/converse-stream` or `/converse-stream`. It is refused at load, naming the file, the
/// field and the fix; a model id with dots and other characters is sent as it is.
#[test]
fn a_bedrock_model_id_that_is_a_dot_segment_is_refused() {
    let base = "scenarios:\n  - name: s\n    messages: [{role: user, content: \"Hi\"}]\n    max_tokens: 8\ntargets:\n  - name: t\n    base_url: https://bedrock-runtime.us-east-1.amazonaws.com\n    protocol: bedrock\n    api_key_env: K\n";
    let env = |v: &str| (v == "K").then(|| "k".to_string());
    for model in [".", ".."] {
        let yaml = format!("{base}    model: \"{model}\"\n");
        let err = config::parse(&yaml, "f.yaml", &env)
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some(format!("f.yaml:10:12: targets[0].model: target \"t\": model \"{model}\" cannot be a Bedrock model id: the request path would be /model/{model}/converse-stream, and \"{model}\" as a path segment is removed by URL normalisation, so the request would go elsewhere; set it to the model id, inference profile id or ARN to call, e.g. anthropic.claude-3-haiku-20240307-v1:0.").as_str()),
            "{model}"
        );
    }
    for model in ["...", "a..b", ".x"] {
        let yaml = format!("{base}    model: \"{model}\"\n");
        let cfg = config::parse(&yaml, "f.yaml", &env).unwrap();
        let t = &cfg.targets[0];
        let spec = build_request(t, &t.scenarios[0], None);
        assert_eq!(
            spec.url.as_str(),
            format!(
                "https://bedrock-runtime.us-east-1.amazonaws.com/model/{model}/converse-stream"
            ),
        );
    }
}

// ---- one real exchange: version_path and the server-timing metrics ---------------------------

/// A one-purpose HTTP/1.1 server on port 0: `GET /version` answers `{"version": "0.9.1"}`, any
/// POST answers the captured llama.cpp native stream. Returns the base URL and the request heads
/// it saw.
async fn tiny_server() -> (String, Arc<std::sync::Mutex<Vec<String>>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let log = log.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                let head_end = loop {
                    let n = sock.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        break i + 4;
                    }
                };
                let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
                let len: usize = head
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase()
                            .strip_prefix("content-length:")
                            .map(|v| v.trim().parse().unwrap())
                    })
                    .unwrap_or(0);
                while buf.len() < head_end + len {
                    let n = sock.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        break;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                }
                log.lock().unwrap().push(head.clone());
                let (ct, body) = if head.starts_with("GET /version ") {
                    ("application/json", br#"{"version":"0.9.1"}"#.to_vec())
                } else {
                    (
                        "text/event-stream",
                        fixture("captured/llama-cpp-native.txt"),
                    )
                };
                let resp = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: {ct}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                if ct == "text/event-stream" {
                    // The capture reports a 26.46 ms prefill: take at least that long, so the
                    // prefill fits inside the TTFT and is believed.
                    tokio::time::sleep(std::time::Duration::from_millis(30)).await;
                }
                let _ = sock.write_all(resp.as_bytes()).await;
                let _ = sock.write_all(&body).await;
                let _ = sock.shutdown().await;
            });
        }
    });
    (format!("http://{addr}"), seen)
}

#[tokio::test]
async fn version_path_and_server_timing_reach_the_metrics() {
    let (base, seen) = tiny_server().await;
    let t = target("llama-cpp", &base, "    version_path: /version\n");
    let prober = llm_probe::probe::Prober::new(t.clone()).unwrap();
    let outcome = prober.probe(&t.scenarios[0]).await;
    assert!(outcome.is_success(), "{:?}", outcome.result);
    assert_eq!(
        outcome.observations.identity.server_version.as_deref(),
        Some("0.9.1")
    );
    let m = outcome.result.as_ref().unwrap();
    assert_eq!(
        (m.output_tokens, m.token_count_source),
        (16, TokenCountSource::Server)
    );
    assert_eq!(m.server_prefill, Some(Duration::from_secs_f64(0.02646)));

    let heads = seen.lock().unwrap().clone();
    assert_eq!(heads.len(), 2, "{heads:?}");
    assert!(heads[0].starts_with("POST /completion "), "{}", heads[0]);
    assert!(heads[1].starts_with("GET /version "), "{}", heads[1]);
    assert!(
        !heads[1].contains(KEY),
        "the key is not sent to version_path"
    );

    let metrics = llm_probe::metrics::Metrics::new(&[]);
    metrics.observe(&outcome);
    let (_, text) = metrics.render(None);
    assert!(
        text.lines()
            .any(|l| l.starts_with("llm_probe_endpoint_info{")
                && l.contains(r#"server_version="0.9.1""#)),
        "{text}"
    );
    for name in [
        "llm_probe_server_prefill_seconds_count",
        "llm_probe_ttft_overhead_seconds_count",
    ] {
        assert!(
            text.lines()
                .any(|l| l.starts_with(name) && l.ends_with(" 1")),
            "{name} observed once:\n{text}"
        );
    }
    assert!(
        text.contains(r#"llm_probe_server_prefill_seconds_bucket{target="t",model="m1",scenario="s",le="0.05"} 1"#),
        "{text}"
    );
}

#[test]
fn example_file_has_a_loading_target_per_protocol() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/probes.example.yaml");
    let text = std::fs::read_to_string(path).unwrap();
    let (mut inside, mut out) = (false, String::new());
    for line in text.lines() {
        if line.contains("other server families (begin)") {
            inside = true;
        } else if line.contains("other server families (end)") {
            inside = false;
        } else if inside {
            // "  # - name: x" → "  - name: x"; "  #   # note" → "    # note" (a comment).
            if let Some(rest) = line.strip_prefix("  # ") {
                out.push_str("  ");
                out.push_str(rest);
            } else if line.trim() != "#" {
                out.push_str(line);
            }
            out.push('\n');
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    // Key files are read at load: the example's paths (e.g. a Kubernetes secret mount) point
    // at a temporary file here.
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("token");
    std::fs::write(&key, "k\n").unwrap();
    let mut files = 0;
    let out: String = out
        .lines()
        .map(|l| match l.split_once("api_key_file: ") {
            Some((indent, _)) => {
                files += 1;
                format!("{indent}api_key_file: {}\n", key.display())
            }
            None => format!("{l}\n"),
        })
        .collect();
    assert!(files > 0, "the example shows api_key_file on some target");
    let cfg = config::parse(&out, "probes.example.yaml", &|_| Some("k".into()))
        .unwrap_or_else(|e| panic!("{e}"));
    for p in Protocol::ALL {
        assert!(
            cfg.targets.iter().any(|t| t.protocol == *p),
            "no example target for {p}"
        );
    }
    let azure = cfg
        .targets
        .iter()
        .find(|t| t.protocol == Protocol::AzureOpenAi)
        .unwrap();
    assert_eq!(azure.deployment.as_deref(), Some("gpt-4o-prod"));
}
