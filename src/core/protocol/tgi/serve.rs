//! The server side of TGI's native `generate_stream`: `data:{…}` events without a space, one per
//! token, the last the end-of-sequence token with `generated_text` and `details`.

use bytes::Bytes;
use serde_json::{json, Value};

use crate::protocol::serve::{sse, stream_error_message, Ctx, End, ServeWire};

/// The native token stream.
pub(crate) struct TgiWire;

/// TGI's native endpoint.
pub(crate) static WIRE: TgiWire = TgiWire;

/// The end-of-sequence token: generated (and counted) but no text.
fn eos(index: u32, generated_text: String, details: Value) -> Value {
    json!({
        "index": index,
        "token": {"id": 2, "text": "</s>", "logprob": -0.1, "special": true},
        "generated_text": generated_text,
        "details": details,
    })
}

impl ServeWire for TgiWire {
    fn max_tokens(&self, body: &Value) -> Option<u64> {
        body["parameters"]["max_new_tokens"].as_u64()
    }

    fn frame_raw(&self, _event: Option<&str>, payload: &[u8]) -> Vec<u8> {
        sse(None, b"data:", payload, b"\n\n")
    }

    fn token_msg(&self, _ctx: &Ctx, text: &str, _reasoning: bool, index: u32) -> Value {
        json!({
            "index": index + 1,
            "token": {"id": 1000 + index, "text": text, "logprob": -0.5, "special": false},
            "generated_text": null, "details": null,
        })
    }

    fn huge_line_prefix(&self) -> &'static [u8] {
        b"data:"
    }

    fn error(&self, _ctx: &Ctx, after_tokens: bool) -> Bytes {
        let message = stream_error_message(after_tokens);
        self.frame(&[json!({"error": message, "error_type": "generation"})])
    }

    /// The end-of-sequence token is the terminator and carries the count.
    fn end(&self, ctx: &Ctx, end: End) -> Vec<Bytes> {
        if !end.terminator {
            return Vec::new();
        }
        let n = ctx.tokens;
        let details = if end.count {
            json!({"finish_reason": "eos_token", "generated_tokens": n + 1, "seed": null})
        } else {
            Value::Null
        };
        let text = (0..n).map(|i| format!(" t{i}")).collect::<String>();
        vec![self.frame(&[eos(n + 1, text, details)])]
    }

    /// Only the end-of-sequence token: one generated token, no text.
    fn terminator_only(&self, _ctx: &Ctx) -> Bytes {
        let details = json!({"finish_reason": "eos_token", "generated_tokens": 1, "seed": null});
        self.frame(&[eos(1, String::new(), details)])
    }
}
