use std::path::Path;
use std::time::{Duration, UNIX_EPOCH};

use super::save::{from_text, Pick};
use super::*;

/// A bench JSON with levels concurrency 1 and 4; level 0 holds TTFTs 0.100..=0.199 s (100
/// requests, TPOT 20 ms, 50 tokens/s, E2E TTFT + 0.3 s) plus two warmup requests of 5 s; level 1
/// only failures. `capacity` is the `sla_capacity.concurrency` value.
fn bench(capacity: &str) -> String {
    let mut requests: Vec<String> = (0..2)
        .map(|_| r#"{"level":0,"warmup":true,"ok":true,"ttft_seconds":5.0}"#.to_string())
        .collect();
    for i in 0..100 {
        let t = 0.1 + f64::from(i) / 1000.0;
        requests.push(format!(
            r#"{{"level":0,"ok":true,"ttft_seconds":{t},"tpot_seconds":0.02,"output_tokens_per_second":50.0,"e2e_seconds":{}}}"#,
            t + 0.3
        ));
    }
    for _ in 0..5 {
        requests.push(r#"{"level":1,"ok":false,"reason":"timeout"}"#.to_string());
    }
    format!(
        r#"{{"schema":"llm-probe.bench/v1","metadata":{{"target":"sim","model":"m","scenario":"chat",
           "llm_probe_version":"9.9.9","ended":"2026-11-30T12:00:00.000Z",
           "endpoint":{{"response_model":"sim-v1","system_fingerprint":"fp","server":"s/1","server_version":null}}}},
           "levels":[{{"concurrency":1,"rate":null}},{{"concurrency":4,"rate":null}}],
           "sla_capacity":{{"concurrency":{capacity},"rate":null}},
           "requests":[{}]}}"#,
        requests.join(",")
    )
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[test]
fn save_takes_the_sla_capacity_level_and_bench_percentiles() {
    let m = from_text(Path::new("run.json"), &bench("1"), Pick::Default).unwrap();
    assert_eq!(m.why, "the highest level within the SLA capacity");
    assert_eq!((m.target.as_str(), m.scenario.as_str()), ("sim", "chat"));
    assert_eq!(m.samples, 100, "warmup excluded");
    // Linear interpolation at rank q·(n−1): P50 = 0.1495, P95 = 0.19405, P99 = 0.19801.
    assert!(close(m.ttft.p50, 0.1495), "{:?}", m.ttft);
    assert!(close(m.ttft.p95, 0.19405), "{:?}", m.ttft);
    assert!(close(m.ttft.p99, 0.19801), "{:?}", m.ttft);
    assert!(close(m.output_tokens_per_second.unwrap().p50, 50.0));
    assert!(close(m.e2e.unwrap().p95, 0.49405));
    assert_eq!(m.endpoint.response_model.as_deref(), Some("sim-v1"));
    assert_eq!(m.source.level, "concurrency 1");
    assert_eq!(m.source.llm_probe_version, "9.9.9");
    assert_eq!(m.source.kind, "bench");
    assert_eq!(
        m.measured_at,
        UNIX_EPOCH + Duration::from_secs(1_796_040_000),
        "the bench's end time"
    );
}

#[test]
fn save_without_capacity_takes_the_first_level_and_says_so() {
    let m = from_text(Path::new("run.json"), &bench("null"), Pick::Default).unwrap();
    assert_eq!(m.source.level, "concurrency 1");
    assert!(m.why.contains("first level"), "{}", m.why);
    let m = from_text(Path::new("run.json"), &bench("null"), Pick::Concurrency(1)).unwrap();
    assert_eq!(m.why, "--level 1");
}

#[test]
fn save_refuses_a_missing_level_a_level_without_success_and_an_unknown_schema() {
    let e = from_text(Path::new("r"), &bench("1"), Pick::Concurrency(8)).unwrap_err();
    assert!(
        e.contains("no level with concurrency 8") && e.contains("concurrency 1, concurrency 4"),
        "{e}"
    );
    let e = from_text(Path::new("r"), &bench("1"), Pick::Rate(2.0)).unwrap_err();
    assert!(e.contains("no level at rate 2/s"), "{e}");
    let e = from_text(Path::new("r"), &bench("1"), Pick::Concurrency(4)).unwrap_err();
    assert!(
        e.contains("concurrency 4 has no successful request (5 sent)"),
        "{e}"
    );
    let other = bench("1").replace("llm-probe.bench/v1", "vllm.bench/v3");
    let e = from_text(Path::new("r"), &other, Pick::Default).unwrap_err();
    assert!(e.contains("unknown schema \"vllm.bench/v3\""), "{e}");
}

#[test]
fn a_saved_baseline_round_trips_through_the_file_format() {
    let m = from_text(Path::new("run.json"), &bench("1"), Pick::Default).unwrap();
    let b = m.into_baseline(UNIX_EPOCH + Duration::from_secs(1_796_043_600));
    let text = b.to_json();
    assert!(
        text.contains(r#""schema": "llm-probe.baseline/v1""#),
        "{text}"
    );
    assert!(
        text.contains(r#""saved_at": "2026-11-30T13:00:00.000Z""#),
        "{text}"
    );
    let back = parse(&text).unwrap();
    // serde_json reads a float to within one ulp: the text, not the value, round-trips exactly.
    assert_eq!(back.to_json(), text);
    assert_eq!((back.target.as_str(), back.samples), ("sim", 100));
    assert!(close(back.measured_unix_seconds(), 1_796_040_000.0));
}

/// A valid file with `field` replaced by `value` (JSON text).
fn with(field: &str, value: &str) -> String {
    let m = from_text(Path::new("run.json"), &bench("1"), Pick::Default).unwrap();
    let mut v: serde_json::Value =
        serde_json::from_str(&m.into_baseline(UNIX_EPOCH).to_json()).unwrap();
    v[field] = serde_json::from_str(value).unwrap();
    v.to_string()
}

#[test]
fn parse_rejects_bad_files_with_a_reason() {
    let cases = [
        (
            with("schema", r#""llm-probe.baseline/v2""#),
            "not supported by this llm-probe",
        ),
        (with("schema", r#""llm-probe.bench/v1""#), "unknown schema"),
        (with("samples", "0"), "`samples` is 0"),
        (with("measured_at", r#""yesterday""#), "not an RFC 3339"),
        (
            with("ttft_seconds", r#"{"p50":0.3,"p95":0.2,"p99":0.4}"#),
            "ttft_seconds is not in order",
        ),
        (
            with("tpot_seconds", r#"{"p50":-1,"p95":0.2,"p99":0.4}"#),
            "tpot_seconds quantile 0.5 is -1",
        ),
        (with("extra", "1"), "unknown field `extra`"),
        (with("target", r#""""#), "`target` and `scenario`"),
        ("{".to_string(), "not JSON"),
        ("{}".to_string(), "no \"schema\" field"),
    ];
    for (text, want) in cases {
        let e = parse(&text).unwrap_err();
        assert!(e.contains(want), "{want:?} not in {e:?}");
    }
}
