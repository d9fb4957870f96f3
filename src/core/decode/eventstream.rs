//! Decoder for AWS's binary event stream framing (`application/vnd.amazon.eventstream`), the
//! response body of Amazon Bedrock `converse-stream`.
//!
//! Each message is self-delimiting (all integers big-endian):
//!
//! ```text
//! total length u32 | headers length u32 | prelude CRC u32 | headers | payload | message CRC u32
//! ```
//!
//! The prelude CRC is the CRC-32 (IEEE 802.3, as zlib and `crc32fast` compute it) of the first 8
//! bytes; the message CRC is the CRC-32 of every byte before it (prelude and prelude CRC
//! included). A header is a name length u8, the name (UTF-8), a value type u8 and the value:
//! 0 true, 1 false (no bytes), 2 byte (1), 3 short (2), 4 integer (4), 5 long (8), 6 byte array
//! and 7 string (a u16 length, then the bytes), 8 timestamp (8, milliseconds since the epoch),
//! 9 UUID (16). Source: the AWS event stream encoding as documented for the AWS SDKs and the
//! Amazon Transcribe / S3 Select streaming APIs.
//!
//! Like the line decoders of this module, this one is sans-IO, gives the same messages whatever
//! the read boundaries are, and caps one message at a size limit. Every malformed input is a
//! typed [`DecodeError::BadFrame`] (or [`DecodeError::TooLarge`]), never a panic.
//!
//! ```
//! use llm_probe::decode::eventstream::{encode, EventStreamDecoder, HeaderValue};
//!
//! let bytes = encode(&[(":event-type", HeaderValue::String("messageStop".into()))], b"{}");
//! let mut dec = EventStreamDecoder::new();
//! let mut out = Vec::new();
//! dec.feed(&bytes[..5], &mut out).unwrap();
//! assert!(out.is_empty());
//! dec.feed(&bytes[5..], &mut out).unwrap();
//! assert_eq!(out[0].header_str(":event-type"), Some("messageStop"));
//! assert_eq!(out[0].payload, b"{}");
//! assert_eq!(dec.finish(), Ok(()));
//! ```

use super::{DecodeError, DEFAULT_MAX_EVENT_BYTES};

/// Bytes of the prelude (total length, headers length) plus its CRC.
const PRELUDE_BYTES: usize = 12;
/// Smallest possible message: prelude, prelude CRC and message CRC with no headers or payload.
const MIN_MESSAGE_BYTES: usize = PRELUDE_BYTES + 4;
/// Most headers one message may carry. AWS sends three or four (`:event-type`,
/// `:content-type`, `:message-type`, …); a 1 MiB message of 2-byte empty boolean headers would
/// otherwise become half a million `(String, HeaderValue)` pairs (tens of MiB) per message.
pub const MAX_HEADERS: usize = 64;

/// One header value, typed as on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderValue {
    /// Types 0 (true) and 1 (false).
    Bool(bool),
    /// Type 2: a signed byte.
    Byte(i8),
    /// Type 3: a signed 16-bit integer.
    Short(i16),
    /// Type 4: a signed 32-bit integer.
    Int(i32),
    /// Type 5: a signed 64-bit integer.
    Long(i64),
    /// Type 6: bytes.
    Bytes(Vec<u8>),
    /// Type 7: a UTF-8 string.
    String(String),
    /// Type 8: milliseconds since the Unix epoch.
    Timestamp(i64),
    /// Type 9: a UUID's 16 bytes.
    Uuid([u8; 16]),
}

/// One decoded message: its headers in wire order and its payload bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// `(name, value)` pairs in the order they were sent.
    pub headers: Vec<(String, HeaderValue)>,
    /// The payload (for Bedrock, a JSON document).
    pub payload: Vec<u8>,
}

impl Message {
    /// The string value of the first header called `name` (e.g. `:event-type`), if it is one.
    pub fn header_str(&self, name: &str) -> Option<&str> {
        self.headers.iter().find_map(|(n, v)| match v {
            HeaderValue::String(s) if n == name => Some(s.as_str()),
            _ => None,
        })
    }
}

/// Incremental, sans-IO event stream decoder. One decoder per stream.
#[derive(Debug, Clone)]
pub struct EventStreamDecoder {
    /// Cap in bytes on one message's total length.
    limit: usize,
    /// Bytes of the current, incomplete message.
    buf: Vec<u8>,
    poisoned: Option<DecodeError>,
    /// A prelude whose CRC matches was read ([`EventStreamDecoder::framed`]).
    framed: bool,
}

impl Default for EventStreamDecoder {
    /// Same as [`EventStreamDecoder::new`].
    fn default() -> Self {
        Self::new()
    }
}

fn bad(detail: impl Into<String>) -> DecodeError {
    DecodeError::BadFrame {
        detail: detail.into(),
    }
}

fn be_u32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

impl EventStreamDecoder {
    /// A decoder capping one message at [`DEFAULT_MAX_EVENT_BYTES`] (1 MiB).
    pub fn new() -> Self {
        Self::with_max_message_bytes(DEFAULT_MAX_EVENT_BYTES)
    }

    /// A decoder capping one message (its total length) at `limit` bytes; a longer one fails
    /// with [`DecodeError::TooLarge`] as soon as its prelude is read.
    pub fn with_max_message_bytes(limit: usize) -> Self {
        EventStreamDecoder {
            limit,
            buf: Vec::new(),
            poisoned: None,
            framed: false,
        }
    }

    /// Pushes every message `bytes` completes to `out`, keeping the rest for the next call.
    /// `bytes` is one network read and may end anywhere.
    ///
    /// Errors (the decoder is then poisoned and returns the same error forever): a bad prelude
    /// CRC, a bad message CRC, lengths that do not fit, a malformed header
    /// ([`DecodeError::BadFrame`]); a message longer than the cap ([`DecodeError::TooLarge`]).
    /// Messages completed before the bad one in the same call are still pushed.
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<Message>) -> Result<(), DecodeError> {
        if let Some(err) = &self.poisoned {
            return Err(err.clone());
        }
        self.buf.extend_from_slice(bytes);
        let mut start = 0;
        let result = loop {
            match self.next_message(start) {
                Ok(Some((msg, len))) => {
                    out.push(msg);
                    start += len;
                }
                Ok(None) => break Ok(()),
                Err(e) => break Err(e),
            }
        };
        self.framed |= start > 0 || prelude_matches(&self.buf[start..]);
        self.buf.drain(..start);
        if let Err(e) = &result {
            self.poisoned = Some(e.clone());
            self.buf.clear();
        }
        result
    }

    /// End of stream. Errors: bytes of an incomplete message are left
    /// ([`DecodeError::BadFrame`] naming how many), or the decoder is poisoned. Afterwards the
    /// decoder is empty (the cap and any poisoning kept).
    pub fn finish(&mut self) -> Result<(), DecodeError> {
        if let Some(err) = &self.poisoned {
            return Err(err.clone());
        }
        let left = std::mem::take(&mut self.buf);
        if left.is_empty() {
            return Ok(());
        }
        let want = (left.len() >= 4).then(|| be_u32(&left).to_string());
        Err(bad(format!(
            "the stream ended inside a message ({} of {} bytes)",
            left.len(),
            want.as_deref().unwrap_or("?")
        )))
    }

    /// Whether a prelude whose CRC matches has been read (the one of a message that then failed
    /// included): the body is AWS's event stream, so a later error is a malformed frame, not a
    /// body of some other kind (an HTML page, a JSON error). Random bytes match a prelude CRC
    /// once in 2^32.
    pub fn framed(&self) -> bool {
        self.framed
    }

    /// Bytes held of an incomplete message.
    pub fn pending_bytes(&self) -> usize {
        self.buf.len()
    }

    /// The message starting at `self.buf[start..]` and its length, or `None` when it is not
    /// complete yet.
    fn next_message(&self, start: usize) -> Result<Option<(Message, usize)>, DecodeError> {
        let b = &self.buf[start..];
        if b.len() < PRELUDE_BYTES {
            return Ok(None);
        }
        let total = be_u32(&b[0..4]) as usize;
        let headers_len = be_u32(&b[4..8]) as usize;
        let prelude_crc = be_u32(&b[8..12]);
        if crc32fast::hash(&b[0..8]) != prelude_crc {
            return Err(bad("the prelude CRC does not match"));
        }
        if total < MIN_MESSAGE_BYTES || headers_len > total - MIN_MESSAGE_BYTES {
            return Err(bad(format!(
                "a message's lengths do not fit (total {total} bytes, headers {headers_len} bytes)"
            )));
        }
        if total > self.limit {
            return Err(DecodeError::TooLarge { limit: self.limit });
        }
        if b.len() < total {
            return Ok(None);
        }
        let crc = be_u32(&b[total - 4..total]);
        if crc32fast::hash(&b[..total - 4]) != crc {
            return Err(bad("the message CRC does not match"));
        }
        let headers = parse_headers(&b[PRELUDE_BYTES..PRELUDE_BYTES + headers_len])?;
        let payload = b[PRELUDE_BYTES + headers_len..total - 4].to_vec();
        Ok(Some((Message { headers, payload }, total)))
    }
}

/// Whether `b` starts with a whole prelude whose CRC matches.
fn prelude_matches(b: &[u8]) -> bool {
    b.len() >= PRELUDE_BYTES && crc32fast::hash(&b[0..8]) == be_u32(&b[8..12])
}

/// Splits `n` bytes off the front of `b`.
fn take<'a>(b: &mut &'a [u8], n: usize) -> Result<&'a [u8], DecodeError> {
    if b.len() < n {
        return Err(bad("a header runs past the headers section"));
    }
    let (head, rest) = b.split_at(n);
    *b = rest;
    Ok(head)
}

fn parse_headers(mut b: &[u8]) -> Result<Vec<(String, HeaderValue)>, DecodeError> {
    let mut out = Vec::new();
    while !b.is_empty() {
        if out.len() == MAX_HEADERS {
            return Err(bad(format!(
                "a message has more than {MAX_HEADERS} headers"
            )));
        }
        let name_len = take(&mut b, 1)?[0] as usize;
        let name = std::str::from_utf8(take(&mut b, name_len)?)
            .map_err(|_| bad("a header name is not UTF-8"))?
            .to_string();
        let ty = take(&mut b, 1)?[0];
        let fixed = |b: &mut &[u8], n: usize| take(b, n).map(|s| s.to_vec());
        let value = match ty {
            0 => HeaderValue::Bool(true),
            1 => HeaderValue::Bool(false),
            2 => HeaderValue::Byte(take(&mut b, 1)?[0] as i8),
            3 => HeaderValue::Short(i16::from_be_bytes(
                fixed(&mut b, 2)?.try_into().expect("2 bytes"),
            )),
            4 => HeaderValue::Int(i32::from_be_bytes(
                fixed(&mut b, 4)?.try_into().expect("4 bytes"),
            )),
            5 | 8 => {
                let v = i64::from_be_bytes(fixed(&mut b, 8)?.try_into().expect("8 bytes"));
                if ty == 5 {
                    HeaderValue::Long(v)
                } else {
                    HeaderValue::Timestamp(v)
                }
            }
            6 | 7 => {
                let len = take(&mut b, 2)?;
                let len = u16::from_be_bytes([len[0], len[1]]) as usize;
                let bytes = take(&mut b, len)?.to_vec();
                if ty == 6 {
                    HeaderValue::Bytes(bytes)
                } else {
                    HeaderValue::String(
                        String::from_utf8(bytes)
                            .map_err(|_| bad(format!("header {name} is not UTF-8")))?,
                    )
                }
            }
            9 => HeaderValue::Uuid(fixed(&mut b, 16)?.try_into().expect("16 bytes")),
            other => return Err(bad(format!("header {name} has unknown value type {other}"))),
        };
        out.push((name, value));
    }
    Ok(out)
}

/// Encodes one message (the simulator's and the tests' writer; the inverse of the decoder).
/// Header names longer than 255 bytes and string or byte values longer than 65535 bytes are
/// cut to fit.
pub fn encode(headers: &[(&str, HeaderValue)], payload: &[u8]) -> Vec<u8> {
    let mut h = Vec::new();
    for (name, value) in headers {
        let name = &name.as_bytes()[..name.len().min(255)];
        h.push(name.len() as u8);
        h.extend_from_slice(name);
        let var = |h: &mut Vec<u8>, ty: u8, bytes: &[u8]| {
            let bytes = &bytes[..bytes.len().min(u16::MAX as usize)];
            h.push(ty);
            h.extend_from_slice(&(bytes.len() as u16).to_be_bytes());
            h.extend_from_slice(bytes);
        };
        match value {
            HeaderValue::Bool(true) => h.push(0),
            HeaderValue::Bool(false) => h.push(1),
            HeaderValue::Byte(v) => h.extend([2, *v as u8]),
            HeaderValue::Short(v) => {
                h.push(3);
                h.extend_from_slice(&v.to_be_bytes());
            }
            HeaderValue::Int(v) => {
                h.push(4);
                h.extend_from_slice(&v.to_be_bytes());
            }
            HeaderValue::Long(v) => {
                h.push(5);
                h.extend_from_slice(&v.to_be_bytes());
            }
            HeaderValue::Bytes(v) => var(&mut h, 6, v),
            HeaderValue::String(v) => var(&mut h, 7, v.as_bytes()),
            HeaderValue::Timestamp(v) => {
                h.push(8);
                h.extend_from_slice(&v.to_be_bytes());
            }
            HeaderValue::Uuid(v) => {
                h.push(9);
                h.extend_from_slice(v);
            }
        }
    }
    let total = (MIN_MESSAGE_BYTES + h.len() + payload.len()) as u32;
    let mut out = Vec::with_capacity(total as usize);
    out.extend_from_slice(&total.to_be_bytes());
    out.extend_from_slice(&(h.len() as u32).to_be_bytes());
    let prelude_crc = crc32fast::hash(&out);
    out.extend_from_slice(&prelude_crc.to_be_bytes());
    out.extend_from_slice(&h);
    out.extend_from_slice(payload);
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_be_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn event(ty: &str, payload: &str) -> Vec<u8> {
        encode(
            &[
                (":event-type", HeaderValue::String(ty.into())),
                (
                    ":content-type",
                    HeaderValue::String("application/json".into()),
                ),
                (":message-type", HeaderValue::String("event".into())),
            ],
            payload.as_bytes(),
        )
    }

    fn decode_all(bytes: &[u8]) -> Result<Vec<Message>, DecodeError> {
        let mut d = EventStreamDecoder::new();
        let mut out = Vec::new();
        d.feed(bytes, &mut out)?;
        d.finish()?;
        Ok(out)
    }

    /// Known answer: the message without headers or payload is the `empty_message` vector of
    /// AWS's event stream encoding tests (base64 `AAAAEAAAAAAFwkjrfZjI/w==`): total 16,
    /// headers 0, prelude CRC-32 0x05C248EB, message CRC-32 0x7D98C8FF.
    #[test]
    fn the_empty_message_has_the_documented_crcs() {
        let bytes = encode(&[], b"");
        assert_eq!(
            bytes,
            [0, 0, 0, 0x10, 0, 0, 0, 0, 0x05, 0xc2, 0x48, 0xeb, 0x7d, 0x98, 0xc8, 0xff]
        );
        assert_eq!(
            decode_all(&bytes).unwrap(),
            [Message {
                headers: vec![],
                payload: vec![]
            }]
        );
    }

    #[test]
    fn every_header_type_round_trips() {
        let headers = [
            ("t", HeaderValue::Bool(true)),
            ("f", HeaderValue::Bool(false)),
            ("b", HeaderValue::Byte(-3)),
            ("s", HeaderValue::Short(-300)),
            ("i", HeaderValue::Int(70000)),
            ("l", HeaderValue::Long(-1 << 40)),
            ("y", HeaderValue::Bytes(vec![0, 255])),
            ("str", HeaderValue::String("é".into())),
            ("ts", HeaderValue::Timestamp(1_700_000_000_000)),
            ("u", HeaderValue::Uuid([7; 16])),
        ];
        let out = decode_all(&encode(&headers, b"{\"a\":1}")).unwrap();
        let want: Vec<(String, HeaderValue)> = (headers.iter())
            .map(|(n, v)| (n.to_string(), v.clone()))
            .collect();
        assert_eq!(out[0].headers, want);
        assert_eq!(out[0].payload, b"{\"a\":1}");
    }

    #[test]
    fn bad_crcs_lengths_and_headers_are_typed_failures() {
        let good = event("messageStart", r#"{"role":"assistant"}"#);
        let label = |bytes: &[u8]| decode_all(bytes).unwrap_err();
        let mut prelude = good.clone();
        prelude[9] ^= 1;
        assert!(label(&prelude).to_string().contains("prelude CRC"));
        let mut body = good.clone();
        body[20] ^= 1;
        assert!(label(&body).to_string().contains("message CRC"));
        let mut crc = good.clone();
        let n = crc.len();
        crc[n - 1] ^= 1;
        assert!(label(&crc).to_string().contains("message CRC"));
        // Lengths that cannot be: total below 16, headers longer than the message.
        for (total, headers) in [(8u32, 0u32), (16, 1), (40, 30)] {
            let mut b = total.to_be_bytes().to_vec();
            b.extend_from_slice(&headers.to_be_bytes());
            let c = crc32fast::hash(&b);
            b.extend_from_slice(&c.to_be_bytes());
            b.resize(total.max(16) as usize, 0);
            assert!(
                label(&b).to_string().contains("lengths"),
                "{total} {headers}"
            );
        }
        // A header of unknown type 12, with valid CRCs.
        let mut raw = vec![1, b'x', 12];
        raw.extend_from_slice(b"....");
        let total = (16 + raw.len()) as u32;
        let mut b = total.to_be_bytes().to_vec();
        b.extend_from_slice(&(raw.len() as u32).to_be_bytes());
        let c = crc32fast::hash(&b);
        b.extend_from_slice(&c.to_be_bytes());
        b.extend_from_slice(&raw);
        let c = crc32fast::hash(&b);
        b.extend_from_slice(&c.to_be_bytes());
        assert!(label(&b).to_string().contains("unknown value type 12"));
        // 10,000 headers (empty booleans, 2 bytes each): refused, not 10,000 allocations.
        let many: Vec<(String, HeaderValue)> = (0..10_000)
            .map(|_| (String::new(), HeaderValue::Bool(true)))
            .collect();
        let many: Vec<(&str, HeaderValue)> =
            many.iter().map(|(n, v)| (n.as_str(), v.clone())).collect();
        let e = label(&encode(&many, b"{}")).to_string();
        assert!(e.contains("more than 64 headers"), "{e}");
        let few = &many[..MAX_HEADERS];
        assert_eq!(
            decode_all(&encode(few, b"{}")).unwrap()[0].headers.len(),
            MAX_HEADERS
        );
        // Over the cap: refused at the prelude, before the bytes arrive.
        let mut d = EventStreamDecoder::with_max_message_bytes(20);
        let e = d.feed(&good[..12], &mut Vec::new()).unwrap_err();
        assert_eq!(e, DecodeError::TooLarge { limit: 20 });
        assert_eq!(d.feed(b"", &mut Vec::new()).unwrap_err(), e, "poisoned");
    }

    proptest! {
        /// Three messages split at every pair of offsets decode to the same messages; any
        /// prefix short of the end is a typed truncation at finish, never a panic.
        #[test]
        fn split_anywhere_same_messages(a in 0usize..400, b in 0usize..400) {
            let mut all = event("messageStart", r#"{"role":"assistant"}"#);
            all.extend(event("contentBlockDelta", r#"{"contentBlockIndex":0,"delta":{"text":"Hé"}}"#));
            all.extend(event("messageStop", r#"{"stopReason":"end_turn"}"#));
            let whole = decode_all(&all).unwrap();
            prop_assert_eq!(whole.len(), 3);
            let (a, b) = (a.min(all.len()), b.min(all.len()));
            let (a, b) = (a.min(b), a.max(b));
            let mut d = EventStreamDecoder::new();
            let mut out = Vec::new();
            for piece in [&all[..a], &all[a..b], &all[b..]] {
                d.feed(piece, &mut out).unwrap();
            }
            prop_assert_eq!(d.finish(), Ok(()));
            prop_assert_eq!(&out, &whole);
            // Truncated at b (< len): messages before the cut, then a typed failure.
            if b < all.len() {
                let mut d = EventStreamDecoder::new();
                let mut out = Vec::new();
                d.feed(&all[..b], &mut out).unwrap();
                let complete = out.len();
                prop_assert!(complete < 3);
                if d.pending_bytes() > 0 {
                    let bad_frame = matches!(d.finish(), Err(DecodeError::BadFrame { .. }));
                    prop_assert!(bad_frame, "a cut at {} is not a typed failure", b);
                }
            }
        }

        /// Arbitrary bytes, and a valid stream with one byte flipped, never panic; a flipped
        /// byte is always caught (CRC-32 detects every single-bit error).
        #[test]
        fn garbage_and_flips_never_panic(junk in proptest::collection::vec(any::<u8>(), 0..200),
                                         at in 0usize..200, bit in 0u8..8) {
            let _ = decode_all(&junk);
            let mut one = event("contentBlockDelta", r#"{"delta":{"text":"x"}}"#);
            let at = at % one.len();
            one[at] ^= 1 << bit;
            let r = decode_all(&one);
            prop_assert!(r.is_err(), "a flipped bit at {} went unnoticed", at);
        }
    }

    /// Every single split point of a whole Bedrock-like stream, one byte at a time too.
    #[test]
    fn every_split_point_and_byte_by_byte() {
        let mut all = event("messageStart", r#"{"role":"assistant"}"#);
        all.extend(event(
            "contentBlockDelta",
            r#"{"contentBlockIndex":0,"delta":{"text":"Hi"}}"#,
        ));
        all.extend(event(
            "metadata",
            r#"{"usage":{"inputTokens":3,"outputTokens":1},"metrics":{"latencyMs":12}}"#,
        ));
        let whole = decode_all(&all).unwrap();
        for cut in 0..=all.len() {
            let mut d = EventStreamDecoder::new();
            let mut out = Vec::new();
            d.feed(&all[..cut], &mut out).unwrap();
            d.feed(&all[cut..], &mut out).unwrap();
            d.finish().unwrap();
            assert_eq!(out, whole, "cut at {cut}");
        }
        let mut d = EventStreamDecoder::new();
        let mut out = Vec::new();
        for byte in &all {
            d.feed(std::slice::from_ref(byte), &mut out).unwrap();
        }
        assert_eq!(out, whole);
    }
}
