//! Azure OpenAI chat completions:
//! `POST {base}/openai/deployments/{deployment}/chat/completions?api-version={api_version}`,
//! key in the `api-key` header, `base_url` the resource root (e.g.
//! `https://myres.openai.azure.com`, no `/v1`). The body is OpenAI chat's without `model` (the
//! deployment names the model).
//!
//! The stream is OpenAI chat's ([`super::openai_chat::OpenAiStream::chat`]), with Azure's habits:
//! a first chunk with `choices: []` and `prompt_filter_results`, chunks whose choices have no
//! `delta` (content filter results), and `usage` on the last chunk before `[DONE]`. None of them
//! is a token. A refusal streams in `delta.refusal` and is output, as in OpenAI chat. Source:
//! docs/protocols.md.

use super::RequestSpec;
use crate::config::{Scenario, Target, DEFAULT_AZURE_API_VERSION};

/// The collection of deployments under the resource root.
const DEPLOYMENTS: &str = "openai/deployments";

/// The endpoint of `deployment` after `base_url`: OpenAI chat's path under the deployment.
pub(super) fn path(deployment: &str) -> String {
    format!("{DEPLOYMENTS}/{deployment}/{}", super::openai_chat::PATH)
}

/// The deployment (one segment) of a request path to this endpoint, [`path`] from the server
/// root. Served in OpenAI chat's wire shape.
pub(super) fn serve_deployment(path: &str) -> Option<&str> {
    super::serve::segment_between(path, DEPLOYMENTS, super::openai_chat::PATH)
}

/// The streaming chat request to the target's deployment.
pub(super) fn build_request(
    target: &Target,
    scenario: &Scenario,
    nonce: Option<&str>,
) -> RequestSpec {
    let mut body = super::openai_chat::chat_body(scenario, nonce);
    super::set_temperature(&mut body, target, scenario);
    super::merge_extra_body(&mut body, target, scenario);
    let mut headers = super::common_headers(target);
    if let Some(key) = &target.api_key {
        headers.push(("api-key".into(), key.expose().to_string()));
    }
    // Validation guarantees a deployment for this protocol; fall back to the model name.
    let deployment = target.deployment.as_deref().unwrap_or(&target.model);
    let mut url = super::join_url(&target.base_url, &path(deployment));
    url.query_pairs_mut().append_pair(
        "api-version",
        target
            .api_version
            .as_deref()
            .unwrap_or(DEFAULT_AZURE_API_VERSION),
    );
    RequestSpec { url, headers, body }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::super::{stream_for, Flow};
    use crate::config::Protocol;
    use crate::decode::sse::SseEvent;
    use crate::measure::Observations;

    #[test]
    fn filter_chunks_and_delta_less_choices_are_not_tokens() {
        let t0 = Instant::now();
        let mut obs = Observations::new(t0);
        let mut p = stream_for(Protocol::AzureOpenAi);
        let datas = [
            r#"{"choices":[],"created":0,"id":"","model":"","object":"","prompt_filter_results":[{"prompt_index":0,"content_filter_results":{}}]}"#,
            r#"{"choices":[{"content_filter_results":{},"delta":{"role":"assistant","content":""},"finish_reason":null,"index":0}],"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_1"}"#,
            r#"{"choices":[{"content_filter_results":{"hate":{"filtered":false}},"delta":{"content":"Hi"},"index":0}],"model":"gpt-4o-2024-08-06"}"#,
            r#"{"choices":[{"content_filter_results":{},"finish_reason":"stop","index":0}],"model":"gpt-4o-2024-08-06"}"#,
            r#"{"choices":[],"usage":{"completion_tokens":2,"prompt_tokens":9}}"#,
            "[DONE]",
        ];
        let mut flow = Flow::Continue;
        for (i, d) in datas.iter().enumerate() {
            let ev = SseEvent {
                event: None,
                data: (*d).into(),
                id: None,
            };
            flow = p.on_event(&ev, t0 + Duration::from_millis(i as u64), &mut obs);
        }
        assert_eq!(flow, Flow::Done);
        assert_eq!(obs.timeline.token_events.len(), 1);
        assert_eq!(
            obs.timeline.first_token(),
            Some(t0 + Duration::from_millis(2))
        );
        assert!(obs.finished && obs.terminated);
        assert_eq!(obs.usage.completion_tokens, Some(2));
        assert_eq!(
            obs.identity.response_model.as_deref(),
            Some("gpt-4o-2024-08-06"),
            "the filter chunk's empty model is skipped"
        );
        assert!(obs.anomalies.is_empty());
    }
}
