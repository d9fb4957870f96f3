//! Sans-IO decoding of an HTTP content coding (`Content-Encoding`, RFC 9110 §8.4): compressed
//! bytes in, the stream's own bytes out, one network read at a time.
//!
//! The probe asks for `Accept-Encoding: identity`; a server or proxy that compresses anyway
//! (gzip, deflate, br, zstd) is decoded here, so the events still reach the SSE / NDJSON decoder
//! as each compressed read arrives and keep that read's instant. A compressor that flushes per
//! event (gzip `Z_SYNC_FLUSH`, brotli and zstd flush) gives every event back in the read that
//! carried it; one that buffers delays the events exactly as it delays them for every client
//! (and the collapsed-stream check sees it).
//!
//! ```
//! use std::io::Write;
//! use llm_probe::decode::content::{Coding, ContentDecoder};
//!
//! let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
//! gz.write_all(b"data: [DONE]\n\n").unwrap();
//! gz.flush().unwrap();
//! let coded = gz.get_ref().clone();
//! let mut dec = ContentDecoder::new(Coding::parse("gzip").unwrap().unwrap());
//! let mut out = Vec::new();
//! dec.feed(&coded, &mut out).unwrap();
//! assert_eq!(out, b"data: [DONE]\n\n");
//! ```

use std::io::Write;

use super::DecodeError;

/// A content coding the probe decodes. `identity` (or no `Content-Encoding`) needs no decoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coding {
    /// `gzip` (also `x-gzip`, RFC 9110 §8.4.1.3).
    Gzip,
    /// `deflate`: a zlib stream (RFC 1950), or a raw deflate stream as some servers send.
    Deflate,
    /// `br`: Brotli (RFC 7932).
    Brotli,
    /// `zstd`: Zstandard (RFC 8878).
    Zstd,
}

impl Coding {
    /// The coding named by a `Content-Encoding` value: `Ok(None)` for none or `identity`,
    /// `Err(value)` for a coding the probe cannot decode (an unknown one, or several stacked,
    /// e.g. `gzip, br`), with the value trimmed and cut to 64 bytes for an error message.
    pub fn parse(value: &str) -> Result<Option<Coding>, String> {
        let v = value.trim().to_ascii_lowercase();
        match v.as_str() {
            "" | "identity" => Ok(None),
            "gzip" | "x-gzip" => Ok(Some(Coding::Gzip)),
            "deflate" => Ok(Some(Coding::Deflate)),
            "br" => Ok(Some(Coding::Brotli)),
            "zstd" => Ok(Some(Coding::Zstd)),
            _ => Err(v.chars().filter(|c| !c.is_control()).take(64).collect()),
        }
    }

    /// The coding's `Content-Encoding` token.
    pub fn as_str(self) -> &'static str {
        match self {
            Coding::Gzip => "gzip",
            Coding::Deflate => "deflate",
            Coding::Brotli => "br",
            Coding::Zstd => "zstd",
        }
    }
}

enum Inner {
    Gzip(flate2::write::GzDecoder<Vec<u8>>),
    /// Deflate before its first two bytes tell zlib from raw deflate.
    DeflateUndecided(Vec<u8>),
    Zlib(flate2::write::ZlibDecoder<Vec<u8>>),
    RawDeflate(flate2::write::DeflateDecoder<Vec<u8>>),
    Brotli(Box<brotli_decompressor::DecompressorWriter<Vec<u8>>>),
    Zstd(zstd::stream::write::Decoder<'static, Vec<u8>>),
}

/// Incremental decoder of one response body's content coding. After an error it is poisoned:
/// later calls return the same error.
pub struct ContentDecoder {
    coding: Coding,
    inner: Inner,
    poisoned: Option<DecodeError>,
}

impl std::fmt::Debug for ContentDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ContentDecoder")
            .field("coding", &self.coding)
            .finish_non_exhaustive()
    }
}

impl ContentDecoder {
    /// A decoder for a body coded with `coding`.
    pub fn new(coding: Coding) -> Self {
        let inner = match coding {
            Coding::Gzip => Inner::Gzip(flate2::write::GzDecoder::new(Vec::new())),
            Coding::Deflate => Inner::DeflateUndecided(Vec::new()),
            Coding::Brotli => Inner::Brotli(Box::new(
                brotli_decompressor::DecompressorWriter::new(Vec::new(), 4096),
            )),
            Coding::Zstd => match zstd::stream::write::Decoder::new(Vec::new()) {
                Ok(d) => Inner::Zstd(d),
                // Only an allocation failure inside libzstd; reported on the first feed.
                Err(e) => {
                    return ContentDecoder {
                        coding,
                        inner: Inner::DeflateUndecided(Vec::new()),
                        poisoned: Some(corrupt(coding, &e)),
                    }
                }
            },
        };
        ContentDecoder {
            coding,
            inner,
            poisoned: None,
        }
    }

    /// The coding this decoder undoes.
    pub fn coding(&self) -> Coding {
        self.coding
    }

    /// Decodes the bytes of one read and appends everything they complete to `out`.
    ///
    /// Errors: [`DecodeError::CorruptCoding`] when the bytes are not valid for the coding.
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<u8>) -> Result<(), DecodeError> {
        if let Some(e) = &self.poisoned {
            return Err(e.clone());
        }
        let result = self.feed_inner(bytes, out);
        if let Err(e) = &result {
            self.poisoned = Some(e.clone());
        }
        result
    }

    fn feed_inner(&mut self, bytes: &[u8], out: &mut Vec<u8>) -> Result<(), DecodeError> {
        if let Inner::DeflateUndecided(head) = &mut self.inner {
            head.extend_from_slice(bytes);
            if head.len() < 2 {
                return Ok(());
            }
            let head = std::mem::take(head);
            // RFC 1950 §2.2: CM = 8 and the header is a multiple of 31.
            let zlib = head[0] & 0x0f == 8 && u16::from_be_bytes([head[0], head[1]]) % 31 == 0;
            self.inner = if zlib {
                Inner::Zlib(flate2::write::ZlibDecoder::new(Vec::new()))
            } else {
                Inner::RawDeflate(flate2::write::DeflateDecoder::new(Vec::new()))
            };
            return self.feed_inner(&head, out);
        }
        let coding = self.coding;
        let written = match &mut self.inner {
            Inner::Gzip(d) => write_out(d, bytes, out, |d| d.get_mut()),
            Inner::Zlib(d) => write_out(d, bytes, out, |d| d.get_mut()),
            Inner::RawDeflate(d) => write_out(d, bytes, out, |d| d.get_mut()),
            Inner::Brotli(d) => write_out(d.as_mut(), bytes, out, |d| d.get_mut()),
            Inner::Zstd(d) => write_out(d, bytes, out, |d| d.get_mut()),
            Inner::DeflateUndecided(_) => Ok(()),
        };
        written.map_err(|e| corrupt(coding, &e))
    }
}

/// Writes `bytes` into the decoder `d`, flushes it, and moves what it produced to `out`.
fn write_out<D: Write>(
    d: &mut D,
    bytes: &[u8],
    out: &mut Vec<u8>,
    sink: impl Fn(&mut D) -> &mut Vec<u8>,
) -> std::io::Result<()> {
    d.write_all(bytes)?;
    d.flush()?;
    out.append(sink(d));
    Ok(())
}

fn corrupt(coding: Coding, e: &std::io::Error) -> DecodeError {
    DecodeError::CorruptCoding {
        coding: coding.as_str(),
        detail: e.to_string().chars().take(120).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codings_are_parsed_and_unknown_or_stacked_ones_named() {
        assert_eq!(Coding::parse(" GZIP "), Ok(Some(Coding::Gzip)));
        assert_eq!(Coding::parse("x-gzip"), Ok(Some(Coding::Gzip)));
        assert_eq!(Coding::parse("identity"), Ok(None));
        assert_eq!(Coding::parse("br"), Ok(Some(Coding::Brotli)));
        assert_eq!(Coding::parse("gzip, br"), Err("gzip, br".to_string()));
        assert_eq!(Coding::parse("compress\u{1b}"), Err("compress".to_string()));
    }

    #[test]
    fn deflate_reads_zlib_and_raw_split_anywhere() {
        let text = b"data: {\"a\":1}\n\n".repeat(20);
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
        z.write_all(&text).unwrap();
        let zlib = z.finish().unwrap();
        let mut r = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
        r.write_all(&text).unwrap();
        let raw = r.finish().unwrap();
        for coded in [zlib, raw] {
            for k in 0..coded.len() {
                let mut d = ContentDecoder::new(Coding::Deflate);
                let mut out = Vec::new();
                d.feed(&coded[..k], &mut out).unwrap();
                d.feed(&coded[k..], &mut out).unwrap();
                assert_eq!(out, text, "split at {k}");
            }
        }
    }

    #[test]
    fn garbage_is_a_corrupt_coding_that_names_it() {
        for coding in [Coding::Gzip, Coding::Brotli, Coding::Zstd] {
            let mut d = ContentDecoder::new(coding);
            let err = d
                .feed(
                    b"<!DOCTYPE html><html>not compressed</html>",
                    &mut Vec::new(),
                )
                .unwrap_err();
            assert!(
                matches!(&err, DecodeError::CorruptCoding { coding: c, .. } if *c == coding.as_str()),
                "{err:?}"
            );
            assert_eq!(d.feed(b"x", &mut Vec::new()), Err(err), "poisoned");
        }
    }
}
