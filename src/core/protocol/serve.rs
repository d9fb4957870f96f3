//! The server side of every protocol, as the built-in simulator plays it: which request paths
//! serve a protocol ([`protocol_for_path`]), and the bytes of each part of a scripted stream in
//! its shapes ([`ServeWire`]: preamble, token event, tool call, error inside the 200, end of
//! generation, terminator, keep-alive, the faults' broken events) and of its error answers.
//!
//! This file owns the trait, the data it is given ([`Ctx`], [`End`], [`RequestMetrics`]), the
//! SSE framing most protocols share and the routing. Each protocol's shapes live beside its
//! adapter, in a `serve` submodule (`openai_chat/serve.rs`, `bedrock/serve.rs`, …), and its
//! endpoint path is the one constant its request builder appends to `base_url`. The timing
//! (when each part is sent) is the simulator's.

use std::time::Duration;

use bytes::Bytes;
use serde_json::{json, Value};

use crate::config::Protocol;

/// What every part of one scripted stream needs to know.
#[derive(Debug, Clone)]
pub struct Ctx {
    /// The `model` field.
    pub model: String,
    /// Output tokens of this stream (after the request's cap).
    pub tokens: u32,
    /// Whether the stream opens with reasoning tokens.
    pub reasoning: bool,
    /// How many of the output tokens are reasoning (Gemini's `thoughtsTokenCount`).
    pub reasoning_tokens: u32,
    /// Scripted TTFT, reported as the server's own prefill time where the protocol has one.
    pub ttft: Duration,
    /// Scripted time from the first to the last token event.
    pub decode: Duration,
    /// Prompt tokens reported in the usage: the request's, or the context's size when it was
    /// truncated.
    pub prompt_tokens: u64,
    /// Of them, served from the prefix cache (`None`: the server has no prefix cache).
    pub cached_prompt_tokens: Option<u64>,
}

impl Ctx {
    /// The same stream without a single token (what [`ServeWire::terminator_only`] reports).
    pub fn empty(&self) -> Ctx {
        Ctx {
            tokens: 0,
            decode: Duration::ZERO,
            ..self.clone()
        }
    }
}

/// How a protocol's stream ends (the faults that leave parts out).
#[derive(Debug, Clone, Copy)]
pub struct End {
    /// Send the token count (usage, `eval_count`, `details`, `timings`).
    pub count: bool,
    /// Send the terminator.
    pub terminator: bool,
    /// vLLM's per-request metrics to put beside the usage (OpenAI chat, completions and
    /// Responses), when the load model asks for them.
    pub metrics: Option<RequestMetrics>,
}

impl End {
    /// A whole end: count and terminator, no per-request metrics.
    pub const ALL: End = End {
        count: true,
        terminator: true,
        metrics: None,
    };
}

/// What vLLM's `--enable-per-request-metrics` reports, in the simulator's terms.
#[derive(Debug, Clone, Copy)]
pub struct RequestMetrics {
    /// Arrival → slot (vLLM: queued → scheduled).
    pub queue: Duration,
    /// Slot → first token event handed to the connection (vLLM: scheduled → first token).
    pub first_token: Duration,
    /// First → last token event.
    pub generation: Duration,
}

impl RequestMetrics {
    /// The `metrics` object of `n` output tokens, milliseconds as vLLM sends them (fractional).
    pub fn json(self, n: u32) -> Value {
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        let mut m = json!({
            "time_to_first_token_ms": ms(self.first_token),
            "generation_time_ms": ms(self.generation),
            "queue_time_ms": ms(self.queue),
        });
        if n > 1 {
            m["mean_itl_ms"] = json!(ms(self.generation) / f64::from(n - 1));
        }
        m
    }
}

/// The server side of one wire shape: the bytes of every part of a scripted stream, and the
/// protocol's error answers. The defaults are the common case: SSE `data: …` events, no
/// preamble, no tools, OpenAI's error bodies and rate-limit headers.
pub trait ServeWire: Sync {
    /// The request's cap on output tokens, from the protocol's own field.
    fn max_tokens(&self, body: &Value) -> Option<u64>;

    /// The response's content type.
    fn content_type(&self) -> &'static str {
        "text/event-stream"
    }

    /// Frames one payload; `event` is the message's `type`, an SSE `event:` line where the
    /// protocol names its events.
    fn frame_raw(&self, _event: Option<&str>, payload: &[u8]) -> Vec<u8> {
        sse(None, b"data: ", payload, b"\n\n")
    }

    /// Frames JSON messages (each framed with its `type`) into one write.
    fn frame(&self, msgs: &[Value]) -> Bytes {
        let mut out = Vec::new();
        for m in msgs {
            out.extend(self.frame_raw(m["type"].as_str(), m.to_string().as_bytes()));
        }
        out.into()
    }

    /// What is sent at once with the headers.
    fn preamble(&self, _ctx: &Ctx) -> Bytes {
        Bytes::new()
    }

    /// The JSON of one token event carrying `text` (`index` = tokens sent before it).
    fn token_msg(&self, ctx: &Ctx, text: &str, reasoning: bool, index: u32) -> Value;

    /// One token event; `first_output_after_reasoning` closes the reasoning block where the
    /// protocol has blocks (Anthropic, Responses, Bedrock) in the same write.
    fn token(
        &self,
        ctx: &Ctx,
        text: &str,
        reasoning: bool,
        _first_output_after_reasoning: bool,
        index: u32,
    ) -> Bytes {
        self.frame(&[self.token_msg(ctx, text, reasoning, index)])
    }

    /// Whether the protocol has tool calls (its own [`ServeWire::tool_call`]).
    fn has_tools(&self) -> bool {
        false
    }

    /// Whether the protocol sends a tool call whole in one event (Ollama, Gemini: `arguments`
    /// / `args` is an object), rather than its arguments in fragments.
    fn whole_tool_calls(&self) -> bool {
        false
    }

    /// One tool-call event in the protocol's shape: the call opens with its `name` on its first
    /// event, then argument fragments; a protocol with whole calls sends the name with all of
    /// `arguments` at once. A protocol without tools gets the text as a token.
    fn tool_call(&self, ctx: &Ctx, _name: Option<&str>, arguments: &str) -> Bytes {
        self.token(ctx, arguments, false, false, 0)
    }

    /// A token event whose JSON breaks off (it starts as JSON: a `decode` failure, not an
    /// anomaly).
    fn broken_json(&self, ctx: &Ctx) -> Bytes {
        let msg = self.token_msg(ctx, "x", false, 0);
        let s = msg.to_string();
        let cut = &s.as_bytes()[..s.len() - 2];
        self.frame_raw(msg["type"].as_str(), cut).into()
    }

    /// A token event whose text is not UTF-8.
    fn invalid_utf8(&self, ctx: &Ctx) -> Bytes {
        let msg = self.token_msg(ctx, "@@BAD@@", false, 0);
        let s = msg.to_string();
        let (a, b) = s.split_once("@@BAD@@").expect("the marker is in the JSON");
        let mut payload = a.as_bytes().to_vec();
        payload.extend_from_slice(b"\xff\xfe");
        payload.extend_from_slice(b.as_bytes());
        self.frame_raw(msg["type"].as_str(), &payload).into()
    }

    /// The start of one endless line (no line end follows), for the huge-line fault.
    fn huge_line_prefix(&self) -> &'static [u8] {
        b"data: "
    }

    /// A comment keep-alive where the framing has comments (SSE).
    fn keepalive(&self) -> Option<Bytes> {
        Some(Bytes::from_static(b": keep-alive\n\n"))
    }

    /// The protocol's error inside a 200 stream (`after_tokens`: the fault after three tokens,
    /// else the stream's only event; [`stream_error_message`] says which).
    fn error(&self, ctx: &Ctx, after_tokens: bool) -> Bytes;

    /// The writes after the last token: finish, count (unless `end.count` is false) and
    /// terminator (unless `end.terminator` is false). Where the count travels inside the
    /// terminator, no terminator means no count either.
    fn end(&self, ctx: &Ctx, end: End) -> Vec<Bytes>;

    /// A stream that ends without a single token: the terminator (with a count of 0 where the
    /// protocol carries one in it) and nothing else. By default the whole end of an empty
    /// stream.
    fn terminator_only(&self, ctx: &Ctx) -> Bytes {
        self.end(&ctx.empty(), End::ALL).concat().into()
    }

    /// The body of the 429 that refuses a request past the quota.
    fn rate_limit_body(&self) -> &'static [u8] {
        br#"{"error":{"message":"rate limit reached for requests","type":"rate_limit"}}"#
    }

    /// The headers that say what is left of a quota of `limit` requests: `remaining` of them,
    /// for `left` more (OpenAI's `x-ratelimit-*`).
    fn rate_limit_headers(
        &self,
        limit: u32,
        remaining: u32,
        left: Duration,
    ) -> Vec<(String, String)> {
        vec![
            ("x-ratelimit-limit-requests".into(), limit.to_string()),
            (
                "x-ratelimit-remaining-requests".into(),
                remaining.to_string(),
            ),
            (
                "x-ratelimit-reset-requests".into(),
                format!("{}ms", left.as_millis()),
            ),
        ]
    }

    /// The body of a scripted HTTP 500 (`rate_limited`: of a scripted HTTP 429 instead).
    fn http_error_body(&self, rate_limited: bool) -> &'static [u8] {
        if rate_limited {
            br#"{"error":{"message":"rate limited","type":"rate_limit"}}"#
        } else {
            br#"{"error":{"message":"simulated internal error","type":"server_error"}}"#
        }
    }

    /// The error body of a prompt of `prompt` tokens refused by a context of `limit`, in the
    /// shape and words of the protocol's servers.
    fn context_error(&self, prompt: u64, limit: u64) -> Value {
        json!({"error": {"type": "invalid_request_error", "code": "context_length_exceeded",
            "message": format!("This model's maximum context length is {limit} tokens. However, you requested {prompt} tokens in the messages. Please reduce the length of the messages.")}})
    }
}

/// The message of a scripted error inside a 200 stream, which says which fault it is.
pub fn stream_error_message(after_tokens: bool) -> &'static str {
    if after_tokens {
        "simulated error after tokens"
    } else {
        "simulated error inside a 200 stream"
    }
}

/// One SSE event: an `event:` line when `event` is given, then `data` (`data: ` or TGI's
/// `data:`), the payload and `line_end` (`\n\n`, or Gemini's `\r\n\r\n`).
pub(super) fn sse(event: Option<&str>, data: &[u8], payload: &[u8], line_end: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + 32);
    if let Some(e) = event {
        out.extend_from_slice(format!("event: {e}\n").as_bytes());
    }
    out.extend_from_slice(data);
    out.extend_from_slice(payload);
    out.extend_from_slice(line_end);
    out
}

/// The protocols in the order the simulator's 404 lists their endpoints.
const SERVED: [Protocol; 11] = [
    Protocol::OpenAiChat,
    Protocol::OpenAiCompletions,
    Protocol::OpenAiResponses,
    Protocol::Anthropic,
    Protocol::Ollama,
    Protocol::Tgi,
    Protocol::LlamaCpp,
    Protocol::AzureOpenAi,
    Protocol::Gemini,
    Protocol::VertexGemini,
    Protocol::Bedrock,
];

/// The protocol whose endpoint `path` is, as real servers route (a trailing `/` allowed). Only
/// what a real server serves: a `base_url` with a doubled endpoint path
/// (`…/v1/chat/completions/chat/completions`) or without its `/v1` matches nothing.
pub fn protocol_for_path(path: &str) -> Option<Protocol> {
    let path = path.trim_end_matches('/');
    SERVED.into_iter().find(|&p| serves(p, path))
}

/// The wire shape `protocol` is served in (Azure OpenAI's is OpenAI chat's; AI Studio and
/// Vertex AI share Gemini's).
pub fn serve_wire(protocol: Protocol) -> &'static dyn ServeWire {
    use super::{
        anthropic, bedrock, gemini, llama_cpp, ollama, openai_chat, openai_responses, tgi,
    };
    match protocol {
        Protocol::OpenAiChat | Protocol::AzureOpenAi => &openai_chat::serve::CHAT,
        Protocol::OpenAiCompletions => &openai_chat::serve::COMPLETIONS,
        Protocol::OpenAiResponses => &openai_responses::serve::WIRE,
        Protocol::Anthropic => &anthropic::serve::WIRE,
        Protocol::Ollama => &ollama::serve::WIRE,
        Protocol::Tgi => &tgi::serve::WIRE,
        Protocol::LlamaCpp => &llama_cpp::serve::WIRE,
        Protocol::Gemini | Protocol::VertexGemini => &gemini::serve::WIRE,
        Protocol::Bedrock => &bedrock::serve::WIRE,
    }
}

/// Every endpoint the simulator serves, as its 404 lists them (`…, … and …`), variable segments in
/// braces.
pub fn served_paths() -> String {
    let shown: Vec<String> = SERVED.into_iter().map(shown_path).collect();
    let (last, rest) = shown.split_last().expect("SERVED is not empty");
    format!("{} and {last}", rest.join(", "))
}

/// Whether `path` (without a trailing `/`) is `protocol`'s endpoint.
fn serves(protocol: Protocol, path: &str) -> bool {
    use super::{
        anthropic, azure_openai, bedrock, gemini, llama_cpp, ollama, openai_completions,
        openai_responses, tgi,
    };
    match protocol {
        Protocol::OpenAiChat => v1(path) == Some(super::openai_chat::PATH),
        Protocol::OpenAiCompletions => v1(path) == Some(openai_completions::PATH),
        Protocol::OpenAiResponses => v1(path) == Some(openai_responses::PATH),
        Protocol::Anthropic => v1(path) == Some(anthropic::PATH),
        Protocol::Ollama => root(path) == Some(ollama::PATH),
        Protocol::Tgi => root(path) == Some(tgi::PATH),
        Protocol::LlamaCpp => root(path) == Some(llama_cpp::PATH),
        Protocol::AzureOpenAi => azure_openai::serve_deployment(path).is_some(),
        Protocol::Gemini => gemini::serve::is_ai_studio_path(path),
        Protocol::VertexGemini => gemini::serve::is_vertex_path(path),
        Protocol::Bedrock => bedrock::serve::model_id(path).is_some(),
    }
}

/// `protocol`'s endpoint as the 404 shows it, variable segments in braces.
fn shown_path(protocol: Protocol) -> String {
    use super::{
        anthropic, azure_openai, bedrock, gemini, llama_cpp, ollama, openai_chat,
        openai_completions, openai_responses, tgi,
    };
    match protocol {
        Protocol::OpenAiChat => format!("/v1/{}", openai_chat::PATH),
        Protocol::OpenAiCompletions => format!("/v1/{}", openai_completions::PATH),
        Protocol::OpenAiResponses => format!("/v1/{}", openai_responses::PATH),
        Protocol::Anthropic => format!("/v1/{}", anthropic::PATH),
        Protocol::Ollama => format!("/{}", ollama::PATH),
        Protocol::Tgi => format!("/{}", tgi::PATH),
        Protocol::LlamaCpp => format!("/{}", llama_cpp::PATH),
        Protocol::AzureOpenAi => format!("/{}", azure_openai::path("{d}")),
        Protocol::Gemini => format!("/{}", gemini::serve::ai_studio_path("{m}")),
        Protocol::VertexGemini => format!(
            "/v1/projects/{{p}}/locations/{{l}}/{}",
            gemini::serve::vertex_path("{m}")
        ),
        Protocol::Bedrock => format!("/{}", bedrock::path("{id}")),
    }
}

/// The endpoint of a server whose API is under `/v1` (OpenAI, Anthropic): `/v1/x` → `x`.
fn v1(path: &str) -> Option<&str> {
    path.strip_prefix("/v1/")
}

/// The endpoint of a server whose API is at its root (Ollama, TGI, llama.cpp): `/x` → `x`.
fn root(path: &str) -> Option<&str> {
    path.strip_prefix('/')
}

/// The one non-empty segment of `path` between `/{before}/` and `/{after}` (a deployment, a
/// model id), if `path` is that shape.
pub(super) fn segment_between<'a>(path: &'a str, before: &str, after: &str) -> Option<&'a str> {
    root(path)?
        .strip_prefix(before)?
        .strip_prefix('/')?
        .strip_suffix(after)?
        .strip_suffix('/')
        .filter(|s| !s.is_empty() && !s.contains('/'))
}

/// A tool call's arguments as the protocols that send them as a JSON object (Gemini, Ollama)
/// carry them: the object, or the text as a string when it is not JSON.
pub(crate) fn arguments_value(arguments: &str) -> Value {
    serde_json::from_str(arguments).unwrap_or_else(|_| Value::String(arguments.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_endpoint_is_served_exactly() {
        for p in SERVED {
            let shown = shown_path(p);
            let path = (shown.replace("{d}", "dep").replace("{m}", "m"))
                .replace("{p}", "p")
                .replace("{l}", "l")
                .replace("{id}", "id");
            assert_eq!(protocol_for_path(&path), Some(p), "{path}");
            assert_eq!(protocol_for_path(&format!("{path}/")), Some(p), "{path}/");
        }
        for bad in [
            "/v1/chat/completions/chat/completions",
            "/chat/completions",
            "/v1/api/chat",
            "/openai/deployments//chat/completions",
            "/openai/deployments/a/b/chat/completions",
            "/v1/generate_stream",
        ] {
            assert_eq!(protocol_for_path(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_404_lists_every_endpoint() {
        assert_eq!(
            served_paths(),
            "/v1/chat/completions, /v1/completions, /v1/responses, /v1/messages, /api/chat, \
             /generate_stream, /completion, /openai/deployments/{d}/chat/completions, \
             /v1beta/models/{m}:streamGenerateContent, \
             /v1/projects/{p}/locations/{l}/publishers/google/models/{m}:streamGenerateContent \
             and /model/{id}/converse-stream"
        );
    }
}
