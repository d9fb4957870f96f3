//! Google Gemini `streamGenerateContent`, on AI Studio (`gemini`) and on Vertex AI
//! (`vertex-gemini`); both stream the same `GenerateContentResponse` chunks.
//!
//! Request: `POST {base_url}/v1beta/models/{model}:streamGenerateContent?alt=sse` with the API
//! key in the `x-goog-api-key` header (never in the query, where it would end up in proxy and
//! server logs); on Vertex AI `POST {base_url}/publishers/google/models/{model}:streamGenerateContent?alt=sse`,
//! `base_url` naming the project and location
//! (`https://{location}-aiplatform.googleapis.com/v1/projects/{project}/locations/{location}`),
//! with the OAuth access token as `Authorization: Bearer` (from `api_key_env` or `api_key_file`;
//! the file is re-read when it changes, so an external job can refresh the hour-long token).
//! Body: `contents` = the user and assistant (`model`) turns as text parts, `systemInstruction` =
//! the system and developer messages joined with "\n\n" (the nonce of a cold probe stays at the
//! very start of the prompt), `generationConfig.maxOutputTokens` = `max_tokens`,
//! `generationConfig.temperature` when set, then `extra_body` (e.g.
//! `generationConfig.thinkingConfig`).
//!
//! Stream: SSE (`alt=sse`), `data:` lines, CRLF line ends seen in the wild; no terminator: the
//! last chunk carries `finishReason`, then the server closes ([`StreamProtocol::ends_on_close`]).
//! Tokens: per chunk, `candidates[].content.parts[]`: a non-empty `text` (output; with
//! `thought: true`, reasoning), a `functionCall` with a name (output: the tool-call rule of
//! docs/measurement.md) or `executableCode.code` (output). A part with only a
//! `thoughtSignature` is no token. One chunk is one token event, of output when any part is.
//! Counts: `usageMetadata` (cumulative: the last report wins): N = `candidatesTokenCount` +
//! `thoughtsTokenCount` (Gemini's candidates count excludes the thoughts, OpenAI's
//! `completion_tokens` includes them), prompt = `promptTokenCount` (cached included), cached =
//! `cachedContentTokenCount`. Identity: `modelVersion` is the response model (`responseId` is
//! unique per response, so it is no label of the endpoint and is not kept).
//! Finish: `finishReason` `STOP` → `stop`, `MAX_TOKENS` → `length`, `SAFETY`, `RECITATION`,
//! `BLOCKLIST`, `PROHIBITED_CONTENT`, `SPII`, `IMAGE_SAFETY`, `LANGUAGE` → `content_filter
//! (REASON)`, others lower-cased; `promptFeedback.blockReason` (no candidates) →
//! `content_filter (prompt blocked: REASON)`, so a blocked prompt is an `empty_stream` whose
//! detail says why. Errors inside a 200: `{"error": {"code", "message", "status"}}`.
//! Source: Google's Gemini API and Vertex AI references (`GenerateContentResponse`,
//! `UsageMetadata`, `FinishReason`, `BlockReason`), docs/protocols.md.

pub(super) mod serve;

use std::time::Instant;

use serde_json::{json, Value};

use super::json::{has_text, str_at, u64_at};
use super::{usage, Flow, RequestSpec, StreamProtocol};
use crate::config::{Protocol, Scenario, Target};
use crate::decode::sse::SseEvent;
use crate::measure::{Anomaly, Observations, TokenKind};

/// The thought signature of a configured tool call (a round trip in `messages`): the value
/// Gemini's documentation gives for a call it did not generate
/// (<https://ai.google.dev/gemini-api/docs/thought-signatures>).
const SKIP_THOUGHT_SIGNATURE: &str = "skip_thought_signature_validator";

/// AI Studio's models after `base_url` (the server root), with its API version.
const AI_STUDIO_MODELS: &str = "v1beta/models";

/// Vertex AI's models after `base_url` (`…/v1/projects/{project}/locations/{location}`).
const VERTEX_MODELS: &str = "publishers/google/models";

/// The streaming method, after the model's name in the path.
const STREAM_METHOD: &str = ":streamGenerateContent";

/// The streaming `streamGenerateContent` request, AI Studio or Vertex AI by `target.protocol`.
pub(super) fn build_request(
    target: &Target,
    scenario: &Scenario,
    nonce: Option<&str>,
) -> RequestSpec {
    let mut system = Vec::new();
    let mut contents = Vec::new();
    let texts = super::texts(&scenario.messages, nonce);
    let mut results_last = false;
    for (m, text) in scenario.messages.iter().zip(texts) {
        let was_results = std::mem::replace(&mut results_last, m.role == "tool");
        match m.role.as_str() {
            "system" | "developer" => system.push(text.into_owned()),
            "assistant" => {
                let mut parts = Vec::new();
                if !text.is_empty() || m.tool_calls.is_empty() {
                    parts.push(json!({"text": text}));
                }
                // A call Gemini did not make has no thought signature of its own: Gemini 3
                // refuses a functionCall part of the current turn without one (HTTP 400
                // "Function call is missing a thought_signature"), and the documented value for
                // such a call tells it to skip the check.
                for c in &m.tool_calls {
                    parts.push(json!({
                        "functionCall": {"name": c.name, "args": c.arguments},
                        "thoughtSignature": SKIP_THOUGHT_SIGNATURE,
                    }));
                }
                contents.push(json!({"role": "model", "parts": parts}));
            }
            // A tool result: a `functionResponse` part by the tool's name, the results of one
            // turn in one content.
            "tool" => {
                let id = m.tool_call_id.as_deref().unwrap_or_default();
                let part = json!({"functionResponse": {
                    "name": super::tool_name(&scenario.messages, id),
                    "response": super::result_object(&text),
                }});
                match contents.last_mut() {
                    Some(last) if was_results => {
                        if let Some(parts) = last["parts"].as_array_mut() {
                            parts.push(part);
                        }
                    }
                    _ => contents.push(json!({"role": "user", "parts": [part]})),
                }
            }
            _ => contents.push(json!({"role": "user", "parts": [{"text": text}]})),
        }
    }
    let mut config = json!({ "maxOutputTokens": scenario.max_tokens });
    if let Some(t) = target.temperature_for(scenario) {
        config["temperature"] = json!(t);
    }
    let mut body = json!({ "contents": contents, "generationConfig": config });
    if !system.is_empty() {
        body["systemInstruction"] = json!({ "parts": [{ "text": system.join("\n\n") }] });
    }
    super::structured::add_gemini(&mut body, scenario);
    super::merge_extra_body(&mut body, target, scenario);
    let mut headers = super::common_headers(target);
    let prefix = match target.protocol {
        Protocol::VertexGemini => {
            super::bearer_auth(target, &mut headers);
            VERTEX_MODELS
        }
        _ => {
            if let Some(key) = &target.api_key {
                headers.push(("x-goog-api-key".into(), key.expose().to_string()));
            }
            AI_STUDIO_MODELS
        }
    };
    RequestSpec {
        url: stream_url(&target.base_url, prefix, &target.model),
        headers,
        body,
    }
}

/// `{base}/{prefix}/{model}:streamGenerateContent?alt=sse`, the model as one path segment (a
/// `/` or `?` in it is escaped, not a path or a query).
fn stream_url(base: &reqwest::Url, prefix: &str, model: &str) -> reqwest::Url {
    let mut url = super::join_url(base, prefix);
    if let Ok(mut segments) = url.path_segments_mut() {
        segments.push(&format!("{model}{STREAM_METHOD}"));
    }
    url.set_query(Some("alt=sse"));
    url
}

/// Interprets a Gemini `streamGenerateContent?alt=sse` stream.
#[derive(Debug, Default)]
pub(super) struct GeminiStream;

impl StreamProtocol for GeminiStream {
    fn on_event(&mut self, event: &SseEvent, at: Instant, obs: &mut Observations) -> Flow {
        let chunk = match super::parse_json(&event.data, obs) {
            Ok(v) => v,
            Err(flow) => return flow,
        };
        // A JSON array: the whole non-SSE response (`alt=sse` missing) arrived as one event.
        let Some(obj) = chunk.as_object() else {
            obs.anomaly(Anomaly::UnknownEvent);
            return Flow::Continue;
        };
        if let Some(err) = chunk.get("error").filter(|e| !e.is_null()) {
            obs.stream_error(&error_text(err));
            return Flow::Done;
        }
        const KNOWN: &[&str] = &[
            "candidates",
            "usageMetadata",
            "promptFeedback",
            "modelVersion",
            "responseId",
            "createTime",
        ];
        if !obj.keys().any(|k| KNOWN.contains(&k.as_str())) {
            obs.anomaly(Anomaly::UnknownEvent);
        }
        Observations::identity_field(
            &mut obs.identity.response_model,
            str_at(&chunk, "modelVersion"),
        );
        if let Some(u) = chunk.get("usageMetadata").filter(|u| u.is_object()) {
            read_usage(u, obs);
        }
        if let Some(r) = chunk
            .get("promptFeedback")
            .and_then(|f| str_at(f, "blockReason"))
            .filter(|r| !r.is_empty() && *r != "BLOCK_REASON_UNSPECIFIED")
        {
            obs.finish(&format!("content_filter (prompt blocked: {r})"));
        }
        let mut kind = None;
        for candidate in chunk
            .get("candidates")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(r) = str_at(candidate, "finishReason") {
                if let Some(reason) = finish_reason(r) {
                    obs.finish(&reason);
                }
            }
            collect_answer(candidate, at, obs);
            match candidate_kind(candidate) {
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

    fn ends_on_close(&self) -> bool {
        true
    }
}

/// What one candidate's `content.parts[]` carries: output when any part has answer text, a
/// named `functionCall` or `executableCode`; else reasoning when any `thought: true` part has
/// text; else nothing (empty text, a lone `thoughtSignature`, no content).
fn candidate_kind(candidate: &Value) -> Option<TokenKind> {
    let parts = candidate
        .get("content")
        .and_then(|c| c.get("parts"))
        .and_then(Value::as_array)?;
    let mut kind = None;
    for part in parts {
        let thought = part.get("thought").and_then(Value::as_bool) == Some(true);
        let output = (!thought && has_text(part, "text"))
            || part
                .get("functionCall")
                .is_some_and(|f| has_text(f, "name"))
            || part
                .get("executableCode")
                .is_some_and(|c| has_text(c, "code"));
        if output {
            return Some(TokenKind::Output);
        }
        if thought && has_text(part, "text") {
            kind = Some(TokenKind::Reasoning);
        }
    }
    kind
}

/// Adds one candidate's parts to [`Observations::answer`]: text parts to the answer, `thought`
/// parts to reasoning, each `functionCall` as one whole tool call (Gemini sends a call complete,
/// its `args` an object, kept as JSON text).
fn collect_answer(candidate: &Value, at: Instant, obs: &mut Observations) {
    let parts = candidate
        .get("content")
        .and_then(|c| c.get("parts"))
        .and_then(Value::as_array);
    for part in parts.into_iter().flatten() {
        let text = str_at(part, "text").unwrap_or("");
        if part.get("thought").and_then(Value::as_bool) == Some(true) {
            obs.answer.push_reasoning(text);
        } else {
            obs.answer.push_text(text);
        }
        if let Some(call) = part.get("functionCall") {
            let index = obs.answer.tool_calls.len();
            let args = call.get("args").map(Value::to_string);
            obs.answer
                .push_tool_call(index, str_at(call, "name"), args.as_deref(), at);
        }
    }
}

/// The finish reason as the other protocols name it (`None` for the unspecified default).
fn finish_reason(raw: &str) -> Option<String> {
    Some(match raw {
        "" | "FINISH_REASON_UNSPECIFIED" => return None,
        "STOP" => "stop".to_string(),
        "MAX_TOKENS" => "length".to_string(),
        "SAFETY" | "RECITATION" | "BLOCKLIST" | "PROHIBITED_CONTENT" | "SPII" | "IMAGE_SAFETY"
        | "LANGUAGE" => format!("content_filter ({raw})"),
        other => other.to_ascii_lowercase(),
    })
}

/// `usageMetadata`: N = candidates + thoughts (either alone when only one is reported).
fn read_usage(u: &Value, obs: &mut Observations) {
    let candidates = u64_at(u, "candidatesTokenCount");
    let thoughts = u64_at(u, "thoughtsTokenCount");
    let completion = match (candidates, thoughts) {
        (None, None) => None,
        (c, t) => Some(c.unwrap_or(0).saturating_add(t.unwrap_or(0))),
    };
    usage::record(
        obs,
        completion,
        u64_at(u, "promptTokenCount"),
        u64_at(u, "cachedContentTokenCount"),
    );
}

/// Google's error object: `STATUS (code): message`, with whatever of the three is present.
fn error_text(err: &Value) -> String {
    let message = match err {
        Value::Object(_) => str_at(err, "message").map(str::to_string),
        Value::String(s) => Some(s.clone()),
        _ => None,
    };
    let status = str_at(err, "status");
    let code = u64_at(err, "code");
    let head = match (status, code) {
        (Some(s), Some(c)) => Some(format!("{s} ({c})")),
        (Some(s), None) => Some(s.to_string()),
        (None, Some(c)) => Some(c.to_string()),
        (None, None) => None,
    };
    match (head, message) {
        (Some(h), Some(m)) => format!("{h}: {m}"),
        (Some(h), None) => h,
        (None, Some(m)) => m,
        (None, None) => err.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn run(datas: &[&str]) -> (Observations, Flow) {
        super::super::testing::feed_data(&mut GeminiStream, datas)
    }

    const THOUGHT: &str = r#"{"candidates":[{"content":{"parts":[{"text":"**Planning** the answer","thought":true}],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":9,"totalTokenCount":9},"modelVersion":"gemini-2.5-flash","responseId":"r1"}"#;
    const TEXT: &str = r#"{"candidates":[{"content":{"parts":[{"text":"Hello"}],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":9,"totalTokenCount":9},"modelVersion":"gemini-2.5-flash","responseId":"r1"}"#;
    const LAST: &str = r#"{"candidates":[{"content":{"parts":[{"text":" world"}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":9,"candidatesTokenCount":3,"totalTokenCount":40,"thoughtsTokenCount":28,"cachedContentTokenCount":4},"modelVersion":"gemini-2.5-flash","responseId":"r1"}"#;

    #[test]
    fn thoughts_then_text_with_usage() {
        let (obs, flow) = run(&[THOUGHT, TEXT, LAST]);
        assert_eq!(flow, Flow::Continue, "no terminator: the close ends it");
        let tl = &obs.timeline;
        let kinds: Vec<_> = tl.token_events.iter().map(|e| e.kind).collect();
        assert_eq!(
            kinds,
            [TokenKind::Reasoning, TokenKind::Output, TokenKind::Output]
        );
        assert_eq!(tl.first_token(), Some(tl.sent + Duration::from_millis(1)));
        assert_eq!(tl.first_output(), Some(tl.sent + Duration::from_millis(2)));
        assert_eq!(obs.usage.completion_tokens, Some(31));
        assert_eq!(obs.usage.prompt_tokens, Some(9));
        assert_eq!(obs.usage.cached_prompt_tokens, Some(4));
        assert_eq!(
            obs.identity.response_model.as_deref(),
            Some("gemini-2.5-flash")
        );
        assert!(obs.finished);
        assert_eq!(obs.finish_reason.as_deref(), Some("stop"));
        assert!(obs.anomalies.is_empty(), "{:?}", obs.anomalies);
        assert!(GeminiStream.ends_on_close());
    }

    #[test]
    fn signature_only_and_empty_parts_are_no_tokens() {
        let (obs, _) = run(&[
            r#"{"candidates":[{"content":{"parts":[{"text":"","thoughtSignature":"c2ln"}],"role":"model"}}]}"#,
            r#"{"candidates":[{"content":{"parts":[],"role":"model"}}]}"#,
            r#"{"candidates":[{"content":{"role":"model"}}]}"#,
            r#"{"candidates":[{"index":0}]}"#,
            r#"{"usageMetadata":{"promptTokenCount":3}}"#,
        ]);
        assert!(obs.timeline.token_events.is_empty());
        assert!(obs.anomalies.is_empty(), "{:?}", obs.anomalies);
        assert_eq!(obs.usage.completion_tokens, None, "absent is unknown");
    }

    #[test]
    fn a_function_call_is_output_and_output_wins_in_a_mixed_chunk() {
        let (obs, _) = run(&[
            r#"{"candidates":[{"content":{"parts":[{"functionCall":{"name":"get_weather","args":{}}}],"role":"model"}}]}"#,
            r#"{"candidates":[{"content":{"parts":[{"functionCall":{"name":"","args":{}}}],"role":"model"}}]}"#,
            r#"{"candidates":[{"content":{"parts":[{"text":"t","thought":true},{"text":"a"}],"role":"model"}}]}"#,
        ]);
        let kinds: Vec<_> = obs.timeline.token_events.iter().map(|e| e.kind).collect();
        assert_eq!(kinds, [TokenKind::Output, TokenKind::Output]);
    }

    #[test]
    fn finish_reasons_map_to_the_common_names() {
        for (raw, want) in [
            ("STOP", Some("stop")),
            ("MAX_TOKENS", Some("length")),
            ("SAFETY", Some("content_filter (SAFETY)")),
            ("RECITATION", Some("content_filter (RECITATION)")),
            ("MALFORMED_FUNCTION_CALL", Some("malformed_function_call")),
            ("FINISH_REASON_UNSPECIFIED", None),
        ] {
            let data = format!(r#"{{"candidates":[{{"finishReason":"{raw}","index":0}}]}}"#);
            let (obs, _) = run(&[&data]);
            assert_eq!(obs.finish_reason.as_deref(), want, "{raw}");
            assert_eq!(obs.finished, want.is_some(), "{raw}");
        }
    }

    #[test]
    fn a_blocked_prompt_finishes_without_tokens_and_says_why() {
        let (obs, _) = run(&[
            r#"{"promptFeedback":{"blockReason":"SAFETY","safetyRatings":[]},"usageMetadata":{"promptTokenCount":8,"totalTokenCount":8},"modelVersion":"gemini-2.5-flash"}"#,
        ]);
        assert!(obs.finished);
        assert!(obs.timeline.token_events.is_empty());
        assert_eq!(
            obs.finish_reason.as_deref(),
            Some("content_filter (prompt blocked: SAFETY)")
        );
    }

    #[test]
    fn an_error_object_is_a_stream_error_naming_status_and_code() {
        let (obs, flow) = run(&[
            TEXT,
            r#"{"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}"#,
        ]);
        assert_eq!(flow, Flow::Done);
        assert_eq!(
            obs.stream_error.as_deref(),
            Some("UNAVAILABLE (503): The model is overloaded.")
        );
    }

    #[test]
    fn unknown_shapes_and_broken_json() {
        let (obs, flow) = run(&[r#"{"foo":1}"#, r#"[{"candidates":[]}]"#]);
        assert_eq!(flow, Flow::Continue);
        assert_eq!(obs.anomalies, [Anomaly::UnknownEvent]);
        let (_, flow) = run(&[r#"{"candidates":[{"content""#]);
        assert!(matches!(flow, Flow::Fail(_)));
    }

    /// Hostile counts at the top of u64 saturate instead of overflowing (a debug build
    /// panicked, a release build wrapped to a tiny count).
    #[test]
    fn usage_counts_at_the_top_of_u64_saturate() {
        let (obs, _) = run(&[
            r#"{"usageMetadata":{"candidatesTokenCount":18446744073709551615,"thoughtsTokenCount":7}}"#,
        ]);
        assert_eq!(obs.usage.completion_tokens, Some(u64::MAX));
    }
}
