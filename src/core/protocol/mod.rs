//! Per-API adapters: each turns a (target, scenario) into an HTTP request and the decoded events
//! of its stream into marks on the probe's [`Observations`]. One file per protocol, one shape
//! (the [`StreamProtocol`] trait), over the shared decoder and timeline. Beside each adapter, in
//! its `serve` submodule, the protocol's server side (the [`serve::ServeWire`] the simulator
//! plays), which serves the endpoint path the adapter's request uses.

mod anthropic;
mod azure_openai;
mod bedrock;
mod gemini;
mod json;
mod llama_cpp;
mod ollama;
mod openai_chat;
mod openai_chunk;
mod openai_completions;
mod openai_responses;
mod prompt;
pub mod serve;
mod structured;
mod tgi;
mod usage;

use std::time::Instant;

use crate::config::{Protocol, Scenario, Target};
use crate::decode::sse::SseEvent;
use crate::measure::{Failure, Observations, ServerTimingSource};

pub(crate) use json::{error_message, has_text};
pub use prompt::{new_nonce, render_messages, render_prompt, result_object, texts, tool_name};

/// An HTTP request ready to send: always a `POST` with a JSON body. `Debug` shows header
/// names only (the values may hold the API key).
#[derive(Clone)]
pub struct RequestSpec {
    /// Full URL of the streaming endpoint.
    pub url: reqwest::Url,
    /// Headers in addition to `content-type: application/json`. Values may hold the API key:
    /// never log them.
    pub headers: Vec<(String, String)>,
    /// The JSON body.
    pub body: serde_json::Value,
}

impl std::fmt::Debug for RequestSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let headers: Vec<(&str, &str)> = (self.headers.iter())
            .map(|(k, _)| (k.as_str(), "<redacted>"))
            .collect();
        f.debug_struct("RequestSpec")
            .field("url", &self.url.as_str())
            .field("headers", &headers)
            .field("body", &self.body)
            .finish()
    }
}

/// What the probe loop does after an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Flow {
    /// Keep reading.
    Continue,
    /// The protocol's terminator (or an error event) was seen: the stream is over.
    Done,
    /// The stream cannot be trusted any further (e.g. a JSON payload that does not parse).
    Fail(Failure),
}

/// How a protocol frames its stream: which decoder the probe loop feeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// Server-sent events ([`crate::decode::sse::SseDecoder`]).
    Sse,
    /// One JSON document per line ([`crate::decode::ndjson::NdjsonDecoder`]); each line reaches
    /// [`StreamProtocol::on_event`] as an [`SseEvent`] with `event: None`, `data` = the line.
    Ndjson,
    /// AWS's binary event stream ([`crate::decode::eventstream::EventStreamDecoder`], Amazon
    /// Bedrock); each message reaches [`StreamProtocol::on_event`] as the [`SseEvent`] that
    /// [`eventstream_event`] makes of it.
    EventStream,
}

/// The stream side of a protocol: a fresh value per probe, fed every decoded SSE event (or
/// NDJSON line) with the instant its read returned.
pub trait StreamProtocol: Send {
    /// The stream's framing; SSE unless the protocol says otherwise.
    fn framing(&self) -> Framing {
        Framing::Sse
    }

    /// Interprets one event: records tokens, counts, identity, errors and anomalies in `obs`.
    fn on_event(&mut self, event: &SseEvent, at: Instant, obs: &mut Observations) -> Flow;

    /// Whether a pending, unterminated event at end of stream is this protocol's harmless
    /// terminator (e.g. `data: [DONE]` without its blank line).
    /// By default none is: most protocols end on a JSON event, and an unterminated one is not
    /// trusted.
    fn is_terminator(&self, _event: &SseEvent) -> bool {
        false
    }

    /// Whether an event after the stream's end (its terminal event) is harmless: a `[DONE]`,
    /// which gateways add after any protocol's terminal event (LiteLLM after Responses'
    /// `response.completed`), or the protocol's own [`StreamProtocol::is_terminator`] (OpenAI's
    /// `[DONE]` again). Anything else after the end is an
    /// [`crate::measure::Anomaly::TrailingBytes`].
    fn is_benign_after_end(&self, event: &SseEvent) -> bool {
        is_done(&event.data) || self.is_terminator(event)
    }

    /// Whether the protocol has no terminator event, so that a clean close after a finish
    /// reason is its normal end (Gemini's `streamGenerateContent`: the last chunk carries
    /// `finishReason`, then the server closes). Then such a close is no
    /// [`crate::measure::Anomaly::MissingTerminator`]. By default a protocol has a terminator.
    fn ends_on_close(&self) -> bool {
        false
    }
}

/// Builds the streaming request for `scenario` on `target`. `nonce`, when given, is put at the
/// very start of the prompt (cold prefix cache, see [`crate::config::PrefixCache`]).
pub fn build_request(target: &Target, scenario: &Scenario, nonce: Option<&str>) -> RequestSpec {
    match target.protocol {
        Protocol::OpenAiChat => openai_chat::build_request(target, scenario, nonce),
        Protocol::OpenAiCompletions => openai_completions::build_request(target, scenario, nonce),
        Protocol::OpenAiResponses => openai_responses::build_request(target, scenario, nonce),
        Protocol::Anthropic => anthropic::build_request(target, scenario, nonce),
        Protocol::Ollama => ollama::build_request(target, scenario, nonce),
        Protocol::Tgi => tgi::build_request(target, scenario, nonce),
        Protocol::AzureOpenAi => azure_openai::build_request(target, scenario, nonce),
        Protocol::LlamaCpp => llama_cpp::build_request(target, scenario, nonce),
        Protocol::Gemini | Protocol::VertexGemini => gemini::build_request(target, scenario, nonce),
        Protocol::Bedrock => bedrock::build_request(target, scenario, nonce),
    }
}

/// Whether `protocol`'s adapter assembles the answer text ([`crate::measure::Answer`]), so
/// that the answer checks can run on it. A protocol that does not skips the checks (its probes
/// are timed only); every protocol of docs/protocols.md does.
pub fn captures_answer(protocol: Protocol) -> bool {
    matches!(
        protocol,
        Protocol::OpenAiChat
            | Protocol::OpenAiCompletions
            | Protocol::OpenAiResponses
            | Protocol::Anthropic
            | Protocol::Ollama
            | Protocol::Tgi
            | Protocol::AzureOpenAi
            | Protocol::LlamaCpp
            | Protocol::Gemini
            | Protocol::VertexGemini
            | Protocol::Bedrock
    )
}

/// A fresh stream interpreter for `protocol`.
pub fn stream_for(protocol: Protocol) -> Box<dyn StreamProtocol> {
    match protocol {
        Protocol::OpenAiChat | Protocol::AzureOpenAi => Box::new(openai_chat::OpenAiStream::chat()),
        Protocol::OpenAiCompletions => Box::new(openai_chat::OpenAiStream::completions()),
        Protocol::OpenAiResponses => Box::<openai_responses::ResponsesStream>::default(),
        Protocol::Anthropic => Box::<anthropic::AnthropicStream>::default(),
        Protocol::Ollama => Box::new(ollama::OllamaStream),
        Protocol::Tgi => Box::new(tgi::TgiStream),
        Protocol::LlamaCpp => Box::new(llama_cpp::LlamaCppStream),
        Protocol::Gemini | Protocol::VertexGemini => Box::<gemini::GeminiStream>::default(),
        Protocol::Bedrock => Box::new(bedrock::BedrockStream::default()),
    }
}

/// The event an adapter sees for one binary event-stream message (Bedrock): `event` = the
/// `:event-type` header (`exception:{type}`, `error:{code}` for exceptions and errors), `data` =
/// the payload. Errors: the payload is not UTF-8.
pub fn eventstream_event(
    msg: crate::decode::eventstream::Message,
) -> Result<SseEvent, crate::decode::DecodeError> {
    bedrock::as_event(msg)
}

/// Joins `base` (e.g. `http://host:8000/v1`) and `path` (e.g. `chat/completions`), keeping any
/// path prefix of `base` whether or not it ends in `/`.
pub(crate) fn join_url(base: &reqwest::Url, path: &str) -> reqwest::Url {
    let mut url = base.clone();
    let joined = format!("{}/{}", base.path().trim_end_matches('/'), path);
    url.set_path(&joined);
    url
}

/// The request headers every protocol sends: `accept: text/event-stream`, the target's
/// configured headers, and `accept-encoding: identity` unless those set one (without it a server
/// or proxy may compress the stream, RFC 9110 §12.5.3).
pub(crate) fn common_headers(target: &Target) -> Vec<(String, String)> {
    let mut h = vec![("accept".to_string(), "text/event-stream".to_string())];
    h.extend(target.headers.iter().cloned());
    default_header(&mut h, "accept-encoding", "identity");
    h
}

/// `Authorization: Bearer <key>` when the target has a key.
pub(crate) fn bearer_auth(target: &Target, headers: &mut Vec<(String, String)>) {
    if let Some(key) = &target.api_key {
        headers.push(("authorization".into(), format!("Bearer {}", key.expose())));
    }
}

/// A `POST {base_url}/{path}` with `Authorization: Bearer` (when the target has a key) and a
/// JSON `body` completed with the temperature (scenario's, else target's, when set) and the
/// `extra_body` keys: the shape OpenAI-style APIs and llama.cpp's native one share.
pub(crate) fn bearer_json_request(
    target: &Target,
    scenario: &Scenario,
    path: &str,
    mut body: serde_json::Value,
) -> RequestSpec {
    set_temperature(&mut body, target, scenario);
    merge_extra_body(&mut body, target, scenario);
    let mut headers = common_headers(target);
    bearer_auth(target, &mut headers);
    RequestSpec {
        url: join_url(&target.base_url, path),
        headers,
        body,
    }
}

/// Sets top-level `temperature` to the scenario's, else the target's, when either is set.
pub(crate) fn set_temperature(body: &mut serde_json::Value, target: &Target, scenario: &Scenario) {
    if let Some(t) = target.temperature_for(scenario) {
        body["temperature"] = serde_json::json!(t);
    }
}

/// Adds `name: value` unless the target's headers already set `name` (the configured value wins).
pub(crate) fn default_header(headers: &mut Vec<(String, String)>, name: &str, value: &str) {
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case(name)) {
        headers.push((name.to_string(), value.to_string()));
    }
}

/// Merges the target's then the scenario's `extra_body` into `body` (scenario wins over target).
/// Keys the protocol set itself win over `extra_body`: a key already in `body` is kept, and for
/// a key whose value is an object in both (Ollama `options`, TGI `parameters`) only the
/// sub-keys the protocol did not set are added. (For `openai-chat` the keys it sets cannot be
/// in `extra_body` at all: validation rejects them.)
pub(crate) fn merge_extra_body(body: &mut serde_json::Value, target: &Target, scenario: &Scenario) {
    let Some(obj) = body.as_object_mut() else {
        return;
    };
    for (k, v) in target.extra_body_for(scenario) {
        match (obj.get_mut(&k), v) {
            (None, v) => {
                obj.insert(k, v);
            }
            (Some(serde_json::Value::Object(ours)), serde_json::Value::Object(theirs)) => {
                for (sk, sv) in theirs {
                    ours.entry(sk).or_insert(sv);
                }
            }
            (Some(_), _) => {}
        }
    }
}

/// Reads llama.cpp's `timings` object (on the last chunk of its chat, completions, Responses
/// and native streams) into `obs.server_timings`, and its `cache_n` as the cached prompt tokens
/// when no usage gave them; later reports replace earlier ones.
pub(crate) fn read_llama_cpp_timings(chunk: &serde_json::Value, obs: &mut Observations) {
    use json::{f64_at, u64_at};
    if let Some(t) = chunk.get("timings").filter(|t| t.is_object()) {
        merge_llama_cpp_timings(
            obs,
            f64_at(t, "prompt_ms"),
            u64_at(t, "prompt_n"),
            u64_at(t, "predicted_n"),
            f64_at(t, "predicted_ms"),
        );
        // The prompt tokens it reused from its cache (`cache_n`), where the usage said none
        // (the native `/completion` stream has no usage object).
        if obs.usage.cached_prompt_tokens.is_none() {
            obs.usage.cached_prompt_tokens = u64_at(t, "cache_n");
        }
    }
}

/// Merges one `timings` object (milliseconds and token counts, as llama.cpp sends them) into
/// `obs.server_timings` in seconds; a field the object lacks keeps its earlier value.
pub(crate) fn merge_llama_cpp_timings(
    obs: &mut Observations,
    prompt_ms: Option<f64>,
    prompt_n: Option<u64>,
    predicted_n: Option<u64>,
    predicted_ms: Option<f64>,
) {
    let secs = |ms: Option<f64>| ms.filter(|f| f.is_finite()).map(|ms| ms / 1000.0);
    let st = &mut obs.server_timings;
    if secs(prompt_ms).is_some() {
        st.source = Some(ServerTimingSource::LlamaCppTimings);
    }
    st.prompt_seconds = secs(prompt_ms).or(st.prompt_seconds);
    st.prompt_tokens = prompt_n.or(st.prompt_tokens);
    st.predicted_tokens = predicted_n.or(st.predicted_tokens);
    st.predicted_seconds = secs(predicted_ms).or(st.predicted_seconds);
}

/// Reads vLLM's per-request metrics (`--enable-per-request-metrics`): the `metrics` object that
/// vLLM puts on the final usage chunk of a Chat Completions or completions stream and on the
/// `response` object of a Responses stream. `queue_time_ms` (engine core queued → scheduled)
/// becomes the queue wait and `time_to_first_token_ms` (scheduled → first token, so not vLLM's
/// own TTFT histogram, which starts at the request's arrival) the prefill, both in seconds. An
/// object with neither number, or with non-numbers, changes nothing. Source: vLLM 0.32
/// `vllm/entrypoints/generate/base/serving.py` `build_per_request_timing_metrics`.
pub(crate) fn read_vllm_request_metrics(holder: &serde_json::Value, obs: &mut Observations) {
    let Some(m) = holder.get("metrics").filter(|m| m.is_object()) else {
        return;
    };
    merge_vllm_request_metrics(
        obs,
        json::f64_at(m, "queue_time_ms"),
        json::f64_at(m, "time_to_first_token_ms"),
    );
}

/// Merges one vLLM `metrics` object's `queue_time_ms` and `time_to_first_token_ms`
/// (milliseconds) into `obs.server_timings` in seconds; a missing, negative or non-finite value
/// keeps the earlier one, and an object with neither changes nothing (the source included).
pub(crate) fn merge_vllm_request_metrics(
    obs: &mut Observations,
    queue_time_ms: Option<f64>,
    time_to_first_token_ms: Option<f64>,
) {
    let secs = |ms: Option<f64>| {
        ms.filter(|v| v.is_finite() && *v >= 0.0)
            .map(|v| v / 1000.0)
    };
    let (queue, first_token) = (secs(queue_time_ms), secs(time_to_first_token_ms));
    if queue.is_none() && first_token.is_none() {
        return;
    }
    let st = &mut obs.server_timings;
    st.queue_seconds = queue.or(st.queue_seconds);
    st.prompt_seconds = first_token.or(st.prompt_seconds);
    st.source = Some(ServerTimingSource::VllmRequestMetrics);
}

/// Whether an event's data is OpenAI's terminator `[DONE]`, whitespace around it allowed (a
/// `data: [DONE] ` with a trailing space is still the end, not broken JSON).
pub(crate) fn is_done(data: &str) -> bool {
    data.trim() == "[DONE]"
}

/// Parses an event's data as JSON. Non-JSON that does not look like JSON (`: keepalive`
/// rewrapped as data, OpenAI's `[DONE]` in a protocol that does not use it) is an anomaly and
/// `Err(Flow::Continue)`; broken JSON is a `decode` failure, `Err(Flow::Fail)`. A lone UTF-16
/// surrogate escape (`"\ud800"`) is read as U+FFFD ([`json::replace_lone_surrogates`], tried
/// only after the parse failed).
pub(crate) fn parse_json(data: &str, obs: &mut Observations) -> Result<serde_json::Value, Flow> {
    let parsed =
        serde_json::from_str(data).or_else(|e| match json::replace_lone_surrogates(data) {
            Some(lossy) => serde_json::from_str(&lossy),
            None => Err(e),
        });
    match parsed {
        Ok(v) => Ok(v),
        Err(e) if !is_done(data) && json::looks_like_json(data) => Err(Flow::Fail(Failure::new(
            crate::measure::FailureReason::Decode,
            format!("a data line is not valid JSON: {e}"),
        ))),
        Err(_) => {
            obs.anomaly(crate::measure::Anomaly::NonJsonData);
            Err(Flow::Continue)
        }
    }
}

/// Test support for the adapters' unit tables.
#[cfg(test)]
pub(crate) mod testing {
    use std::time::{Duration, Instant};

    use super::{Flow, StreamProtocol};
    use crate::decode::sse::SseEvent;
    use crate::measure::Observations;

    /// Feeds `events` — `(event type, data)`, `""` for no type — to `adapter`, one per
    /// millisecond after `sent`, until it stops; stamps `ended` on `Done` as the probe loop does.
    /// Returns the observations and the last flow.
    pub(crate) fn feed(
        adapter: &mut dyn StreamProtocol,
        events: &[(&str, &str)],
    ) -> (Observations, Flow) {
        let t0 = Instant::now();
        let mut obs = Observations::new(t0);
        let mut flow = Flow::Continue;
        for (i, (event, data)) in events.iter().enumerate() {
            let ev = SseEvent {
                event: (!event.is_empty()).then(|| event.to_string()),
                data: (*data).into(),
                id: None,
            };
            let at = t0 + Duration::from_millis(i as u64 + 1);
            flow = adapter.on_event(&ev, at, &mut obs);
            if flow == Flow::Done {
                obs.timeline.ended = Some(at);
            }
            if flow != Flow::Continue {
                break;
            }
        }
        (obs, flow)
    }

    /// [`feed`] for streams whose events have no type (data lines, NDJSON lines).
    pub(crate) fn feed_data(
        adapter: &mut dyn StreamProtocol,
        datas: &[&str],
    ) -> (Observations, Flow) {
        let events: Vec<(&str, &str)> = datas.iter().map(|d| ("", *d)).collect();
        feed(adapter, &events)
    }
}
