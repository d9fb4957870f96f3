//! Exemplars in a real Prometheus: TTFT exemplars scraped as OpenMetrics and over protobuf
//! (native histograms) resolve to the probes' records.

use crate::common;

const TTFT: &str = "llm_probe_time_to_first_token_seconds";
use common::prometheus::Prometheus;
use llm_probe::simulate::Script;
use std::time::Duration;

/// Prometheus scrapes OpenMetrics (its default with exemplar
/// storage alone).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_prometheus_returns_ttft_exemplars_that_resolve_to_probe_records() {
    let series = prometheus_exemplars_resolve(&["--enable-feature=exemplar-storage"]).await;
    assert!(
        series.iter().all(|s| s == &format!("{TTFT}_bucket")),
        "{series:?}"
    );
}

/// The same over the protobuf exposition: with native histograms on, Prometheus asks for
/// protobuf first and reads the native histogram's exemplars.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_prometheus_scraping_protobuf_returns_native_histogram_exemplars() {
    let series =
        prometheus_exemplars_resolve(&["--enable-feature=exemplar-storage,native-histograms"])
            .await;
    assert!(
        series.iter().all(|s| s == TTFT),
        "the native series: {series:?}"
    );
}

/// Starts a daemon and a Prometheus with `flags`, waits for two TTFT exemplars and checks
/// each resolves to its probe's record; returns the names of the series they came on.
async fn prometheus_exemplars_resolve(flags: &[&str]) -> Vec<String> {
    common::require_tool("prometheus", "apt-get install prometheus");
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
        "",
    ));
    let d = common::daemon(cfg).await;
    let dir = tempfile::tempdir().unwrap();
    let prom = Prometheus::start_with(dir.path(), &[], d.addr, flags).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let (exemplars, series) = loop {
        let (data, found) = prom
            .exemplars(&format!("{{__name__=~\"{TTFT}(_bucket)?\"}}"))
            .await;
        if found.len() >= 2 {
            let names = data
                .as_array()
                .into_iter()
                .flatten()
                .map(|s| s["seriesLabels"]["__name__"].as_str().unwrap().to_string())
                .collect::<Vec<_>>();
            break (found, names);
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no TTFT exemplars from Prometheus in 60 s: {data}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    for e in &exemplars {
        let id = e["labels"]["trace_id"].as_str().expect("trace_id");
        assert!(
            id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()),
            "{e}"
        );
        let req = e["labels"]["request_id"].as_str().expect("request_id");
        assert!(req.starts_with("llm-probe-"), "{e}");
        let value: f64 = e["value"].as_str().unwrap().parse().unwrap();
        assert!((0.12..1.0).contains(&value), "{e}");
        let (status, _, body) =
            common::get(d.addr, &format!("/probes/{id}"), Some("application/json")).await;
        assert_eq!(status, 200, "{id}: {body}");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["trace_id"], id);
        assert!(
            (v["ttft_ms"].as_f64().unwrap() - value * 1e3).abs() < 1e-3,
            "{v} vs {e}"
        );
    }
    // `promtool check metrics` (it reads the text format 0.0.4, which has no exemplars) stays
    // clean with exemplars kept.
    let (_, _, text) = common::get(d.addr, "/metrics", None).await;
    assert!(!text.contains(" # {"));
    common::prometheus::promtool_check_metrics(&text);
    d.stop().await;
    series
}
