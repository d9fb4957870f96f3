//! OpenAI legacy completions (`POST {base}/completions`), as served by vLLM, SGLang, llama.cpp,
//! OpenAI and most OpenAI-compatible servers.
//!
//! Request: `prompt` is the scenario's messages' contents joined with a blank line ("\n\n",
//! see [`super::render_prompt`]; roles are dropped and no chat template is applied),
//! `max_tokens`, `stream: true`, `stream_options.include_usage: true`.
//! Tokens: a non-empty `choices[i].text` (`""` is sent for special tokens and is no token).
//! Counts, identity, errors and the terminator are those of OpenAI chat (`usage` chunk,
//! llama.cpp `timings`, `data: [DONE]`, `{"error": …}`, `finish_reason: "error"`); the stream
//! side is [`super::openai_chat::OpenAiStream::completions`]. Source: docs/protocols.md.

use serde_json::json;

use super::RequestSpec;
use crate::config::{Scenario, Target};

/// The endpoint after `base_url`; a server serves it under `/v1`.
pub(super) const PATH: &str = "completions";

/// The streaming completions request.
pub(super) fn build_request(
    target: &Target,
    scenario: &Scenario,
    nonce: Option<&str>,
) -> RequestSpec {
    let body = json!({
        "model": target.model,
        "prompt": super::render_prompt(&scenario.messages, nonce),
        "max_tokens": scenario.max_tokens,
        "stream": true,
        "stream_options": { "include_usage": true },
    });
    super::bearer_json_request(target, scenario, PATH, body)
}

#[cfg(test)]
mod tests {

    use super::super::{stream_for, Flow};
    use crate::config::Protocol;

    use crate::measure::{Observations, TokenKind};

    fn run(datas: &[&str]) -> (Observations, Flow) {
        super::super::testing::feed_data(stream_for(Protocol::OpenAiCompletions).as_mut(), datas)
    }

    #[test]
    fn table() {
        struct Case {
            name: &'static str,
            datas: &'static [&'static str],
            events: usize,
            usage: Option<u64>,
            finished: bool,
            terminated: bool,
            error: Option<&'static str>,
        }
        let cases = [
            Case {
                name: "text chunks, empty special-token text, usage chunk, [DONE]",
                datas: &[
                    r#"{"choices":[{"index":0,"text":"Hel","finish_reason":null}]}"#,
                    r#"{"choices":[{"index":0,"text":"","finish_reason":null}]}"#,
                    r#"{"choices":[{"index":0,"text":"lo","finish_reason":"length"}]}"#,
                    r#"{"choices":[],"usage":{"completion_tokens":3,"prompt_tokens":5}}"#,
                    "[DONE]",
                ],
                events: 2,
                usage: Some(3),
                finished: true,
                terminated: true,
                error: None,
            },
            Case {
                name: "null text and absent choices are no tokens",
                datas: &[
                    r#"{"choices":[{"index":0,"text":null}]}"#,
                    r#"{"object":"text_completion"}"#,
                    "[DONE]",
                ],
                events: 0,
                usage: None,
                finished: false,
                terminated: true,
                error: None,
            },
            Case {
                name: "error inside 200",
                datas: &[
                    r#"{"choices":[{"index":0,"text":"A"}]}"#,
                    r#"{"error":{"message":"boom","type":"server_error"}}"#,
                ],
                events: 1,
                usage: None,
                finished: false,
                terminated: false,
                error: Some("boom"),
            },
        ];
        for c in cases {
            let (obs, _) = run(c.datas);
            assert_eq!(obs.timeline.token_events.len(), c.events, "{}", c.name);
            assert!(
                obs.timeline
                    .token_events
                    .iter()
                    .all(|e| e.kind == TokenKind::Output),
                "{}",
                c.name
            );
            assert_eq!(obs.usage.completion_tokens, c.usage, "{}", c.name);
            assert_eq!(obs.finished, c.finished, "{}", c.name);
            assert_eq!(obs.terminated, c.terminated, "{}", c.name);
            assert_eq!(obs.stream_error.as_deref(), c.error, "{}", c.name);
        }
    }
}
