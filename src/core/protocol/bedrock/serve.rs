//! The server side of Amazon Bedrock ConverseStream (`POST /model/{modelId}/converse-stream`):
//! every part of a scripted stream as binary event-stream messages
//! ([`crate::decode::eventstream::encode`], the framing and CRCs the decoder checks), with the
//! headers Bedrock sends (`:event-type`, `:content-type`, `:message-type`; exceptions with
//! `:exception-type`).

use bytes::Bytes;
use serde_json::{json, Value};

use super::{CONTENT_TYPE, CONVERSE_STREAM, MODEL};
use crate::decode::eventstream::{encode, HeaderValue};
use crate::protocol::serve::{segment_between, stream_error_message, Ctx, End, ServeWire};

/// The ConverseStream event stream.
pub(crate) struct BedrockWire;

/// `/model/{modelId}/converse-stream`.
pub(crate) static WIRE: BedrockWire = BedrockWire;

/// The prelude of one 100 MiB message (total length 104857616, no headers, valid prelude CRC
/// 0x87A63415): a probe refuses it as too large as soon as these 12 bytes arrive.
const HUGE_PRELUDE: &[u8] = &[6, 64, 0, 16, 0, 0, 0, 0, 0x87, 0xa6, 0x34, 0x15];

/// The model id of a ConverseStream path, `/model/{id}/converse-stream`: one segment
/// (percent-encoded as clients send it).
pub(crate) fn model_id(path: &str) -> Option<&str> {
    segment_between(path, MODEL, CONVERSE_STREAM)
}

/// One event message.
fn event(kind: &str, payload: &Value) -> Vec<u8> {
    event_raw(kind, payload.to_string().as_bytes())
}

fn event_raw(kind: &str, payload: &[u8]) -> Vec<u8> {
    encode(
        &[
            (":event-type", HeaderValue::String(kind.into())),
            (
                ":content-type",
                HeaderValue::String("application/json".into()),
            ),
            (":message-type", HeaderValue::String("event".into())),
        ],
        payload,
    )
}

fn concat(parts: impl IntoIterator<Item = Vec<u8>>) -> Bytes {
    parts.into_iter().flatten().collect::<Vec<u8>>().into()
}

/// The `contentBlockDelta` payload carrying `text`.
fn delta(ctx: &Ctx, text: &str, reasoning: bool) -> Value {
    let index = usize::from(ctx.reasoning && !reasoning);
    let delta = if reasoning {
        json!({"reasoningContent": {"text": text}})
    } else {
        json!({"text": text})
    };
    json!({"contentBlockIndex": index, "delta": delta})
}

/// `metadata`: usage (when `count`) and the server's latency.
fn metadata(ctx: &Ctx, n: u32, count: bool) -> Vec<u8> {
    let latency = ((ctx.ttft + ctx.decode).as_secs_f64() * 1000.0).round() as u64;
    let mut m = json!({"metrics": {"latencyMs": latency}});
    if count {
        // Bedrock's inputTokens leaves out what the cache served, counted apart.
        let cached = ctx.cached_prompt_tokens;
        let input = ctx.prompt_tokens - cached.unwrap_or(0);
        m["usage"] = json!({"inputTokens": input, "outputTokens": n, "totalTokens": ctx.prompt_tokens + u64::from(n)});
        if let Some(c) = cached {
            m["usage"]["cacheReadInputTokens"] = json!(c);
        }
    }
    event("metadata", &m)
}

impl ServeWire for BedrockWire {
    fn max_tokens(&self, body: &Value) -> Option<u64> {
        body["inferenceConfig"]["maxTokens"].as_u64()
    }

    fn content_type(&self) -> &'static str {
        CONTENT_TYPE
    }

    /// One event message of type `event`; a payload without a type is a token's
    /// `contentBlockDelta` (what the broken-event faults frame).
    fn frame_raw(&self, event: Option<&str>, payload: &[u8]) -> Vec<u8> {
        event_raw(event.unwrap_or("contentBlockDelta"), payload)
    }

    /// `messageStart`.
    fn preamble(&self, _ctx: &Ctx) -> Bytes {
        event("messageStart", &json!({"role": "assistant"})).into()
    }

    fn token_msg(&self, ctx: &Ctx, text: &str, reasoning: bool, _index: u32) -> Value {
        delta(ctx, text, reasoning)
    }

    /// One `contentBlockDelta`; the first output after reasoning closes the reasoning block
    /// first.
    fn token(&self, ctx: &Ctx, text: &str, reasoning: bool, switch: bool, _index: u32) -> Bytes {
        let mut parts = Vec::new();
        if switch {
            parts.push(event("contentBlockStop", &json!({"contentBlockIndex": 0})));
        }
        parts.push(event("contentBlockDelta", &delta(ctx, text, reasoning)));
        concat(parts)
    }

    fn has_tools(&self) -> bool {
        true
    }

    /// `contentBlockStart` of a `toolUse` block (its id and name) when `name` is given (the
    /// first event), then a `contentBlockDelta` with an input fragment. The call's block follows
    /// the reasoning block when there is one.
    fn tool_call(&self, ctx: &Ctx, name: Option<&str>, input: &str) -> Bytes {
        let index = usize::from(ctx.reasoning);
        let mut parts = Vec::new();
        if let Some(n) = name {
            if ctx.reasoning {
                parts.push(event("contentBlockStop", &json!({"contentBlockIndex": 0})));
            }
            parts.push(event(
                "contentBlockStart",
                &json!({"contentBlockIndex": index, "start": {"toolUse": {"toolUseId": "tooluse_sim", "name": n}}}),
            ));
        }
        parts.push(event(
            "contentBlockDelta",
            &json!({"contentBlockIndex": index, "delta": {"toolUse": {"input": input}}}),
        ));
        concat(parts)
    }

    fn huge_line_prefix(&self) -> &'static [u8] {
        HUGE_PRELUDE
    }

    /// The binary framing has no comments.
    fn keepalive(&self) -> Option<Bytes> {
        None
    }

    /// An exception inside the 200: `modelStreamErrorException` after tokens,
    /// `throttlingException` before any.
    fn error(&self, _ctx: &Ctx, after_tokens: bool) -> Bytes {
        let kind = match after_tokens {
            true => "modelStreamErrorException",
            false => "throttlingException",
        };
        let message = stream_error_message(after_tokens);
        encode(
            &[
                (":exception-type", HeaderValue::String(kind.into())),
                (
                    ":content-type",
                    HeaderValue::String("application/json".into()),
                ),
                (":message-type", HeaderValue::String("exception".into())),
            ],
            json!({ "message": message }).to_string().as_bytes(),
        )
        .into()
    }

    /// `contentBlockStop` and `messageStop` in one write, then `metadata` (the terminator, which
    /// carries the count: no terminator means no count either).
    fn end(&self, ctx: &Ctx, end: End) -> Vec<Bytes> {
        let mut out = vec![concat([
            event(
                "contentBlockStop",
                &json!({"contentBlockIndex": usize::from(ctx.reasoning)}),
            ),
            event("messageStop", &json!({"stopReason": "end_turn"})),
        ])];
        if end.terminator {
            out.push(metadata(ctx, ctx.tokens, end.count).into());
        }
        out
    }

    /// `messageStart`, `messageStop` and `metadata` with 0 output tokens.
    fn terminator_only(&self, ctx: &Ctx) -> Bytes {
        concat([
            event("messageStart", &json!({"role": "assistant"})),
            event("messageStop", &json!({"stopReason": "end_turn"})),
            metadata(&ctx.empty(), 0, true),
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_huge_prelude_is_valid() {
        let total = u32::from_be_bytes(HUGE_PRELUDE[0..4].try_into().unwrap());
        assert_eq!(total, 100 * 1024 * 1024 + 16);
        let crc = u32::from_be_bytes(HUGE_PRELUDE[8..12].try_into().unwrap());
        assert_eq!(crc32fast::hash(&HUGE_PRELUDE[..8]), crc);
    }

    #[test]
    fn paths() {
        assert_eq!(
            model_id("/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse-stream"),
            Some("anthropic.claude-3-haiku-20240307-v1%3A0")
        );
        assert_eq!(model_id("/model//converse-stream"), None);
        assert_eq!(model_id("/model/a/b/converse-stream"), None);
        assert_eq!(model_id("/v1/model/a/converse-stream"), None);
    }
}
