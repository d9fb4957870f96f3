//! OpenAI Responses (`POST {base}/responses`), as served by OpenAI, vLLM, llama.cpp and others.
//!
//! Request: `input` = the scenario's messages (role and content, nonce first), `max_output_tokens`
//! = `max_tokens` (OpenAI rejects values below 16), `stream: true`, `temperature` when set.
//! Stream: SSE with `event:` = `data.type` (the JSON `type` is used; the `event:` line is the
//! fallback). Tokens: a non-empty `delta` of `response.output_text.delta`,
//! `response.refusal.delta` and `response.function_call_arguments.delta` (output), a
//! `response.output_item.added` of a `function_call` item with its `name` (output: the tool-call
//! rule of docs/measurement.md), and of
//! `response.reasoning_text.delta` / `response.reasoning_summary_text.delta` (reasoning).
//! Counts: `response.completed` (or `.incomplete`) → `response.usage.output_tokens` (reasoning
//! included), `input_tokens`, `input_tokens_details.cached_tokens`; llama.cpp adds its `timings`
//! object beside `response`. Terminator: `response.completed`, or `response.incomplete` (e.g.
//! `max_output_tokens` reached: a finished generation). Errors inside a 200: `response.failed`
//! (`response.error.message`) and the `error` event (`message`, `code`). Types this adapter does
//! not know are recorded once as [`Anomaly::UnknownEvent`]. A `data: [DONE]` after the terminal
//! event (LiteLLM sends one) is harmless ([`StreamProtocol::is_benign_after_end`]). Source:
//! docs/protocols.md, tests/fixtures/captured/llama-cpp-responses.txt.

pub(super) mod serve;

use std::time::Instant;

use serde_json::{json, Value};

use super::json::{error_message, has_text, str_at, u64_at};
use super::{usage, Flow, RequestSpec, StreamProtocol};
use crate::config::{Scenario, Target};
use crate::decode::sse::SseEvent;
use crate::measure::{Anomaly, Observations, TokenKind};

/// The endpoint after `base_url`; a server serves it under `/v1`.
pub(super) const PATH: &str = "responses";

/// The streaming Responses request.
pub(super) fn build_request(
    target: &Target,
    scenario: &Scenario,
    nonce: Option<&str>,
) -> RequestSpec {
    let mut body = json!({
        "model": target.model,
        "input": input(scenario, nonce),
        "max_output_tokens": scenario.max_tokens,
        "stream": true,
    });
    super::structured::add_responses(&mut body, scenario);
    super::bearer_json_request(target, scenario, PATH, body)
}

/// The `input` items: a message `{role, content}` each; an assistant's tool call as a
/// `function_call` item (after its text, if any), a tool result as a `function_call_output`.
fn input(scenario: &Scenario, nonce: Option<&str>) -> Vec<Value> {
    let texts = super::texts(&scenario.messages, nonce);
    let mut items = Vec::new();
    for (m, text) in scenario.messages.iter().zip(texts) {
        match m.role.as_str() {
            "tool" => items.push(json!({
                "type": "function_call_output",
                "call_id": m.tool_call_id,
                "output": text,
            })),
            role => {
                if !text.is_empty() || m.tool_calls.is_empty() {
                    items.push(json!({"role": role, "content": text}));
                }
                for c in &m.tool_calls {
                    items.push(json!({
                        "type": "function_call",
                        "call_id": c.id,
                        "name": c.name,
                        "arguments": Value::Object(c.arguments.clone()).to_string(),
                    }));
                }
            }
        }
    }
    items
}

/// Event types that carry no token and need no action.
const QUIET: &[&str] = &[
    "response.created",
    "response.in_progress",
    "response.queued",
    "response.output_item.done",
    "response.content_part.added",
    "response.content_part.done",
    "response.output_text.done",
    "response.output_text.annotation.added",
    "response.refusal.done",
    "response.function_call_arguments.done",
    "response.reasoning_text.done",
    "response.reasoning_summary_part.added",
    "response.reasoning_summary_part.done",
    "response.reasoning_summary_text.done",
    "keepalive",
];

/// Interprets a Responses event stream.
#[derive(Debug, Default)]
pub(super) struct ResponsesStream {
    /// Each `function_call` item seen, in order, by its id (`#N` for its `output_index` when it
    /// has none): a call's position here is its index in
    /// [`crate::measure::Answer::tool_calls`].
    tool_items: Vec<String>,
}

impl ResponsesStream {
    /// The tool-call index of the item `key` ([`item_key`]): a new one for an item added now;
    /// an arguments delta of an item never announced belongs to the last call (a new one when
    /// there is none).
    fn tool_index(&mut self, key: String, added: bool) -> usize {
        if let Some(i) = self.tool_items.iter().position(|k| *k == key) {
            return i;
        }
        if !added && !self.tool_items.is_empty() {
            return self.tool_items.len() - 1;
        }
        self.tool_items.push(key);
        self.tool_items.len() - 1
    }
}

/// How a Responses event names its output item: the item's `id` (`item.id` on
/// `output_item.added`, `item_id` on deltas), else `#` and its `output_index`.
fn item_key(id: Option<&str>, data: &Value) -> String {
    match id.filter(|i| !i.is_empty()) {
        Some(i) => i.to_string(),
        None => format!("#{}", u64_at(data, "output_index").unwrap_or(0)),
    }
}

impl StreamProtocol for ResponsesStream {
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
            "response.output_text.delta"
            | "response.refusal.delta"
            | "response.function_call_arguments.delta" => {
                if has_text(&data, "delta") {
                    obs.token(at, TokenKind::Output);
                    let delta = str_at(&data, "delta").unwrap_or("");
                    if kind != "response.function_call_arguments.delta" {
                        obs.answer.push_text(delta);
                    } else {
                        let key = item_key(str_at(&data, "item_id"), &data);
                        let index = self.tool_index(key, false);
                        obs.answer.push_tool_call(index, None, Some(delta), at);
                    }
                }
            }
            "response.reasoning_text.delta" | "response.reasoning_summary_text.delta" => {
                if has_text(&data, "delta") {
                    obs.token(at, TokenKind::Reasoning);
                    obs.answer
                        .push_reasoning(str_at(&data, "delta").unwrap_or(""));
                }
            }
            "response.completed" | "response.incomplete" => {
                read_response(&data, obs);
                let why = data
                    .get("response")
                    .and_then(|r| r.get("incomplete_details"))
                    .and_then(|d| str_at(d, "reason"));
                obs.finish(why.unwrap_or(""));
                obs.terminated = true;
                return Flow::Done;
            }
            "response.failed" => {
                read_response(&data, obs);
                let msg = data
                    .get("response")
                    .and_then(|r| r.get("error"))
                    .filter(|e| !e.is_null())
                    .map(error_message)
                    .unwrap_or_else(|| "response.failed".to_string());
                obs.stream_error(&msg);
                return Flow::Done;
            }
            "error" => {
                let msg = match data.get("error").filter(|e| !e.is_null()) {
                    Some(e) => error_message(e),
                    None => error_message(&data),
                };
                obs.stream_error(&msg);
                return Flow::Done;
            }
            // A function call's item opens with its name: one output token event (the
            // tool-call rule of docs/measurement.md, as on openai-chat).
            "response.output_item.added" => {
                let item = data.get("item").unwrap_or(&Value::Null);
                if str_at(item, "type") == Some("function_call") && has_text(item, "name") {
                    obs.token(at, TokenKind::Output);
                    let index = self.tool_index(item_key(str_at(item, "id"), &data), true);
                    obs.answer
                        .push_tool_call(index, str_at(item, "name"), None, at);
                }
            }
            k if QUIET.contains(&k) => {}
            // Built-in tool progress (web_search_call.searching, …) and future `.done`/`.added`.
            k if k.starts_with("response.")
                && (k.ends_with(".done")
                    || k.ends_with(".added")
                    || k.ends_with(".in_progress")
                    || k.ends_with(".searching")
                    || k.ends_with(".completed")) => {}
            _ => obs.anomaly(Anomaly::UnknownEvent),
        }
        Flow::Continue
    }
}

/// Usage, model, llama.cpp timings and vLLM's per-request metrics (on the `response` object)
/// of a `response.completed` / `.incomplete` / `.failed`.
fn read_response(data: &Value, obs: &mut Observations) {
    super::read_llama_cpp_timings(data, obs);
    let Some(resp) = data.get("response") else {
        return;
    };
    super::read_vllm_request_metrics(resp, obs);
    Observations::identity_field(&mut obs.identity.response_model, str_at(resp, "model"));
    if let Some(u) = resp.get("usage").filter(|u| u.is_object()) {
        usage::read(u, &usage::RESPONSES, obs);
    }
}

#[cfg(test)]
mod tests {

    use super::*;

    fn run(events: &[(&str, &str)]) -> (Observations, Flow) {
        super::super::testing::feed(&mut ResponsesStream::default(), events)
    }

    /// The tool-call rule (docs/measurement.md): a `function_call` item added with its name is
    /// one output token event; a message item and an empty arguments delta are none.
    #[test]
    fn a_function_call_item_with_its_name_is_one_output_event() {
        use std::time::Duration;
        let (obs, _) = run(&[
            (
                "response.output_item.added",
                r#"{"type":"response.output_item.added","output_index":0,"item":{"type":"message","id":"m","content":[]}}"#,
            ),
            (
                "response.output_item.added",
                r#"{"type":"response.output_item.added","output_index":1,"item":{"type":"function_call","id":"fc_1","call_id":"c1","name":"get_weather","arguments":""}}"#,
            ),
            (
                "response.function_call_arguments.delta",
                r#"{"type":"response.function_call_arguments.delta","item_id":"fc_1","delta":""}"#,
            ),
            (
                "response.function_call_arguments.delta",
                r#"{"type":"response.function_call_arguments.delta","item_id":"fc_1","delta":"{}"}"#,
            ),
        ]);
        let tl = &obs.timeline;
        assert_eq!(tl.token_events.len(), 2);
        assert!(tl.token_events.iter().all(|e| e.kind == TokenKind::Output));
        assert_eq!(tl.first_token(), Some(tl.sent + Duration::from_millis(2)));
        assert!(obs.anomalies.is_empty(), "{:?}", obs.anomalies);
        // The call is assembled for the answer checks: its name and arguments.
        assert_eq!(
            obs.answer.tool_calls.len(),
            1,
            "{:?}",
            obs.answer.tool_calls
        );
        assert_eq!(obs.answer.tool_calls[0].name, "get_weather");
        assert_eq!(obs.answer.tool_calls[0].arguments, "{}");
    }

    #[test]
    fn table() {
        use TokenKind::{Output, Reasoning};
        struct Case {
            name: &'static str,
            events: &'static [(&'static str, &'static str)],
            kinds: &'static [TokenKind],
            usage: (Option<u64>, Option<u64>, Option<u64>),
            terminated: bool,
            error: Option<&'static str>,
            anomalies: &'static [Anomaly],
        }
        let cases = [
            Case {
                name: "reasoning, text, empty delta, completed with usage",
                events: &[
                    (
                        "response.created",
                        r#"{"type":"response.created","response":{}}"#,
                    ),
                    (
                        "response.reasoning_summary_text.delta",
                        r#"{"type":"response.reasoning_summary_text.delta","delta":"Hm"}"#,
                    ),
                    (
                        "response.reasoning_text.delta",
                        r#"{"type":"response.reasoning_text.delta","delta":"so"}"#,
                    ),
                    (
                        "response.output_text.delta",
                        r#"{"type":"response.output_text.delta","delta":""}"#,
                    ),
                    (
                        "response.output_text.delta",
                        r#"{"type":"response.output_text.delta","delta":"Hi"}"#,
                    ),
                    (
                        "response.output_text.done",
                        r#"{"type":"response.output_text.done","text":"Hi"}"#,
                    ),
                    (
                        "response.completed",
                        r#"{"type":"response.completed","response":{"model":"m","usage":{"input_tokens":9,"output_tokens":7,"input_tokens_details":{"cached_tokens":4},"output_tokens_details":{"reasoning_tokens":5}}}}"#,
                    ),
                ],
                kinds: &[Reasoning, Reasoning, Output],
                usage: (Some(7), Some(9), Some(4)),
                terminated: true,
                error: None,
                anomalies: &[],
            },
            Case {
                name: "incomplete is a finished generation",
                events: &[
                    (
                        "response.output_text.delta",
                        r#"{"type":"response.output_text.delta","delta":"a"}"#,
                    ),
                    (
                        "response.incomplete",
                        r#"{"type":"response.incomplete","response":{"incomplete_details":{"reason":"max_output_tokens"},"usage":{"output_tokens":1}}}"#,
                    ),
                ],
                kinds: &[Output],
                usage: (Some(1), None, None),
                terminated: true,
                error: None,
                anomalies: &[],
            },
            Case {
                name: "response.failed after tokens",
                events: &[
                    (
                        "response.output_text.delta",
                        r#"{"type":"response.output_text.delta","delta":"a"}"#,
                    ),
                    (
                        "response.failed",
                        r#"{"type":"response.failed","response":{"status":"failed","error":{"code":"server_error","message":"The model crashed"}}}"#,
                    ),
                ],
                kinds: &[Output],
                usage: (None, None, None),
                terminated: false,
                error: Some("The model crashed"),
                anomalies: &[],
            },
            Case {
                name: "error event",
                events: &[(
                    "error",
                    r#"{"type":"error","code":"rate_limit_exceeded","message":"Slow down","param":null}"#,
                )],
                kinds: &[],
                usage: (None, None, None),
                terminated: false,
                error: Some("Slow down"),
                anomalies: &[],
            },
            Case {
                name: "unknown types are one anomaly; tool progress is quiet; args are output",
                events: &[
                    ("response.brand_new", r#"{"type":"response.brand_new"}"#),
                    ("response.other_new", r#"{"type":"response.other_new"}"#),
                    (
                        "response.web_search_call.searching",
                        r#"{"type":"response.web_search_call.searching"}"#,
                    ),
                    (
                        "response.function_call_arguments.delta",
                        r#"{"type":"response.function_call_arguments.delta","delta":"{\"a\""}"#,
                    ),
                    (
                        "response.completed",
                        r#"{"type":"response.completed","response":{}}"#,
                    ),
                ],
                kinds: &[Output],
                usage: (None, None, None),
                terminated: true,
                error: None,
                anomalies: &[Anomaly::UnknownEvent],
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
            assert_eq!(obs.terminated, c.terminated, "{}", c.name);
            assert_eq!(obs.stream_error.as_deref(), c.error, "{}", c.name);
            assert_eq!(obs.anomalies, c.anomalies, "{}", c.name);
        }
    }
}
