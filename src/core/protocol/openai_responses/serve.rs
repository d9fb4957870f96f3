//! The server side of OpenAI Responses: `event: {type}` + `data: …` events, a reasoning item
//! then a message item, `response.completed` (with the usage and vLLM's per-request `metrics`)
//! as the terminator.

use bytes::Bytes;
use serde_json::{json, Value};

use crate::protocol::serve::{sse, stream_error_message, Ctx, End, ServeWire};

/// The Responses event stream.
pub(crate) struct ResponsesWire;

/// `/v1/responses`.
pub(crate) static WIRE: ResponsesWire = ResponsesWire;

fn response_obj(ctx: &Ctx, status: &str, usage: Option<Value>) -> Value {
    let mut r = json!({"id": "resp_sim", "object": "response", "created_at": 0, "status": status, "model": ctx.model, "output": []});
    if let Some(u) = usage {
        r["usage"] = u;
    }
    r
}

/// The message item at `output_index` `oi`, added or done.
fn message_item(kind: &str, oi: usize) -> Value {
    json!({"type": kind, "output_index": oi, "item": {"id": "msg_sim", "type": "message", "role": "assistant", "content": []}})
}

/// The message's text part at `output_index` `oi`, added or done.
fn text_part(kind: &str, oi: usize) -> Value {
    json!({"type": kind, "item_id": "msg_sim", "output_index": oi, "content_index": 0, "part": {"type": "output_text", "text": ""}})
}

/// The usage of `n` output tokens.
fn usage(ctx: &Ctx, n: u32) -> Value {
    let mut u = json!({"input_tokens": ctx.prompt_tokens, "output_tokens": n, "total_tokens": ctx.prompt_tokens + u64::from(n)});
    if let Some(c) = ctx.cached_prompt_tokens {
        u["input_tokens_details"] = json!({"cached_tokens": c});
    }
    u
}

impl ServeWire for ResponsesWire {
    fn max_tokens(&self, body: &Value) -> Option<u64> {
        body["max_output_tokens"].as_u64()
    }

    fn frame_raw(&self, event: Option<&str>, payload: &[u8]) -> Vec<u8> {
        sse(event, b"data: ", payload, b"\n\n")
    }

    fn preamble(&self, ctx: &Ctx) -> Bytes {
        let item = if ctx.reasoning {
            json!({"type": "response.output_item.added", "output_index": 0, "item": {"id": "rs_sim", "type": "reasoning", "summary": []}})
        } else {
            message_item("response.output_item.added", 0)
        };
        let mut msgs = vec![
            json!({"type": "response.created", "response": response_obj(ctx, "in_progress", None)}),
            json!({"type": "response.in_progress", "response": response_obj(ctx, "in_progress", None)}),
            item,
        ];
        if !ctx.reasoning {
            msgs.push(text_part("response.content_part.added", 0));
        }
        self.frame(&msgs)
    }

    fn token_msg(&self, ctx: &Ctx, text: &str, reasoning: bool, _index: u32) -> Value {
        if reasoning {
            json!({"type": "response.reasoning_text.delta", "item_id": "rs_sim", "output_index": 0, "content_index": 0, "delta": text})
        } else {
            json!({"type": "response.output_text.delta", "item_id": "msg_sim", "output_index": usize::from(ctx.reasoning), "content_index": 0, "delta": text})
        }
    }

    /// The first output after reasoning closes the reasoning item and opens the message.
    fn token(&self, ctx: &Ctx, text: &str, reasoning: bool, switch: bool, index: u32) -> Bytes {
        let mut msgs = Vec::new();
        if switch {
            msgs.extend([
                json!({"type": "response.reasoning_text.done", "item_id": "rs_sim", "output_index": 0, "content_index": 0, "text": ""}),
                json!({"type": "response.output_item.done", "output_index": 0, "item": {"id": "rs_sim", "type": "reasoning", "summary": []}}),
                message_item("response.output_item.added", 1),
                text_part("response.content_part.added", 1),
            ]);
        }
        msgs.push(self.token_msg(ctx, text, reasoning, index));
        self.frame(&msgs)
    }

    fn has_tools(&self) -> bool {
        true
    }

    /// A `function_call` item, then `function_call_arguments.delta` fragments.
    fn tool_call(&self, ctx: &Ctx, name: Option<&str>, arguments: &str) -> Bytes {
        let output = usize::from(ctx.reasoning) + 1;
        let mut msgs = Vec::new();
        if let Some(n) = name {
            msgs.push(json!({"type": "response.output_item.added", "output_index": output, "item": {"id": "fc_sim", "type": "function_call", "call_id": "call_sim", "name": n, "arguments": "", "status": "in_progress"}}));
        }
        msgs.push(json!({"type": "response.function_call_arguments.delta", "item_id": "fc_sim", "output_index": output, "delta": arguments}));
        self.frame(&msgs)
    }

    /// `response.failed` after tokens, an `error` event before any.
    fn error(&self, ctx: &Ctx, after_tokens: bool) -> Bytes {
        let message = stream_error_message(after_tokens);
        let msg = if after_tokens {
            let mut r = response_obj(ctx, "failed", None);
            r["error"] = json!({"code": "server_error", "message": message});
            json!({"type": "response.failed", "response": r})
        } else {
            json!({"type": "error", "code": "server_error", "message": message, "param": null})
        };
        self.frame(&[msg])
    }

    fn end(&self, ctx: &Ctx, end: End) -> Vec<Bytes> {
        let (n, oi) = (ctx.tokens, usize::from(ctx.reasoning));
        let mut out = vec![self.frame(&[
            json!({"type": "response.output_text.done", "item_id": "msg_sim", "output_index": oi, "content_index": 0, "text": ""}),
            text_part("response.content_part.done", oi),
            message_item("response.output_item.done", oi),
        ])];
        if end.terminator {
            let mut resp = response_obj(ctx, "completed", end.count.then(|| usage(ctx, n)));
            if let Some(m) = end.metrics.filter(|_| end.count) {
                resp["metrics"] = m.json(n);
            }
            out.push(self.frame(&[json!({"type": "response.completed", "response": resp})]));
        }
        out
    }

    fn terminator_only(&self, ctx: &Ctx) -> Bytes {
        let usage = json!({"input_tokens": ctx.prompt_tokens, "output_tokens": 0, "total_tokens": ctx.prompt_tokens});
        self.frame(&[
            json!({"type": "response.created", "response": response_obj(ctx, "in_progress", None)}),
            json!({"type": "response.completed", "response": response_obj(ctx, "completed", Some(usage))}),
        ])
    }
}
