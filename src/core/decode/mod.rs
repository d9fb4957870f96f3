//! Sans-IO stream decoders: bytes in, events out. No async, no IO.
//!
//! The probe hands every network read to a decoder as it arrives; the decoder returns the complete
//! frames found so far and keeps the rest for the next read. Both decoders
//!
//! - split on bytes and decode whole lines only, so a multi-byte UTF-8 character split across two
//!   reads is never mangled (docs/protocols.md, "Stream faults the probe gets right", "Framing and bytes");
//! - scan each input byte once (a scan position per line, `memchr` for terminators), so the work
//!   is linear in the input however the reads are split (docs/protocols.md, "Server-sent events, exactly", rule 10);
//! - cap the size of one line / one event and fail with [`DecodeError::TooLarge`] past it;
//! - give the same output whatever the read boundaries are: fed whole, split at any byte offset,
//!   or one byte at a time.
//!
//! [`sse::SseDecoder`] implements the WHATWG "event stream" rules (docs/protocols.md, "Server-sent events, exactly") for OpenAI,
//! Anthropic, Responses and TGI streams; [`ndjson::NdjsonDecoder`] splits Ollama's native
//! one-JSON-document-per-line streams; [`eventstream::EventStreamDecoder`] splits the binary
//! event stream of Amazon Bedrock `converse-stream` into messages. Interpreting the payloads (JSON, `[DONE]`, keep-alives
//! rewrapped as data) is the caller's job. Before them, [`content::ContentDecoder`] undoes a
//! content coding (gzip, deflate, br, zstd) a server applied although the probe asked for none.

pub mod content;
pub mod eventstream;
pub mod ndjson;
pub mod sse;

/// Why a decoder gave up on a stream. After returning one, a decoder is poisoned: every later
/// `feed` returns the same error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// A line or an event's accumulated data grew past the configured cap (bytes).
    #[error("stream event larger than {limit} bytes")]
    TooLarge {
        /// The configured cap, in bytes.
        limit: usize,
    },
    /// A complete line was not valid UTF-8.
    #[error("stream is not valid UTF-8")]
    InvalidUtf8,
    /// The body's content coding (`Content-Encoding`) could not be undone: the bytes are not
    /// valid for it.
    #[error("the {coding}-coded body does not decode: {detail}")]
    CorruptCoding {
        /// The coding's `Content-Encoding` token (`gzip`, `deflate`, `br`, `zstd`).
        coding: &'static str,
        /// The decompressor's message (at most 120 characters).
        detail: String,
    },
    /// A binary event-stream message ([`eventstream`], Amazon Bedrock) is malformed: a CRC
    /// does not match, its lengths do not fit, a header is malformed, or the stream ended inside
    /// a message.
    #[error("the event stream is malformed: {detail}")]
    BadFrame {
        /// What is wrong, without any of the message's bytes.
        detail: String,
    },
}

impl DecodeError {
    /// A short, stable label for metrics and logs: `"too_large"`, `"invalid_utf8"` or
    /// `"corrupt_coding"` or `"bad_frame"`.
    pub fn label(&self) -> &'static str {
        match self {
            DecodeError::TooLarge { .. } => "too_large",
            DecodeError::InvalidUtf8 => "invalid_utf8",
            DecodeError::CorruptCoding { .. } => "corrupt_coding",
            DecodeError::BadFrame { .. } => "bad_frame",
        }
    }
}

/// Default cap, in bytes, on one line and on one event's accumulated data (1 MiB). A stream that
/// exceeds it fails with [`DecodeError::TooLarge`] instead of growing memory without bound.
pub const DEFAULT_MAX_EVENT_BYTES: usize = 1 << 20; // 1 MiB
