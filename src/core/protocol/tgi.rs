//! Hugging Face Text Generation Inference native streaming (`POST {base}/generate_stream`;
//! `base_url` is the server root).
//!
//! Request: `inputs` = the messages' contents joined with "\n\n" (see [`super::render_prompt`];
//! TGI's native API applies no chat template), `parameters.max_new_tokens` = `max_tokens`,
//! `parameters.details: true` (for the count), and `parameters.temperature` with
//! `do_sample: true` when the temperature is above 0 (TGI rejects `temperature: 0`; greedy
//! decoding is its default, so 0 sends neither); `Authorization: Bearer` when the target has a
//! key.
//! Stream: SSE `data:{…}` without a space. Tokens: a non-empty `token.text` with
//! `token.special: false`; a special token (e.g. `</s>`) is generated but carries no text, so it
//! is counted through `details.generated_tokens` and not stamped as a token event. The last
//! event has a non-null `generated_text` (the terminator) and `details.generated_tokens` (N,
//! source `server`). Error inside a 200: `data:{"error": "...", "error_type": "..."}`.
//! Source: docs/protocols.md, tests/fixtures/sse/tgi-nospace.sse.

pub(super) mod serve;

use std::time::Instant;

use serde_json::{json, Value};

use super::json::{has_text, str_at, u64_at};
use super::{Flow, RequestSpec, StreamProtocol};
use crate::config::{Scenario, Target};
use crate::decode::sse::SseEvent;
use crate::measure::{Anomaly, Observations, TokenKind};

/// The endpoint after `base_url`, the server root.
pub(super) const PATH: &str = "generate_stream";

/// The streaming native generate request.
pub(super) fn build_request(
    target: &Target,
    scenario: &Scenario,
    nonce: Option<&str>,
) -> RequestSpec {
    let mut parameters = json!({
        "max_new_tokens": scenario.max_tokens,
        "details": true,
    });
    if let Some(t) = target.temperature_for(scenario).filter(|t| *t > 0.0) {
        parameters["temperature"] = json!(t);
        parameters["do_sample"] = json!(true);
    }
    let mut body = json!({
        "inputs": super::render_prompt(&scenario.messages, nonce),
        "parameters": parameters,
    });
    super::merge_extra_body(&mut body, target, scenario);
    let mut headers = super::common_headers(target);
    super::bearer_auth(target, &mut headers);
    RequestSpec {
        url: super::join_url(&target.base_url, PATH),
        headers,
        body,
    }
}

/// Interprets a TGI native token stream.
#[derive(Debug, Default)]
pub(super) struct TgiStream;

impl StreamProtocol for TgiStream {
    fn on_event(&mut self, event: &SseEvent, at: Instant, obs: &mut Observations) -> Flow {
        if event.event.as_deref() == Some("error")
            && serde_json::from_str::<Value>(&event.data).is_err()
        {
            obs.stream_error(&event.data);
            return Flow::Done;
        }
        let chunk = match super::parse_json(&event.data, obs) {
            Ok(v) => v,
            Err(flow) => return flow,
        };
        if !chunk.is_object() {
            obs.anomaly(Anomaly::UnknownEvent);
            return Flow::Continue;
        }
        if let Some(err) = chunk.get("error").filter(|e| !e.is_null()) {
            let text = super::json::error_message(err);
            let msg = match str_at(&chunk, "error_type") {
                Some(t) => format!("{t}: {text}"),
                None => text,
            };
            obs.stream_error(&msg);
            return Flow::Done;
        }
        match chunk.get("token") {
            Some(token) => {
                let special = token.get("special").and_then(Value::as_bool) == Some(true);
                if !special && has_text(token, "text") {
                    obs.token(at, TokenKind::Output);
                    obs.answer.push_text(str_at(token, "text").unwrap_or(""));
                }
            }
            None => obs.anomaly(Anomaly::UnknownEvent),
        }
        if chunk.get("generated_text").is_some_and(|g| !g.is_null()) {
            if let Some(details) = chunk.get("details").filter(|d| d.is_object()) {
                if let Some(n) = u64_at(details, "generated_tokens") {
                    obs.server_timings.predicted_tokens = Some(n);
                }
            }
            obs.finished = true;
            obs.terminated = true;
            return Flow::Done;
        }
        Flow::Continue
    }
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::measure::{measure, TokenCountSource};

    fn run(datas: &[&str]) -> (Observations, Flow) {
        super::super::testing::feed_data(&mut TgiStream, datas)
    }

    #[test]
    fn special_token_is_counted_not_stamped() {
        let (obs, flow) = run(&[
            r#"{"index":1,"token":{"id":1,"text":" Hi","special":false},"generated_text":null,"details":null}"#,
            r#"{"index":2,"token":{"id":2,"text":"","special":false},"generated_text":null,"details":null}"#,
            r#"{"index":3,"token":{"id":3,"text":"</s>","special":true},"generated_text":" Hi","details":{"finish_reason":"eos_token","generated_tokens":3}}"#,
        ]);
        assert_eq!(flow, Flow::Done);
        assert_eq!(obs.timeline.token_events.len(), 1);
        assert!(obs.terminated && obs.finished);
        let m = measure(&obs).unwrap();
        assert_eq!(
            (m.output_tokens, m.token_count_source),
            (3, TokenCountSource::Server)
        );
    }

    #[test]
    fn error_with_type() {
        let (obs, flow) = run(&[
            r#"{"index":1,"token":{"id":1,"text":"A","special":false},"generated_text":null}"#,
            r#"{"error":"Request failed during generation: CUDA out of memory","error_type":"generation"}"#,
        ]);
        assert_eq!(flow, Flow::Done);
        assert_eq!(
            obs.stream_error.as_deref(),
            Some("generation: Request failed during generation: CUDA out of memory")
        );
    }

    #[test]
    fn final_event_without_details_counts_events() {
        let (obs, _) = run(&[
            r#"{"token":{"text":"a","special":false},"generated_text":null}"#,
            r#"{"token":{"text":"b","special":false},"generated_text":"ab"}"#,
        ]);
        let m = measure(&obs).unwrap();
        assert_eq!(
            (m.output_tokens, m.token_count_source),
            (2, TokenCountSource::Events)
        );
        assert!(obs.anomalies.is_empty());
    }
}
