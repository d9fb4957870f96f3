//! The whole `/metrics` text for one (target, scenario) pair after one probe against the
//! simulator, compared with the committed `tests/fixtures/golden/one_pair.prom`: every metric
//! name, HELP and TYPE line, label set, bucket boundary and count that does not depend on the
//! clock is pinned, so a renamed metric, a lost label, a changed bucket layout or a counter that
//! moves by the wrong amount shows up as a diff. Values that depend on timing (the bucket
//! counts and sums of duration and rate histograms, timestamps, ages) are replaced by `<t>`.
//! Regenerate after an intended change with `LLM_PROBE_REGENERATE_GOLDEN=1 cargo test --test
//! fast exporter::golden_exposition::`, and review the diff.

use crate::common;

use std::time::Duration;

const GOLDEN: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/golden/one_pair.prom"
);

/// Whether the value of the sample `series` (name and labels) depends on the clock.
fn timing_dependent(series: &str) -> bool {
    let name = series.split('{').next().unwrap_or(series);
    let histogram_part = |base: &str| {
        ["_bucket", "_sum"]
            .iter()
            .any(|s| name.strip_suffix(s) == Some(base))
    };
    let timed_histograms = [
        "llm_probe_time_to_first_token_seconds",
        "llm_probe_time_to_first_output_token_seconds",
        "llm_probe_time_per_output_token_seconds",
        "llm_probe_inter_token_latency_seconds",
        "llm_probe_request_duration_seconds",
        "llm_probe_output_tokens_per_second",
        "llm_probe_connection_setup_seconds",
        "llm_probe_ttft_overhead_seconds",
        "llm_probe_server_prefill_seconds",
    ];
    timed_histograms.iter().any(|h| histogram_part(h))
        || counted_by_timing(series)
        || name.contains("timestamp")
        || name.ends_with("_age_seconds")
        || name.starts_with("process_")
}

/// Whether even the count of the histogram of `series` depends on the clock: the read delay has
/// one sample per read that carried token events, and how a stream splits into reads is timing.
fn counted_by_timing(series: &str) -> bool {
    series.starts_with("llm_probe_read_delay_seconds")
}

/// The series of a sample line without its `le` label (the key its buckets share) and its value.
fn series_key(line: &str) -> (String, &str) {
    let (series, value) = line.rsplit_once(' ').unwrap_or((line, ""));
    let key = match series.find(",le=\"") {
        Some(i) => {
            let end = series[i + 5..]
                .find('"')
                .map_or(series.len(), |j| i + 6 + j);
            format!("{}{}", &series[..i], &series[end..])
        }
        None => series.to_string(),
    };
    (key.replacen("_bucket{", "{", 1), value)
}

/// `text` with every timing-dependent value replaced by `<t>` (a histogram's `+Inf` bucket is
/// its count, so it stays, unless [`counted_by_timing`]), the crate version by `<version>`, and the samples of each metric
/// family in a fixed order (label sets come out of a hash map).
fn normalize(text: &str) -> String {
    let text = text.replace(env!("CARGO_PKG_VERSION"), "<version>");
    let mut out = String::new();
    let mut family: Vec<String> = Vec::new();
    let flush = |family: &mut Vec<String>, out: &mut String| {
        // Stable: the buckets of one series keep their `le` order.
        family.sort_by_cached_key(|l| series_key(l).0);
        for l in family.drain(..) {
            out.push_str(&l);
            out.push('\n');
        }
    };
    for line in text.lines() {
        if line.starts_with('#') {
            flush(&mut family, &mut out);
            out.push_str(line);
            out.push('\n');
            continue;
        }
        let (series, _) = line.rsplit_once(' ').unwrap_or((line, ""));
        if timing_dependent(series)
            && (!series.contains("le=\"+Inf\"") || counted_by_timing(series))
        {
            family.push(format!("{series} <t>"));
        } else {
            family.push(line.to_string());
        }
    }
    flush(&mut family, &mut out);
    out
}

/// Every histogram's buckets are cumulative and its `+Inf` bucket equals its `_count`.
fn assert_buckets_consistent(text: &str) {
    let mut last: Option<(String, f64)> = None;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let (key, value) = series_key(line);
        let value: f64 = value
            .parse()
            .unwrap_or_else(|_| panic!("not a number: {line}"));
        if line.contains("_bucket{") {
            if let Some((k, v)) = &last {
                if *k == key {
                    assert!(value >= *v, "buckets not cumulative at {line}");
                }
            }
            last = Some((key, value));
        } else if line.contains("_count{") {
            let (k, v) = last.take().expect("buckets before _count");
            assert_eq!(k, key.replacen("_count{", "{", 1), "{line}");
            assert_eq!(v, value, "+Inf bucket ≠ count: {line}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_pair_exposition_matches_the_golden_file() {
    // Token events 30 ms apart: the pinned counts (a TPOT sample, no `collapsed_stream`) hold
    // unless the reader stalls for 150 ms, where 2 ms apart a 10 ms stall on a busy host read
    // the events together, as a buffering proxy would deliver them.
    let sim = common::simulator(common::stream(20, 30, 8)).await;
    // One probe: the interval is far longer than the test. The pair's first probe comes 8.6 s
    // after start (its slot, `schedule::slot`, of at most 10 s).
    // With a pinned baseline: its gauges are part of the exposition.
    let dir = tempfile::tempdir().unwrap();
    let cfg = common::parse(&common::yaml(
        &sim.base_url(),
        "1h",
        &common::scenario("first", 8),
        &common::baseline_file_line(dir.path(), "sim", "first"),
    ));
    let d = common::daemon(cfg).await;
    let mut rx = d.subscribe();
    let outcome = common::outcomes(&mut rx, 1, Duration::from_secs(20)).await;
    assert!(outcome[0].result.is_ok(), "{:?}", outcome[0].result);
    let (status, _, text) = common::get(d.addr, "/metrics", None).await;
    d.stop().await;
    assert_eq!(status, 200);
    assert_buckets_consistent(&text);
    let got = normalize(&text);
    assert!(got.contains("<t>"), "timing values were normalized");
    common::golden::assert_golden(GOLDEN, &got, "exporter::golden_exposition::");
}
