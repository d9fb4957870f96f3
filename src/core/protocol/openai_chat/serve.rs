//! The server side of OpenAI chat completions (also Azure OpenAI's deployment path) and legacy
//! completions: `data: {chunk}` events, usage on a last chunk with no choices (vLLM's
//! per-request `metrics` beside it), `data: [DONE]`.

use bytes::Bytes;
use serde_json::{json, Value};

use crate::protocol::serve::{stream_error_message, Ctx, End, ServeWire};

/// OpenAI's chunked stream: `chat.completion.chunk` deltas, or `text_completion` texts.
pub(crate) struct OpenAiWire {
    /// Chat (`delta`s, tool calls) rather than legacy completions (`text`).
    chat: bool,
}

/// OpenAI chat, also Azure OpenAI's deployments.
pub(crate) static CHAT: OpenAiWire = OpenAiWire { chat: true };
/// OpenAI legacy completions.
pub(crate) static COMPLETIONS: OpenAiWire = OpenAiWire { chat: false };

/// An OpenAI chunk.
fn chunk(ctx: &Ctx, object: &str, choices: Value, usage: Option<Value>) -> Value {
    let mut c = json!({
        "id": "chatcmpl-sim", "object": object, "created": 0, "model": ctx.model,
        "system_fingerprint": concat!("llm-probe-simulator-", env!("CARGO_PKG_VERSION")),
        "choices": choices,
    });
    if let Some(u) = usage {
        c["usage"] = u;
    }
    c
}

fn usage(ctx: &Ctx, n: u32) -> Value {
    let mut u = json!({"prompt_tokens": ctx.prompt_tokens, "completion_tokens": n, "total_tokens": ctx.prompt_tokens + u64::from(n)});
    if let Some(c) = ctx.cached_prompt_tokens {
        u["prompt_tokens_details"] = json!({"cached_tokens": c});
    }
    u
}

impl OpenAiWire {
    fn object(&self) -> &'static str {
        if self.chat {
            "chat.completion.chunk"
        } else {
            "text_completion"
        }
    }

    /// The choice that finishes the generation.
    fn finish(&self) -> Value {
        if self.chat {
            json!([{"index": 0, "delta": {}, "finish_reason": "stop"}])
        } else {
            json!([{"index": 0, "text": "", "logprobs": null, "finish_reason": "stop"}])
        }
    }
}

impl ServeWire for OpenAiWire {
    fn max_tokens(&self, body: &Value) -> Option<u64> {
        body["max_tokens"].as_u64()
    }

    fn preamble(&self, ctx: &Ctx) -> Bytes {
        if !self.chat {
            return Bytes::new();
        }
        self.frame(&[chunk(
            ctx,
            self.object(),
            json!([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": null}]),
            None,
        )])
    }

    fn token_msg(&self, ctx: &Ctx, text: &str, reasoning: bool, _index: u32) -> Value {
        if !self.chat {
            let choices =
                json!([{"index": 0, "text": text, "logprobs": null, "finish_reason": null}]);
            return chunk(ctx, self.object(), choices, None);
        }
        let delta = if reasoning {
            json!({"reasoning_content": text})
        } else {
            json!({"content": text})
        };
        let choices = json!([{"index": 0, "delta": delta, "finish_reason": null}]);
        chunk(ctx, self.object(), choices, None)
    }

    fn has_tools(&self) -> bool {
        self.chat
    }

    /// `tool_calls` deltas: the first with the call's id, type and name.
    fn tool_call(&self, ctx: &Ctx, name: Option<&str>, arguments: &str) -> Bytes {
        if !self.chat {
            return self.token(ctx, arguments, false, false, 0);
        }
        let mut call = json!({"index": 0, "function": {"arguments": arguments}});
        if let Some(n) = name {
            call["id"] = json!("call_sim");
            call["type"] = json!("function");
            call["function"]["name"] = json!(n);
        }
        let choices = json!([{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": null}]);
        self.frame(&[chunk(ctx, self.object(), choices, None)])
    }

    fn error(&self, _ctx: &Ctx, after_tokens: bool) -> Bytes {
        let message = stream_error_message(after_tokens);
        self.frame(&[json!({"error": {"message": message, "type": "server_error"}})])
    }

    fn end(&self, ctx: &Ctx, end: End) -> Vec<Bytes> {
        let n = ctx.tokens;
        let mut out = vec![self.frame(&[chunk(ctx, self.object(), self.finish(), None)])];
        if end.count {
            let mut c = chunk(ctx, self.object(), json!([]), Some(usage(ctx, n)));
            if let Some(m) = end.metrics {
                c["metrics"] = m.json(n);
            }
            out.push(self.frame(&[c]));
        }
        if end.terminator {
            out.push(self.frame_raw(None, b"[DONE]").into());
        }
        out
    }

    fn terminator_only(&self, _ctx: &Ctx) -> Bytes {
        self.frame_raw(None, b"[DONE]").into()
    }
}
