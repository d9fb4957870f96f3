//! The server side of Anthropic Messages: `event: {type}` + `data: …` events, a thinking block
//! then a text block, `message_delta` with the usage, `message_stop`; Anthropic's error bodies
//! and `anthropic-ratelimit-*` headers.

use std::time::{Duration, SystemTime};

use bytes::Bytes;
use serde_json::{json, Value};

use crate::protocol::serve::{sse, stream_error_message, Ctx, End, ServeWire};

/// The Messages event stream.
pub(crate) struct AnthropicWire;

/// `/v1/messages`.
pub(crate) static WIRE: AnthropicWire = AnthropicWire;

/// `message_start`'s usage: `input_tokens` leaves out what the cache served, counted apart as
/// `cache_read_input_tokens`.
fn start_usage(ctx: &Ctx) -> Value {
    let cached = ctx.cached_prompt_tokens;
    let mut u =
        json!({"input_tokens": ctx.prompt_tokens - cached.unwrap_or(0), "output_tokens": 1});
    if let Some(c) = cached {
        u["cache_read_input_tokens"] = json!(c);
    }
    u
}

/// `message_delta` with the stop reason.
fn message_delta() -> Value {
    json!({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null}})
}

impl ServeWire for AnthropicWire {
    fn max_tokens(&self, body: &Value) -> Option<u64> {
        body["max_tokens"].as_u64()
    }

    fn frame_raw(&self, event: Option<&str>, payload: &[u8]) -> Vec<u8> {
        sse(event, b"data: ", payload, b"\n\n")
    }

    fn preamble(&self, ctx: &Ctx) -> Bytes {
        let block = if ctx.reasoning {
            json!({"type": "thinking", "thinking": ""})
        } else {
            json!({"type": "text", "text": ""})
        };
        self.frame(&[
            json!({"type": "message_start", "message": {"id": "msg_sim", "type": "message", "role": "assistant", "model": ctx.model, "content": [], "stop_reason": null, "stop_sequence": null, "usage": start_usage(ctx)}}),
            json!({"type": "content_block_start", "index": 0, "content_block": block}),
            json!({"type": "ping"}),
        ])
    }

    fn token_msg(&self, ctx: &Ctx, text: &str, reasoning: bool, _index: u32) -> Value {
        let delta = if reasoning {
            json!({"type": "thinking_delta", "thinking": text})
        } else {
            json!({"type": "text_delta", "text": text})
        };
        json!({"type": "content_block_delta", "index": usize::from(ctx.reasoning && !reasoning), "delta": delta})
    }

    /// The first output after reasoning closes the thinking block and opens a text block.
    fn token(&self, ctx: &Ctx, text: &str, reasoning: bool, switch: bool, index: u32) -> Bytes {
        let mut msgs = Vec::new();
        if switch {
            msgs.extend([
                json!({"type": "content_block_stop", "index": 0}),
                json!({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}),
            ]);
        }
        msgs.push(self.token_msg(ctx, text, reasoning, index));
        self.frame(&msgs)
    }

    fn has_tools(&self) -> bool {
        true
    }

    /// A `tool_use` block, then `input_json_delta` fragments.
    fn tool_call(&self, ctx: &Ctx, name: Option<&str>, arguments: &str) -> Bytes {
        let open = usize::from(ctx.reasoning);
        let index = open + 1;
        let mut msgs = Vec::new();
        if let Some(n) = name {
            msgs.push(json!({"type": "content_block_stop", "index": open}));
            msgs.push(json!({"type": "content_block_start", "index": index, "content_block": {"type": "tool_use", "id": "toolu_sim", "name": n, "input": {}}}));
        }
        msgs.push(json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": arguments}}));
        self.frame(&msgs)
    }

    fn error(&self, _ctx: &Ctx, after_tokens: bool) -> Bytes {
        let message = stream_error_message(after_tokens);
        self.frame(&[json!({"type": "error", "error": {"type": "api_error", "message": message}})])
    }

    fn end(&self, ctx: &Ctx, end: End) -> Vec<Bytes> {
        let mut delta = message_delta();
        if end.count {
            delta["usage"] = json!({"output_tokens": ctx.tokens});
        }
        let mut out = vec![self.frame(&[
            json!({"type": "content_block_stop", "index": usize::from(ctx.reasoning)}),
            delta,
        ])];
        if end.terminator {
            out.push(self.frame(&[json!({"type": "message_stop"})]));
        }
        out
    }

    fn terminator_only(&self, ctx: &Ctx) -> Bytes {
        let mut delta = message_delta();
        delta["usage"] = json!({"output_tokens": 0});
        self.frame(&[
            json!({"type": "message_start", "message": {"id": "msg_sim", "type": "message", "role": "assistant", "model": ctx.model, "content": [], "stop_reason": null, "usage": {"input_tokens": ctx.prompt_tokens, "output_tokens": 0}}}),
            delta,
            json!({"type": "message_stop"}),
        ])
    }

    fn rate_limit_body(&self) -> &'static [u8] {
        br#"{"type":"error","error":{"type":"rate_limit_error","message":"rate limit reached for requests"}}"#
    }

    /// Anthropic's `anthropic-ratelimit-requests-*`, the reset as an RFC 3339 instant.
    fn rate_limit_headers(
        &self,
        limit: u32,
        remaining: u32,
        left: Duration,
    ) -> Vec<(String, String)> {
        let reset = humantime::format_rfc3339_millis(SystemTime::now() + left).to_string();
        vec![
            (
                "anthropic-ratelimit-requests-limit".into(),
                limit.to_string(),
            ),
            (
                "anthropic-ratelimit-requests-remaining".into(),
                remaining.to_string(),
            ),
            ("anthropic-ratelimit-requests-reset".into(), reset),
        ]
    }

    fn context_error(&self, prompt: u64, limit: u64) -> Value {
        json!({"type": "error", "error": {"type": "invalid_request_error",
            "message": format!("prompt is too long: {prompt} tokens > {limit} maximum")}})
    }
}
