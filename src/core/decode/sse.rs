//! Server-Sent Events decoder, following the WHATWG HTML "event stream" rules as restated in
//! docs/protocols.md, "Server-sent events, exactly" (rule numbers below refer to that list).
//!
//! Feed it the bytes of each network read with [`SseDecoder::feed`]; it pushes every event whose
//! terminating blank line has arrived. At end of stream call [`SseDecoder::finish`] to learn what
//! was left over (rule 9).
//!
//! ```
//! use llm_probe::decode::sse::{SseDecoder, SseEvent};
//!
//! let mut dec = SseDecoder::new();
//! let mut out = Vec::new();
//! dec.feed(b"event: ping\ndata:{\"a\"", &mut out).unwrap();
//! assert!(out.is_empty());
//! dec.feed(b":1}\r\n\r\ndata: [DONE]\n", &mut out).unwrap();
//! assert_eq!(out, vec![SseEvent { event: Some("ping".into()), data: "{\"a\":1}".into(), id: None }]);
//! let trailing = dec.finish();
//! assert_eq!(trailing.bytes, "data: [DONE]\n".len());
//! assert_eq!(trailing.pending.unwrap().data, "[DONE]");
//! ```

use super::{DecodeError, DEFAULT_MAX_EVENT_BYTES};

/// The UTF-8 byte order mark, stripped once at the very start of a stream (rule 1).
const BOM: [u8; 3] = [0xEF, 0xBB, 0xBF];

/// One dispatched SSE event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// `event:` field; None when absent (the WHATWG default type "message").
    pub event: Option<String>,
    /// The data lines joined with '\n' (never empty for a dispatched event).
    pub data: String,
    /// The last event ID seen so far (`id:` persists across events, per WHATWG).
    pub id: Option<String>,
}

/// What was left at end of stream, returned by [`SseDecoder::finish`] (docs/protocols.md, "Server-sent events, exactly", rule 9).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Trailing {
    /// Bytes received after the last dispatched event (or after the last blank line) that did not form a dispatched event. 0 = clean end.
    pub bytes: usize,
    /// The event those bytes would have formed had a blank line followed (the unterminated last line processed too), if it has data. Lets callers judge e.g. an unterminated `data: [DONE]` as harmless.
    pub pending: Option<SseEvent>,
}

/// Most data buffers an [`SseDecoder`] keeps for reuse: enough for the events of one read.
const SPARE_BUFFERS: usize = 8;

/// Largest data buffer an [`SseDecoder`] keeps for reuse (token events are far smaller; a rare
/// large event's buffer is freed rather than held for the rest of the stream).
const SPARE_CAPACITY: usize = 16 << 10;

/// Where the decoder stands on the optional leading byte order mark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bom {
    /// Still at the start of the stream; this many bytes of [`BOM`] matched so far (0..=2).
    Matching(u8),
    /// Decided: a BOM was stripped, or the stream does not start with one.
    Done,
}

/// Incremental, sans-IO SSE decoder. One decoder per stream.
///
/// Every input byte is scanned once: the bytes of an unterminated line are kept in a buffer and
/// only the new bytes of each read are searched for line terminators (rule 10). A line longer
/// than the cap, or an event whose data grows past it, fails with [`DecodeError::TooLarge`].
#[derive(Debug, Clone)]
pub struct SseDecoder {
    /// Cap in bytes on one line (terminator excluded) and on one event's joined data.
    limit: usize,
    bom: Bom,
    /// Bytes of the current, not yet terminated line.
    line: Vec<u8>,
    /// The previous line ended with a CR as the last byte of a read: an LF at the start of the next
    /// read belongs to that terminator (CRLF) and must be skipped, not read as an empty line.
    skip_lf: bool,
    /// The data buffer of the event being built: `data:` values joined with '\n'.
    data: String,
    /// Emptied data buffers handed back by [`SseDecoder::recycle`], taken by the next events so
    /// that a stream's events do not each allocate one (at most [`SPARE_BUFFERS`]).
    spare: Vec<String>,
    /// Whether a `data:` line was seen for the event being built (so the next one is joined with '\n').
    has_data_line: bool,
    /// The event type buffer; None when absent or empty.
    event: Option<String>,
    /// The last event ID buffer; persists across events.
    last_id: Option<String>,
    /// Bytes consumed since the end of the last blank line.
    since_blank: usize,
    comments: u64,
    poisoned: Option<DecodeError>,
}

impl Default for SseDecoder {
    /// Same as [`SseDecoder::new`].
    fn default() -> Self {
        Self::new()
    }
}

impl SseDecoder {
    /// A decoder capping lines and event data at [`DEFAULT_MAX_EVENT_BYTES`] (1 MiB).
    pub fn new() -> Self {
        Self::with_max_event_bytes(DEFAULT_MAX_EVENT_BYTES)
    }

    /// A decoder capping one line (terminator excluded) and one event's joined data at `limit`
    /// bytes; anything larger fails with [`DecodeError::TooLarge`] (docs/protocols.md, "Server-sent events, exactly", rule 10).
    pub fn with_max_event_bytes(limit: usize) -> Self {
        SseDecoder {
            limit,
            bom: Bom::Matching(0),
            line: Vec::new(),
            skip_lf: false,
            data: String::new(),
            spare: Vec::new(),
            has_data_line: false,
            event: None,
            last_id: None,
            since_blank: 0,
            comments: 0,
            poisoned: None,
        }
    }

    /// Feed the bytes of one network read; complete events are pushed to `out` in order.
    /// After an error the decoder is poisoned: later calls return the same error.
    ///
    /// `bytes` may end anywhere: inside a line, inside a multi-byte character, between the CR and
    /// the LF of a CRLF. An event is pushed as soon as its terminating blank line is complete
    /// (a CR ends a line at once; an LF right after it, even in the next read, is skipped).
    ///
    /// Errors: [`DecodeError::TooLarge`] when a line or an event's data exceeds the cap,
    /// [`DecodeError::InvalidUtf8`] when a complete line is not UTF-8. Events completed before the
    /// offending line in the same call are still pushed to `out`.
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<SseEvent>) -> Result<(), DecodeError> {
        if let Some(err) = &self.poisoned {
            return Err(err.clone());
        }
        let result = self.feed_inner(bytes, out);
        if let Err(err) = &result {
            self.poisoned = Some(err.clone());
        }
        result
    }

    /// End of stream. Returns what was left over (rule 9). Does not dispatch it.
    ///
    /// `bytes` counts every byte after the last blank line (the unterminated last line included);
    /// `pending` is the event those bytes would have formed, if it has data. An unterminated last
    /// line that is a comment or not valid UTF-8 is counted but contributes nothing to `pending`.
    /// On a poisoned decoder it returns `Trailing::default()`: the error returned by `feed` is the
    /// report, and how many bytes preceded it would depend on how the reads were split.
    ///
    /// Afterwards the decoder is back at the start of a new stream (BOM, event and ID state
    /// cleared); the comment count, the cap and any poisoning are kept.
    pub fn finish(&mut self) -> Trailing {
        let mut trailing = Trailing::default();
        if self.poisoned.is_none() {
            if let Bom::Matching(matched) = self.bom {
                // A stream shorter than a BOM that starts like one: those bytes were a line.
                let matched = usize::from(matched);
                self.line.extend_from_slice(&BOM[..matched]);
                self.since_blank += matched;
            }
            let tail = std::mem::take(&mut self.line);
            if !tail.is_empty() && tail[0] != b':' {
                if let Ok(text) = std::str::from_utf8(&tail) {
                    // The only possible error is the data cap; nothing is dispatched here, so
                    // the pending event is reported as built (at most one line over the cap).
                    let _ = self.process_field(text);
                }
            }
            trailing.bytes = self.since_blank;
            if !self.data.is_empty() {
                trailing.pending = Some(SseEvent {
                    event: self.event.take(),
                    data: std::mem::take(&mut self.data),
                    id: self.last_id.clone(),
                });
            }
        }
        *self = SseDecoder {
            comments: self.comments,
            poisoned: self.poisoned.take(),
            ..SseDecoder::with_max_event_bytes(self.limit)
        };
        trailing
    }

    /// Hands back the `data` of a dispatched event once its reader is done with it: a later
    /// event's data is built in that buffer instead of a new allocation (at most 8 buffers of
    /// up to 16 KiB are kept; others are dropped). Optional; the decoder's output does not
    /// depend on it.
    pub fn recycle(&mut self, mut data: String) {
        let capacity = data.capacity();
        if self.spare.len() < SPARE_BUFFERS && capacity > 0 && capacity <= SPARE_CAPACITY {
            data.clear();
            self.spare.push(data);
        }
    }

    /// Number of comment lines (`:` keep-alives) seen so far.
    ///
    /// Counts complete lines starting with `:` (rule 4); an unterminated comment at end of stream
    /// is not counted.
    pub fn comments(&self) -> u64 {
        self.comments
    }

    fn feed_inner(&mut self, mut bytes: &[u8], out: &mut Vec<SseEvent>) -> Result<(), DecodeError> {
        if let Bom::Matching(matched) = self.bom {
            let mut matched = usize::from(matched);
            while matched < BOM.len() {
                match bytes.first() {
                    None => {
                        // Still undecided; remember how far the BOM matched.
                        self.bom = Bom::Matching(matched as u8);
                        return Ok(());
                    }
                    Some(&b) if b == BOM[matched] => {
                        matched += 1;
                        bytes = &bytes[1..];
                    }
                    Some(_) => break,
                }
            }
            self.bom = Bom::Done;
            // A stripped BOM is not stream content: it does not count as trailing bytes.
            if matched > 0 && matched < BOM.len() {
                // Not a BOM after all: the bytes held back are ordinary stream bytes.
                self.scan(&BOM[..matched], out)?;
            }
        }
        self.scan(bytes, out)
    }

    /// Split `bytes` into lines, continuing the buffered partial line, and process each line.
    fn scan(&mut self, mut bytes: &[u8], out: &mut Vec<SseEvent>) -> Result<(), DecodeError> {
        if self.skip_lf {
            if let Some(&first) = bytes.first() {
                self.skip_lf = false;
                if first == b'\n' {
                    bytes = &bytes[1..];
                    // The LF is part of the previous line's terminator; it belongs to the
                    // trailing count only if that line was not blank (which reset the count).
                    if self.since_blank > 0 {
                        self.since_blank += 1;
                    }
                }
            }
        }
        while let Some(pos) = memchr::memchr2(b'\r', b'\n', bytes) {
            let mut consumed = pos + 1;
            if bytes[pos] == b'\r' {
                match bytes.get(pos + 1) {
                    Some(b'\n') => consumed += 1,
                    Some(_) => {}
                    None => self.skip_lf = true,
                }
            }
            if self.line.len() + pos > self.limit {
                return Err(DecodeError::TooLarge { limit: self.limit });
            }
            self.since_blank += consumed;
            if self.line.is_empty() {
                self.process_line(&bytes[..pos], out)?;
            } else {
                let mut line = std::mem::take(&mut self.line);
                line.extend_from_slice(&bytes[..pos]);
                let result = self.process_line(&line, out);
                line.clear();
                self.line = line; // keep the allocation
                result?;
            }
            bytes = &bytes[consumed..];
        }
        if self.line.len() + bytes.len() > self.limit {
            return Err(DecodeError::TooLarge { limit: self.limit });
        }
        self.line.extend_from_slice(bytes);
        self.since_blank += bytes.len();
        Ok(())
    }

    /// Process one complete line (terminator removed): rules 3–8.
    fn process_line(&mut self, line: &[u8], out: &mut Vec<SseEvent>) -> Result<(), DecodeError> {
        if line.is_empty() {
            self.since_blank = 0;
            self.dispatch(out);
            return Ok(());
        }
        let text = std::str::from_utf8(line).map_err(|_| DecodeError::InvalidUtf8)?;
        if text.starts_with(':') {
            self.comments += 1;
            return Ok(());
        }
        self.process_field(text)
    }

    /// Apply one `field:value` line (rules 5–7). `text` is non-empty and not a comment.
    fn process_field(&mut self, text: &str) -> Result<(), DecodeError> {
        let (field, value) = match text.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (text, ""),
        };
        match field {
            "data" => {
                if self.has_data_line {
                    self.data.push('\n');
                }
                self.has_data_line = true;
                self.data.push_str(value);
                if self.data.len() > self.limit {
                    return Err(DecodeError::TooLarge { limit: self.limit });
                }
            }
            "event" => self.event = (!value.is_empty()).then(|| value.to_owned()),
            // An ID containing NUL is ignored (WHATWG); an empty one resets the last event ID.
            "id" if !value.contains('\0') => {
                self.last_id = (!value.is_empty()).then(|| value.to_owned());
            }
            // `retry:` (digits only, reconnection delay in ms) matters only to clients that
            // reconnect; the probe never does, so the field is accepted and ignored.
            "retry" => {}
            _ => {}
        }
        Ok(())
    }

    /// A blank line: dispatch the event being built if its data is non-empty (rule 8), then reset
    /// the data and event type buffers (the last event ID persists).
    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        self.has_data_line = false;
        let event = self.event.take();
        if self.data.is_empty() {
            return;
        }
        let next = self.spare.pop().unwrap_or_default();
        out.push(SseEvent {
            event,
            data: std::mem::replace(&mut self.data, next),
            id: self.last_id.clone(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recycling_keeps_a_few_small_buffers_and_builds_the_next_events_in_them() {
        let mut dec = SseDecoder::new();
        for _ in 0..SPARE_BUFFERS + 2 {
            dec.recycle(String::with_capacity(64));
        }
        dec.recycle(String::with_capacity(SPARE_CAPACITY + 1));
        dec.recycle(String::new());
        assert_eq!(dec.spare.len(), SPARE_BUFFERS);

        let mut dec = SseDecoder::new();
        dec.recycle(String::with_capacity(SPARE_CAPACITY + 1));
        assert!(dec.spare.is_empty());
        let mut used = String::with_capacity(64);
        used.push_str("left over");
        dec.recycle(used);
        let mut out = Vec::new();
        dec.feed(b"data: a\n\ndata: b\n\n", &mut out).unwrap();
        assert_eq!(out[0].data, "a");
        // The second event was built in the recycled buffer, emptied first.
        assert_eq!(out[1].data, "b");
        assert_eq!(out[1].data.capacity(), 64);
    }
}
