//! The simulator's Amazon Bedrock ConverseStream shapes (`POST /model/{modelId}/converse-stream`):
//! every part of a scripted stream as binary event-stream messages
//! ([`crate::decode::eventstream::encode`]), with the headers Bedrock sends (`:event-type`,
//! `:content-type`, `:message-type`; exceptions with `:exception-type`). Kept apart from
//! [`super::wire`], which dispatches here for [`super::Wire::Bedrock`].

use std::time::Duration;

use bytes::Bytes;
use serde_json::{json, Value};

use super::wire::{Ctx, End};
use crate::decode::eventstream::{encode, HeaderValue};

/// The prelude of one 100 MiB message (total length 104857616, no headers, valid prelude CRC
/// 0x87A63415): a probe refuses it as too large as soon as these 12 bytes arrive.
pub(super) const HUGE_PRELUDE: &[u8] = &[6, 64, 0, 16, 0, 0, 0, 0, 0x87, 0xa6, 0x34, 0x15];

/// Whether `path` is a ConverseStream path: `/model/{id}/converse-stream`, the id one segment
/// (percent-encoded as clients send it).
pub(super) fn is_path(path: &str) -> bool {
    path.strip_prefix("/model/")
        .and_then(|rest| rest.strip_suffix("/converse-stream"))
        .is_some_and(|id| !id.is_empty() && !id.contains('/'))
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

/// `messageStart`, sent with the headers.
pub(super) fn preamble() -> Bytes {
    event("messageStart", &json!({"role": "assistant"})).into()
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

/// One token event; `first_output_after_reasoning` closes the reasoning block first.
pub(super) fn token(
    ctx: &Ctx,
    text: &str,
    reasoning: bool,
    first_output_after_reasoning: bool,
) -> Bytes {
    let mut parts = Vec::new();
    if first_output_after_reasoning {
        parts.push(event("contentBlockStop", &json!({"contentBlockIndex": 0})));
    }
    parts.push(event("contentBlockDelta", &delta(ctx, text, reasoning)));
    concat(parts)
}

/// One tool-call event: `contentBlockStart` of a `toolUse` block (its id and name) when `name`
/// is given (the first event), then a `contentBlockDelta` with an input fragment. The call's
/// block follows the reasoning block when there is one.
pub(super) fn tool_call(ctx: &Ctx, name: Option<&str>, input: &str) -> Bytes {
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

/// A token event whose JSON payload breaks off (a valid frame: a `decode` failure of the JSON).
pub(super) fn broken_json(ctx: &Ctx) -> Bytes {
    let s = delta(ctx, "x", false).to_string();
    event_raw("contentBlockDelta", &s.as_bytes()[..s.len() - 2]).into()
}

/// A token event whose payload is not UTF-8.
pub(super) fn invalid_utf8(ctx: &Ctx) -> Bytes {
    let s = delta(ctx, "@@BAD@@", false).to_string();
    let (a, b) = s.split_once("@@BAD@@").expect("the marker is in the JSON");
    let mut payload = a.as_bytes().to_vec();
    payload.extend_from_slice(b"\xff\xfe");
    payload.extend_from_slice(b.as_bytes());
    event_raw("contentBlockDelta", &payload).into()
}

/// An exception inside the 200: `modelStreamErrorException` after tokens,
/// `throttlingException` before any.
pub(super) fn error(after_tokens: bool) -> Bytes {
    let (kind, message) = if after_tokens {
        ("modelStreamErrorException", "simulated error after tokens")
    } else {
        ("throttlingException", "simulated error inside a 200 stream")
    };
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

/// After the last token: `contentBlockStop` and `messageStop` in one write, then `metadata` (the
/// terminator, which carries the count: no terminator means no count either).
pub(super) fn end(ctx: &Ctx, end: End) -> Vec<Bytes> {
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

/// A stream without a single token: `messageStart`, `messageStop` and `metadata` with 0
/// output tokens.
pub(super) fn terminator_only(ctx: &Ctx) -> Bytes {
    let empty = Ctx {
        tokens: 0,
        decode: Duration::ZERO,
        ..ctx.clone()
    };
    concat([
        event("messageStart", &json!({"role": "assistant"})),
        event("messageStop", &json!({"stopReason": "end_turn"})),
        metadata(&empty, 0, true),
    ])
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
        assert!(is_path(
            "/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse-stream"
        ));
        assert!(!is_path("/model//converse-stream"));
        assert!(!is_path("/model/a/b/converse-stream"));
        assert!(!is_path("/v1/model/a/converse-stream"));
    }
}
