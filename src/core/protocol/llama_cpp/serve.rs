//! The server side of llama.cpp's native `/completion`: `data: {…}` events, the last with
//! `stop: true`, the counts and the server's `timings`.

use bytes::Bytes;
use serde_json::{json, Value};

use crate::protocol::serve::{stream_error_message, Ctx, End, ServeWire};

/// The native completion stream.
pub(crate) struct LlamaCppWire;

/// llama.cpp's native endpoint.
pub(crate) static WIRE: LlamaCppWire = LlamaCppWire;

/// The `timings` object of `n` output tokens: the scripted TTFT as the prompt time.
fn timings(ctx: &Ctx, n: u32) -> Value {
    let predicted_ms = ctx.decode.as_secs_f64() * 1000.0;
    json!({
        "prompt_n": ctx.prompt_tokens, "prompt_ms": ctx.ttft.as_secs_f64() * 1000.0,
        "predicted_n": n, "predicted_ms": predicted_ms,
        "predicted_per_second": if predicted_ms > 0.0 { f64::from(n) * 1000.0 / predicted_ms } else { 0.0 },
    })
}

impl ServeWire for LlamaCppWire {
    fn max_tokens(&self, body: &Value) -> Option<u64> {
        body["n_predict"].as_u64()
    }

    fn token_msg(&self, ctx: &Ctx, text: &str, _reasoning: bool, index: u32) -> Value {
        json!({
            "index": 0, "content": text, "tokens": [], "stop": false, "id_slot": 0,
            "tokens_predicted": index + 1, "tokens_evaluated": ctx.prompt_tokens,
        })
    }

    fn error(&self, _ctx: &Ctx, after_tokens: bool) -> Bytes {
        let message = stream_error_message(after_tokens);
        self.frame(&[json!({"error": {"code": 500, "message": message, "type": "server_error"}})])
    }

    /// The `stop: true` event is the terminator and carries the counts.
    fn end(&self, ctx: &Ctx, end: End) -> Vec<Bytes> {
        if !end.terminator {
            return Vec::new();
        }
        let n = ctx.tokens;
        let mut last = json!({"index": 0, "content": "", "tokens": [], "stop": true, "id_slot": 0, "model": ctx.model, "stop_type": "eos"});
        if end.count {
            last["tokens_predicted"] = json!(n);
            last["tokens_evaluated"] = json!(ctx.prompt_tokens);
            last["timings"] = timings(ctx, n);
        }
        vec![self.frame(&[last])]
    }
}
