//! A borrowed, typed view of one OpenAI stream chunk: the fast path of
//! [`super::openai_chat::OpenAiStream`].
//!
//! Parsing every token chunk into a `serde_json::Value` allocates a map per object and a string
//! per key and value, and was the largest share of the daemon's own CPU at 1,000 targets
//! (`BENCHMARKS.md` table 4). This view reads only the fields the adapter uses, borrows strings
//! from the event's data (an escaped string is the only copy), and skips everything else.
//!
//! It is strict where the `Value` path is lenient: [`parse`] returns `None` for any chunk that is
//! not of the expected shape — not an object, a field of an unexpected type, a duplicate key, an
//! `error` that is not `null`, or no valid JSON at all — and the caller then takes the general
//! `Value` path, so both paths interpret every chunk they accept the same way (see the
//! differential test in `openai_chat.rs`). One difference remains, on fields this view does not
//! read: they are skipped, not built, so a number too large for an `f64` there (`1e400`) does
//! not fail the chunk as it fails `serde_json::Value`.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::value::MapAccessDeserializer;
use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::Number;

/// The chunk, or `None` when it needs the general `Value` path (see the module doc).
pub(super) fn parse(data: &str) -> Option<Chunk<'_>> {
    let Obj(chunk) = serde_json::from_str::<Obj<Chunk<'_>>>(data).ok()?;
    chunk.error.is_none().then_some(chunk)
}

/// The fields of a chunk that the adapter reads.
#[derive(serde::Deserialize)]
pub(super) struct Chunk<'a> {
    /// Present and not `null`: an error object, left to the general path.
    error: Option<IgnoredAny>,
    #[serde(borrow)]
    pub model: Option<Str<'a>>,
    #[serde(borrow)]
    pub system_fingerprint: Option<Str<'a>>,
    pub usage: Option<Obj<Usage>>,
    pub timings: Option<Obj<Timings>>,
    pub metrics: Option<Obj<RequestMetrics>>,
    #[serde(borrow)]
    pub choices: Option<Vec<Obj<Choice<'a>>>>,
}

/// `usage`.
#[derive(serde::Deserialize)]
pub(super) struct Usage {
    pub completion_tokens: Option<Number>,
    pub prompt_tokens: Option<Number>,
    pub prompt_tokens_details: Option<Obj<PromptTokensDetails>>,
}

/// `usage.prompt_tokens_details`.
#[derive(serde::Deserialize)]
pub(super) struct PromptTokensDetails {
    pub cached_tokens: Option<Number>,
}

/// llama.cpp's `timings`.
#[derive(serde::Deserialize)]
pub(super) struct Timings {
    pub prompt_ms: Option<f64>,
    pub prompt_n: Option<Number>,
    pub predicted_n: Option<Number>,
    pub predicted_ms: Option<f64>,
}

/// vLLM's per-request `metrics` (`--enable-per-request-metrics`), the two fields of the TTFT
/// split.
#[derive(serde::Deserialize)]
pub(super) struct RequestMetrics {
    pub queue_time_ms: Option<f64>,
    pub time_to_first_token_ms: Option<f64>,
}

/// One of `choices`: chat (`delta`) or legacy completions (`text`).
#[derive(serde::Deserialize)]
pub(super) struct Choice<'a> {
    #[serde(borrow)]
    pub finish_reason: Option<Str<'a>>,
    #[serde(borrow)]
    pub delta: Option<Obj<Delta<'a>>>,
    #[serde(borrow)]
    pub text: Option<Str<'a>>,
}

/// A chat choice's `delta`.
#[derive(serde::Deserialize)]
pub(super) struct Delta<'a> {
    #[serde(borrow)]
    pub content: Option<Str<'a>>,
    /// A refusal's text (sent with `content: null`): output.
    #[serde(borrow)]
    pub refusal: Option<Str<'a>>,
    #[serde(borrow)]
    pub reasoning_content: Option<Str<'a>>,
    #[serde(borrow)]
    pub reasoning: Option<Str<'a>>,
    #[serde(borrow)]
    pub tool_calls: Option<Vec<Obj<ToolCall<'a>>>>,
    /// Gateways' typed reasoning entries (`reasoning.text`, `reasoning.summary`, …).
    #[serde(borrow)]
    pub reasoning_details: Option<Vec<Obj<ReasoningDetail<'a>>>>,
}

/// One of `delta.reasoning_details`: its text, or its summary.
#[derive(serde::Deserialize)]
pub(super) struct ReasoningDetail<'a> {
    #[serde(borrow)]
    pub text: Option<Str<'a>>,
    #[serde(borrow)]
    pub summary: Option<Str<'a>>,
}

/// One of `delta.tool_calls`.
#[derive(serde::Deserialize)]
pub(super) struct ToolCall<'a> {
    /// Which call of the message this delta continues (absent: the first).
    pub index: Option<Number>,
    #[serde(borrow)]
    pub function: Option<Obj<Function<'a>>>,
}

/// `delta.tool_calls[].function`.
#[derive(serde::Deserialize)]
pub(super) struct Function<'a> {
    #[serde(borrow)]
    pub arguments: Option<Str<'a>>,
    #[serde(borrow)]
    pub name: Option<Str<'a>>,
}

/// A JSON string, borrowed from the data unless it has escapes.
pub(super) struct Str<'a>(pub Cow<'a, str>);

impl Str<'_> {
    /// True for a non-empty string.
    pub fn has_text(s: &Option<Self>) -> bool {
        s.as_ref().is_some_and(|s| !s.0.is_empty())
    }

    /// The string, if present.
    pub fn get(s: &Option<Self>) -> Option<&str> {
        s.as_ref().map(|s| &*s.0)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Str<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Str<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Str(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Str(Cow::Owned(v.to_owned())))
            }
        }
        d.deserialize_str(V(PhantomData))
    }
}

/// A `T` read from a JSON object only: a derived struct also reads a JSON array, by position,
/// which the `Value` path would not.
pub(super) struct Obj<T>(pub T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Obj<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = T;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
                T::deserialize(MapAccessDeserializer::new(map))
            }
        }
        d.deserialize_map(V(PhantomData)).map(Obj)
    }
}
