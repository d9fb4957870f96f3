//! The server side of Ollama's native chat: one JSON line per message (NDJSON), the last with
//! `done: true` and the counts and durations (nanoseconds).

use std::time::Duration;

use bytes::Bytes;
use serde_json::{json, Value};

use crate::protocol::serve::{arguments_value, stream_error_message, Ctx, End, ServeWire};

/// The NDJSON chat stream.
pub(crate) struct OllamaWire;

/// Ollama's native chat endpoint.
pub(crate) static WIRE: OllamaWire = OllamaWire;

fn line(ctx: &Ctx, message: Value, done: bool) -> Value {
    json!({"model": ctx.model, "created_at": "2025-01-01T00:00:00Z", "message": message, "done": done})
}

impl ServeWire for OllamaWire {
    fn max_tokens(&self, body: &Value) -> Option<u64> {
        body["options"]["num_predict"].as_u64()
    }

    fn content_type(&self) -> &'static str {
        "application/x-ndjson"
    }

    /// One line.
    fn frame_raw(&self, _event: Option<&str>, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(payload.len() + 32);
        out.extend_from_slice(payload);
        out.push(b'\n');
        out
    }

    fn token_msg(&self, ctx: &Ctx, text: &str, reasoning: bool, _index: u32) -> Value {
        let message = if reasoning {
            json!({"role": "assistant", "content": "", "thinking": text})
        } else {
            json!({"role": "assistant", "content": text})
        };
        line(ctx, message, false)
    }

    fn has_tools(&self) -> bool {
        true
    }

    fn whole_tool_calls(&self) -> bool {
        true
    }

    /// The whole call on its first line, `arguments` an object (a string when not JSON); an
    /// empty token after it.
    fn tool_call(&self, ctx: &Ctx, name: Option<&str>, arguments: &str) -> Bytes {
        let Some(n) = name else {
            return self.token(ctx, "", false, false, 0);
        };
        let args = arguments_value(arguments);
        let call = json!({"role": "assistant", "content": "", "tool_calls": [{"function": {"name": n, "arguments": args}}]});
        self.frame(&[line(ctx, call, false)])
    }

    fn huge_line_prefix(&self) -> &'static [u8] {
        br#"{"message":{"content":""#
    }

    /// NDJSON has no comments.
    fn keepalive(&self) -> Option<Bytes> {
        None
    }

    fn error(&self, _ctx: &Ctx, after_tokens: bool) -> Bytes {
        self.frame(&[json!({"error": stream_error_message(after_tokens)})])
    }

    /// The `done` line is the terminator and carries the counts.
    fn end(&self, ctx: &Ctx, end: End) -> Vec<Bytes> {
        if !end.terminator {
            return Vec::new();
        }
        let mut last = line(ctx, json!({"role": "assistant", "content": ""}), true);
        last["done_reason"] = json!("stop");
        if end.count {
            let ns = |d: Duration| d.as_nanos() as u64;
            last["total_duration"] = json!(ns(ctx.ttft + ctx.decode));
            last["load_duration"] = json!(0);
            last["prompt_eval_count"] = json!(ctx.prompt_tokens);
            last["prompt_eval_duration"] = json!(ns(ctx.ttft));
            last["eval_count"] = json!(ctx.tokens);
            last["eval_duration"] = json!(ns(ctx.decode));
        }
        vec![self.frame(&[last])]
    }
}
