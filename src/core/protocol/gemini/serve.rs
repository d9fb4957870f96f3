//! The server side of Gemini's `streamGenerateContent?alt=sse`, on AI Studio's and Vertex AI's
//! paths: `data: {GenerateContentResponse}` events with CRLF line ends and no terminator (the
//! last chunk carries `finishReason` and the final counts, then the server closes); Google's
//! error bodies.

use bytes::Bytes;
use serde_json::{json, Value};

use super::{AI_STUDIO_MODELS, STREAM_METHOD, VERTEX_MODELS};
use crate::protocol::serve::{arguments_value, sse, stream_error_message, Ctx, End, ServeWire};

/// The `GenerateContentResponse` chunk stream.
pub(crate) struct GeminiWire;

/// Both Gemini paths.
pub(crate) static WIRE: GeminiWire = GeminiWire;

/// AI Studio's path of `model` after the server root: `v1beta/models/{model}:streamGenerateContent`.
pub(crate) fn ai_studio_path(model: &str) -> String {
    format!("{AI_STUDIO_MODELS}/{model}{STREAM_METHOD}")
}

/// Vertex AI's path of `model` after `/v1/projects/{p}/locations/{l}`:
/// `publishers/google/models/{model}:streamGenerateContent`.
pub(crate) fn vertex_path(model: &str) -> String {
    format!("{VERTEX_MODELS}/{model}{STREAM_METHOD}")
}

/// The segments of a streaming path after the root, each non-empty (`None`: not one).
fn stream_segments(path: &str) -> Option<Vec<&str>> {
    let rest = path.strip_suffix(STREAM_METHOD)?;
    let segs: Vec<&str> = rest.split('/').skip(1).collect();
    (!segs.iter().any(|s| s.is_empty())).then_some(segs)
}

/// Whether `path` is AI Studio's streaming path, `/{version}/models/{m}:streamGenerateContent`
/// (any API version).
pub(crate) fn is_ai_studio_path(path: &str) -> bool {
    let models = AI_STUDIO_MODELS.rsplit('/').next();
    match stream_segments(path).as_deref() {
        Some([_version, collection, _model]) => Some(*collection) == models,
        _ => false,
    }
}

/// Whether `path` is Vertex AI's streaming path,
/// `/{version}/projects/{p}/locations/{l}/publishers/google/models/{m}:streamGenerateContent`.
pub(crate) fn is_vertex_path(path: &str) -> bool {
    let models: Vec<&str> = VERTEX_MODELS.split('/').collect();
    match stream_segments(path).as_deref() {
        Some([_version, "projects", _, "locations", _, rest @ .., _model]) => rest == models,
        _ => false,
    }
}

/// A chunk with `parts` in its one candidate.
fn chunk(ctx: &Ctx, parts: Value, finish: Option<&str>, usage: Value) -> Value {
    let mut candidate = json!({"content": {"parts": parts, "role": "model"}, "index": 0});
    if let Some(f) = finish {
        candidate["finishReason"] = json!(f);
    }
    json!({"candidates": [candidate], "usageMetadata": usage, "modelVersion": ctx.model, "responseId": "sim-response"})
}

/// The usage of a chunk before the last: the prompt only.
fn prompt_usage(ctx: &Ctx) -> Value {
    json!({"promptTokenCount": ctx.prompt_tokens, "totalTokenCount": ctx.prompt_tokens})
}

/// The final usage of `n` output tokens: Gemini counts thoughts apart from the candidates'.
fn final_usage(ctx: &Ctx, n: u32) -> Value {
    let thoughts = ctx.reasoning_tokens.min(n);
    let mut u = json!({"promptTokenCount": ctx.prompt_tokens, "candidatesTokenCount": n - thoughts, "totalTokenCount": ctx.prompt_tokens + u64::from(n)});
    if thoughts > 0 {
        u["thoughtsTokenCount"] = json!(thoughts);
    }
    if let Some(c) = ctx.cached_prompt_tokens {
        u["cachedContentTokenCount"] = json!(c);
    }
    u
}

impl ServeWire for GeminiWire {
    fn max_tokens(&self, body: &Value) -> Option<u64> {
        body["generationConfig"]["maxOutputTokens"].as_u64()
    }

    fn frame_raw(&self, _event: Option<&str>, payload: &[u8]) -> Vec<u8> {
        sse(None, b"data: ", payload, b"\r\n\r\n")
    }

    fn token_msg(&self, ctx: &Ctx, text: &str, reasoning: bool, _index: u32) -> Value {
        let part = if reasoning {
            json!({"text": text, "thought": true})
        } else {
            json!({"text": text})
        };
        chunk(ctx, json!([part]), None, prompt_usage(ctx))
    }

    fn has_tools(&self) -> bool {
        true
    }

    fn whole_tool_calls(&self) -> bool {
        true
    }

    /// The whole `functionCall` in the first chunk, `args` an object (a string when not JSON);
    /// an empty token after it.
    fn tool_call(&self, ctx: &Ctx, name: Option<&str>, arguments: &str) -> Bytes {
        let Some(n) = name else {
            return self.token(ctx, "", false, false, 0);
        };
        let args = arguments_value(arguments);
        let parts = json!([{"functionCall": {"name": n, "args": args}}]);
        self.frame(&[chunk(ctx, parts, None, prompt_usage(ctx))])
    }

    fn error(&self, _ctx: &Ctx, after_tokens: bool) -> Bytes {
        let message = stream_error_message(after_tokens);
        self.frame(&[json!({"error": {"code": 500, "message": message, "status": "INTERNAL"}})])
    }

    /// The finish rides on the last chunk, with the final counts: no terminator means neither.
    fn end(&self, ctx: &Ctx, end: End) -> Vec<Bytes> {
        if !end.terminator {
            return Vec::new();
        }
        let usage = match end.count {
            true => final_usage(ctx, ctx.tokens),
            false => prompt_usage(ctx),
        };
        let parts = json!([{"text": ""}]);
        vec![self.frame(&[chunk(ctx, parts, Some("STOP"), usage)])]
    }

    fn rate_limit_body(&self) -> &'static [u8] {
        br#"{"error":{"code":429,"message":"rate limit reached for requests","status":"RESOURCE_EXHAUSTED"}}"#
    }

    /// Google's error body: code, message, status.
    fn http_error_body(&self, rate_limited: bool) -> &'static [u8] {
        if rate_limited {
            br#"{"error":{"code":429,"message":"rate limited","status":"RESOURCE_EXHAUSTED"}}"#
        } else {
            br#"{"error":{"code":500,"message":"simulated internal error","status":"INTERNAL"}}"#
        }
    }

    fn context_error(&self, prompt: u64, limit: u64) -> Value {
        json!({"error": {"code": 400, "status": "INVALID_ARGUMENT",
            "message": format!("The input token count ({prompt}) exceeds the maximum number of tokens allowed ({limit}).")}})
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Protocol;
    use crate::protocol::serve::protocol_for_path;

    #[test]
    fn gemini_is_served_on_both_of_its_paths_only() {
        for (ok, protocol) in [
            (
                "/v1beta/models/gemini-2.5-flash:streamGenerateContent",
                Protocol::Gemini,
            ),
            (
                "/v1/projects/p-1/locations/us-central1/publishers/google/models/m:streamGenerateContent",
                Protocol::VertexGemini,
            ),
        ] {
            assert_eq!(protocol_for_path(ok), Some(protocol), "{ok}");
        }
        for bad in [
            "/v1beta/models/:streamGenerateContent",
            "/v1beta/models/m:generateContent",
            "/v1beta/models/a/b:streamGenerateContent",
            "/models/m:streamGenerateContent",
            "/v1/projects/p/locations/l/publishers/other/models/m:streamGenerateContent",
            "/v1/projects/p/locations/l/models/m:streamGenerateContent",
        ] {
            assert_eq!(protocol_for_path(bad), None, "{bad}");
        }
    }
}
