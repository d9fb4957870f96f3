//! The protobuf `Metric` messages of the fast path, written straight into the body: the bytes
//! `prost` writes for prometheus-client's `io.prometheus.client` messages (fields in tag order,
//! proto3 defaults left out, packed repeated numbers), without building the messages first and
//! without `prost`'s repeated length passes over nested messages. Held equal to the
//! reference by `tests/fast/exporter/exposition_equivalence.rs`.

use std::time::SystemTime;

use crate::metrics::exemplars::Exemplar;
use crate::metrics::histogram::HistogramView;

const VARINT: u64 = 0;
const FIXED64: u64 = 1;
const LEN: u64 = 2;

/// Appends `v` as a base-128 varint.
pub fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn key(out: &mut Vec<u8>, field: u64, wire: u64) {
    varint(out, field << 3 | wire);
}

/// A `uint64`/`int64`/enum field, left out at 0.
fn uint(out: &mut Vec<u8>, field: u64, v: u64) {
    if v != 0 {
        key(out, field, VARINT);
        varint(out, v);
    }
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// A `double` field, left out at 0 (and −0, as `prost` does).
fn double(out: &mut Vec<u8>, field: u64, v: f64) {
    if v != 0.0 {
        key(out, field, FIXED64);
        out.extend_from_slice(&v.to_le_bytes());
    }
}

/// A `string` field, left out when empty.
fn string(out: &mut Vec<u8>, field: u64, s: &str) {
    if !s.is_empty() {
        key(out, field, LEN);
        varint(out, s.len() as u64);
        out.extend_from_slice(s.as_bytes());
    }
}

/// A nested message (or packed field) `field` whose bytes `body` appends: its length prefix is
/// reserved as one byte and widened afterwards if the message is longer than 127 bytes.
pub fn nested(out: &mut Vec<u8>, field: u64, body: impl FnOnce(&mut Vec<u8>)) {
    key(out, field, LEN);
    let at = out.len();
    out.push(0);
    body(out);
    let len = out.len() - at - 1;
    if len < 0x80 {
        out[at] = len as u8;
    } else {
        let mut prefix = Vec::with_capacity(3);
        varint(&mut prefix, len as u64);
        out.splice(at..at + 1, prefix);
    }
}

/// A `LabelPair` entry of field `field`.
pub fn label(out: &mut Vec<u8>, field: u64, name: &str, value: &str) {
    nested(out, field, |m| {
        string(m, 1, name);
        string(m, 2, value);
    });
}

fn timestamp(out: &mut Vec<u8>, field: u64, at: SystemTime) {
    let d = at
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    nested(out, field, |m| {
        uint(m, 1, d.as_secs());
        uint(m, 2, u64::from(d.subsec_nanos()));
    });
}

/// An `Exemplar` message of field `field`.
fn exemplar(out: &mut Vec<u8>, field: u64, e: &Exemplar) {
    nested(out, field, |m| {
        label(m, 1, "trace_id", e.trace_id.hex().as_str());
        if let Some(r) = &e.request_id {
            label(m, 1, "request_id", r);
        }
        double(m, 2, e.value);
        let secs = e.at_unix_ns / 1_000_000_000;
        let nanos = e.at_unix_ns % 1_000_000_000;
        nested(m, 3, |t| {
            uint(t, 1, secs);
            uint(t, 2, nanos);
        });
    });
}

/// The `counter` (`field` 3) or `gauge` (2) of a `Metric`: `{ double value = 1; }`.
pub fn scalar(out: &mut Vec<u8>, field: u64, value: f64) {
    nested(out, field, |m| double(m, 1, value));
}

/// The `histogram` field (7) of a `Metric` for `v`, with its exemplars chosen by `bucket_exemplar`
/// (classic bucket `(above, upto]` → the exemplar it shows) and `oldest_first` (all kept, for
/// the native `exemplars`). `spans` is a reused buffer.
pub fn histogram<'e>(
    out: &mut Vec<u8>,
    v: &HistogramView<'e>,
    bucket_exemplar: impl Fn(f64, f64) -> Option<&'e Exemplar>,
    oldest_first: &[usize],
    spans: &mut Vec<(i32, u32)>,
    deltas: &mut Vec<i64>,
) {
    nested(out, 7, |h| {
        uint(h, 1, v.count);
        double(h, 2, v.sum);
        let mut cumulative = 0;
        let mut above = f64::NEG_INFINITY;
        for (bound, n) in v.classic.iter() {
            cumulative += n;
            nested(h, 3, |b| {
                uint(b, 1, cumulative);
                double(b, 2, bound);
                if let Some(e) = bucket_exemplar(above, bound) {
                    exemplar(b, 3, e);
                }
            });
            above = bound;
        }
        let Some(native) = &v.native else {
            return;
        };
        uint(h, 5, zigzag(i64::from(native.schema)));
        double(h, 6, native.zero_threshold);
        uint(h, 7, native.zero_count);
        // A count above i64::MAX has no delta (the library fails the encode; unreachable).
        let negative = native.negative_spans_and_deltas(spans, deltas).is_ok();
        if negative {
            side(h, 9, 10, spans, deltas);
        }
        let positive = native.positive_spans_and_deltas(spans, deltas).is_ok();
        if positive {
            side(h, 12, 13, spans, deltas);
        }
        timestamp(h, 15, native.created);
        let is_native =
            native.schema != 0 || native.zero_threshold != 0.0 || (positive && !spans.is_empty());
        if is_native {
            for &i in oldest_first {
                exemplar(h, 16, &v.exemplars[i].1);
            }
        }
    });
}

/// One side's `BucketSpan`s (field `span_field`) and packed `sint64` deltas (`delta_field`).
fn side(
    out: &mut Vec<u8>,
    span_field: u64,
    delta_field: u64,
    spans: &[(i32, u32)],
    deltas: &[i64],
) {
    for &(offset, length) in spans {
        nested(out, span_field, |s| {
            uint(s, 1, zigzag(i64::from(offset)));
            uint(s, 2, u64::from(length));
        });
    }
    if !deltas.is_empty() {
        nested(out, delta_field, |d| {
            for &delta in deltas {
                varint(d, zigzag(delta));
            }
        });
    }
}
