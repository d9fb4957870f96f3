//! The sans-IO half of a probe: the bytes of each network read, stamped with the instant the read
//! returned, go through the protocol's decoder (SSE or NDJSON) to its adapter, which writes the
//! [`Observations`]. No clock is read and no IO is done here, so the whole path from bytes to
//! observations is tested on byte strings (`tests/protocols.rs`), split any way.

use std::time::Instant;

use crate::config::Protocol;
use crate::decode::ndjson::NdjsonDecoder;
use crate::decode::sse::{SseDecoder, SseEvent};
use crate::measure::{Anomaly, Failure, FailureReason, Observations};
use crate::protocol::{self, Flow, Framing, StreamProtocol};

use super::{errors, Limits};

enum Decoder {
    Sse(SseDecoder),
    Ndjson(NdjsonDecoder, Vec<String>),
}

/// Decoder + protocol adapter of one probe's stream.
pub struct StreamReader {
    decoder: Decoder,
    adapter: Box<dyn StreamProtocol>,
    events: Vec<SseEvent>,
    max_token_events: usize,
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
        };
        StreamReader {
            decoder,
            adapter,
            events: Vec::new(),
            max_token_events: limits.max_token_events,
        }
    }

    /// Feeds the bytes of one read that returned at `at`; every event the read completes gets
    /// `at`. Returns `Ok(true)` when the protocol's terminator (or an error event) ended the
    /// stream (`obs.timeline.ended` is then set to `at`), `Ok(false)` to keep reading, or the
    /// failure (`decode`, `too_large`) that ends the probe.
    pub fn feed(
        &mut self,
        bytes: &[u8],
        at: Instant,
        obs: &mut Observations,
    ) -> Result<bool, Failure> {
        let decoded = match &mut self.decoder {
            Decoder::Sse(d) => d.feed(bytes, &mut self.events),
            Decoder::Ndjson(d, lines) => {
                let r = d.feed(bytes, lines);
                self.events.extend(lines.drain(..).map(ndjson_event));
                r
            }
        };
        // Events completed before a decoding error are interpreted first, so that the outcome
        // does not depend on where the reads happened to split the stream.
        for event in self.events.drain(..) {
            match self.adapter.on_event(&event, at, obs) {
                Flow::Continue => {}
                Flow::Done => {
                    obs.timeline.ended = Some(at);
                    return Ok(true);
                }
                Flow::Fail(f) => return Err(f),
            }
            if obs.timeline.token_events.len() > self.max_token_events {
                return Err(Failure::new(
                    FailureReason::TooLarge,
                    format!("more than {} token events", self.max_token_events),
                ));
            }
        }
        decoded.map_err(errors::decode)?;
        Ok(false)
    }

    /// A clean close at `at`. SSE: an unterminated event that is the protocol's harmless
    /// terminator (`data: [DONE]` without its blank line) counts as the terminator; other
    /// leftovers are trailing bytes. NDJSON: a last line without its newline is a complete
    /// document and is interpreted (stamped `at`, the read that completed it); one that does not
    /// parse is trailing bytes. Then, without a terminator, a finish reason still ends the
    /// stream (anomaly `missing_terminator`); with neither, the stream was cut short
    /// (`truncated`).
    pub fn finish(mut self, at: Instant, obs: &mut Observations) -> Result<(), Failure> {
        match &mut self.decoder {
            Decoder::Sse(d) => {
                let trailing = d.finish();
                match &trailing.pending {
                    Some(ev) if self.adapter.is_terminator(ev) => obs.terminated = true,
                    _ if trailing.bytes > 0 => obs.anomaly(Anomaly::TrailingBytes),
                    _ => {}
                }
            }
            Decoder::Ndjson(d, _) => {
                if let Some(line) = d.finish() {
                    match self.adapter.on_event(&ndjson_event(line), at, obs) {
                        Flow::Continue | Flow::Done => {}
                        Flow::Fail(_) => obs.anomaly(Anomaly::TrailingBytes),
                    }
                }
            }
        }
        if obs.stream_error.is_some() {
            obs.timeline.ended = Some(at);
            return Ok(());
        }
        if obs.terminated || obs.finished {
            if !obs.terminated {
                obs.anomaly(Anomaly::MissingTerminator);
            }
            obs.timeline.ended = Some(at);
            Ok(())
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

/// An NDJSON line as the adapter sees it.
fn ndjson_event(line: String) -> SseEvent {
    SseEvent {
        event: None,
        data: line,
        id: None,
    }
}
