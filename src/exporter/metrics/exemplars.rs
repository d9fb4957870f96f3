//! Exemplars on the TTFT, TPOT and E2E histograms: each observation carries the
//! probe's `trace_id` and `request_id`, its value and the probe's start, so a slow bucket in
//! Grafana leads to that probe's record (`/probes/{trace_id}`) and to the engine's own span or
//! log line.
//!
//! prometheus-client 0.26 has exemplars only on its classic-bucket `HistogramWithExemplars`
//! (no native buckets; its exemplars cannot be built or read outside the crate), and its
//! protobuf encoder never fills the native `Histogram.exemplars`. So each series
//! ([`super::histogram::ProbeHistogram`]) keeps at most one exemplar per classic bucket of the
//! family's bounds (the library's rule: the newest observation of that bucket wins), also when
//! only native buckets are exported, and the expositions show them as follows. The fast
//! encoder ([`super::fast`]) writes them in the same pass as the buckets; the reference render
//! (`Metrics::render_reference`) adds them to prometheus-client's output afterwards with the
//! functions here, and tests hold the two equal.
//!
//! - OpenMetrics text ([`add_to_openmetrics`]): each `_bucket` line gets
//!   ` # {trace_id="…",request_id="…"} VALUE TIMESTAMP`, the newest exemplar whose value lies
//!   in that bucket (`(previous le, le]`); with native buckets only, the single `+Inf` bucket
//!   gets the newest of all.
//! - Protobuf ([`add_to_protobuf`]): `Bucket.exemplar` likewise, and for a histogram with
//!   native buckets `Histogram.exemplars` (all kept, oldest first; Prometheus ignores native
//!   exemplars without a timestamp, these always have one).
//! - The Prometheus text 0.0.4 has no exemplars and is left as it is.
//!
//! The label set is `trace_id` (32 hex digits) and `request_id` (the `x-request-id` sent); a
//! request id that would take the set past OpenMetrics' 128 characters (names and values) is
//! left out, and a probe without a W3C trace id has no exemplar.

use std::time::{Duration, SystemTime};

use prometheus_client::encoding::prometheus_protobuf::prometheus_data_model as pb;

use super::histogram::SharedHistogram;
use super::series::SeriesFamily;
use super::ProbeLabels;
use crate::measure::TraceId;

/// OpenMetrics' limit on an exemplar's label names and values together, in characters.
pub const MAX_LABEL_CHARS: usize = 128;

/// The characters of `trace_id` and its 32-digit value.
const TRACE_ID_CHARS: usize = "trace_id".len() + 32;

/// One exemplar: which probe made an observation, the observation and when.
#[derive(Debug, Clone, PartialEq)]
pub struct Exemplar {
    /// The probe's W3C trace id.
    pub trace_id: TraceId,
    /// The `x-request-id` it sent; `None` when it sent none or the value would take the label
    /// set past [`MAX_LABEL_CHARS`].
    pub request_id: Option<Box<str>>,
    /// The observed value (seconds).
    pub value: f64,
    /// The probe's start, nanoseconds since the Unix epoch.
    pub at_unix_ns: u64,
}

impl Exemplar {
    /// The exemplar of an observation `value` by the probe that sent `trace_id` and
    /// `request_id` and started at `at`. A request id longer than the label limit leaves
    /// (78 characters) is dropped, not cut (a cut id would name another request).
    pub fn new(trace_id: TraceId, request_id: Option<&str>, value: f64, at: SystemTime) -> Self {
        let room = MAX_LABEL_CHARS - TRACE_ID_CHARS - "request_id".len();
        let request_id = request_id
            .filter(|r| !r.is_empty() && r.chars().count() <= room)
            .map(Box::from);
        Exemplar {
            trace_id,
            request_id,
            value,
            at_unix_ns: at
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)),
        }
    }

    fn at(&self) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_nanos(self.at_unix_ns)
    }

    /// ` # {trace_id="…",request_id="…"} VALUE TIMESTAMP` (OpenMetrics 1.0 exemplar syntax;
    /// the timestamp in seconds with millisecond precision).
    pub(crate) fn write_openmetrics(&self, out: &mut String) {
        use std::fmt::Write;
        out.push_str(" # {trace_id=\"");
        out.push_str(self.trace_id.hex().as_str());
        out.push('"');
        if let Some(r) = &self.request_id {
            out.push_str(",request_id=\"");
            for c in r.chars() {
                match c {
                    '\\' => out.push_str("\\\\"),
                    '"' => out.push_str("\\\""),
                    '\n' => out.push_str("\\n"),
                    c => out.push(c),
                }
            }
            out.push('"');
        }
        let (secs, ms) = (
            self.at_unix_ns / 1_000_000_000,
            self.at_unix_ns % 1_000_000_000 / 1_000_000,
        );
        let _ = write!(out, "}} {:?} {secs}.{ms:03}", self.value);
    }

    pub(crate) fn to_protobuf(&self) -> pb::Exemplar {
        let mut label = vec![pb::LabelPair {
            name: "trace_id".into(),
            value: self.trace_id.hex().as_str().to_string(),
        }];
        if let Some(r) = &self.request_id {
            label.push(pb::LabelPair {
                name: "request_id".into(),
                value: r.to_string(),
            });
        }
        pb::Exemplar {
            label,
            value: self.value,
            timestamp: Some(self.at().into()),
        }
    }
}

/// A histogram family whose series carry exemplars.
pub type TracedFamily = SeriesFamily<ProbeLabels, SharedHistogram>;

/// The newest of `exemplars` (oldest first) whose value lies in `(above, upto]`.
fn in_bucket(exemplars: &[Exemplar], above: f64, upto: f64) -> Option<&Exemplar> {
    exemplars
        .iter()
        .rev()
        .find(|e| above < e.value && e.value <= upto)
}

/// The exemplars of the series `family` has for `labels` (target, model, scenario pairs in
/// any order, others ignored), oldest first.
fn series_exemplars<'a>(
    family: &TracedFamily,
    labels: impl Iterator<Item = (&'a str, &'a str)>,
) -> Vec<Exemplar> {
    let (mut target, mut model, mut scenario, mut replica) = ("", "", "", "");
    for (name, value) in labels {
        match name {
            "target" => target = value,
            "model" => model = value,
            "scenario" => scenario = value,
            "replica" => replica = value,
            _ => {}
        }
    }
    let key = ProbeLabels::new(target, model, scenario, replica);
    family.get(&key).map(|h| h.exemplars()).unwrap_or_default()
}

/// Fills the classic buckets' exemplars (`Bucket.exemplar`) and, for histograms with native
/// buckets, `Histogram.exemplars`, of the families in `families` named in `traced` (full
/// metric name, family).
pub fn add_to_protobuf(families: &mut [pb::MetricFamily], traced: &[(&str, &TracedFamily)]) {
    for f in families.iter_mut() {
        let Some((_, family)) = traced.iter().find(|(name, _)| *name == f.name) else {
            continue;
        };
        for m in &mut f.metric {
            let Some(h) = m.histogram.as_mut() else {
                continue;
            };
            let kept = series_exemplars(
                family,
                m.label.iter().map(|l| (l.name.as_str(), l.value.as_str())),
            );
            if kept.is_empty() {
                continue;
            }
            let mut above = f64::NEG_INFINITY;
            for b in &mut h.bucket {
                b.exemplar = in_bucket(&kept, above, b.upper_bound).map(Exemplar::to_protobuf);
                above = b.upper_bound;
            }
            let native = h.schema != 0 || h.zero_threshold != 0.0 || !h.positive_span.is_empty();
            if native {
                h.exemplars = kept.iter().map(Exemplar::to_protobuf).collect();
            }
        }
    }
}

/// The labels of an OpenMetrics sample line's label set (`{a="x",b="y\"z"}` at its start,
/// escapes `\\`, `\"`, `\n` undone), and the rest of the line; `None` if it is not one.
fn parse_labels(line: &str) -> Option<(Vec<(String, String)>, &str)> {
    let mut rest = line.strip_prefix('{')?;
    let mut labels = Vec::new();
    loop {
        if let Some(after) = rest.strip_prefix('}') {
            return Some((labels, after));
        }
        let eq = rest.find("=\"")?;
        let name = rest[..eq].to_string();
        let mut value = String::new();
        let mut chars = rest[eq + 2..].char_indices();
        let end = loop {
            match chars.next()? {
                (i, '"') => break eq + 2 + i + 1,
                (_, '\\') => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    c => value.push(c),
                },
                (_, c) => value.push(c),
            }
        };
        labels.push((name, value));
        rest = &rest[end..];
        rest = rest.strip_prefix(',').unwrap_or(rest);
    }
}

/// `le`'s value as a number (`+Inf` included).
fn parse_le(v: &str) -> Option<f64> {
    match v {
        "+Inf" => Some(f64::INFINITY),
        v => v.parse().ok(),
    }
}

/// Appends each exemplar to its `_bucket` line in the OpenMetrics `text` (as
/// prometheus-client wrote it) of the families named in `traced` (full metric name, family).
/// Only those families' blocks are rewritten, in place.
pub fn add_to_openmetrics(text: &mut String, traced: &[(&str, &TracedFamily)]) {
    for (name, family) in traced {
        let header = format!("# TYPE {name} histogram\n");
        let Some(at) = text.find(&header) else {
            continue;
        };
        let start = at + header.len();
        // The block's samples: up to the next `#` line (another family, or `# EOF`),
        // skipping this family's own `# UNIT`.
        let mut end = start;
        for line in text[start..].split_inclusive('\n') {
            if line.starts_with('#') && !line.starts_with(&format!("# UNIT {name} ")) {
                break;
            }
            end += line.len();
        }
        let bucket = format!("{name}_bucket{{");
        let mut block = String::with_capacity(end - start + (end - start) / 2);
        // The series of the previous bucket line (its labels without `le`), its exemplars and
        // the previous bucket's bound.
        let mut series: Option<(String, Vec<Exemplar>, f64)> = None;
        for line in text[start..end].split_inclusive('\n') {
            let body = line.strip_suffix('\n').unwrap_or(line);
            let Some(label_text) = body
                .strip_prefix(&bucket[..bucket.len() - 1])
                .filter(|l| l.starts_with('{'))
            else {
                block.push_str(line);
                continue;
            };
            // The label set ends at the line's last `}` (the count after it has none). The
            // encoder writes `le` first: then the rest of the set is the series' key, and the
            // labels are parsed once per series, not once per bucket.
            let set = &label_text[..label_text.rfind('}').map_or(label_text.len(), |i| i + 1)];
            let (le, key) = match set.strip_prefix("{le=\"").and_then(|r| r.split_once('"')) {
                Some((le, rest)) => (parse_le(le), rest.to_string()),
                None => {
                    let le = parse_labels(set).and_then(|(labels, _)| {
                        let (_, v) = labels.into_iter().find(|(k, _)| k == "le")?;
                        parse_le(&v)
                    });
                    (le, set.to_string())
                }
            };
            if series.as_ref().is_none_or(|(k, _, _)| *k != key) {
                let labels = parse_labels(set).map(|(l, _)| l).unwrap_or_default();
                let kept =
                    series_exemplars(family, labels.iter().map(|(k, v)| (k.as_str(), v.as_str())));
                series = Some((key, kept, f64::NEG_INFINITY));
            }
            block.push_str(body);
            if let (Some(le), Some((_, kept, above))) = (le, series.as_mut()) {
                if let Some(e) = in_bucket(kept, *above, le) {
                    e.write_openmetrics(&mut block);
                }
                *above = le;
            }
            if line.ends_with('\n') {
                block.push('\n');
            }
        }
        text.replace_range(start..end, &block);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u8) -> TraceId {
        TraceId::from_bytes([n; 16]).unwrap()
    }

    #[test]
    fn labels_parse_with_escapes() {
        let (labels, rest) =
            parse_labels(r#"{target="a\"b\\c\nd",le="0.1"} 3"#).expect("a label set");
        assert_eq!(
            labels,
            vec![
                ("target".to_string(), "a\"b\\c\nd".to_string()),
                ("le".to_string(), "0.1".to_string())
            ]
        );
        assert_eq!(rest, " 3");
        assert_eq!(parse_labels(r#"{target="unterminated} 3"#), None);
        assert_eq!(parse_labels("no labels 3"), None);
    }

    #[test]
    fn a_long_request_id_is_dropped_and_the_label_set_stays_within_128_characters() {
        let at = SystemTime::UNIX_EPOCH + Duration::from_millis(1_700_000_000_123);
        let fits = "r".repeat(78);
        let e = Exemplar::new(id(1), Some(&fits), 0.25, at);
        assert_eq!(e.request_id.as_deref(), Some(fits.as_str()));
        let chars = "trace_id".len() + 32 + "request_id".len() + fits.len();
        assert_eq!(chars, MAX_LABEL_CHARS);
        let long = Exemplar::new(id(1), Some(&"r".repeat(79)), 0.25, at);
        assert_eq!(long.request_id, None);
        let mut out = String::new();
        Exemplar::new(id(1), Some("a\"b"), 0.25, at).write_openmetrics(&mut out);
        assert_eq!(
            out,
            " # {trace_id=\"01010101010101010101010101010101\",request_id=\"a\\\"b\"} 0.25 1700000000.123"
        );
    }

    #[test]
    fn the_newest_exemplar_in_a_bucket_wins() {
        let at = |ms| SystemTime::UNIX_EPOCH + Duration::from_millis(ms);
        let all = vec![
            Exemplar::new(id(2), None, 0.07, at(2)),
            Exemplar::new(id(3), None, 0.3, at(3)),
            Exemplar::new(id(4), None, 9.0, at(4)),
        ];
        assert_eq!(
            in_bucket(&all, f64::NEG_INFINITY, 0.1).unwrap().trace_id,
            id(2)
        );
        assert_eq!(in_bucket(&all, 0.1, 0.5).unwrap().trace_id, id(3));
        assert_eq!(in_bucket(&all, 0.5, 1.0).map(|e| e.trace_id), None);
        assert_eq!(
            in_bucket(&all, f64::NEG_INFINITY, f64::INFINITY)
                .unwrap()
                .trace_id,
            id(4),
            "the newest overall for a lone +Inf bucket"
        );
    }
}
