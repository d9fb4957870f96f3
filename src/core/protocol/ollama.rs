//! Ollama native chat (`POST {base}/api/chat`; `base_url` is the server root, e.g.
//! `http://127.0.0.1:11434`, without the `/v1` of its OpenAI-compatible API).
//!
//! Request: `model`, `messages`, `stream: true`, `options.num_predict` = `max_tokens`,
//! `options.temperature` when set; `Authorization: Bearer` when the target has a key (Ollama
//! behind a proxy, or ollama.com).
//! Stream: NDJSON, one JSON object per line. Tokens: a non-empty `message.content` (output) or
//! `message.thinking` (reasoning), or a `message.tool_calls` entry with a function name or
//! arguments (output). The final line
//! has `done: true` (the terminator) with `eval_count` (N, source `server`),
//! `prompt_eval_count`, and durations in **nanoseconds**: `prompt_eval_duration` (→ server
//! prefill), `load_duration` (model load; server time, kept out of the TTFT overhead),
//! `eval_duration`, `total_duration`; any may be absent (unknown, never 0). Error inside a 200: a
//! line `{"error": "..."}`. Source: docs/protocols.md.

pub(super) mod serve;

use std::time::Instant;

use serde_json::{json, Value};

use super::json::{error_message, f64_at, has_text, str_at, u64_at};
use super::{Flow, Framing, RequestSpec, StreamProtocol};
use crate::config::{Scenario, Target};
use crate::decode::sse::SseEvent;
use crate::measure::{Anomaly, Observations, TokenKind};

/// The endpoint after `base_url`, the server root.
pub(super) const PATH: &str = "api/chat";

/// The streaming native chat request.
pub(super) fn build_request(
    target: &Target,
    scenario: &Scenario,
    nonce: Option<&str>,
) -> RequestSpec {
    let mut options = json!({ "num_predict": scenario.max_tokens });
    if let Some(t) = target.temperature_for(scenario) {
        options["temperature"] = json!(t);
    }
    let mut body = json!({
        "model": target.model,
        "messages": messages(scenario, nonce),
        "stream": true,
        "options": options,
    });
    super::structured::add_ollama(&mut body, scenario);
    super::merge_extra_body(&mut body, target, scenario);
    let mut headers = super::common_headers(target);
    headers[0].1 = "application/x-ndjson".into();
    super::bearer_auth(target, &mut headers);
    RequestSpec {
        url: super::join_url(&target.base_url, PATH),
        headers,
        body,
    }
}

/// The chat messages `{role, content}`; an assistant's tool calls as `tool_calls`
/// (`{function: {name, arguments}}`, the arguments an object), a tool result as
/// `{role: tool, content, tool_name}`.
fn messages(scenario: &Scenario, nonce: Option<&str>) -> Vec<Value> {
    let texts = super::texts(&scenario.messages, nonce);
    (scenario.messages.iter().zip(texts))
        .map(|(m, text)| {
            let mut v = json!({"role": m.role, "content": text});
            if !m.tool_calls.is_empty() {
                v["tool_calls"] = (m.tool_calls.iter())
                    .map(|c| json!({"function": {"name": c.name, "arguments": c.arguments}}))
                    .collect();
            }
            if let Some(id) = &m.tool_call_id {
                v["tool_name"] = json!(super::tool_name(&scenario.messages, id));
            }
            v
        })
        .collect()
}

/// Whether a tool call's `arguments` (an object in Ollama's API, a string in some gateways) has
/// any content.
fn has_arguments(args: &Value) -> bool {
    match args {
        Value::Object(m) => !m.is_empty(),
        Value::String(s) => !s.is_empty(),
        _ => false,
    }
}

/// Interprets an Ollama NDJSON chat stream.
#[derive(Debug, Default)]
pub(super) struct OllamaStream;

impl StreamProtocol for OllamaStream {
    fn framing(&self) -> Framing {
        Framing::Ndjson
    }

    fn on_event(&mut self, event: &SseEvent, at: Instant, obs: &mut Observations) -> Flow {
        let line = match super::parse_json(&event.data, obs) {
            Ok(v) => v,
            Err(flow) => return flow,
        };
        if !line.is_object() {
            obs.anomaly(Anomaly::UnknownEvent);
            return Flow::Continue;
        }
        if let Some(err) = line.get("error").filter(|e| !e.is_null()) {
            obs.stream_error(&error_message(err));
            return Flow::Done;
        }
        Observations::identity_field(&mut obs.identity.response_model, str_at(&line, "model"));
        let message = line.get("message");
        if let Some(msg) = message {
            // A call with a name or arguments (the tool-call rule of docs/measurement.md).
            let tools = (msg.get("tool_calls").and_then(Value::as_array))
                .into_iter()
                .flatten()
                .filter_map(|c| c.get("function"))
                .any(|f| has_text(f, "name") || f.get("arguments").is_some_and(has_arguments));
            // Ollama sends each call whole, its `arguments` an object (kept as JSON text).
            for f in (msg.get("tool_calls").and_then(Value::as_array))
                .into_iter()
                .flatten()
                .filter_map(|c| c.get("function"))
            {
                let index = obs.answer.tool_calls.len();
                let args = f
                    .get("arguments")
                    .filter(|a| has_arguments(a))
                    .map(|a| match a {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    });
                obs.answer
                    .push_tool_call(index, str_at(f, "name"), args.as_deref(), at);
            }
            if has_text(msg, "content") || tools {
                obs.token(at, TokenKind::Output);
            } else if has_text(msg, "thinking") {
                obs.token(at, TokenKind::Reasoning);
            }
            obs.answer.push_text(str_at(msg, "content").unwrap_or(""));
            obs.answer
                .push_reasoning(str_at(msg, "thinking").unwrap_or(""));
        }
        match line.get("done").and_then(Value::as_bool) {
            Some(true) => {
                read_final(&line, obs);
                obs.finished = true;
                obs.terminated = true;
                Flow::Done
            }
            Some(false) => Flow::Continue,
            None => {
                if message.is_none() {
                    obs.anomaly(Anomaly::UnknownEvent);
                }
                Flow::Continue
            }
        }
    }
}

/// Counts and nanosecond durations of the `done: true` line.
fn read_final(line: &Value, obs: &mut Observations) {
    let ns = |key| f64_at(line, key).filter(|v| *v >= 0.0).map(|v| v / 1e9);
    let st = &mut obs.server_timings;
    st.predicted_tokens = u64_at(line, "eval_count").or(st.predicted_tokens);
    st.prompt_tokens = u64_at(line, "prompt_eval_count").or(st.prompt_tokens);
    st.prompt_seconds = ns("prompt_eval_duration").or(st.prompt_seconds);
    st.load_seconds = ns("load_duration").or(st.load_seconds);
    if ns("prompt_eval_duration").is_some() || ns("load_duration").is_some() {
        st.source = Some(crate::measure::ServerTimingSource::Ollama);
    }
    st.predicted_seconds = ns("eval_duration").or(st.predicted_seconds);
    if let Some(n) = u64_at(line, "prompt_eval_count") {
        obs.usage.prompt_tokens = Some(n);
    }
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::measure::{measure, TokenCountSource};

    fn run(lines: &[&str]) -> (Observations, Flow) {
        super::super::testing::feed_data(&mut OllamaStream, lines)
    }

    /// The tool-call rule (docs/measurement.md): a call with a name is an output token event;
    /// an entry with neither name nor arguments is none.
    #[test]
    fn a_named_tool_call_is_output_and_an_empty_one_is_not() {
        let (obs, _) = run(&[
            r#"{"message":{"role":"assistant","content":"","tool_calls":[{"function":{"name":"","arguments":{}}}]},"done":false}"#,
            r#"{"message":{"role":"assistant","content":"","tool_calls":[{"function":{"name":"get_weather","arguments":{}}}]},"done":false}"#,
            r#"{"message":{"role":"assistant","content":"","tool_calls":[{"function":{"arguments":{"city":"Paris"}}}]},"done":false}"#,
        ]);
        let tl = &obs.timeline;
        assert_eq!(tl.token_events.len(), 2);
        assert!(tl.token_events.iter().all(|e| e.kind == TokenKind::Output));
        assert_eq!(
            tl.first_token(),
            Some(tl.sent + std::time::Duration::from_millis(2))
        );
        // Each call arrives whole and is kept whole: the empty entry is none, the named one has
        // no arguments, the last one's object is kept as JSON text.
        let calls = &obs.answer.tool_calls;
        assert_eq!(calls.len(), 2, "{calls:?}");
        assert_eq!(
            (calls[0].name.as_str(), calls[0].arguments.as_str()),
            ("get_weather", "")
        );
        assert_eq!(calls[1].arguments, r#"{"city":"Paris"}"#);
    }

    #[test]
    fn thinking_then_content_then_done_with_nanoseconds() {
        let (obs, flow) = run(&[
            r#"{"model":"qwen3","message":{"role":"assistant","content":"","thinking":"Hm"},"done":false}"#,
            r#"{"model":"qwen3","message":{"role":"assistant","content":""},"done":false}"#,
            r#"{"model":"qwen3","message":{"role":"assistant","content":"Hi"},"done":false}"#,
            r#"{"model":"qwen3","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop","total_duration":900000000,"load_duration":30000000,"prompt_eval_count":26,"prompt_eval_duration":120000000,"eval_count":7,"eval_duration":600000000}"#,
        ]);
        assert_eq!(flow, Flow::Done);
        let kinds: Vec<_> = obs.timeline.token_events.iter().map(|e| e.kind).collect();
        assert_eq!(kinds, [TokenKind::Reasoning, TokenKind::Output]);
        let st = &obs.server_timings;
        assert_eq!(st.prompt_seconds, Some(0.12));
        assert_eq!(st.load_seconds, Some(0.03));
        assert_eq!(st.predicted_seconds, Some(0.6));
        assert_eq!(obs.usage.prompt_tokens, Some(26));
        let m = measure(&obs).unwrap();
        assert_eq!(
            (m.output_tokens, m.token_count_source),
            (7, TokenCountSource::Server)
        );
        assert_eq!(obs.identity.response_model.as_deref(), Some("qwen3"));
    }

    #[test]
    fn absent_counts_stay_unknown() {
        let (obs, _) = run(&[
            r#"{"message":{"content":"a"},"done":false}"#,
            r#"{"done":true}"#,
        ]);
        assert_eq!(obs.server_timings, Default::default());
        assert_eq!(obs.usage, Default::default());
        assert!(obs.terminated);
    }

    #[test]
    fn error_line_and_unknown_shape() {
        let (obs, flow) = run(&[
            r#"{"message":{"content":"a"},"done":false}"#,
            r#"{"error":"model runner has unexpectedly stopped"}"#,
        ]);
        assert_eq!(flow, Flow::Done);
        assert_eq!(
            obs.stream_error.as_deref(),
            Some("model runner has unexpectedly stopped")
        );
        let (obs, _) = run(&[r#"{"status":"pulling manifest"}"#]);
        assert_eq!(obs.anomalies, [Anomaly::UnknownEvent]);
    }
}
