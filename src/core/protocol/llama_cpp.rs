//! llama.cpp native completion (`POST {base}/completion`; `base_url` is the server root, without
//! `/v1`).
//!
//! Request: `prompt` (the messages' contents joined with "\n\n", see [`super::render_prompt`];
//! no chat template), `n_predict` = `max_tokens`, `stream: true`, `temperature` when set.
//! Stream: SSE `data:` lines without `[DONE]`. Tokens: a non-empty `content`. The last event has
//! `stop: true` (the terminator), `tokens_predicted`, `tokens_evaluated` and the `timings` object
//! (`predicted_n` → N with source `server`, `prompt_ms` → server prefill). Errors inside a 200:
//! `{"error": {...}}`. Source: docs/protocols.md, tests/fixtures/captured/llama-cpp-native.txt.

pub(super) mod serve;

use std::time::Instant;

use serde_json::{json, Value};

use super::json::{has_text, str_at, u64_at};
use super::{Flow, RequestSpec, StreamProtocol};
use crate::config::{Scenario, Target};
use crate::decode::sse::SseEvent;
use crate::measure::{Anomaly, Observations, TokenKind};

/// The endpoint after `base_url`, the server root.
pub(super) const PATH: &str = "completion";

/// The streaming native completion request.
pub(super) fn build_request(
    target: &Target,
    scenario: &Scenario,
    nonce: Option<&str>,
) -> RequestSpec {
    let body = json!({
        "model": target.model,
        "prompt": super::render_prompt(&scenario.messages, nonce),
        "n_predict": scenario.max_tokens,
        "stream": true,
    });
    super::bearer_json_request(target, scenario, PATH, body)
}

/// Interprets a llama.cpp native completion stream.
#[derive(Debug, Default)]
pub(super) struct LlamaCppStream;

impl StreamProtocol for LlamaCppStream {
    fn on_event(&mut self, event: &SseEvent, at: Instant, obs: &mut Observations) -> Flow {
        if event.event.as_deref() == Some("error") {
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
        // Error objects, `model`, llama.cpp `timings`.
        if super::openai_chat::interpret_common(&chunk, obs) == Flow::Done {
            return Flow::Done;
        }
        if has_text(&chunk, "content") {
            obs.token(at, TokenKind::Output);
            obs.answer
                .push_text(str_at(&chunk, "content").unwrap_or(""));
        }
        if chunk.get("stop").and_then(Value::as_bool) == Some(true) {
            let st = &mut obs.server_timings;
            st.predicted_tokens = st
                .predicted_tokens
                .or_else(|| u64_at(&chunk, "tokens_predicted"));
            if let Some(n) = u64_at(&chunk, "tokens_evaluated") {
                obs.usage.prompt_tokens = Some(n);
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

    #[test]
    fn table() {
        struct Case {
            name: &'static str,
            datas: &'static [&'static str],
            events: usize,
            n: Option<(u64, TokenCountSource)>,
            prefill: Option<f64>,
            error: Option<&'static str>,
        }
        let cases = [
            Case {
                name: "content, then stop with timings",
                datas: &[
                    r#"{"index":0,"content":" Paris","stop":false,"tokens_predicted":1}"#,
                    r#"{"index":0,"content":"","stop":false}"#,
                    r#"{"index":0,"content":".","stop":false,"tokens_predicted":2}"#,
                    r#"{"index":0,"content":"","stop":true,"model":"m","tokens_predicted":3,"tokens_evaluated":5,"timings":{"prompt_n":5,"prompt_ms":26.5,"predicted_n":3,"predicted_ms":30.0}}"#,
                ],
                events: 2,
                n: Some((3, TokenCountSource::Server)),
                prefill: Some(0.0265),
                error: None,
            },
            Case {
                name: "stop without timings: tokens_predicted is the server count",
                datas: &[
                    r#"{"content":"a","stop":false}"#,
                    r#"{"content":"b","stop":false}"#,
                    r#"{"content":"","stop":true,"tokens_predicted":2}"#,
                ],
                events: 2,
                n: Some((2, TokenCountSource::Server)),
                prefill: None,
                error: None,
            },
            Case {
                name: "error inside 200",
                datas: &[
                    r#"{"content":"a","stop":false}"#,
                    r#"{"error":{"code":500,"message":"slot unavailable","type":"server_error"}}"#,
                ],
                events: 1,
                n: None,
                prefill: None,
                error: Some("slot unavailable"),
            },
        ];
        for c in cases {
            let (obs, _) = super::super::testing::feed_data(&mut LlamaCppStream, c.datas);
            assert_eq!(obs.timeline.token_events.len(), c.events, "{}", c.name);
            assert_eq!(obs.stream_error.as_deref(), c.error, "{}", c.name);
            assert_eq!(obs.server_timings.prompt_seconds, c.prefill, "{}", c.name);
            if c.error.is_none() {
                let m = measure(&obs).unwrap();
                assert_eq!(
                    Some((m.output_tokens, m.token_count_source)),
                    c.n,
                    "{}",
                    c.name
                );
                assert!(obs.terminated && obs.finished, "{}", c.name);
            }
        }
    }

    #[test]
    fn the_prompt_tokens_reused_from_the_cache_are_the_cached_count() {
        let datas = [
            r#"{"content":"a","stop":false}"#,
            r#"{"content":"","stop":true,"tokens_predicted":1,"tokens_evaluated":40,"timings":{"cache_n":35,"prompt_n":5,"prompt_ms":9.0}}"#,
        ];
        let (obs, _) = super::super::testing::feed_data(&mut LlamaCppStream, &datas);
        assert_eq!(obs.usage.prompt_tokens, Some(40));
        assert_eq!(obs.usage.cached_prompt_tokens, Some(35));
        assert_eq!(obs.server_timings.prompt_tokens, Some(5));
    }
}
