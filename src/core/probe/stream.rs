//! The sans-IO half of a probe: the bytes of each network read, stamped with the instant the read
//! returned, go through the protocol's decoder (SSE, NDJSON or AWS's binary event stream) to its
//! adapter, which writes the [`Observations`]. No clock is read and no IO is done here, so the whole path from bytes to
//! observations is tested on byte strings (`tests/fast/protocols/streams.rs`), split any way.

use std::time::Instant;

use crate::config::Protocol;
use crate::decode::content::{Coding, ContentDecoder};
use crate::decode::eventstream::{EventStreamDecoder, Message};
use crate::decode::ndjson::NdjsonDecoder;
use crate::decode::sse::{SseDecoder, SseEvent};
use crate::measure::{Anomaly, Failure, FailureReason, Observations};
use crate::protocol::{self, Flow, Framing, StreamProtocol};

use super::{body, errors, Limits};

enum Decoder {
    Sse(SseDecoder),
    Ndjson(NdjsonDecoder, Vec<String>),
    EventStream(EventStreamDecoder, Vec<Message>),
}

/// Leading body bytes kept for the detail of a "not an event stream" failure.
const HEAD_BYTES: usize = 512;

/// Decoder + protocol adapter of one probe's stream.
pub struct StreamReader {
    decoder: Decoder,
    adapter: Box<dyn StreamProtocol>,
    events: Vec<SseEvent>,
    max_token_events: usize,
    /// The response's content coding, when the server applied one.
    content: Option<ContentDecoder>,
    /// Scratch buffer for the decoded bytes of one read.
    plain: Vec<u8>,
    /// The protocol's terminal event (or an error event) was seen: later events are only
    /// checked for leftovers.
    ended: bool,
    /// Something of the protocol's framing arrived: an SSE event or comment, an NDJSON line
    /// that looks like JSON, or an event-stream message.
    framed: bool,
    /// The binary event stream's first message did not decode and nothing of the framing came
    /// before it: the body is something else, whose head is being collected for the detail.
    unframed: bool,
    /// The first [`HEAD_BYTES`] of the (decoded) body.
    head: Vec<u8>,
    /// Bytes the content decoder produced so far, and their cap (the per-probe byte cap).
    decoded: u64,
    max_decoded: u64,
    /// The response's status and content type, for a "not an event stream" detail.
    status: u16,
    content_type: String,
}

impl StreamReader {
    /// A reader for one stream of `protocol`, with the per-event and token-event caps of
    /// `limits` (the byte cap per probe is the caller's).
    pub fn new(protocol: Protocol, limits: &Limits) -> Self {
        let adapter = protocol::stream_for(protocol);
        let decoder = match adapter.framing() {
            Framing::Sse => Decoder::Sse(SseDecoder::with_max_event_bytes(limits.max_event_bytes)),
            Framing::Ndjson => Decoder::Ndjson(
                NdjsonDecoder::with_max_line_bytes(limits.max_event_bytes),
                Vec::new(),
            ),
            Framing::EventStream => Decoder::EventStream(
                EventStreamDecoder::with_max_message_bytes(limits.max_event_bytes),
                Vec::new(),
            ),
        };
        StreamReader {
            decoder,
            adapter,
            events: Vec::new(),
            max_token_events: limits.max_token_events,
            content: None,
            plain: Vec::new(),
            ended: false,
            framed: false,
            unframed: false,
            head: Vec::new(),
            decoded: 0,
            max_decoded: limits.max_stream_bytes,
            status: 200,
            content_type: String::new(),
        }
    }

    /// What the response head said about the body: its status, `Content-Type` and
    /// `Content-Encoding` (`None` when absent). A content coding (gzip, deflate, br, zstd) is
    /// undone read by read, and recorded as [`Anomaly::CompressedStream`] when `unasked` (the
    /// probe asked for `identity`). Errors: a coding the probe cannot decode (`decode`, the
    /// detail names it).
    pub fn on_headers(
        &mut self,
        status: u16,
        content_type: &str,
        content_encoding: Option<&str>,
        unasked: bool,
        obs: &mut Observations,
    ) -> Result<(), Failure> {
        self.status = status;
        self.content_type = content_type.to_string();
        match Coding::parse(content_encoding.unwrap_or("")) {
            Ok(None) => Ok(()),
            Ok(Some(coding)) => {
                if unasked {
                    obs.anomaly(Anomaly::CompressedStream);
                }
                self.content = Some(ContentDecoder::new(coding));
                Ok(())
            }
            Err(name) => Err(Failure::new(
                FailureReason::Decode,
                format!(
                    "the server sent the stream with Content-Encoding \"{name}\", which the probe cannot decode (it asked for identity; gzip, deflate, br and zstd are decoded)"
                ),
            )),
        }
    }

    /// Feeds the bytes of one read that returned at `at`; every event the read completes gets
    /// `at`. Returns `Ok(true)` once the protocol's terminator (or an error event) ended the
    /// stream (`obs.timeline.ended` is then set to the instant of the read that carried it),
    /// `Ok(false)` to keep reading, or the failure (`decode`, `too_large`) that ends the probe.
    /// Bytes fed after the end are only checked: anything but a `[DONE]`, comments and blank
    /// lines is [`Anomaly::TrailingBytes`]; they never fail the probe. Decoded bytes (after a
    /// content coding) count against the per-probe byte cap too, so a compression bomb is
    /// `too_large`.
    pub fn feed(
        &mut self,
        bytes: &[u8],
        at: Instant,
        obs: &mut Observations,
    ) -> Result<bool, Failure> {
        let mut plain = std::mem::take(&mut self.plain);
        plain.clear();
        let bytes = match &mut self.content {
            None => bytes,
            Some(c) => {
                // In small pieces, so that one read of a compression bomb stops at the cap.
                let mut result = Ok(());
                for piece in bytes.chunks(1024) {
                    result = c.feed(piece, &mut plain);
                    if result.is_err() || self.decoded + plain.len() as u64 > self.max_decoded {
                        break;
                    }
                }
                self.decoded += plain.len() as u64;
                match result {
                    Err(_) if self.ended => {
                        obs.anomaly(Anomaly::TrailingBytes);
                        self.plain = plain;
                        return Ok(true);
                    }
                    Err(e) => return Err(errors::decode(e)),
                    Ok(()) if self.decoded > self.max_decoded && !self.ended => {
                        return Err(Failure::new(
                            FailureReason::TooLarge,
                            format!(
                                "the {}-coded stream decoded to more than {} bytes",
                                c.coding().as_str(),
                                self.max_decoded
                            ),
                        ));
                    }
                    Ok(()) => &plain[..],
                }
            }
        };
        let room = HEAD_BYTES.saturating_sub(self.head.len()).min(bytes.len());
        self.head.extend_from_slice(&bytes[..room]);
        if self.unframed {
            self.plain = plain;
            return self.unframed_head(obs);
        }
        let decoded = match &mut self.decoder {
            Decoder::Sse(d) => d.feed(bytes, &mut self.events),
            Decoder::Ndjson(d, lines) => {
                let r = d.feed(bytes, lines);
                self.events.extend(lines.drain(..).map(ndjson_event));
                r
            }
            Decoder::EventStream(d, messages) => {
                let fed = d.feed(bytes, messages);
                // Messages before one whose payload is not UTF-8 are interpreted; that one
                // fails the stream like a bad frame at the same place would.
                let mut converted = Ok(());
                for msg in messages.drain(..) {
                    match protocol::eventstream_event(msg) {
                        Ok(e) if converted.is_ok() => self.events.push(e),
                        Ok(_) => {}
                        Err(e) => converted = converted.and(Err(e)),
                    }
                }
                converted.and(fed)
            }
        };
        self.plain = plain;
        // Events completed before a decoding error are interpreted first, so that the outcome
        // does not depend on where the reads happened to split the stream.
        let mut events = std::mem::take(&mut self.events);
        let interpreted = self.interpret(&mut events, at, obs);
        events.clear();
        self.events = events;
        interpreted?;
        match decoded {
            Ok(()) => {}
            Err(_) if self.ended => obs.anomaly(Anomaly::TrailingBytes),
            // Not a single event-stream prelude: the server answered with something else (an
            // HTML page, a JSON error), named as such rather than as a bad frame. A first frame
            // whose prelude CRC matched but whose lengths or headers do not fit is a bad frame.
            Err(crate::decode::DecodeError::BadFrame { .. })
                if !self.framed
                    && matches!(&self.decoder, Decoder::EventStream(d, _) if !d.framed()) =>
            {
                self.unframed = true;
                return self.unframed_head(obs);
            }
            Err(e) => return Err(errors::decode(e)),
        }
        Ok(self.ended)
    }

    /// A body that is no binary event stream: read on until [`HEAD_BYTES`] of it are kept (or
    /// the body ends, [`StreamReader::finish`]), then fail as not an event stream with that head.
    fn unframed_head(&mut self, obs: &mut Observations) -> Result<bool, Failure> {
        if self.head.len() < HEAD_BYTES {
            return Ok(false);
        }
        Err(body::not_a_stream(
            self.status,
            &self.content_type,
            &self.head,
            obs,
        ))
    }

    /// Hands `events` to the adapter until the end; checks the ones after it.
    fn interpret(
        &mut self,
        events: &mut Vec<SseEvent>,
        at: Instant,
        obs: &mut Observations,
    ) -> Result<(), Failure> {
        for event in events.drain(..) {
            let result = self.interpret_one(&event, at, obs);
            // The event's buffer goes back to the decoder for a later event's data.
            if let Decoder::Sse(d) = &mut self.decoder {
                d.recycle(event.data);
            }
            result?;
        }
        Ok(())
    }

    /// One event of [`StreamReader::interpret`].
    fn interpret_one(
        &mut self,
        event: &SseEvent,
        at: Instant,
        obs: &mut Observations,
    ) -> Result<(), Failure> {
        if self.ended {
            if !self.adapter.is_benign_after_end(event) {
                obs.anomaly(Anomaly::TrailingBytes);
            }
            return Ok(());
        }
        self.frame(event, obs)?;
        match self.adapter.on_event(event, at, obs) {
            Flow::Continue => {}
            Flow::Done => {
                obs.timeline.ended = Some(at);
                self.ended = true;
            }
            Flow::Fail(f) => return Err(f),
        }
        if obs.timeline.token_events.len() > self.max_token_events {
            return Err(Failure::new(
                FailureReason::TooLarge,
                format!("more than {} token events", self.max_token_events),
            ));
        }
        Ok(())
    }

    /// Notes that `event` (before the end) shows the protocol's framing; a first event that is
    /// a whole non-streamed answer fails the probe as not an event stream.
    fn frame(&mut self, event: &SseEvent, obs: &mut Observations) -> Result<(), Failure> {
        let json = looks_like_json(&event.data);
        if !self.framed && json {
            let first = serde_json::from_str::<serde_json::Value>(&event.data);
            if first.is_ok_and(|v| body::is_whole_answer(&v)) {
                return Err(body::not_a_stream(
                    self.status,
                    &self.content_type,
                    event.data.as_bytes(),
                    obs,
                ));
            }
        }
        self.framed |= json || matches!(self.decoder, Decoder::Sse(_) | Decoder::EventStream(..));
        Ok(())
    }

    /// The body ended at `at`: closed cleanly, or (after the end) no longer waited for.
    ///
    /// After the end, what is left unterminated is checked as [`StreamReader::feed`] checks
    /// events after the end. Before it: SSE: an unterminated event that is the protocol's
    /// harmless terminator (`data: [DONE]` without its blank line) counts as the terminator;
    /// other leftovers are trailing bytes. NDJSON: a last line without its newline is a complete
    /// document and is interpreted (stamped `at`, the read that completed it); one that does not
    /// parse is trailing bytes. Then a body in which nothing of the protocol's framing arrived
    /// (an HTML page, a whole JSON completion, plain text) is not an event stream
    /// (`decode`, or `stream_error` for a JSON error object; the detail names the content type
    /// and what came back); without a terminator, a finish reason still ends the stream
    /// (anomaly `missing_terminator`, unless the protocol ends on close,
    /// [`StreamProtocol::ends_on_close`]); with neither, the stream was cut short (`truncated`).
    pub fn finish(mut self, at: Instant, obs: &mut Observations) -> Result<(), Failure> {
        if self.unframed {
            return Err(body::not_a_stream(
                self.status,
                &self.content_type,
                &self.head,
                obs,
            ));
        }
        let ended = self.ended;
        match &mut self.decoder {
            Decoder::Sse(d) => {
                let trailing = d.finish();
                self.framed |= d.comments() > 0 || trailing.pending.is_some();
                match &trailing.pending {
                    Some(ev) if ended && self.adapter.is_benign_after_end(ev) => {}
                    Some(ev) if !ended && self.adapter.is_terminator(ev) => {
                        self.framed = true;
                        obs.terminated = true;
                    }
                    _ if trailing.bytes > 0 => obs.anomaly(Anomaly::TrailingBytes),
                    _ => {}
                }
            }
            Decoder::EventStream(d, _) => {
                // Bytes of an incomplete message: after the end they are trailing bytes; before
                // it, the stream was cut inside a frame (checked below like any cut).
                if d.finish().is_err() {
                    obs.anomaly(Anomaly::TrailingBytes);
                }
            }
            Decoder::Ndjson(d, _) => {
                if let Some(line) = d.finish() {
                    let event = ndjson_event(line);
                    if ended {
                        if !self.adapter.is_benign_after_end(&event) {
                            obs.anomaly(Anomaly::TrailingBytes);
                        }
                    } else {
                        self.frame(&event, obs)?;
                        match self.adapter.on_event(&event, at, obs) {
                            Flow::Continue | Flow::Done => {}
                            Flow::Fail(_) => obs.anomaly(Anomaly::TrailingBytes),
                        }
                    }
                }
            }
        }
        if ended {
            return Ok(());
        }
        if obs.stream_error.is_some() {
            obs.timeline.ended = Some(at);
            return Ok(());
        }
        if obs.terminated || obs.finished {
            if !obs.terminated && self.adapter.ends_on_close() {
                obs.terminated = true;
            } else if !obs.terminated {
                obs.anomaly(Anomaly::MissingTerminator);
            }
            obs.timeline.ended = Some(at);
            Ok(())
        } else if !self.framed {
            // Nothing of the stream's framing came, not even a keep-alive: the server answered
            // with something else (an empty body included: a clean end, not a cut).
            obs.anomalies
                .retain(|a| *a != Anomaly::TrailingBytes && *a != Anomaly::NonJsonData);
            Err(body::not_a_stream(
                self.status,
                &self.content_type,
                &self.head,
                obs,
            ))
        } else {
            Err(Failure::new(
                FailureReason::Truncated,
                format!(
                    "the server closed the stream after {} token events without a terminator or finish reason",
                    obs.timeline.token_events.len()
                ),
            ))
        }
    }
}

/// Whether an NDJSON line could be one of the stream's documents.
fn looks_like_json(data: &str) -> bool {
    matches!(data.trim_start().as_bytes().first(), Some(b'{' | b'['))
}

/// An NDJSON line as the adapter sees it.
fn ndjson_event(line: String) -> SseEvent {
    SseEvent {
        event: None,
        data: line,
        id: None,
    }
}
