//! A real Prometheus (the Debian package, on loopback with a temporary data dir) scrapes the
//! daemon, and `histogram_quantile(0.95, …)` over the TTFT series returns a number; `promtool
//! check metrics` passes on the text exposition.

use crate::common;

use common::prometheus::Prometheus;
use std::time::Duration;

use llm_probe::simulate::Script;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn promtool_accepts_the_text_exposition() {
    let sim = common::simulator(Script {
        tokens: 5,
        ttft: Duration::from_millis(10),
        ..Script::default()
    })
    .await;
    let cfg = common::parse(&common::yaml(
        &sim.base_url(),
        "1s",
        &common::scenario("chat", 8),
        "",
    ));
    let d = common::daemon(cfg).await;
    let mut rx = d.subscribe();
    common::outcomes(&mut rx, 1, Duration::from_secs(10)).await;
    let (_, _, text) = common::get(d.addr, "/metrics", None).await;
    d.stop().await;
    common::prometheus::promtool_check_metrics(&text);
    assert!(
        text.contains("llm_probe_time_to_first_token_seconds_bucket"),
        "the check saw real series"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_prometheus_scrapes_and_computes_p95_ttft() {
    let script = Script {
        ttft: Duration::from_millis(250),
        itl: Duration::from_millis(5),
        tokens: 10,
        ..Script::default()
    };
    let sim = common::simulator(script).await;
    let cfg = common::parse(&common::yaml(
        &sim.base_url(),
        "500ms",
        &common::scenario("chat", 16),
        "",
    ));
    let d = common::daemon(cfg).await;

    let dir = tempfile::tempdir().unwrap();
    let prom = Prometheus::start(dir.path(), &[], d.addr).await;

    let q = "histogram_quantile(0.95, sum by (le, target, scenario) (rate(llm_probe_time_to_first_token_seconds_bucket[1m])))";
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    let p95 = loop {
        let r = common::rules::vector(&prom, q).await;
        let v = r
            .first()
            .and_then(|s| s["value"][1].as_str())
            .and_then(|s| s.parse::<f64>().ok());
        if let Some(v) = v.filter(|v| v.is_finite()) {
            break v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "Prometheus never returned a P95; last result {r:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    // Every TTFT is ≈ 250 ms, inside the (0.25, 0.3] bucket: the estimate lies in that bucket.
    assert!((0.25..=0.3).contains(&p95), "P95 TTFT {p95}");
    let up = common::rules::vector(&prom, "up{job=\"llm-probe\"}").await;
    assert_eq!(up[0]["value"][1], "1");
    // The exact-bucket SLI at the 0.3 s boundary: every probe was within the SLO.
    let ratio = common::rules::vector(&prom, "sum(rate(llm_probe_time_to_first_token_seconds_bucket{le=~\"0.3(0*)?\"}[1m])) / sum(rate(llm_probe_time_to_first_token_seconds_count[1m]))").await;
    assert_eq!(ratio[0]["value"][1], "1", "{ratio:?}");
    d.stop().await;
}
