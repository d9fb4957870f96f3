//! A target whose own `x-request-id` is hostile (quotes, backslashes, braces, `#`, `=`, commas,
//! a tab) keeps the OpenMetrics exposition parseable by a real Prometheus (which fails a whole
//! scrape on one bad line), round-trips through protobuf and reaches its exemplar storage.

use crate::common;
use common::prometheus::Prometheus;
use llm_probe::metrics::Exposition;
use llm_probe::simulate::Script;
use prometheus_client::encoding::prometheus_protobuf::prometheus_data_model::MetricFamily;
use prost::Message;
use std::time::Duration;

const TTFT: &str = "llm_probe_time_to_first_token_seconds";

/// The request id as the header carries it (YAML single quotes: backslashes literal, `''` a
/// quote). 55 characters, within the exemplar's 78 left for it.
const HOSTILE: &str = "r\"q\\\"e\\n} # {trace_id=\"x\"} 1 2\t,le=\"0.1\",\\\\'end";
const HOSTILE_YAML: &str = "'r\"q\\\"e\\n} # {trace_id=\"x\"} 1 2\t,le=\"0.1\",\\\\''end'";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_request_id_round_trips_through_openmetrics_protobuf_and_prometheus() {
    common::require_tool("prometheus", "apt-get install prometheus");
    assert!(HOSTILE.chars().count() <= 78);
    let sim = common::simulator(Script {
        ttft: Duration::from_millis(120),
        itl: Duration::from_millis(5),
        tokens: 5,
        ..Script::default()
    })
    .await;
    let cfg = common::parse(&common::yaml(
        &sim.base_url(),
        "500ms",
        &common::scenario("chat", 8),
        &format!("    headers:\n      x-request-id: {HOSTILE_YAML}\n"),
    ));
    let d = common::daemon(cfg).await;
    let mut rx = d.subscribe();
    let o = common::outcomes(&mut rx, 1, Duration::from_secs(20)).await;
    assert_eq!(o[0].observations.request_id.as_deref(), Some(HOSTILE));

    // OpenMetrics: the request id escaped (`\\`, `\"`), nothing else changed.
    let (_, _, om) = common::get(
        d.addr,
        "/metrics",
        Some("application/openmetrics-text; version=1.0.0"),
    )
    .await;
    let escaped = HOSTILE.replace('\\', "\\\\").replace('"', "\\\"");
    let line = om
        .lines()
        .find(|l| l.starts_with(&format!("{TTFT}_bucket{{")) && l.contains(" # {"))
        .unwrap_or_else(|| panic!("no TTFT exemplar: {om}"));
    assert!(
        line.contains(&format!(",request_id=\"{escaped}\"}} 0.")),
        "{line}"
    );

    // Protobuf: the label value exactly.
    let body = d.metrics.render_as(Exposition::Protobuf).unwrap();
    let mut rest = &body[..];
    let mut seen = 0;
    while !rest.is_empty() {
        let f = MetricFamily::decode_length_delimited(&mut rest).unwrap();
        for m in f.metric.iter().filter_map(|m| m.histogram.as_ref()) {
            for e in m.bucket.iter().filter_map(|b| b.exemplar.as_ref()) {
                let r = e.label.iter().find(|l| l.name == "request_id").unwrap();
                assert_eq!(r.value, HOSTILE);
                seen += 1;
            }
        }
    }
    assert!(seen >= 3, "TTFT, TPOT and E2E exemplars: {seen}");

    // A real Prometheus scraping OpenMetrics stores them (one bad line would fail the scrape)
    // and returns the request id exactly.
    let dir = tempfile::tempdir().unwrap();
    let prom = Prometheus::start_with(
        dir.path(),
        &[],
        d.addr,
        &["--enable-feature=exemplar-storage"],
    )
    .await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let exemplars = loop {
        let (data, found) = prom.exemplars(&format!("{TTFT}_bucket")).await;
        if !found.is_empty() {
            break found;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no TTFT exemplars from Prometheus in 60 s: {data}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    for e in &exemplars {
        // Prometheus' OpenMetrics parser (2.42 here) keeps exemplar label values as written,
        // escapes included (its series labels are unescaped); newer ones may unescape.
        let r = e["labels"]["request_id"].as_str().unwrap();
        assert!(r == HOSTILE || r == escaped, "{e}");
        let id = e["labels"]["trace_id"].as_str().unwrap();
        let (status, _, body) =
            common::get(d.addr, &format!("/probes/{id}"), Some("application/json")).await;
        assert_eq!(status, 200, "{body}");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["trace_id"], id);
    }
    // The scrape itself stayed healthy.
    let up = prom.api("/api/v1/query", &[("query", "up")]).await;
    assert_eq!(up["result"][0]["value"][1], "1", "{up}");
    d.stop().await;
}
