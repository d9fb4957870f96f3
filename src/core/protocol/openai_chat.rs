//! OpenAI chat completions (`POST {base}/chat/completions`), as served by vLLM, SGLang,
//! llama.cpp, TGI Messages, Ollama `/v1`, LM Studio, OpenAI and most gateways.
//!
//! Tokens: `choices[i].delta.content`, a refusal's text in `delta.refusal` (sent with
//! `content: null`; output like any answer), reasoning in `delta.reasoning_content` or
//! `delta.reasoning` or typed `delta.reasoning_details[]` entries (`text` or `summary`),
//! tool-call arguments in `delta.tool_calls[].function.arguments` (a call's first chunk with
//! only its `name` is a token too: the tool-call rule of docs/measurement.md). `delta.content`
//! may also be a list of typed parts (Mistral): `text` parts are output, `thinking` parts
//! (a string or nested text parts) reasoning.
//! Counts: the final `usage` chunk (`stream_options.include_usage`), and llama.cpp's `timings`.
//! Terminator: `data: [DONE]`. Errors inside a 200: `{"error": …}`, `event: error`,
//! `finish_reason: "error"`. Source: docs/protocols.md.
//!
//! The stream side, [`OpenAiStream`], also reads legacy completions (`choices[].text`) and Azure
//! OpenAI; [`interpret_common`] is shared with the llama.cpp native adapter.

pub(super) mod serve;

use std::time::Instant;

use serde_json::{json, Value};

use super::json::{error_message, has_text, number_u64, str_at};
use super::openai_chunk::{self, Choice, Chunk, Delta, Obj, Str};
use super::{usage, Flow, RequestSpec, StreamProtocol};
use crate::config::{Scenario, Target};
use crate::decode::sse::SseEvent;
use crate::measure::{Anomaly, Observations, TokenKind};

/// The endpoint after `base_url`; a server serves it under `/v1`.
pub(super) const PATH: &str = "chat/completions";

/// The streaming chat request: `stream: true` with `stream_options.include_usage: true`.
pub(super) fn build_request(
    target: &Target,
    scenario: &Scenario,
    nonce: Option<&str>,
) -> RequestSpec {
    let mut body = chat_body(scenario, nonce);
    body["model"] = json!(target.model);
    super::bearer_json_request(target, scenario, PATH, body)
}

/// The chat body without `model` (Azure names the model by its deployment in the URL) and
/// without temperature.
pub(super) fn chat_body(scenario: &Scenario, nonce: Option<&str>) -> Value {
    let mut body = json!({
        "messages": super::render_messages(&scenario.messages, nonce),
        "max_tokens": scenario.max_tokens,
        "stream": true,
        "stream_options": { "include_usage": true },
    });
    super::structured::add_openai(&mut body, scenario);
    body
}

/// Interprets an OpenAI chunk stream: chat completions (`choices[].delta`, also Azure) or
/// legacy completions (`choices[].text`); the two differ only in where a choice keeps its text.
///
/// A chunk of the usual shape is read through the borrowed [`openai_chunk`] view, without
/// building a `serde_json::Value`; any other chunk takes the general `Value` path.
#[derive(Debug)]
pub(super) struct OpenAiStream {
    texts: Texts,
}

/// Where a choice keeps its text.
#[derive(Debug, Clone, Copy)]
enum Texts {
    /// Chat: `delta.content`, tool-call arguments, reasoning.
    Delta,
    /// Legacy completions: a non-empty `text` (`""` for special tokens is no token).
    Text,
}

impl OpenAiStream {
    /// Chat completions: `delta.content`, tool-call arguments, reasoning.
    pub(super) fn chat() -> Self {
        OpenAiStream {
            texts: Texts::Delta,
        }
    }

    /// Legacy completions: a non-empty `text` (`""` for special tokens is no token).
    pub(super) fn completions() -> Self {
        OpenAiStream { texts: Texts::Text }
    }
}

impl StreamProtocol for OpenAiStream {
    fn on_event(&mut self, event: &SseEvent, at: Instant, obs: &mut Observations) -> Flow {
        if super::is_done(&event.data) {
            obs.terminated = true;
            return Flow::Done;
        }
        if event.event.as_deref() == Some("error") {
            obs.stream_error(&event.data);
            return Flow::Done;
        }
        if let Some(chunk) = openai_chunk::parse(&event.data) {
            return interpret_typed(&chunk, at, obs, self.texts);
        }
        let chunk = match super::parse_json(&event.data, obs) {
            Ok(v) => v,
            Err(flow) => return flow,
        };
        interpret_chunk(&chunk, at, obs, self.texts)
    }

    fn is_terminator(&self, event: &SseEvent) -> bool {
        super::is_done(&event.data)
    }
}

/// The parts every OpenAI-style chunk shares: error objects, identity, `usage`, llama.cpp
/// `timings`. Returns `Flow::Done` on an error object.
pub(super) fn interpret_common(chunk: &Value, obs: &mut Observations) -> Flow {
    if let Some(err) = chunk.get("error").filter(|e| !e.is_null()) {
        obs.stream_error(&error_message(err));
        return Flow::Done;
    }
    Observations::identity_field(&mut obs.identity.response_model, str_at(chunk, "model"));
    Observations::identity_field(
        &mut obs.identity.system_fingerprint,
        str_at(chunk, "system_fingerprint"),
    );
    if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
        // Take the last report of each field; `usage: {}` changes nothing.
        usage::read(usage, &usage::CHAT, obs);
    }
    super::read_llama_cpp_timings(chunk, obs);
    super::read_vllm_request_metrics(chunk, obs);
    Flow::Continue
}

fn interpret_chunk(chunk: &Value, at: Instant, obs: &mut Observations, texts: Texts) -> Flow {
    if !chunk.is_object() {
        obs.anomaly(Anomaly::UnknownEvent);
        return Flow::Continue;
    }
    if interpret_common(chunk, obs) == Flow::Done {
        return Flow::Done;
    }
    let all = chunk.get("choices").and_then(Value::as_array);
    for choice in all.into_iter().flatten() {
        collect_value_answer(choice, texts, at, obs);
    }
    // `choices` may be absent, null or [] (usage chunks, Azure filter chunks): no token.
    let choices = chunk
        .get("choices")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|choice| {
            let kind = match texts {
                Texts::Delta => chat_choice_kind(choice),
                Texts::Text => has_text(choice, "text").then_some(TokenKind::Output),
            };
            (str_at(choice, "finish_reason"), kind)
        });
    fold_choices(choices, at, obs)
}

/// Folds each choice's `(finish_reason, what it carries)` into `obs`: a `finish_reason` of
/// `"error"` ends the stream as a stream error, any other non-empty one marks it finished; the
/// chunk is one token event, of output when any choice carries output (output wins over
/// reasoning when choices disagree), else of reasoning when any carries reasoning.
fn fold_choices<'a>(
    choices: impl Iterator<Item = (Option<&'a str>, Option<TokenKind>)>,
    at: Instant,
    obs: &mut Observations,
) -> Flow {
    let mut kind = None;
    for (finish_reason, choice_kind) in choices {
        match finish_reason {
            Some("error") => {
                obs.stream_error("finish_reason \"error\"");
                return Flow::Done;
            }
            Some(r) if !r.is_empty() => obs.finish(r),
            _ => {}
        }
        match choice_kind {
            Some(TokenKind::Output) => kind = Some(TokenKind::Output),
            Some(TokenKind::Reasoning) if kind.is_none() => kind = Some(TokenKind::Reasoning),
            _ => {}
        }
    }
    if let Some(kind) = kind {
        obs.token(at, kind);
    }
    Flow::Continue
}

/// What a chat choice's `delta` carries; a choice without `delta` (Azure) carries nothing.
/// `content` may be a string or a list of typed parts ([`content_parts_kind`]); reasoning may
/// also come only as `reasoning_details[]` entries ([`has_reasoning_details`]).
fn chat_choice_kind(choice: &Value) -> Option<TokenKind> {
    let delta = choice.get("delta")?;
    let parts = content_parts_kind(delta.get("content"));
    if has_text(delta, "content")
        || parts == Some(TokenKind::Output)
        || has_text(delta, "refusal")
        || has_tool_arguments(delta)
    {
        Some(TokenKind::Output)
    } else if parts == Some(TokenKind::Reasoning)
        || has_text(delta, "reasoning_content")
        || has_text(delta, "reasoning")
        || has_reasoning_details(delta)
    {
        Some(TokenKind::Reasoning)
    } else {
        None
    }
}

/// What a `delta.content` given as a list of typed parts carries (Mistral's documented chunk
/// list): output when a `{"type": "text", "text": …}` part has text; else reasoning when a
/// `{"type": "thinking", "thinking": …}` part has text, `thinking` being a string or a list of
/// text parts (`[{"type": "text", "text": …}]`). Other part types (images, references) and a
/// string or absent `content` give `None` (a string is read by the caller).
fn content_parts_kind(content: Option<&Value>) -> Option<TokenKind> {
    let parts = content?.as_array()?;
    let mut kind = None;
    for part in parts {
        match str_at(part, "type") {
            Some("text") if has_text(part, "text") => return Some(TokenKind::Output),
            Some("thinking") if has_thinking_text(part.get("thinking")) => {
                kind = Some(TokenKind::Reasoning)
            }
            _ => {}
        }
    }
    kind
}

/// A thinking part's `thinking`: a non-empty string, or a list with a text part with text.
fn has_thinking_text(thinking: Option<&Value>) -> bool {
    match thinking {
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Array(parts)) => parts
            .iter()
            .any(|p| str_at(p, "type").is_none_or(|t| t == "text") && has_text(p, "text")),
        _ => false,
    }
}

/// True when any `delta.reasoning_details[]` entry (OpenRouter and other gateways; typed
/// `reasoning.text`, `reasoning.summary`, `reasoning.encrypted`) has a non-empty `text` or
/// `summary`. Encrypted entries carry no readable text and are no token.
fn has_reasoning_details(delta: &Value) -> bool {
    delta
        .get("reasoning_details")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|d| has_text(d, "text") || has_text(d, "summary"))
}

/// True when any `delta.tool_calls[].function.arguments` (or a new call's name) is non-empty.
fn has_tool_arguments(delta: &Value) -> bool {
    delta
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c.get("function"))
        .any(|f| has_text(f, "arguments") || has_text(f, "name"))
}

/// [`interpret_common`] and [`interpret_chunk`] over the typed view, which has no error object
/// (those take the `Value` path). Keep the two in step: the differential test compares them.
fn interpret_typed(chunk: &Chunk<'_>, at: Instant, obs: &mut Observations, texts: Texts) -> Flow {
    Observations::identity_field(&mut obs.identity.response_model, Str::get(&chunk.model));
    Observations::identity_field(
        &mut obs.identity.system_fingerprint,
        Str::get(&chunk.system_fingerprint),
    );
    let u64_of = |n: &Option<serde_json::Number>| n.as_ref().and_then(number_u64);
    if let Some(Obj(u)) = &chunk.usage {
        let cached = match &u.prompt_tokens_details {
            Some(Obj(d)) => u64_of(&d.cached_tokens),
            _ => None,
        };
        usage::record(
            obs,
            u64_of(&u.completion_tokens),
            u64_of(&u.prompt_tokens),
            cached,
        );
    }
    if let Some(Obj(t)) = &chunk.timings {
        super::merge_llama_cpp_timings(
            obs,
            t.prompt_ms,
            u64_of(&t.prompt_n),
            u64_of(&t.predicted_n),
            t.predicted_ms,
        );
    }
    if let Some(Obj(m)) = &chunk.metrics {
        super::merge_vllm_request_metrics(obs, m.queue_time_ms, m.time_to_first_token_ms);
    }
    for Obj(choice) in chunk.choices.iter().flatten() {
        collect_typed_answer(choice, texts, at, obs);
    }
    let choices = chunk.choices.iter().flatten().map(|Obj(choice)| {
        let kind = match texts {
            Texts::Delta => choice.delta.as_ref().and_then(|Obj(d)| typed_delta_kind(d)),
            Texts::Text => Str::has_text(&choice.text).then_some(TokenKind::Output),
        };
        (Str::get(&choice.finish_reason), kind)
    });
    fold_choices(choices, at, obs)
}

/// Adds a choice's answer text, reasoning and tool-call deltas to [`Observations::answer`]
/// (the `Value` path; [`collect_typed_answer`] is the typed one).
fn collect_value_answer(choice: &Value, texts: Texts, at: Instant, obs: &mut Observations) {
    let answer = &mut obs.answer;
    let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
    match texts {
        Texts::Text => answer.push_text(&text(choice, "text")),
        Texts::Delta => {
            let Some(delta) = choice.get("delta") else {
                return;
            };
            answer.push_text(&text(delta, "content"));
            // `content` as a list of typed parts (Mistral): `text` parts are answer text,
            // `thinking` parts (a string or nested text parts) reasoning.
            let parts = delta.get("content").and_then(Value::as_array);
            for part in parts.into_iter().flatten() {
                match str_at(part, "type") {
                    Some("thinking") => match part.get("thinking") {
                        Some(Value::String(t)) => answer.push_reasoning(t),
                        Some(Value::Array(inner)) => {
                            for p in inner {
                                answer.push_reasoning(&text(p, "text"));
                            }
                        }
                        _ => {}
                    },
                    Some("text") | None => answer.push_text(&text(part, "text")),
                    Some(_) => {}
                }
            }
            answer.push_text(&text(delta, "refusal"));
            answer.push_reasoning(&text(delta, "reasoning_content"));
            answer.push_reasoning(&text(delta, "reasoning"));
            let details = delta.get("reasoning_details").and_then(Value::as_array);
            for d in details.into_iter().flatten() {
                answer.push_reasoning(&text(d, "text"));
                answer.push_reasoning(&text(d, "summary"));
            }
            let calls = delta.get("tool_calls").and_then(Value::as_array);
            for (i, call) in calls.into_iter().flatten().enumerate() {
                let index = call.get("index").and_then(Value::as_u64);
                let f = call.get("function");
                let name = f.and_then(|f| f.get("name")).and_then(Value::as_str);
                let args = f.and_then(|f| f.get("arguments")).and_then(Value::as_str);
                let index = index.map_or(i, |n| usize::try_from(n).unwrap_or(usize::MAX));
                answer.push_tool_call(index, name, args, at);
            }
        }
    }
}

/// [`collect_value_answer`] over the typed view.
fn collect_typed_answer(choice: &Choice<'_>, texts: Texts, at: Instant, obs: &mut Observations) {
    let answer = &mut obs.answer;
    match texts {
        Texts::Text => answer.push_text(Str::get(&choice.text).unwrap_or("")),
        Texts::Delta => {
            let Some(Obj(delta)) = &choice.delta else {
                return;
            };
            answer.push_text(Str::get(&delta.content).unwrap_or(""));
            answer.push_text(Str::get(&delta.refusal).unwrap_or(""));
            answer.push_reasoning(Str::get(&delta.reasoning_content).unwrap_or(""));
            answer.push_reasoning(Str::get(&delta.reasoning).unwrap_or(""));
            for Obj(d) in delta.reasoning_details.iter().flatten() {
                answer.push_reasoning(Str::get(&d.text).unwrap_or(""));
                answer.push_reasoning(Str::get(&d.summary).unwrap_or(""));
            }
            for (i, Obj(call)) in delta.tool_calls.iter().flatten().enumerate() {
                let index = call.index.as_ref().and_then(number_u64);
                let index = index.map_or(i, |n| usize::try_from(n).unwrap_or(usize::MAX));
                let (name, args) = match &call.function {
                    Some(Obj(f)) => (Str::get(&f.name), Str::get(&f.arguments)),
                    None => (None, None),
                };
                answer.push_tool_call(index, name, args, at);
            }
        }
    }
}

/// [`chat_choice_kind`] over the typed view (which declines a `content` list: those take the
/// `Value` path).
fn typed_delta_kind(delta: &Delta<'_>) -> Option<TokenKind> {
    let tool_arguments = delta.tool_calls.iter().flatten().any(|Obj(c)| {
        c.function
            .as_ref()
            .is_some_and(|Obj(f)| Str::has_text(&f.arguments) || Str::has_text(&f.name))
    });
    let reasoning_details = (delta.reasoning_details.iter().flatten())
        .any(|Obj(d)| Str::has_text(&d.text) || Str::has_text(&d.summary));
    if Str::has_text(&delta.content) || Str::has_text(&delta.refusal) || tool_arguments {
        Some(TokenKind::Output)
    } else if Str::has_text(&delta.reasoning_content)
        || Str::has_text(&delta.reasoning)
        || reasoning_details
    {
        Some(TokenKind::Reasoning)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use proptest::prelude::*;

    use super::*;
    use crate::measure::FailureReason;

    /// Feeds `datas` one per millisecond; returns the observations and the last flow.
    fn run(datas: &[&str]) -> (Observations, Flow) {
        super::super::testing::feed_data(&mut OpenAiStream::chat(), datas)
    }

    #[test]
    fn role_only_and_empty_content_are_not_tokens() {
        let (obs, flow) = run(&[
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":null}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"Hi"}}]}"#,
            "[DONE]",
        ]);
        assert_eq!(flow, Flow::Done);
        assert!(obs.terminated);
        assert_eq!(obs.timeline.token_events.len(), 1);
        assert_eq!(
            obs.timeline.first_token(),
            Some(obs.timeline.sent + Duration::from_millis(3))
        );
    }

    #[test]
    fn reasoning_under_either_name_is_a_token_but_not_output() {
        for field in ["reasoning_content", "reasoning"] {
            let first = format!(r#"{{"choices":[{{"delta":{{"{field}":"think"}}}}]}}"#);
            let (obs, _) = run(&[&first, r#"{"choices":[{"delta":{"content":"A"}}]}"#]);
            let tl = &obs.timeline;
            assert_eq!(
                tl.first_token(),
                Some(tl.sent + Duration::from_millis(1)),
                "{field}"
            );
            assert_eq!(
                tl.first_output(),
                Some(tl.sent + Duration::from_millis(2)),
                "{field}"
            );
        }
    }

    #[test]
    fn a_refusal_is_output_text() {
        let (obs, flow) = run(&[
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":null,"refusal":""}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":null,"refusal":"I"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"refusal":" can't"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
            r#"{"choices":[],"usage":{"completion_tokens":2}}"#,
            "[DONE]",
        ]);
        assert_eq!(flow, Flow::Done);
        let tl = &obs.timeline;
        assert_eq!(tl.token_events.len(), 2);
        assert!(tl.token_events.iter().all(|e| e.kind == TokenKind::Output));
        assert_eq!(tl.first_token(), Some(tl.sent + Duration::from_millis(2)));
        assert_eq!(tl.first_output(), tl.first_token());
    }

    /// Mistral's documented `delta.content` list: a thinking chunk (nested text parts), then
    /// text chunks. Held-back shape 1: TTFT on the first thinking chunk, first output on the
    /// first text chunk, every chunk with text a token event.
    #[test]
    fn content_as_a_list_of_typed_parts() {
        let (obs, flow) = run(&[
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":[{"type":"thinking","thinking":[{"type":"text","text":"Let me"}]}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":[{"type":"thinking","thinking":[{"type":"text","text":" think."}]}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":[{"type":"thinking","thinking":[{"type":"text","text":""}]}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":[{"type":"text","text":"The"}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":[{"type":"text","text":" answer"}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":[{"type":"thinking","thinking":"more"},{"type":"text","text":"."}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":[{"type":"image_url","image_url":{"url":"x"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":" done"},"finish_reason":"stop"}]}"#,
            "[DONE]",
        ]);
        assert_eq!(flow, Flow::Done);
        let tl = &obs.timeline;
        let kinds: Vec<_> = tl.token_events.iter().map(|e| e.kind).collect();
        use TokenKind::{Output, Reasoning};
        assert_eq!(
            kinds,
            [Reasoning, Reasoning, Output, Output, Output, Output]
        );
        assert_eq!(tl.first_token(), Some(tl.sent + Duration::from_millis(2)));
        assert_eq!(tl.first_output(), Some(tl.sent + Duration::from_millis(5)));
        assert!(obs.anomalies.is_empty(), "{:?}", obs.anomalies);
    }

    /// Reasoning only in `reasoning_details[]` (no `reasoning` string). Held-back shape 2:
    /// TTFT on the first reasoning entry, not on the first output token.
    #[test]
    fn reasoning_only_in_reasoning_details() {
        let (obs, _) = run(&[
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"","reasoning_details":[{"type":"reasoning.text","text":"Hmm","format":"anthropic-claude-v1","index":0}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"","reasoning_details":[{"type":"reasoning.summary","summary":"Weighing it","index":0}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"","reasoning_details":[{"type":"reasoning.encrypted","data":"ZW5j","index":0}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"Yes"}}]}"#,
            "[DONE]",
        ]);
        let tl = &obs.timeline;
        let kinds: Vec<_> = tl.token_events.iter().map(|e| e.kind).collect();
        use TokenKind::{Output, Reasoning};
        assert_eq!(kinds, [Reasoning, Reasoning, Output]);
        assert_eq!(tl.first_token(), Some(tl.sent + Duration::from_millis(2)));
        assert_eq!(tl.first_output(), Some(tl.sent + Duration::from_millis(5)));
    }

    /// The tool-call rule (docs/measurement.md): a call's first chunk with only its name
    /// (`arguments: ""`) is one output token event; a chunk with neither is none.
    #[test]
    fn a_name_only_tool_call_chunk_is_one_output_event() {
        let (obs, _) = run(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"get_weather","arguments":""}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":""}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}}]}"#,
        ]);
        let tl = &obs.timeline;
        assert_eq!(tl.token_events.len(), 2);
        assert_eq!(tl.first_output(), Some(tl.sent + Duration::from_millis(1)));
    }

    #[test]
    fn tool_call_arguments_are_output_tokens() {
        let (obs, _) = run(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\":"}}]}}]}"#,
        ]);
        assert_eq!(obs.timeline.token_events[0].kind, TokenKind::Output);
    }

    #[test]
    fn azure_filter_chunk_and_null_choices_are_not_tokens() {
        let (obs, flow) = run(&[
            r#"{"choices":[],"prompt_filter_results":[{"prompt_index":0}]}"#,
            r#"{"choices":null}"#,
            r#"{"object":""}"#,
            r#"{"choices":[{"index":0}]}"#,
        ]);
        assert_eq!(flow, Flow::Continue);
        assert!(obs.timeline.token_events.is_empty());
        assert!(obs.anomalies.is_empty());
    }

    #[test]
    fn usage_and_llama_cpp_timings_are_read() {
        let (obs, _) = run(&[
            r#"{"choices":[],"model":"m1","system_fingerprint":"b1","usage":{"completion_tokens":36,"prompt_tokens":39,"prompt_tokens_details":{"cached_tokens":7}},"timings":{"prompt_n":39,"prompt_ms":210.5,"predicted_n":36,"predicted_ms":399.2}}"#,
        ]);
        assert_eq!(obs.usage.completion_tokens, Some(36));
        assert_eq!(obs.usage.prompt_tokens, Some(39));
        assert_eq!(obs.usage.cached_prompt_tokens, Some(7));
        assert_eq!(obs.server_timings.predicted_tokens, Some(36));
        assert_eq!(obs.server_timings.prompt_seconds, Some(0.2105));
        assert_eq!(obs.identity.response_model.as_deref(), Some("m1"));
        assert_eq!(obs.identity.system_fingerprint.as_deref(), Some("b1"));
    }

    #[test]
    fn empty_usage_and_absent_fields_stay_unknown() {
        let (obs, _) = run(&[r#"{"choices":[],"usage":{}}"#, r#"{"usage":null}"#]);
        assert_eq!(obs.usage, Default::default());
    }

    #[test]
    fn error_object_inside_200_is_a_stream_error() {
        let (obs, flow) = run(&[
            r#"{"choices":[{"delta":{"content":"A"}}]}"#,
            r#"{"error":{"message":"model overloaded","type":"server_error"}}"#,
        ]);
        assert_eq!(flow, Flow::Done);
        assert_eq!(obs.stream_error.as_deref(), Some("model overloaded"));
        let (obs, _) = run(&[r#"{"error":"plain string"}"#]);
        assert_eq!(obs.stream_error.as_deref(), Some("plain string"));
    }

    #[test]
    fn finish_reason_error_is_a_stream_error_and_others_finish() {
        let (obs, flow) = run(&[r#"{"choices":[{"delta":{},"finish_reason":"error"}]}"#]);
        assert_eq!(flow, Flow::Done);
        assert!(obs.stream_error.is_some());
        let (obs, _) = run(&[r#"{"choices":[{"delta":{},"finish_reason":""}]}"#]);
        assert!(!obs.finished, "an empty finish_reason is no finish");
        let (obs, _) = run(&[r#"{"choices":[{"delta":{},"finish_reason":"weird_new_reason"}]}"#]);
        assert!(obs.finished);
    }

    #[test]
    fn non_json_sentinel_is_an_anomaly_and_broken_json_a_decode_failure() {
        let (obs, flow) = run(&[": keepalive"]);
        assert_eq!(flow, Flow::Continue);
        assert_eq!(obs.anomalies, vec![Anomaly::NonJsonData]);
        let (_, flow) = run(&[r#"{"choices":[{"delta""#]);
        assert!(matches!(flow, Flow::Fail(f) if f.reason == FailureReason::Decode));
    }

    /// The typed fast path and the `Value` path agree on every chunk the fast path accepts, and
    /// the fast path declines what only the `Value` path can judge.
    #[test]
    fn typed_view_agrees_with_the_value_path() {
        let accepted = [
            r#"{"choices":[{"delta":{"reasoning_details":[{"type":"reasoning.text","text":"r","format":"unknown","index":0}]}}]}"#,
            r#"{"choices":[{"delta":{"reasoning_details":[{"type":"reasoning.encrypted","data":"x"},{"type":"reasoning.summary","summary":""}]}}]}"#,
            r#"{"choices":[{"delta":{"reasoning_details":[{"type":"reasoning.summary","summary":"s"}],"content":""}}]}"#,
            r#"{"choices":[{"delta":{"reasoning_details":null,"reasoning":null}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":null}}]}"#,
            r#"{"id":"c1","object":"chat.completion.chunk","model":"m","system_fingerprint":"fp","choices":[{"index":0,"delta":{"content":"Hi"},"logprobs":null,"finish_reason":null}]}"#,
            r#"{"choices":[{"delta":{"content":"line\nbreak \u00e9 \"q\""}}]}"#,
            r#"{"choices":[{"delta":{"content":""}}],"model":""}"#,
            r#"{"choices":[{"delta":{"reasoning_content":"think"}}]}"#,
            r#"{"choices":[{"delta":{"reasoning":"think","content":null}}]}"#,
            r#"{"choices":[{"delta":{"content":null,"refusal":"I can't"}}]}"#,
            r#"{"choices":[{"delta":{"refusal":""}}]}"#,
            r#"{"choices":[{"delta":{"refusal":null,"reasoning":"r"}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\":"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"x","function":{"name":"f","arguments":""}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0}]}}]}"#,
            r#"{"choices":[{"delta":{"reasoning":"r"}},{"delta":{"content":"c"}}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"stop"}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":""}]}"#,
            r#"{"choices":[{"delta":{"content":"A"},"finish_reason":"error"}]}"#,
            r#"{"choices":[],"usage":{"completion_tokens":36,"prompt_tokens":39,"prompt_tokens_details":{"cached_tokens":7}}}"#,
            r#"{"choices":[],"usage":{"completion_tokens":36.0,"prompt_tokens":-1,"prompt_tokens_details":null}}"#,
            r#"{"choices":[],"usage":{"completion_tokens":1.5,"total_tokens":3}}"#,
            r#"{"choices":[],"usage":{}}"#,
            r#"{"usage":null,"choices":null,"error":null}"#,
            r#"{"choices":[],"timings":{"prompt_n":39,"prompt_ms":210.5,"predicted_n":36,"predicted_ms":399.2}}"#,
            r#"{"choices":[],"timings":{"prompt_ms":-3,"predicted_n":1e3}}"#,
            r#"{"choices":[{"index":0}]}"#,
            r#"{"choices":[{"delta":null}]}"#,
            r#"{"choices":[],"prompt_filter_results":[{"prompt_index":0,"content_filter_results":{}}]}"#,
            r#"{"object":""}"#,
            r#" { "choices" : [ { "text" : "t" } ] } "#,
            r#"{"choices":[{"text":""},{"text":"x","finish_reason":"length"}]}"#,
        ];
        let declined = [
            r#"{"choices":[{"delta":{"content":[{"type":"text","text":"x"}]}}]}"#,
            r#"{"choices":[{"delta":{"reasoning_details":[{"type":"reasoning.text","text":5}]}}]}"#,
            r#"{"choices":[{"delta":{"reasoning_details":{"text":"x"}}}]}"#,
            r#"{"error":{"message":"overloaded"}}"#,
            r#"{"error":"plain"}"#,
            r#"[{"choices":[]}]"#,
            r#""text""#,
            r#"{"choices":[{"delta":{"content":5}}]}"#,
            r#"{"choices":{"delta":{"content":"x"}}}"#,
            r#"{"choices":[["x"]]}"#,
            r#"{"choices":[{"delta":["x"]}]}"#,
            r#"{"usage":[36,39]}"#,
            r#"{"usage":{"completion_tokens":"36"}}"#,
            r#"{"model":1,"choices":[]}"#,
            r#"{"choices":[],"choices":[{"delta":{"content":"x"}}]}"#,
            r#"{"choices":[{"delta""#,
            ": keepalive",
        ];
        let t0 = Instant::now();
        let at = t0 + Duration::from_millis(1);
        for data in accepted {
            let typed_chunk =
                openai_chunk::parse(data).unwrap_or_else(|| panic!("declined {data}"));
            let value: Value = serde_json::from_str(data).unwrap();
            for texts in [Texts::Delta, Texts::Text] {
                let (mut a, mut b) = (Observations::new(t0), Observations::new(t0));
                let fa = interpret_typed(&typed_chunk, at, &mut a, texts);
                let fb = interpret_chunk(&value, at, &mut b, texts);
                assert_eq!(fa, fb, "{data}");
                assert_eq!(format!("{a:?}"), format!("{b:?}"), "{data}");
            }
        }
        for data in declined {
            assert!(openai_chunk::parse(data).is_none(), "accepted {data}");
        }
    }

    /// JSON chunks of the OpenAI shape with every field sometimes absent, `null`, of another
    /// type, empty or escaped, for [`typed_view_agrees_on_generated_chunks`].
    fn generated_chunk() -> BoxedStrategy<Value> {
        fn obj(fields: Vec<(&str, Option<Value>)>) -> Value {
            Value::Object(
                fields
                    .into_iter()
                    .filter_map(|(k, v)| Some((k.to_string(), v?)))
                    .collect(),
            )
        }
        // Present 70 % of the time; then mostly of the expected shape, else any scalar.
        fn field(expected: impl Strategy<Value = Value> + 'static) -> BoxedStrategy<Option<Value>> {
            let scalar = prop_oneof![
                Just(Value::Null),
                any::<bool>().prop_map(Value::from),
                any::<i64>().prop_map(Value::from),
                Just(Value::from(-1.5)),
                Just(Value::from("7")),
            ];
            proptest::option::weighted(0.7, prop_oneof![9 => expected, 1 => scalar]).boxed()
        }
        let text = || {
            prop_oneof![
                Just(Value::Null),
                Just(Value::from("")),
                Just(Value::from("tok")),
                Just(Value::from("\u{e9} \"q\"\n")),
            ]
        };
        let count = || {
            prop_oneof![
                (0u64..100).prop_map(Value::from),
                Just(Value::from(36.0)),
                Just(Value::from(1.5)),
                Just(Value::from(-1)),
                Just(Value::from(1e3)),
            ]
        };
        let millis = || prop_oneof![Just(Value::from(210.5)), Just(Value::from(-3)), count()];
        let function = (field(text()), field(text()))
            .prop_map(|(a, n)| obj(vec![("arguments", a), ("name", n)]))
            .boxed();
        let tool_call =
            field(function).prop_map(|f| obj(vec![("index", Some(0.into())), ("function", f)]));
        let detail = (field(text()), field(text()))
            .prop_map(|(t, s)| {
                obj(vec![
                    ("type", Some("reasoning.text".into())),
                    ("text", t),
                    ("summary", s),
                ])
            })
            .boxed();
        let delta = (
            field(text()),
            field(text()),
            field(text()),
            field(proptest::collection::vec(tool_call, 0..3).prop_map(Value::from)),
            field(text()),
            field(proptest::collection::vec(detail, 0..3).prop_map(Value::from)),
        )
            .prop_map(|(c, rc, r, tc, rf, rd)| {
                obj(vec![
                    ("content", c),
                    ("refusal", rf),
                    ("reasoning_content", rc),
                    ("reasoning", r),
                    ("tool_calls", tc),
                    ("reasoning_details", rd),
                ])
            })
            .boxed();
        let finish = prop_oneof![
            Just(Value::Null),
            Just(Value::from("")),
            Just(Value::from("stop")),
            Just(Value::from("error")),
        ];
        let choice = (field(finish), field(delta), field(text()))
            .prop_map(|(f, d, t)| obj(vec![("finish_reason", f), ("delta", d), ("text", t)]))
            .boxed();
        let details = field(count()).prop_map(|c| obj(vec![("cached_tokens", c)]));
        let usage = (field(count()), field(count()), field(details))
            .prop_map(|(c, p, d)| {
                obj(vec![
                    ("completion_tokens", c),
                    ("prompt_tokens", p),
                    ("prompt_tokens_details", d),
                ])
            })
            .boxed();
        let timings = (
            field(millis()),
            field(count()),
            field(count()),
            field(millis()),
        )
            .prop_map(|(pm, pn, dn, dm)| {
                obj(vec![
                    ("prompt_ms", pm),
                    ("prompt_n", pn),
                    ("predicted_n", dn),
                    ("predicted_ms", dm),
                ])
            });
        let error = prop_oneof![
            4 => Just(Value::Null),
            1 => Just(serde_json::json!({"message": "overloaded"})),
        ];
        (
            field(text()),
            field(text()),
            field(usage),
            field(timings),
            field(proptest::collection::vec(choice, 0..3).prop_map(Value::from)),
            field(error),
        )
            .prop_map(|(m, fp, u, t, c, e)| {
                obj(vec![
                    ("model", m),
                    ("system_fingerprint", fp),
                    ("usage", u),
                    ("timings", t),
                    ("choices", c),
                    ("error", e),
                ])
            })
            .boxed()
    }

    proptest! {
        // About half the generated chunks are accepted by the fast path, and 6 % carry a token.
        #![proptest_config(ProptestConfig::with_cases(2048))]
        /// Whatever the fast path accepts, it reads exactly as the `Value` path does: the same
        /// flow and the same observations, for chat deltas and for completions text.
        #[test]
        fn typed_view_agrees_on_generated_chunks(chunk in generated_chunk()) {
            let data = chunk.to_string();
            let t0 = Instant::now();
            let at = t0 + Duration::from_millis(1);
            if let Some(typed_chunk) = openai_chunk::parse(&data) {
                for texts in [Texts::Delta, Texts::Text] {
                    let (mut a, mut b) = (Observations::new(t0), Observations::new(t0));
                    let fa = interpret_typed(&typed_chunk, at, &mut a, texts);
                    let fb = interpret_chunk(&chunk, at, &mut b, texts);
                    prop_assert_eq!(fa, fb, "{}", data);
                    prop_assert_eq!(format!("{a:?}"), format!("{b:?}"), "{}", data);
                }
            }
        }
    }

    #[test]
    fn event_error_type_is_a_stream_error() {
        let t0 = Instant::now();
        let mut obs = Observations::new(t0);
        let e = SseEvent {
            event: Some("error".into()),
            data: "upstream timed out".into(),
            id: None,
        };
        assert_eq!(OpenAiStream::chat().on_event(&e, t0, &mut obs), Flow::Done);
        assert_eq!(obs.stream_error.as_deref(), Some("upstream timed out"));
    }
}
