//! Histogram series on the fast path: [`ProbeHistogram`]'s counts written as prometheus-client
//! writes its own `Histogram` (classic buckets in the text formats, classic and native in the
//! protobuf), with the exemplars in the same pass (the rules of [`super::super::exemplars`]).

use std::fmt::Write as _;

use super::{push_f64, push_u64, series_name, Scratch, TextFormat};
use crate::metrics::exemplars::Exemplar;
use crate::metrics::histogram::{HistogramView, SharedHistogram};

impl super::FastMetric for SharedHistogram {
    fn write_text(
        &self,
        format: TextFormat,
        name: &str,
        labels: &str,
        out: &mut String,
        scratch: &mut Scratch,
    ) {
        self.read(|v| write_text(v, format, name, labels, out, scratch));
    }

    fn write_protobuf(&self, out: &mut Vec<u8>, scratch: &mut Scratch) {
        self.read(|v| {
            let Scratch {
                order,
                spans,
                deltas,
                ..
            } = scratch;
            oldest_first(v.exemplars, order);
            let shown = |above, upto| in_bucket(v.exemplars, order, above, upto);
            super::protobuf::histogram(out, v, shown, order, spans, deltas);
        });
    }
}

/// The `le` values of `v`'s classic buckets in both text formats, cached in `scratch` while the
/// bounds stay the same (they do within a family).
fn le_values<'s>(
    v: &HistogramView<'_>,
    format: TextFormat,
    scratch: &'s mut Scratch,
) -> &'s [String] {
    let same = scratch.le_bounds.len() == v.classic.len()
        && scratch
            .le_bounds
            .iter()
            .zip(v.classic.iter())
            .all(|(a, (b, _))| a.to_bits() == b.to_bits());
    if !same {
        scratch.le_bounds.clear();
        scratch.le.clear();
        for (bound, _) in v.classic.iter() {
            scratch.le_bounds.push(bound);
        }
        for f in [TextFormat::Prometheus, TextFormat::OpenMetrics] {
            for (bound, _) in v.classic.iter() {
                scratch.le.push(le_value(bound, f));
            }
        }
    }
    let n = v.classic.len();
    match format {
        TextFormat::Prometheus => &scratch.le[..n],
        TextFormat::OpenMetrics => &scratch.le[n..],
    }
}

/// A bucket bound as the `le` label value: `+Inf`; else OpenMetrics as `dtoa` writes it
/// (`1.0`), Prometheus 0.0.4 as Go's `strconv.FormatFloat(v, 'g', -1, 64)` (`1`, `1e+06`),
/// prometheus-client's two rules.
pub fn le_value(bound: f64, format: TextFormat) -> String {
    if bound == f64::INFINITY {
        return "+Inf".into();
    }
    match format {
        TextFormat::OpenMetrics => dtoa::Buffer::new().format(bound).to_string(),
        TextFormat::Prometheus => go_float(bound),
    }
}

/// Go's shortest `%g` for a finite or infinite `v`.
fn go_float(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e6 {
        return itoa::Buffer::new().format(v as i64).to_string();
    }
    if (1e-4..1e6).contains(&v.abs()) {
        return format!("{v}");
    }
    if v.is_nan() {
        return "NaN".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "+Inf" } else { "-Inf" }.into();
    }
    let sci = format!("{v:e}");
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    format!("{mantissa}e{exponent:+03}")
}

/// The exemplar the reference shows on the bucket `(above, upto]`: the newest kept whose
/// value lies in it (oldest first by start, ties in the order kept).
fn in_bucket<'a>(
    kept: &'a [(u16, Exemplar)],
    order: &[usize],
    above: f64,
    upto: f64,
) -> Option<&'a Exemplar> {
    order
        .iter()
        .rev()
        .map(|&i| &kept[i].1)
        .find(|e| above < e.value && e.value <= upto)
}

/// `order` := the indices of `kept` sorted by the exemplars' start (stable).
fn oldest_first(kept: &[(u16, Exemplar)], order: &mut Vec<usize>) {
    order.clear();
    order.extend(0..kept.len());
    order.sort_by_key(|&i| kept[i].1.at_unix_ns);
}

fn write_text(
    v: &HistogramView<'_>,
    format: TextFormat,
    name: &str,
    labels: &str,
    out: &mut String,
    scratch: &mut Scratch,
) {
    let mut order = std::mem::take(&mut scratch.order);
    let le = le_values(v, format, scratch);
    match format {
        TextFormat::OpenMetrics => {
            // Only OpenMetrics shows exemplars.
            oldest_first(v.exemplars, &mut order);
            series_name(out, name, "_sum", labels);
            push_f64(out, format, v.sum);
            series_name(out, name, "_count", labels);
            push_u64(out, v.count);
            let mut cumulative = 0;
            let mut above = f64::NEG_INFINITY;
            for ((bound, n), le) in v.classic.iter().zip(le) {
                cumulative += n;
                out.push_str(name);
                out.push_str("_bucket{le=\"");
                out.push_str(le);
                out.push_str("\",");
                out.push_str(labels);
                out.push_str("} ");
                out.push_str(itoa::Buffer::new().format(cumulative));
                if let Some(e) = in_bucket(v.exemplars, &order, above, bound) {
                    e.write_openmetrics(out);
                }
                out.push('\n');
                above = bound;
            }
        }
        TextFormat::Prometheus => {
            let mut cumulative = 0;
            let mut inf_seen = false;
            for ((bound, n), le) in v.classic.iter().zip(le) {
                cumulative += n;
                inf_seen |= bound == f64::INFINITY;
                out.push_str(name);
                out.push_str("_bucket{");
                out.push_str(labels);
                out.push_str(",le=\"");
                out.push_str(le);
                out.push_str("\"}");
                push_u64(out, cumulative);
            }
            if !inf_seen {
                let _ = write!(out, "{name}_bucket{{{labels},le=\"+Inf\"}}");
                push_u64(out, v.count);
            }
            series_name(out, name, "_sum", labels);
            push_f64(out, format, v.sum);
            series_name(out, name, "_count", labels);
            push_u64(out, v.count);
        }
    }
    scratch.order = order;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn le_values_follow_each_formats_rule() {
        let om = |b| le_value(b, TextFormat::OpenMetrics);
        let prom = |b| le_value(b, TextFormat::Prometheus);
        assert_eq!((om(1.0), prom(1.0)), ("1.0".into(), "1".into()));
        assert_eq!((om(0.025), prom(0.025)), ("0.025".into(), "0.025".into()));
        assert_eq!(prom(1e6), "1e+06");
        assert_eq!(prom(2.5e-5), "2.5e-05");
        assert_eq!(
            (om(f64::INFINITY), prom(f64::INFINITY)),
            ("+Inf".into(), "+Inf".into())
        );
    }
}
