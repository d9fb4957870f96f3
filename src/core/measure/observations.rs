//! Everything a probe learns from one exchange, written by the protocol adapters as the stream
//! arrives and read by [`crate::measure::measure`].

use std::time::Instant;

use super::failure::{prefix_within, Failure};
use super::split::ServerTimingSource;
use super::timeline::{Timeline, TokenKind};

/// Token counts the server reported in the stream. `None` = the server did not say (never 0).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Usage {
    /// Generated tokens (`usage.completion_tokens`, Anthropic `output_tokens`); includes reasoning.
    pub completion_tokens: Option<u64>,
    /// Prompt tokens as the server tokenized them (`usage.prompt_tokens`).
    pub prompt_tokens: Option<u64>,
    /// Prompt tokens served from the server's prefix cache
    /// (`usage.prompt_tokens_details.cached_tokens`).
    pub cached_prompt_tokens: Option<u64>,
}

/// The server's own timing and counts, where it reports them (llama.cpp's `timings` object on the
/// last chunk, Ollama's final line, TGI's `details` and `x-queue-time` header, vLLM's
/// per-request `metrics`). Units as the server sends them are converted: durations in seconds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServerTimings {
    /// Prompt (prefill) processing time, seconds (llama.cpp `timings.prompt_ms / 1000`, Ollama
    /// `prompt_eval_duration / 1e9`, vLLM `metrics.time_to_first_token_ms / 1000`, which vLLM
    /// measures from the request's scheduling to its first token).
    pub prompt_seconds: Option<f64>,
    /// Time the request waited in the engine's queue, seconds (vLLM
    /// `metrics.queue_time_ms / 1000`: queued → scheduled in the engine core; TGI
    /// `x-queue-time / 1000`).
    pub queue_seconds: Option<f64>,
    /// Who reported the queue, load or prefill time (the last source that did).
    pub source: Option<ServerTimingSource>,
    /// Model load time before the prompt was processed, seconds (Ollama `load_duration / 1e9`).
    pub load_seconds: Option<f64>,
    /// Prompt tokens the server evaluated, excluding cached ones (llama.cpp `timings.prompt_n`).
    pub prompt_tokens: Option<u64>,
    /// Generated tokens by the server's count (llama.cpp `timings.predicted_n`).
    pub predicted_tokens: Option<u64>,
    /// Generation (decode) time, seconds (llama.cpp `timings.predicted_ms / 1000`).
    pub predicted_seconds: Option<f64>,
    /// The server's own latency of the whole call, seconds (Amazon Bedrock
    /// `metadata.metrics.latencyMs / 1000`); `None` when not reported or not credible
    /// (negative, or longer than a day, the longest a probe can wait).
    pub latency_seconds: Option<f64>,
}

/// What the probe asked the server for: the bounds of the counts it may credibly report back
/// (see [`crate::measure::discard_incredible_counts`]). `None` = unknown (no bound from it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Asked {
    /// The largest token limit in the request body: `max_tokens` and its spellings
    /// (`max_completion_tokens`, `maxOutputTokens`, `max_new_tokens`, `n_predict`,
    /// `num_predict`), or a thinking budget, whichever is largest.
    pub output_tokens: Option<u64>,
    /// The request body's size in bytes.
    pub body_bytes: Option<u64>,
    /// The size of the generated long prompt the request carries (`prompt_tokens:`), tokens;
    /// `None` for a written prompt. It gives the prefill speeds and `prompt_truncated`.
    pub prompt_tokens: Option<u64>,
}

impl Asked {
    /// The limits of a JSON request `body` of `body_bytes` bytes: every integer whose key
    /// (at any depth) names tokens, a prediction or a budget counts as a token limit.
    pub fn of(body: &serde_json::Value, body_bytes: Option<usize>) -> Asked {
        fn largest(v: &serde_json::Value) -> Option<u64> {
            match v {
                serde_json::Value::Object(map) => (map.iter())
                    .filter_map(|(k, v)| {
                        let k = k.to_ascii_lowercase();
                        let limit = ["token", "predict", "budget"].iter().any(|w| k.contains(w));
                        let own = v.as_u64().filter(|_| limit);
                        own.into_iter().chain(largest(v)).max()
                    })
                    .max(),
                serde_json::Value::Array(items) => items.iter().filter_map(largest).max(),
                _ => None,
            }
        }
        Asked {
            output_tokens: largest(body),
            body_bytes: body_bytes.map(|n| n as u64),
            prompt_tokens: None,
        }
    }
}

/// What the backend revealed about itself; the labels of `llm_probe_endpoint_info`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Identity {
    /// The `model` field of the response chunks (may differ from the configured model).
    pub response_model: Option<String>,
    /// `system_fingerprint` (llama.cpp build, TGI version, …), when present and non-empty.
    pub system_fingerprint: Option<String>,
    /// The HTTP `server` response header.
    pub server_header: Option<String>,
    /// The `version` of the target's `version_path` endpoint (e.g. vLLM `GET /version`).
    pub server_version: Option<String>,
}

/// Something that does not fail a probe but makes its numbers less trustworthy. A fixed set:
/// the `kind` label of `llm_probe_stream_anomalies_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Anomaly {
    /// Most tokens arrived within a few milliseconds at the end: a buffering proxy.
    CollapsedStream,
    /// The server counted more tokens than there were token-bearing events.
    MultiTokenEvents,
    /// The stream carried no usage/token count; N was counted from events.
    MissingUsage,
    /// The server's count was below the number of token events (each carries at least one
    /// token), so it was not believed and N was counted from events.
    CountBelowEvents,
    /// Bytes after the last complete event at end of stream, or after the protocol's terminal
    /// event (not a harmless `[DONE]`, repeated terminator or keep-alive).
    TrailingBytes,
    /// A `data:` payload that is neither JSON nor a known sentinel (e.g. `data: : keepalive`).
    NonJsonData,
    /// An event type or shape this protocol does not know.
    UnknownEvent,
    /// The stream closed cleanly after a finish reason but without its terminator.
    MissingTerminator,
    /// The server compressed the stream (`Content-Encoding` gzip, deflate, br or zstd) although
    /// the probe asked for `identity`; it was decoded as each compressed read arrived.
    CompressedStream,
    /// A count the server reported was far above what the probe asked for (output tokens
    /// above twice the request's limit, prompt tokens above the request's bytes plus an
    /// allowance), so it was not believed: N was counted from events, the prompt count is
    /// unknown.
    CountAboveRequest,
    /// The server counted far fewer prompt tokens than the generated long prompt has (below
    /// three quarters of `prompt_tokens`): it cut the prompt, to its context most likely.
    PromptTruncated,
}

impl Anomaly {
    /// Every kind, in label order.
    pub const ALL: [Anomaly; 11] = [
        Anomaly::CollapsedStream,
        Anomaly::MultiTokenEvents,
        Anomaly::MissingUsage,
        Anomaly::CountBelowEvents,
        Anomaly::TrailingBytes,
        Anomaly::NonJsonData,
        Anomaly::UnknownEvent,
        Anomaly::MissingTerminator,
        Anomaly::CompressedStream,
        Anomaly::CountAboveRequest,
        Anomaly::PromptTruncated,
    ];

    /// The metric label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Anomaly::CollapsedStream => "collapsed_stream",
            Anomaly::MultiTokenEvents => "multi_token_events",
            Anomaly::MissingUsage => "missing_usage",
            Anomaly::CountBelowEvents => "count_below_events",
            Anomaly::TrailingBytes => "trailing_bytes",
            Anomaly::NonJsonData => "non_json_data",
            Anomaly::UnknownEvent => "unknown_event",
            Anomaly::MissingTerminator => "missing_terminator",
            Anomaly::CompressedStream => "compressed_stream",
            Anomaly::CountAboveRequest => "count_above_request",
            Anomaly::PromptTruncated => "prompt_truncated",
        }
    }
}

/// The running record of one probe, filled in by the probe loop and the protocol adapter.
#[derive(Debug, Clone)]
pub struct Observations {
    /// The marks.
    pub timeline: Timeline,
    /// HTTP status, once headers arrived.
    pub http_status: Option<u16>,
    /// Server-reported counts.
    pub usage: Usage,
    /// Server-reported timing (llama.cpp).
    pub server_timings: ServerTimings,
    /// Backend identity.
    pub identity: Identity,
    /// Anomalies seen, each at most once, in the order first seen.
    pub anomalies: Vec<Anomaly>,
    /// The protocol's terminator was seen (`[DONE]`, `message_stop`, …).
    pub terminated: bool,
    /// A finish/stop reason was seen (the generation is complete even if the terminator is missing).
    pub finished: bool,
    /// The first finish/stop reason the server named (`stop`, `length`, `content_filter`,
    /// Anthropic's `refusal`, a Responses `incomplete_details.reason`), at most 64 characters,
    /// where the protocol names one: it tells why a stream without a token was empty.
    pub finish_reason: Option<String>,
    /// An error reported inside the stream (bounded text), if any.
    pub stream_error: Option<String>,
    /// That error was the server saying it is overloaded (`overloaded_error`): the probe fails
    /// with reason `overloaded`, not `stream_error`.
    pub overloaded: bool,
    /// Body bytes received.
    pub bytes: u64,
    /// How long the server asked clients to wait (`Retry-After` on a 429, 503 or 529), capped at an
    /// hour; the scheduler holds the next probe of this pair back until it has passed.
    pub retry_after: Option<std::time::Duration>,
    /// The rate-limit windows the response head described (hosted APIs' `x-ratelimit-*` and
    /// `anthropic-ratelimit-*` headers); `None` when it had none, or no head came.
    pub rate_limits: Option<super::RateLimits>,
    /// The first bytes of the response body, kept only when a debug probe asks for them.
    pub raw_excerpt: Vec<u8>,
    /// For each read that completed token events and carried a kernel receive timestamp: how
    /// long after the kernel received its bytes the probe's task read them (the probe's own
    /// delay, `llm_probe_read_delay_seconds`). Empty for read-instant probes.
    pub read_delays: Vec<std::time::Duration>,
    /// The target's credentials were read again from their changed files just before this
    /// probe (`llm_probe_credential_reloads_total`).
    pub credentials_reloaded: bool,
    /// What this probe cost at the target's prices (`cost:`), from the prompt and output
    /// tokens the server reported; `None` when the target has no prices
    /// (`llm_probe_probe_cost_total`).
    pub cost: Option<f64>,
    /// The W3C `traceparent` header this probe's request carried (`00-TRACEID-SPANID-01`);
    /// `None` when no request was sent, or the target's own value is secret, not visible
    /// ASCII or longer than 1 KiB (never cut).
    pub traceparent: Option<String>,
    /// The `x-request-id` header this probe's request carried; `None` as for `traceparent`.
    pub request_id: Option<String>,
    /// The answer text, kept apart from reasoning, and the tool calls, for the answer checks
    /// ([`crate::check`]).
    pub answer: super::answer::Answer,
    /// A prefix-cache canary's pair (`cache_canary: true`): the TTFT of this (cold) request
    /// and of the same prompt sent again right after it; `None` for other scenarios.
    pub cache_canary: Option<CacheCanary>,
    /// Each request of a multi-turn probe (`turns:`), in order, the first included: empty for
    /// a one-request scenario. The probe's own numbers are the first turn's.
    pub turns: Vec<Turn>,
    /// What the request asked for: the bounds of the counts the server may report.
    pub asked: Asked,
    /// An output count the server reported was above [`Observations::asked`]'s bound and was
    /// forgotten (`count_above_request`): N comes from the events, and that is no missing usage.
    pub output_count_forgotten: bool,
    /// What the engine's own `/metrics` said just before the request (`server_metrics_url:`,
    /// [`crate::engine`]): its load, or why it could not be read; `None` when the target has
    /// no `server_metrics_url`.
    pub server_load: Option<crate::engine::EngineScrape>,
}

/// One request of a multi-turn probe (see [`Observations::turns`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Turn {
    /// The turn's number, from 1 (the `turn` label).
    pub turn: usize,
    /// TTFT of a turn that succeeded.
    pub ttft: Option<std::time::Duration>,
    /// Output tokens per second of a turn that succeeded (N ≥ 2).
    pub output_tokens_per_second: Option<f64>,
    /// Output tokens the turn cost (N of a success, the server's count of a failure).
    pub output_tokens: Option<u64>,
    /// The server's prompt count: the whole conversation so far.
    pub prompt_tokens: Option<u64>,
    /// Prompt tokens the server served from its prefix cache: on a later turn, the earlier
    /// turns when the cache works.
    pub cached_prompt_tokens: Option<u64>,
    /// The server's own prefill time of a turn that succeeded, where it reports one: what its
    /// prefix cache saved shows here first.
    pub server_prefill: Option<std::time::Duration>,
    /// Why the turn failed (the probe then failed with it, and no later turn was sent).
    pub failure: Option<super::FailureReason>,
}

/// A prefix-cache canary: the same prompt, with a fresh nonce at its start, sent twice back to
/// back; the second request's prefix is in the server's cache, so it should start faster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheCanary {
    /// TTFT of the first request (its prefix is new to the server).
    pub cold_ttft: std::time::Duration,
    /// TTFT of the second request; `None` when it failed.
    pub warm_ttft: Option<std::time::Duration>,
    /// Prompt tokens the server reported serving from its cache on the second request
    /// (`usage.prompt_tokens_details.cached_tokens`), where it reports them.
    pub warm_cached_tokens: Option<u64>,
}

impl CacheCanary {
    /// Warm TTFT / cold TTFT: below 1 when the cache helps; `None` without a warm TTFT or
    /// with a zero cold one.
    pub fn ratio(&self) -> Option<f64> {
        let cold = self.cold_ttft.as_secs_f64();
        (cold > 0.0).then_some(())?;
        Some(self.warm_ttft?.as_secs_f64() / cold)
    }
}

impl Observations {
    /// The trace id of the `traceparent` this probe sent ([`Observations::traceparent`]), when
    /// it has the W3C shape (a target's own non-W3C value, or none sent: `None`).
    pub fn trace_id(&self) -> Option<super::TraceId> {
        self.traceparent
            .as_deref()
            .and_then(super::TraceId::of_traceparent)
    }

    /// Empty observations for a request sent at `sent`.
    pub fn new(sent: Instant) -> Self {
        Observations {
            timeline: Timeline::new(sent),
            http_status: None,
            usage: Usage::default(),
            server_timings: ServerTimings::default(),
            identity: Identity::default(),
            anomalies: Vec::new(),
            output_count_forgotten: false,
            terminated: false,
            finished: false,
            finish_reason: None,
            stream_error: None,
            overloaded: false,
            rate_limits: None,
            bytes: 0,
            retry_after: None,
            raw_excerpt: Vec::new(),
            read_delays: Vec::new(),
            credentials_reloaded: false,
            cost: None,
            traceparent: None,
            request_id: None,
            answer: super::answer::Answer::default(),
            cache_canary: None,
            turns: Vec::new(),
            asked: Asked::default(),
            server_load: None,
        }
    }

    /// Records a token-bearing event.
    pub fn token(&mut self, at: Instant, kind: TokenKind) {
        self.timeline.token(at, kind);
    }

    /// Marks the generation finished, for the server's `reason` (the first one is kept, cut to
    /// 64 characters).
    pub fn finish(&mut self, reason: &str) {
        self.finished = true;
        if self.finish_reason.is_none() && !reason.is_empty() {
            self.finish_reason = Some(reason.chars().take(64).collect());
        }
    }

    /// Records an anomaly once.
    pub fn anomaly(&mut self, kind: Anomaly) {
        if !self.anomalies.contains(&kind) {
            self.anomalies.push(kind);
        }
    }

    /// Records an error reported inside the stream; the first one wins. `message` is cut to
    /// [`Failure::MAX_DETAIL`] (512) bytes.
    pub fn stream_error(&mut self, message: &str) {
        if self.stream_error.is_none() {
            let cut = prefix_within(message, Failure::MAX_DETAIL);
            self.stream_error = Some(cut.to_string());
        }
    }

    /// Records an error reported inside the stream ([`Observations::stream_error`]) and whether
    /// its type, as the server named it (`error.type`), says the server is overloaded.
    pub fn stream_error_of_type(&mut self, message: &str, kind: Option<&str>) {
        if self.stream_error.is_none() {
            self.overloaded = kind == Some("overloaded_error");
        }
        self.stream_error(message);
    }

    /// Sets a field of the identity if the value is present and non-empty, keeping the first.
    pub fn identity_field(slot: &mut Option<String>, value: Option<&str>) {
        if slot.is_none() {
            if let Some(v) = value.filter(|v| !v.is_empty()) {
                *slot = Some(v.chars().take(128).collect());
            }
        }
    }
}
