//! Amazon Bedrock ConverseStream (`POST {base}/model/{modelId}/converse-stream`; `base_url` is
//! the runtime endpoint, e.g. `https://bedrock-runtime.us-east-1.amazonaws.com`; the model id is
//! percent-encoded into the path, so `anthropic.claude-3-haiku-20240307-v1:0` becomes
//! `…-v1%3A0`).
//!
//! Request: `messages` (`{role, content: [{text}]}`; the system and developer messages go to
//! `system: [{text}]`), `inferenceConfig.maxTokens` = `max_tokens`, `inferenceConfig.temperature`
//! when set, `extra_body` merged; `accept: application/vnd.amazon.eventstream`. Signed with SigV4
//! (service `bedrock`, the target's region; [`sign`]) at the moment the request is built, or,
//! when the target has an API key (a Bedrock API key), sent with `Authorization: Bearer`.
//!
//! Stream: AWS's binary event stream ([`crate::decode::eventstream`]); each message reaches
//! [`StreamProtocol::on_event`] as an [`SseEvent`] ([`as_event`]): `event` = the `:event-type`
//! header for events, `exception:{:exception-type}` for exceptions, `error:{:error-code}` for
//! errors; `data` = the JSON payload (for errors, the `:error-message` header).
//! Tokens: `contentBlockDelta` with a non-empty `delta.text` (output),
//! `delta.reasoningContent.text` (reasoning) or `delta.toolUse.input` (tool input, output); not
//! tokens: `reasoningContent.signature`/`redactedContent`, `messageStart`, block start/stop.
//! `messageStop.stopReason` (`end_turn`, `max_tokens`, `stop_sequence`, `tool_use`,
//! `guardrail_intervened`, `content_filtered`) finishes the generation; `metadata`, always the
//! last event, is the terminator: `usage.outputTokens` is N, prompt tokens = `inputTokens` +
//! `cacheReadInputTokens` + `cacheWriteInputTokens` (Bedrock's `inputTokens` excludes the
//! cache), cached = `cacheReadInputTokens`; `metrics.latencyMs` is the server's own latency of
//! the whole call ([`crate::measure::ServerTimings::latency_seconds`], reported beside
//! llama.cpp's timings). Exceptions
//! inside the 200 (`throttlingException`, `modelStreamErrorException`, `validationException`,
//! `internalServerException`, `serviceUnavailableException`) are stream errors whose detail
//! starts with the exception type.

pub(super) mod serve;
mod sign;

use std::time::{Instant, SystemTime};

use serde_json::{json, Value};

use super::json::{f64_at, has_text, str_at, u64_at};
use super::{usage, Flow, Framing, RequestSpec, StreamProtocol};
use crate::config::{Scenario, Target};
use crate::decode::eventstream::Message;
use crate::decode::sse::SseEvent;
use crate::decode::DecodeError;
use crate::measure::{Anomaly, Observations, TokenKind};

/// The SigV4 service name of the Bedrock runtime.
const SERVICE: &str = "bedrock";

/// The first segment of the endpoint after `base_url`, before the model id.
const MODEL: &str = "model";

/// The last segment of the endpoint, after the model id.
const CONVERSE_STREAM: &str = "converse-stream";

/// The endpoint of the (percent-encoded) `model_id` after `base_url`.
pub(super) fn path(model_id: &str) -> String {
    format!("{MODEL}/{model_id}/{CONVERSE_STREAM}")
}

/// The response content type of `converse-stream`.
pub const CONTENT_TYPE: &str = "application/vnd.amazon.eventstream";

/// The ConverseStream request, signed now (see [`build_request_at`]).
pub(super) fn build_request(
    target: &Target,
    scenario: &Scenario,
    nonce: Option<&str>,
) -> RequestSpec {
    build_request_at(target, scenario, nonce, SystemTime::now())
}

/// The ConverseStream request signed as of `time`. A target without credentials (not read, or
/// unreadable: its probes fail with `credentials` before sending) is sent unsigned.
pub(crate) fn build_request_at(
    target: &Target,
    scenario: &Scenario,
    nonce: Option<&str>,
    time: SystemTime,
) -> RequestSpec {
    let mut system = Vec::new();
    let mut messages: Vec<serde_json::Value> = Vec::new();
    let texts = super::texts(&scenario.messages, nonce);
    let mut results_last = false;
    for (m, text) in scenario.messages.iter().zip(texts) {
        let was_results = std::mem::replace(&mut results_last, m.role == "tool");
        match m.role.as_str() {
            "system" | "developer" => system.push(json!({ "text": text })),
            // A tool result: a `toolResult` block of a user message (JSON when the text is a
            // JSON object), the results of one turn in one message.
            "tool" => {
                let content = match serde_json::from_str::<serde_json::Value>(&text) {
                    Ok(v @ serde_json::Value::Object(_)) => json!([{ "json": v }]),
                    _ => json!([{ "text": text }]),
                };
                let block =
                    json!({"toolResult": {"toolUseId": m.tool_call_id, "content": content}});
                match messages.last_mut() {
                    Some(last) if was_results => {
                        if let Some(blocks) = last["content"].as_array_mut() {
                            blocks.push(block);
                        }
                    }
                    _ => messages.push(json!({"role": "user", "content": [block]})),
                }
            }
            role => {
                let mut content = Vec::new();
                if !text.is_empty() || m.tool_calls.is_empty() {
                    content.push(json!({ "text": text }));
                }
                for c in &m.tool_calls {
                    content.push(json!({"toolUse": {"toolUseId": c.id, "name": c.name, "input": c.arguments}}));
                }
                // Bedrock wants the roles to alternate ("A conversation must alternate between
                // user and assistant roles"): a message of the same role as the one before it
                // (a user message after tool results, two user messages) joins it.
                match messages.last_mut() {
                    Some(last) if last["role"] == role => {
                        if let Some(blocks) = last["content"].as_array_mut() {
                            blocks.extend(content);
                        }
                    }
                    _ => messages.push(json!({ "role": role, "content": content })),
                }
            }
        }
    }
    let mut inference = json!({ "maxTokens": scenario.max_tokens });
    if let Some(t) = target.temperature_for(scenario) {
        inference["temperature"] = json!(t);
    }
    let mut body = json!({ "messages": messages, "inferenceConfig": inference });
    if !system.is_empty() {
        body["system"] = json!(system);
    }
    super::structured::add_bedrock(&mut body, scenario);
    super::merge_extra_body(&mut body, target, scenario);
    let mut headers = super::common_headers(target);
    headers[0].1 = CONTENT_TYPE.into();
    let model: String =
        percent_encoding::utf8_percent_encode(&target.model, percent_encoding::NON_ALPHANUMERIC)
            .collect::<String>()
            // Unreserved characters stay as they are (RFC 3986 §2.3), as the AWS SDKs send them.
            .replace("%2D", "-")
            .replace("%2E", ".")
            .replace("%5F", "_")
            .replace("%7E", "~");
    let url = super::join_url(&target.base_url, &path(&model));
    if target.api_key.is_some() {
        super::bearer_auth(target, &mut headers);
    } else if let Some(aws) = &target.aws {
        if let Some(creds) = &aws.credentials {
            // The bytes reqwest's `.json()` sends: the same serializer on the same value.
            let bytes = serde_json::to_vec(&body).unwrap_or_default();
            if let Ok(signed) = sign::sign_headers(
                "POST",
                url.as_str(),
                &bytes,
                creds,
                &aws.region,
                SERVICE,
                time,
            ) {
                headers.extend(signed);
            }
        }
    }
    RequestSpec { url, headers, body }
}

/// The event the adapter sees for one event-stream message (see the module docs).
///
/// Errors: the payload is not UTF-8 ([`DecodeError::InvalidUtf8`]).
pub(crate) fn as_event(msg: Message) -> Result<SseEvent, DecodeError> {
    let text = std::str::from_utf8(&msg.payload).map_err(|_| DecodeError::InvalidUtf8)?;
    let payload = || text.to_string();
    let (event, data) = match msg.header_str(":message-type") {
        Some("exception") => (
            format!(
                "exception:{}",
                msg.header_str(":exception-type").unwrap_or("unknown")
            ),
            payload(),
        ),
        Some("error") => (
            format!(
                "error:{}",
                msg.header_str(":error-code").unwrap_or("unknown")
            ),
            msg.header_str(":error-message")
                .unwrap_or_default()
                .to_string(),
        ),
        _ => (
            msg.header_str(":event-type")
                .unwrap_or_default()
                .to_string(),
            payload(),
        ),
    };
    Ok(SseEvent {
        event: Some(event),
        data,
        id: None,
    })
}

/// Interprets a Bedrock ConverseStream event stream.
#[derive(Debug, Default)]
pub(super) struct BedrockStream {
    /// The open tool call was dropped (beyond [`crate::measure::MAX_TOOL_CALLS`]): its
    /// argument deltas belong to no kept call.
    dropped_tool_open: bool,
}

impl StreamProtocol for BedrockStream {
    fn framing(&self) -> Framing {
        Framing::EventStream
    }

    fn on_event(&mut self, event: &SseEvent, at: Instant, obs: &mut Observations) -> Flow {
        let kind = event.event.as_deref().unwrap_or_default();
        if let Some(code) = kind.strip_prefix("error:") {
            obs.stream_error(&format!("{code}: {}", event.data));
            return Flow::Done;
        }
        let data = match super::parse_json(&event.data, obs) {
            Ok(v) => v,
            Err(flow) => return flow,
        };
        if let Some(exception) = kind.strip_prefix("exception:") {
            let message = str_at(&data, "message").or(str_at(&data, "Message"));
            obs.stream_error(&match message {
                Some(m) => format!("{exception}: {m}"),
                None => exception.to_string(),
            });
            return Flow::Done;
        }
        match kind {
            "messageStart" | "contentBlockStop" => {}
            "contentBlockStart" => {
                // Opens a tool call (`start.toolUse` with its id and name). The tool-call rule of
                // docs/measurement.md: the event that first names the function is one output
                // token event, even before any argument text.
                let tool = data.pointer("/start/toolUse").unwrap_or(&Value::Null);
                if has_text(tool, "name") {
                    obs.token(at, TokenKind::Output);
                    // A new call: Bedrock streams content blocks one after another.
                    let index = obs.answer.tool_calls.len();
                    self.dropped_tool_open = index >= crate::measure::MAX_TOOL_CALLS;
                    obs.answer
                        .push_tool_call(index, str_at(tool, "name"), None, at);
                }
            }
            "contentBlockDelta" => {
                let delta = data.get("delta").unwrap_or(&Value::Null);
                let reasoning = delta.get("reasoningContent").unwrap_or(&Value::Null);
                let tool = delta.get("toolUse").unwrap_or(&Value::Null);
                obs.answer.push_text(str_at(delta, "text").unwrap_or(""));
                obs.answer
                    .push_reasoning(str_at(reasoning, "text").unwrap_or(""));
                if has_text(tool, "input") && !self.dropped_tool_open {
                    // The open call (the last one started).
                    let index = obs.answer.tool_calls.len().saturating_sub(1);
                    obs.answer
                        .push_tool_call(index, None, str_at(tool, "input"), at);
                }
                if has_text(delta, "text") || has_text(tool, "input") {
                    obs.token(at, TokenKind::Output);
                } else if has_text(reasoning, "text") {
                    obs.token(at, TokenKind::Reasoning);
                } else if !["text", "reasoningContent", "toolUse", "citation", "image"]
                    .iter()
                    .any(|k| delta.get(k).is_some())
                {
                    obs.anomaly(Anomaly::UnknownEvent);
                }
            }
            "messageStop" => {
                if let Some(r) = str_at(&data, "stopReason").filter(|r| !r.is_empty()) {
                    obs.finish(r);
                }
            }
            "metadata" => {
                if let Some(u) = data.get("usage").filter(|u| u.is_object()) {
                    let input = u64_at(u, "inputTokens");
                    let read = u64_at(u, "cacheReadInputTokens");
                    let written = u64_at(u, "cacheWriteInputTokens");
                    let prompt = input.map(|i| {
                        i.saturating_add(read.unwrap_or(0))
                            .saturating_add(written.unwrap_or(0))
                    });
                    usage::record(obs, u64_at(u, "outputTokens"), prompt, read);
                }
                // Server numbers are untrusted input: as for a reported prefill, a negative,
                // NaN or unrepresentable duration is unknown, and so is one longer than any
                // probe can wait (a timeout is at most a day).
                let latency = data.get("metrics").and_then(|m| f64_at(m, "latencyMs"));
                let credible = |s: &f64| {
                    std::time::Duration::try_from_secs_f64(*s)
                        .is_ok_and(|d| d <= crate::config::durations::MAX)
                };
                if let Some(s) = latency.map(|ms| ms / 1000.0).filter(credible) {
                    obs.server_timings.latency_seconds = Some(s);
                }
                obs.terminated = true;
                return Flow::Done;
            }
            _ => obs.anomaly(Anomaly::UnknownEvent),
        }
        Flow::Continue
    }

    /// Nothing follows `metadata` on a well-behaved stream.
    fn is_benign_after_end(&self, _event: &SseEvent) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::{measure, TokenCountSource};

    fn run(events: &[(&str, &str)]) -> (Observations, Flow) {
        super::super::testing::feed(&mut BedrockStream::default(), events)
    }

    /// A stream as the ConverseStream docs show it: reasoning, text, a tool call, the stop
    /// reason, then usage and the server's latency.
    #[test]
    fn documented_stream() {
        let (obs, flow) = run(&[
            ("messageStart", r#"{"role":"assistant"}"#),
            (
                "contentBlockDelta",
                r#"{"contentBlockIndex":0,"delta":{"reasoningContent":{"text":"Think"}}}"#,
            ),
            (
                "contentBlockDelta",
                r#"{"contentBlockIndex":0,"delta":{"reasoningContent":{"signature":"sig"}}}"#,
            ),
            ("contentBlockStop", r#"{"contentBlockIndex":0}"#),
            (
                "contentBlockDelta",
                r#"{"contentBlockIndex":1,"delta":{"text":""}}"#,
            ),
            (
                "contentBlockDelta",
                r#"{"contentBlockIndex":1,"delta":{"text":"Hi"}}"#,
            ),
            (
                "contentBlockStart",
                r#"{"contentBlockIndex":2,"start":{"toolUse":{"toolUseId":"t1","name":"f"}}}"#,
            ),
            (
                "contentBlockDelta",
                r#"{"contentBlockIndex":2,"delta":{"toolUse":{"input":"{\"a\":"}}}"#,
            ),
            ("messageStop", r#"{"stopReason":"tool_use"}"#),
            (
                "metadata",
                r#"{"usage":{"inputTokens":10,"outputTokens":7,"totalTokens":37,"cacheReadInputTokens":20},"metrics":{"latencyMs":250}}"#,
            ),
        ]);
        assert_eq!(flow, Flow::Done);
        let kinds: Vec<_> = obs.timeline.token_events.iter().map(|e| e.kind).collect();
        assert_eq!(
            kinds,
            [
                TokenKind::Reasoning,
                TokenKind::Output,
                TokenKind::Output,
                TokenKind::Output
            ]
        );
        assert_eq!(obs.finish_reason.as_deref(), Some("tool_use"));
        let u = &obs.usage;
        assert_eq!(
            (u.completion_tokens, u.prompt_tokens, u.cached_prompt_tokens),
            (Some(7), Some(30), Some(20))
        );
        assert_eq!(obs.server_timings.latency_seconds, Some(0.25));
        assert!(obs.terminated && obs.finished && obs.anomalies.is_empty());
        let m = measure(&obs).unwrap();
        assert_eq!(
            (m.output_tokens, m.token_count_source),
            (7, TokenCountSource::Usage)
        );
    }

    /// The server's latency is untrusted input: negative, not a number, or longer than any probe
    /// can wait (its timeout is at most a day) is unknown, never shown.
    #[test]
    fn an_absurd_server_latency_is_unknown() {
        for (latency, want) in [
            ("250", Some(0.25)),
            ("0", Some(0.0)),
            ("86400000", Some(86_400.0)),
            ("86400001", None),
            ("1e308", None),
            ("18446744073709551615", None),
            ("-1", None),
            ("\"12\"", None),
        ] {
            let (obs, flow) = run(&[
                (
                    "contentBlockDelta",
                    r#"{"contentBlockIndex":0,"delta":{"text":"Hi"}}"#,
                ),
                ("messageStop", r#"{"stopReason":"end_turn"}"#),
                (
                    "metadata",
                    &format!(
                        r#"{{"usage":{{"outputTokens":1}},"metrics":{{"latencyMs":{latency}}}}}"#
                    ),
                ),
            ]);
            assert_eq!(flow, Flow::Done, "{latency}");
            assert_eq!(obs.server_timings.latency_seconds, want, "{latency}");
        }
    }

    #[test]
    fn exceptions_errors_and_unknown_events() {
        for (event, data, want) in [
            (
                "exception:throttlingException",
                r#"{"message":"Too many requests, please wait before trying again."}"#,
                "throttlingException: Too many requests, please wait before trying again.",
            ),
            (
                "exception:modelStreamErrorException",
                r#"{"message":"boom","originalStatusCode":500}"#,
                "modelStreamErrorException: boom",
            ),
            (
                "exception:serviceUnavailableException",
                "{}",
                "serviceUnavailableException",
            ),
            (
                "error:InternalFailure",
                "An internal error occurred",
                "InternalFailure: An internal error occurred",
            ),
        ] {
            let (obs, flow) = run(&[
                ("contentBlockDelta", r#"{"delta":{"text":"a"}}"#),
                (event, data),
            ]);
            assert_eq!(flow, Flow::Done, "{event}");
            assert_eq!(obs.stream_error.as_deref(), Some(want));
            assert_eq!(obs.timeline.token_events.len(), 1);
        }
        let (obs, _) = run(&[
            ("somethingNew", "{}"),
            ("contentBlockDelta", r#"{"delta":{"video":{}}}"#),
        ]);
        assert_eq!(obs.anomalies, [Anomaly::UnknownEvent]);
        let (_, flow) = run(&[("contentBlockDelta", r#"{"delta":{"text":"a"#)]);
        assert!(matches!(flow, Flow::Fail(_)));
    }

    #[test]
    fn message_headers_become_events() {
        use crate::decode::eventstream::HeaderValue::String as S;
        let msg = |headers: Vec<(&str, &str)>, payload: &str| Message {
            headers: headers
                .into_iter()
                .map(|(k, v)| (k.to_string(), S(v.to_string())))
                .collect(),
            payload: payload.as_bytes().to_vec(),
        };
        let e = as_event(msg(
            vec![(":message-type", "event"), (":event-type", "messageStop")],
            "{}",
        ))
        .unwrap();
        assert_eq!(
            (e.event.as_deref(), e.data.as_str()),
            (Some("messageStop"), "{}")
        );
        let e = as_event(msg(
            vec![
                (":message-type", "exception"),
                (":exception-type", "throttlingException"),
            ],
            r#"{"message":"slow down"}"#,
        ))
        .unwrap();
        assert_eq!(e.event.as_deref(), Some("exception:throttlingException"));
        let e = as_event(msg(
            vec![
                (":message-type", "error"),
                (":error-code", "InternalFailure"),
                (":error-message", "oops"),
            ],
            "",
        ))
        .unwrap();
        assert_eq!(
            (e.event.as_deref(), e.data.as_str()),
            (Some("error:InternalFailure"), "oops")
        );
        // A payload that is not UTF-8 is a typed failure, not replacement characters.
        let mut bad = msg(vec![(":event-type", "contentBlockDelta")], "");
        bad.payload = b"{\"delta\":{\"text\":\"\xff\"}}".to_vec();
        assert_eq!(as_event(bad), Err(DecodeError::InvalidUtf8));
    }

    /// Hostile usage numbers: token counts at u64::MAX add up without overflowing (a debug
    /// build panicked, a release build wrapped to a tiny prompt).
    #[test]
    fn usage_counts_at_the_top_of_u64_saturate() {
        let (obs, _) = run(&[(
            "metadata",
            r#"{"usage":{"inputTokens":18446744073709551615,"outputTokens":1,"cacheReadInputTokens":5,"cacheWriteInputTokens":18446744073709551615}}"#,
        )]);
        assert_eq!(obs.usage.prompt_tokens, Some(u64::MAX));
    }

    /// More tool calls than are kept: the arguments of a dropped call are not appended to the
    /// last kept one.
    #[test]
    fn arguments_of_dropped_tool_calls_stay_out_of_kept_ones() {
        let n = crate::measure::MAX_TOOL_CALLS + 2;
        let start = r#"{"start":{"toolUse":{"toolUseId":"t","name":"f"}}}"#;
        let input = r#"{"delta":{"toolUse":{"input":"{}"}}}"#;
        let events: Vec<(&str, &str)> = (0..n)
            .flat_map(|_| [("contentBlockStart", start), ("contentBlockDelta", input)])
            .collect();
        let (obs, _) = run(&events);
        let calls = &obs.answer.tool_calls;
        assert_eq!(calls.len(), crate::measure::MAX_TOOL_CALLS);
        assert!(calls.iter().all(|c| c.arguments == "{}"), "{calls:?}");
    }
}
