//! Anthropic Messages (`POST {base}/messages`), as served by Anthropic, llama.cpp, LiteLLM and
//! other gateways.
//!
//! Request: headers `x-api-key` (when the target has a key) and `anthropic-version: 2023-06-01`
//! (unless the target's headers set one); body `model`, `max_tokens` (required by the API),
//! `stream: true`, `temperature` when set, `messages` = the user/assistant messages and `system`
//! = the system and developer messages' contents joined with "\n\n" (the nonce of a cold probe
//! stays at the very start of the prompt, in `system` if the scenario starts with one).
//! Stream: SSE with `event:` = `data.type` (the JSON `type` is used; the `event:` line is the
//! fallback). Tokens: `content_block_delta` with a non-empty `text_delta.text` (output),
//! `thinking_delta.thinking` (reasoning) or `input_json_delta.partial_json` (tool input,
//! output), and a `content_block_start` of a `tool_use` (or `server_tool_use`) block with its
//! `name` (output: the tool-call rule of docs/measurement.md). Not tokens: `ping`,
//! `signature_delta`, `citations_delta`, an empty `partial_json`, block stop.
//! Counts: `message_start.message.usage` → prompt tokens = `input_tokens` +
//! `cache_read_input_tokens` + `cache_creation_input_tokens` (Anthropic's `input_tokens` excludes
//! the cache), cached = `cache_read_input_tokens`; `message_delta.usage.output_tokens` is
//! cumulative: the last one is N (`message_start`'s own `output_tokens` is a placeholder and is
//! ignored). `message_delta.delta.stop_reason` finishes the generation; `message_stop` is the
//! terminator. Errors inside a 200: `event: error` / `type: error` with `error.type` and
//! `error.message` (e.g. `overloaded_error`). Unknown event or delta types, and `message_delta`s
//! whose `delta` is a content delta (not Anthropic's shape), are [`Anomaly::UnknownEvent`].
//! Source: docs/protocols.md, tests/fixtures/captured/llama-cpp-anthropic.txt, tests/fixtures/captured/llm-mock-api_anthropic.txt.

pub(super) mod serve;

use std::time::Instant;

use serde_json::{json, Value};

use super::json::{has_text, str_at, u64_at};
use super::{usage, Flow, RequestSpec, StreamProtocol};
use crate::config::{Scenario, Target};
use crate::decode::sse::SseEvent;
use crate::measure::{Anomaly, Observations, TokenKind};

/// The `anthropic-version` header value sent unless the target configures its own.
pub(super) const ANTHROPIC_VERSION: &str = "2023-06-01";

/// The endpoint after `base_url`; a server serves it under `/v1`.
pub(super) const PATH: &str = "messages";

/// The streaming Messages request.
pub(super) fn build_request(
    target: &Target,
    scenario: &Scenario,
    nonce: Option<&str>,
) -> RequestSpec {
    let mut system = Vec::new();
    let mut messages = Vec::new();
    let texts = super::texts(&scenario.messages, nonce);
    for (m, text) in scenario.messages.iter().zip(texts) {
        match m.role.as_str() {
            "system" | "developer" => system.push(text.into_owned()),
            // A tool call: a `tool_use` block (after the text, if any).
            "assistant" if !m.tool_calls.is_empty() => {
                let mut content = Vec::new();
                if !text.is_empty() {
                    content.push(json!({"type": "text", "text": text}));
                }
                for c in &m.tool_calls {
                    content.push(json!({"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments}));
                }
                messages.push(json!({"role": "assistant", "content": content}));
            }
            // A tool result: a `tool_result` block of a user message, the results of one turn
            // in one message.
            "tool" => {
                let block =
                    json!({"type": "tool_result", "tool_use_id": m.tool_call_id, "content": text});
                match messages.last_mut() {
                    Some(last) if is_results(last) => {
                        if let Some(blocks) = last["content"].as_array_mut() {
                            blocks.push(block);
                        }
                    }
                    _ => messages.push(json!({"role": "user", "content": [block]})),
                }
            }
            role => messages.push(json!({"role": role, "content": text})),
        }
    }
    let mut body = json!({
        "model": target.model,
        "max_tokens": scenario.max_tokens,
        "messages": messages,
        "stream": true,
    });
    if !system.is_empty() {
        body["system"] = json!(system.join("\n\n"));
    }
    if let Some(t) = target.temperature_for(scenario) {
        body["temperature"] = json!(t);
    }
    super::structured::add_anthropic(&mut body, scenario);
    super::merge_extra_body(&mut body, target, scenario);
    let mut headers = super::common_headers(target);
    super::default_header(&mut headers, "anthropic-version", ANTHROPIC_VERSION);
    if let Some(key) = &target.api_key {
        headers.push(("x-api-key".into(), key.expose().to_string()));
    }
    RequestSpec {
        url: super::join_url(&target.base_url, PATH),
        headers,
        body,
    }
}

/// True when `message` is a user message of `tool_result` blocks.
fn is_results(message: &Value) -> bool {
    message["role"] == "user"
        && (message["content"].as_array())
            .is_some_and(|b| b.iter().all(|b| b["type"] == "tool_result"))
}

/// Interprets an Anthropic Messages event stream.
#[derive(Debug, Default)]
pub(super) struct AnthropicStream {
    /// The content-block `index` of each `tool_use` block opened, in order: a block's position
    /// here is its index in [`crate::measure::Answer::tool_calls`].
    tool_blocks: Vec<u64>,
}

impl StreamProtocol for AnthropicStream {
    fn on_event(&mut self, event: &SseEvent, at: Instant, obs: &mut Observations) -> Flow {
        let is_error_event = event.event.as_deref() == Some("error");
        if is_error_event && serde_json::from_str::<Value>(&event.data).is_err() {
            obs.stream_error(&event.data);
            return Flow::Done;
        }
        let data = match super::parse_json(&event.data, obs) {
            Ok(v) => v,
            Err(flow) => return flow,
        };
        let kind = str_at(&data, "type")
            .or(event.event.as_deref())
            .unwrap_or("");
        match kind {
            "message_start" => {
                let Some(msg) = data.get("message") else {
                    return Flow::Continue;
                };
                Observations::identity_field(
                    &mut obs.identity.response_model,
                    str_at(msg, "model"),
                );
                if let Some(usage) = msg.get("usage").filter(|u| u.is_object()) {
                    read_input_usage(usage, obs);
                }
            }
            "content_block_start" => {
                // A block may open with text already in it (rare; usually "").
                // A tool call's block opens with its name: one output token event (the
                // tool-call rule of docs/measurement.md, as on openai-chat).
                if let Some(block) = data.get("content_block") {
                    let tool = str_at(block, "type").is_some_and(|t| t.ends_with("tool_use"));
                    if tool {
                        self.tool_blocks.push(u64_at(&data, "index").unwrap_or(0));
                    }
                    if has_text(block, "text") || (tool && has_text(block, "name")) {
                        obs.token(at, TokenKind::Output);
                        obs.answer.push_text(str_at(block, "text").unwrap_or(""));
                        if tool {
                            let index = self.tool_blocks.len() - 1;
                            obs.answer
                                .push_tool_call(index, str_at(block, "name"), None, at);
                        }
                    } else if has_text(block, "thinking") {
                        obs.token(at, TokenKind::Reasoning);
                        obs.answer
                            .push_reasoning(str_at(block, "thinking").unwrap_or(""));
                    }
                }
            }
            "content_block_delta" => {
                let delta = data.get("delta").unwrap_or(&Value::Null);
                match str_at(delta, "type") {
                    Some("text_delta") if has_text(delta, "text") => {
                        obs.token(at, TokenKind::Output);
                        obs.answer.push_text(str_at(delta, "text").unwrap_or(""));
                    }
                    Some("input_json_delta") if has_text(delta, "partial_json") => {
                        obs.token(at, TokenKind::Output);
                        let block = u64_at(&data, "index").unwrap_or(0);
                        if let Some(index) = self.tool_blocks.iter().position(|b| *b == block) {
                            let json = str_at(delta, "partial_json");
                            obs.answer.push_tool_call(index, None, json, at);
                        }
                    }
                    Some("thinking_delta") if has_text(delta, "thinking") => {
                        obs.token(at, TokenKind::Reasoning);
                        obs.answer
                            .push_reasoning(str_at(delta, "thinking").unwrap_or(""));
                    }
                    Some(
                        "text_delta" | "input_json_delta" | "thinking_delta" | "signature_delta"
                        | "citations_delta",
                    ) => {}
                    _ => obs.anomaly(Anomaly::UnknownEvent),
                }
            }
            "message_delta" => {
                let delta = data.get("delta").unwrap_or(&Value::Null);
                if delta.get("type").is_some() {
                    // Anthropic's message_delta carries stop_reason/stop_sequence, never a typed
                    // content delta: this is another format wearing Anthropic's names.
                    obs.anomaly(Anomaly::UnknownEvent);
                }
                if let Some(r) = str_at(delta, "stop_reason").filter(|r| !r.is_empty()) {
                    obs.finish(r);
                }
                if let Some(u) = data.get("usage").filter(|u| u.is_object()) {
                    usage::record(obs, u64_at(u, "output_tokens"), None, None);
                    if u.get("input_tokens").is_some() {
                        read_input_usage(u, obs);
                    }
                }
            }
            "message_stop" => {
                obs.terminated = true;
                return Flow::Done;
            }
            "error" => {
                let err = data.get("error").unwrap_or(&data);
                let msg = match (str_at(err, "type"), str_at(err, "message")) {
                    (Some(t), Some(m)) => format!("{t}: {m}"),
                    (Some(t), None) => t.to_string(),
                    (None, Some(m)) => m.to_string(),
                    (None, None) => err.to_string(),
                };
                obs.stream_error_of_type(&msg, str_at(err, "type"));
                return Flow::Done;
            }
            "ping" | "content_block_stop" => {}
            _ => obs.anomaly(Anomaly::UnknownEvent),
        }
        Flow::Continue
    }
}

/// Prompt tokens = `input_tokens` + cache reads + cache writes; cached = cache reads.
fn read_input_usage(u: &Value, obs: &mut Observations) {
    let input = u64_at(u, "input_tokens");
    let read = u64_at(u, "cache_read_input_tokens");
    let created = u64_at(u, "cache_creation_input_tokens");
    let prompt = input.map(|input| {
        input
            .saturating_add(read.unwrap_or(0))
            .saturating_add(created.unwrap_or(0))
    });
    usage::record(obs, None, prompt, read);
}

#[cfg(test)]
mod tests {

    use super::*;

    fn run(events: &[(&str, &str)]) -> (Observations, Flow) {
        super::super::testing::feed(&mut AnthropicStream::default(), events)
    }

    /// The tool-call rule (docs/measurement.md): the `tool_use` block's start names the
    /// function and is one output token event; an empty `partial_json` is none, and a text
    /// block opening empty is none either. Held-back shape 3: the same stream shape as
    /// openai-chat's name-only chunk, the same TTFT and token events.
    #[test]
    fn a_tool_use_block_start_with_its_name_is_one_output_event() {
        use std::time::Duration;
        let (obs, _) = run(&[
            (
                "message_start",
                r#"{"type":"message_start","message":{"model":"m","usage":{"input_tokens":5}}}"#,
            ),
            (
                "content_block_start",
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{}}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":""}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"city\":"}}"#,
            ),
            (
                "content_block_start",
                r#"{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}"#,
            ),
            (
                "content_block_start",
                r#"{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_2","name":"","input":{}}}"#,
            ),
        ]);
        // The first call is assembled for the answer checks; the nameless one stays empty.
        assert_eq!(obs.answer.tool_calls[0].name, "get_weather");
        assert_eq!(obs.answer.tool_calls[0].arguments, "{\"city\":");
        assert!(obs.answer.text.is_empty());
        let tl = &obs.timeline;
        assert_eq!(tl.token_events.len(), 2);
        assert!(tl.token_events.iter().all(|e| e.kind == TokenKind::Output));
        assert_eq!(tl.first_token(), Some(tl.sent + Duration::from_millis(2)));
        assert!(obs.anomalies.is_empty(), "{:?}", obs.anomalies);
    }

    #[test]
    fn table() {
        use TokenKind::{Output, Reasoning};
        struct Case {
            name: &'static str,
            events: &'static [(&'static str, &'static str)],
            kinds: &'static [TokenKind],
            usage: (Option<u64>, Option<u64>, Option<u64>),
            finished: bool,
            terminated: bool,
            error: Option<&'static str>,
            anomalies: &'static [Anomaly],
        }
        let cases = [
            Case {
                name: "thinking, text, tool input, pings; cumulative output_tokens, last wins",
                events: &[
                    (
                        "message_start",
                        r#"{"type":"message_start","message":{"model":"claude-x","usage":{"input_tokens":10,"cache_read_input_tokens":20,"cache_creation_input_tokens":3,"output_tokens":1}}}"#,
                    ),
                    ("ping", r#"{"type":"ping"}"#),
                    (
                        "content_block_delta",
                        r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Let me"}}"#,
                    ),
                    (
                        "content_block_delta",
                        r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"abc"}}"#,
                    ),
                    (
                        "content_block_delta",
                        r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":""}}"#,
                    ),
                    (
                        "content_block_delta",
                        r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Hi"}}"#,
                    ),
                    (
                        "content_block_delta",
                        r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"a\""}}"#,
                    ),
                    (
                        "message_delta",
                        r#"{"type":"message_delta","delta":{"stop_reason":null},"usage":{"output_tokens":5}}"#,
                    ),
                    (
                        "message_delta",
                        r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":9}}"#,
                    ),
                    ("message_stop", r#"{"type":"message_stop"}"#),
                ],
                kinds: &[Reasoning, Output, Output],
                usage: (Some(9), Some(33), Some(20)),
                finished: true,
                terminated: true,
                error: None,
                anomalies: &[],
            },
            Case {
                name: "overloaded error after a token",
                events: &[
                    (
                        "content_block_delta",
                        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"A"}}"#,
                    ),
                    (
                        "error",
                        r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
                    ),
                ],
                kinds: &[Output],
                usage: (None, None, None),
                finished: false,
                terminated: false,
                error: Some("overloaded_error: Overloaded"),
                anomalies: &[],
            },
            Case {
                name: "type error without an event line; non-JSON error event",
                events: &[("", r#"{"type":"error","error":{"type":"api_error"}}"#)],
                kinds: &[],
                usage: (None, None, None),
                finished: false,
                terminated: false,
                error: Some("api_error"),
                anomalies: &[],
            },
            Case {
                name: "mockllm shape: content delta inside message_delta, no event lines",
                events: &[
                    (
                        "",
                        r#"{"type":"message_delta","id":"x","delta":{"type":"content_block_delta","index":0,"delta":{"text":"T"}},"usage":null}"#,
                    ),
                    ("", "[DONE]"),
                ],
                kinds: &[],
                usage: (None, None, None),
                finished: false,
                terminated: false,
                error: None,
                anomalies: &[Anomaly::UnknownEvent, Anomaly::NonJsonData],
            },
        ];
        for c in cases {
            let (obs, _) = run(c.events);
            let kinds: Vec<_> = obs.timeline.token_events.iter().map(|e| e.kind).collect();
            assert_eq!(kinds, c.kinds, "{}", c.name);
            let u = &obs.usage;
            assert_eq!(
                (u.completion_tokens, u.prompt_tokens, u.cached_prompt_tokens),
                c.usage,
                "{}",
                c.name
            );
            assert_eq!(obs.finished, c.finished, "{}", c.name);
            assert_eq!(obs.terminated, c.terminated, "{}", c.name);
            assert_eq!(obs.stream_error.as_deref(), c.error, "{}", c.name);
            assert_eq!(obs.anomalies, c.anomalies, "{}", c.name);
        }
        let (obs, _) = run(&[("error", "upstream connect error")]);
        assert_eq!(obs.stream_error.as_deref(), Some("upstream connect error"));
        assert!(obs.anomalies.is_empty());
    }

    /// Hostile counts at the top of u64 saturate instead of overflowing (a debug build
    /// panicked, a release build wrapped to a tiny prompt).
    #[test]
    fn usage_counts_at_the_top_of_u64_saturate() {
        let (obs, _) = run(&[(
            "message_start",
            r#"{"type":"message_start","message":{"usage":{"input_tokens":18446744073709551615,"cache_read_input_tokens":3}}}"#,
        )]);
        assert_eq!(obs.usage.prompt_tokens, Some(u64::MAX));
    }
}
