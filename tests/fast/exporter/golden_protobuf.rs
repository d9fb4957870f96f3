//! The protobuf exposition (the format that carries native histograms) of one (target,
//! scenario) pair after three probes with fixed numbers, decoded and printed in a normalized
//! text form, compared with the committed `tests/fixtures/golden/one_pair_protobuf.txt`: every
//! family's name, type and help, every label set, the classic buckets and the native schema,
//! zero bucket, spans and deltas (and the bucket boundaries they decode to), and the exemplars
//! (on classic buckets and native histograms) are pinned. Only
//! clock readings (timestamps, a histogram's start time) and the crate version are replaced.
//! Regenerate after an intended change with `LLM_PROBE_REGENERATE_GOLDEN=1 cargo test --test
//! golden_protobuf`, and review the diff.

use crate::common;

use std::fmt::Write;
use std::time::Duration;

use llm_probe::metrics::{Exposition, HistogramKinds, HistogramOptions, Metrics};
use prometheus_client::encoding::prometheus_protobuf::prometheus_data_model::{
    Histogram, MetricFamily, MetricType,
};
use prost::Message;

const GOLDEN: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/golden/one_pair_protobuf.txt"
);

/// Decodes a length-delimited stream of `MetricFamily` messages.
pub fn decode(mut body: &[u8]) -> Vec<MetricFamily> {
    let mut families = Vec::new();
    while !body.is_empty() {
        families.push(MetricFamily::decode_length_delimited(&mut body).expect("a MetricFamily"));
    }
    families
}

/// `(lower, upper]` of native bucket `index` at `schema` (Prometheus' definition: upper bound
/// 2^(index · 2^-schema)).
fn native_bounds(schema: i32, index: i32) -> (f64, f64) {
    let base = 2f64.powf(2f64.powi(-schema));
    (base.powi(index - 1), base.powi(index))
}

/// The native buckets of `h` as `(lower, upper]: count`, decoded from spans and deltas.
fn native_buckets(h: &Histogram) -> Vec<(f64, f64, i64)> {
    let mut out = Vec::new();
    let (mut index, mut count, mut deltas) = (0i32, 0i64, h.positive_delta.iter());
    for span in &h.positive_span {
        index += span.offset;
        for _ in 0..span.length {
            count += deltas.next().expect("a delta per bucket");
            let (lo, hi) = native_bounds(h.schema, index);
            out.push((lo, hi, count));
            index += 1;
        }
    }
    out
}

fn write_histogram(out: &mut String, h: &Histogram) {
    writeln!(out, "  count {} sum {}", h.sample_count, h.sample_sum).unwrap();
    let exemplar =
        |e: &prometheus_client::encoding::prometheus_protobuf::prometheus_data_model::Exemplar| {
            let labels: Vec<String> = e
                .label
                .iter()
                .map(|l| format!("{}={:?}", l.name, l.value))
                .collect();
            format!(
                "# {{{}}} {} <t>:{}",
                labels.join(","),
                e.value,
                e.timestamp.is_some()
            )
        };
    for b in &h.bucket {
        write!(out, "  le {} {}", b.upper_bound, b.cumulative_count).unwrap();
        if let Some(e) = &b.exemplar {
            write!(out, " {}", exemplar(e)).unwrap();
        }
        writeln!(out).unwrap();
    }
    for e in &h.exemplars {
        writeln!(out, "  native exemplar {}", exemplar(e)).unwrap();
    }
    let native = h.schema != 0 || h.zero_threshold != 0.0 || !h.positive_span.is_empty();
    if native {
        writeln!(
            out,
            "  native schema {} zero_threshold {:e} zero_count {} start <t>:{}",
            h.schema,
            h.zero_threshold,
            h.zero_count,
            h.start_timestamp.is_some()
        )
        .unwrap();
        let spans: Vec<String> = h
            .positive_span
            .iter()
            .map(|s| format!("{}:{}", s.offset, s.length))
            .collect();
        writeln!(
            out,
            "  positive spans {spans:?} deltas {:?}",
            h.positive_delta
        )
        .unwrap();
        for (lo, hi, n) in native_buckets(h) {
            writeln!(out, "  ({lo:.6}, {hi:.6}] {n}").unwrap();
        }
    }
}

/// The families in a stable text form; clock readings replaced by `<t>`.
fn normalize(families: &[MetricFamily]) -> String {
    let mut out = String::new();
    for f in families {
        let kind = MetricType::try_from(f.r#type).map_or("?".into(), |t| format!("{t:?}"));
        writeln!(out, "# {} {kind} {}", f.name, f.help).unwrap();
        let mut metrics: Vec<(String, String)> = f
            .metric
            .iter()
            .map(|m| {
                let labels: Vec<String> = m
                    .label
                    .iter()
                    .map(|l| format!("{}={:?}", l.name, l.value))
                    .collect();
                let mut body = String::new();
                let clock = f.name.contains("timestamp");
                if let Some(c) = &m.counter {
                    writeln!(body, "  counter {}", c.value).unwrap();
                }
                if let Some(g) = &m.gauge {
                    if clock {
                        writeln!(body, "  gauge <t>").unwrap();
                    } else {
                        writeln!(body, "  gauge {}", g.value).unwrap();
                    }
                }
                if let Some(h) = &m.histogram {
                    write_histogram(&mut body, h);
                }
                (labels.join(","), body)
            })
            .collect();
        metrics.sort();
        for (labels, body) in metrics {
            writeln!(out, " {{{labels}}}").unwrap();
            out.push_str(&body);
        }
    }
    out.replace(env!("CARGO_PKG_VERSION"), "<version>")
}

fn metrics_after_three_probes(kinds: HistogramKinds) -> Metrics {
    let m = Metrics::with_histograms(
        &[],
        HistogramOptions {
            kinds,
            ..HistogramOptions::default()
        },
    );
    // Each with its own trace id and request id: the TTFT, TPOT and E2E exemplars.
    for (k, ttft) in [250, 310, 1700].into_iter().enumerate() {
        let mut o = common::synthetic::success(Duration::from_millis(ttft));
        o.observations.traceparent = Some(format!("00-{:032x}-00f067aa0ba902b7-01", k + 1));
        o.observations.request_id = Some(format!("req-{k}"));
        // A fixed start (the exemplars' timestamp): two of these renders compare equal.
        o.started_at =
            std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000 + k as u64);
        m.observe(&o);
    }
    m
}

fn family<'a>(families: &'a [MetricFamily], name: &str) -> &'a MetricFamily {
    families
        .iter()
        .find(|f| f.name == name)
        .unwrap_or_else(|| panic!("no family {name}"))
}

#[test]
fn one_pair_protobuf_exposition_matches_the_golden_file() {
    let m = metrics_after_three_probes(HistogramKinds::Both);
    let families = decode(&m.render_as(Exposition::Protobuf).unwrap());
    // The facts the golden file shows, asserted on their own as well.
    let ttft = family(&families, "llm_probe_time_to_first_token_seconds");
    let h = ttft.metric[0].histogram.as_ref().unwrap();
    assert_eq!((h.sample_count, h.schema), (3, 3), "1.1 → schema 3");
    assert!(h.bucket.len() > 20, "the classic buckets are there too");
    let native = native_buckets(h);
    for v in [0.25, 0.31, 1.7] {
        let hits: Vec<_> = native
            .iter()
            .filter(|(lo, hi, n)| *lo < v && v <= *hi && *n == 1)
            .collect();
        assert_eq!(
            hits.len(),
            1,
            "{v} s in exactly one native bucket: {native:?}"
        );
    }
    assert_eq!(native.iter().map(|b| b.2).sum::<i64>(), 3);
    common::golden::assert_golden(GOLDEN, &normalize(&families), "exporter::golden_protobuf::");
}

#[test]
fn classic_only_protobuf_has_no_native_fields_and_native_only_no_classic_bounds() {
    let name = "llm_probe_time_to_first_token_seconds";
    let classic = decode(
        &metrics_after_three_probes(HistogramKinds::Classic)
            .render_as(Exposition::Protobuf)
            .unwrap(),
    );
    let h = family(&classic, name).metric[0].histogram.clone().unwrap();
    assert!(h.positive_span.is_empty() && h.zero_threshold == 0.0 && h.schema == 0);
    assert!(h.bucket.len() > 20);

    let native = decode(
        &metrics_after_three_probes(HistogramKinds::Native)
            .render_as(Exposition::Protobuf)
            .unwrap(),
    );
    let h = family(&native, name).metric[0].histogram.clone().unwrap();
    let filled = native_buckets(&h).iter().filter(|b| b.2 > 0).count();
    assert_eq!(filled, 3, "three observations, three native buckets");
    let bounds: Vec<f64> = h.bucket.iter().map(|b| b.upper_bound).collect();
    assert_eq!(bounds, [f64::INFINITY], "only the +Inf bucket");
}

#[test]
fn the_text_formats_carry_classic_buckets_only() {
    let both = metrics_after_three_probes(HistogramKinds::Both);
    let classic = metrics_after_three_probes(HistogramKinds::Classic);
    for accept in [None, Some("application/openmetrics-text")] {
        let (_, b) = both.render(accept);
        let (_, c) = classic.render(accept);
        // Same lines up to the order of label sets and the histograms' creation times.
        let lines = |t: &str| {
            let mut v: Vec<String> = t
                .lines()
                .filter(|l| !l.contains("timestamp") && !l.contains("_created"))
                .map(str::to_string)
                .collect();
            v.sort();
            v
        };
        assert_eq!(lines(&b), lines(&c), "{accept:?}");
    }
    let (_, native) = metrics_after_three_probes(HistogramKinds::Native).render(None);
    let ttft_buckets: Vec<&str> = native
        .lines()
        .filter(|l| l.starts_with("llm_probe_time_to_first_token_seconds_bucket"))
        .collect();
    assert_eq!(ttft_buckets.len(), 1, "{ttft_buckets:?}");
    assert!(ttft_buckets[0].contains("le=\"+Inf\"") && ttft_buckets[0].ends_with(" 3"));
    // OpenMetrics encodes native-only mode too (it refuses histograms without buckets).
    let (_, om) = metrics_after_three_probes(HistogramKinds::Native)
        .render(Some("application/openmetrics-text"));
    assert!(
        om.contains("llm_probe_time_to_first_token_seconds_count{"),
        "{om}"
    );
}
