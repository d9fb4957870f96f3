//! Newline-delimited JSON splitter for Ollama's native streams (`/api/chat`, `/api/generate`):
//! one JSON document per line (docs/protocols.md). This module only frames lines; parsing the JSON
//! is the caller's job.
//!
//! ```
//! use llm_probe::decode::ndjson::NdjsonDecoder;
//!
//! let mut dec = NdjsonDecoder::new();
//! let mut out = Vec::new();
//! dec.feed(b"{\"response\":\"Hi\"}\r\n\n{\"done\":", &mut out).unwrap();
//! assert_eq!(out, vec!["{\"response\":\"Hi\"}".to_string()]);
//! dec.feed(b"true}", &mut out).unwrap();
//! assert_eq!(dec.finish().as_deref(), Some("{\"done\":true}"));
//! ```

use super::{DecodeError, DEFAULT_MAX_EVENT_BYTES};

/// Incremental, sans-IO NDJSON line splitter. One decoder per stream.
///
/// Only LF ends a line (a CR right before it is stripped; a lone CR is an ordinary byte). Every
/// input byte is scanned once; a line longer than the cap (bytes before the LF, a CR included)
/// fails with [`DecodeError::TooLarge`].
#[derive(Debug, Clone)]
pub struct NdjsonDecoder {
    /// Cap in bytes on one line, LF excluded.
    limit: usize,
    /// Bytes of the current, not yet terminated line.
    line: Vec<u8>,
    poisoned: Option<DecodeError>,
}

impl Default for NdjsonDecoder {
    /// Same as [`NdjsonDecoder::new`].
    fn default() -> Self {
        Self::new()
    }
}

/// Whether a line (CR already stripped) holds nothing but JSON whitespace.
fn is_blank(line: &[u8]) -> bool {
    line.iter().all(|b| matches!(b, b' ' | b'\t' | b'\r'))
}

impl NdjsonDecoder {
    /// A decoder capping one line at [`DEFAULT_MAX_EVENT_BYTES`] (1 MiB).
    pub fn new() -> Self {
        Self::with_max_line_bytes(DEFAULT_MAX_EVENT_BYTES)
    }

    /// A decoder capping one line (bytes before the LF) at `limit` bytes; a longer line fails
    /// with [`DecodeError::TooLarge`].
    pub fn with_max_line_bytes(limit: usize) -> Self {
        NdjsonDecoder {
            limit,
            line: Vec::new(),
            poisoned: None,
        }
    }

    /// Complete non-blank lines (LF or CRLF terminated, CR stripped, blank lines skipped) pushed as Strings.
    ///
    /// `bytes` is one network read and may end anywhere, inside a multi-byte character included.
    /// Lines made only of spaces, tabs and CRs count as blank. After an error the decoder is
    /// poisoned: later calls return the same error.
    ///
    /// Errors: [`DecodeError::TooLarge`] when a line exceeds the cap, [`DecodeError::InvalidUtf8`]
    /// when a complete line is not UTF-8. Lines completed before the offending one in the same
    /// call are still pushed to `out`.
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<String>) -> Result<(), DecodeError> {
        if let Some(err) = &self.poisoned {
            return Err(err.clone());
        }
        let result = self.scan(bytes, out);
        if let Err(err) = &result {
            self.poisoned = Some(err.clone());
        }
        result
    }

    /// End of stream: returns the unterminated last line, if any (a final line without '\n' is common; the caller decides).
    ///
    /// A trailing CR is stripped and a blank last line gives None, as in [`NdjsonDecoder::feed`].
    /// Since nothing more can complete it, a last line that is not valid UTF-8 is returned with
    /// U+FFFD replacements (the JSON parse will then fail visibly). None on a poisoned decoder.
    /// Afterwards the decoder is empty and ready for a new stream (the cap and any poisoning kept).
    pub fn finish(&mut self) -> Option<String> {
        let mut line = std::mem::take(&mut self.line);
        if self.poisoned.is_some() {
            return None;
        }
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        if is_blank(&line) {
            return None;
        }
        Some(match String::from_utf8(line) {
            Ok(text) => text,
            Err(err) => String::from_utf8_lossy(err.as_bytes()).into_owned(),
        })
    }

    fn scan(&mut self, mut bytes: &[u8], out: &mut Vec<String>) -> Result<(), DecodeError> {
        while let Some(pos) = memchr::memchr(b'\n', bytes) {
            if self.line.len() + pos > self.limit {
                return Err(DecodeError::TooLarge { limit: self.limit });
            }
            let line: &[u8] = if self.line.is_empty() {
                &bytes[..pos]
            } else {
                self.line.extend_from_slice(&bytes[..pos]);
                &self.line
            };
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if !is_blank(line) {
                let text = std::str::from_utf8(line).map_err(|_| DecodeError::InvalidUtf8)?;
                out.push(text.to_owned());
            }
            self.line.clear();
            bytes = &bytes[pos + 1..];
        }
        if self.line.len() + bytes.len() > self.limit {
            return Err(DecodeError::TooLarge { limit: self.limit });
        }
        self.line.extend_from_slice(bytes);
        Ok(())
    }
}
