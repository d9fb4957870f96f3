//! The daemon's behaviour over time and its HTTP surface: scheduling without overlap,
//! shutdown that drops in-flight probes, the exporter endpoints, content negotiation, SLO
//! bucket boundaries and the backend identity series.

use crate::common;
use common::ScriptExt;

use std::time::Duration;

use llm_probe::simulate::Fault;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_of_one_pair_never_overlap() {
    // Each probe takes ≈ 420 ms + 5 × 5 ms against a 300 ms interval: ticks are skipped, not stacked.
    let sim = common::simulator(common::stream(420, 5, 5).fault(Fault::None)).await;
    let cfg = common::parse(&common::yaml(
        &sim.base_url(),
        "300ms",
        &common::scenario("chat", 8),
        "    timeout: 300ms\n",
    ));
    // timeout 300 ms < probe duration: every probe times out at its deadline; still no overlap.
    let d = common::daemon(cfg).await;
    let mut rx = d.subscribe();
    let outs = common::outcomes(&mut rx, 4, Duration::from_secs(15)).await;
    d.stop().await;
    assert!(outs
        .iter()
        .all(|o| o.failure_reason() == Some(llm_probe::measure::FailureReason::Timeout)));
    assert!(sim.received().len() >= 4);
    // Each probe ran to its 300 ms deadline; the next one was sent after that, by the probe's
    // own clock (arrivals at the simulator would add the request's own jitter).
    for w in outs.windows(2) {
        let gap = w[1].observations.timeline.sent - w[0].observations.timeline.sent;
        assert!(
            gap >= Duration::from_millis(300),
            "a probe was sent {gap:?} after the previous one, before its deadline"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_drops_in_flight_probes_without_observing_them() {
    let sim = common::simulator(common::stream(10, 5, 20).fault(Fault::Stall)).await;
    let cfg = common::parse(&common::yaml(
        &sim.base_url(),
        "30s",
        &common::scenario("chat", 32),
        "",
    ));
    let d = common::daemon(cfg).await;
    let mut rx = d.subscribe();
    let metrics = d.metrics.clone();
    // Wait for the (stalled) probe to be in flight.
    for _ in 0..200 {
        if !sim.received().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        sim.received().len(),
        1,
        "the first probe starts within the phase window"
    );
    let t = std::time::Instant::now();
    d.stop().await;
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "stop does not wait for the 30 s deadline"
    );
    assert!(
        rx.try_recv().is_err(),
        "the cancelled probe produced no outcome"
    );
    let (_, text) = metrics.render(None);
    let l = [("target", "sim"), ("scenario", "chat")];
    assert_eq!(
        common::sample(&text, "llm_probe_probes_total", &l),
        Some(0.0)
    );
    assert_eq!(
        common::sample(&text, "llm_probe_time_to_first_token_seconds_count", &l),
        None
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exporter_endpoints_and_content_negotiation() {
    let sim = common::simulator(common::stream(10, 5, 5).fault(Fault::None)).await;
    let cfg = common::parse(&common::yaml(
        &sim.base_url(),
        "1s",
        &common::scenario("chat", 8),
        "",
    ));
    let d = common::daemon(cfg).await;
    let mut rx = d.subscribe();
    common::outcomes(&mut rx, 1, Duration::from_secs(10)).await;

    assert_eq!(common::get(d.addr, "/-/healthy", None).await.0, 200);
    assert_eq!(common::get(d.addr, "/-/ready", None).await.0, 200);
    assert_eq!(common::get(d.addr, "/nope", None).await.0, 404);
    let (status, ct, landing) = common::get(d.addr, "/", None).await;
    assert_eq!(status, 200);
    assert!(ct.starts_with("text/html"));
    assert!(
        landing.contains("/metrics") && landing.contains("<code>sim</code> / <code>chat</code>"),
        "a card per pair: {landing}"
    );
    let (status, _, page) = common::get(d.addr, "/targets/sim", None).await;
    assert_eq!(status, 200);
    assert!(page.contains("sim: openai-chat"), "{page}");
    assert!(
        page.contains("class=\"pt ttft\""),
        "recent probes are charted: {page}"
    );

    let (_, ct, om) = common::get(
        d.addr,
        "/metrics",
        Some("application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"),
    )
    .await;
    assert!(ct.starts_with("application/openmetrics-text"), "{ct}");
    assert!(om.ends_with("# EOF\n"));
    assert!(om.contains("# UNIT llm_probe_time_to_first_token_seconds seconds"));
    let (_, ct, text) = common::get(d.addr, "/metrics", Some("text/plain")).await;
    assert!(ct.starts_with("text/plain; version=0.0.4"), "{ct}");
    assert!(!text.contains("# EOF"));
    // The spelling trap of docs/metrics.md: the two formats write integer bounds differently.
    assert!(text.contains(r#"le="30""#) && om.contains(r#"le="30.0""#));

    let info = [
        ("target", "sim"),
        ("response_model", "llm-probe-simulator"),
        ("server", "llm-probe-simulator"),
    ];
    assert_eq!(
        common::sample(&text, "llm_probe_endpoint_info", &info),
        Some(1.0)
    );
    assert_eq!(
        common::sample(&text, "llm_probe_config_last_reload_successful", &[]),
        Some(1.0)
    );
    assert_eq!(
        common::sample(
            &text,
            "llm_probe_slo_time_to_first_token_seconds",
            &[("target", "sim")]
        ),
        Some(0.3)
    );
    d.stop().await;
}

#[tokio::test]
async fn configured_slo_thresholds_become_bucket_boundaries() {
    let yaml = common::yaml(
        "http://127.0.0.1:1/v1",
        "15s",
        &common::scenario("chat", 8),
        "    slo:\n      ttft_p95: 350ms\n      output_tokens_per_second_min: 42\n",
    );
    let cfg = common::parse(&yaml);
    let d = common::daemon(cfg).await;
    assert!(d.metrics.ttft_boundaries().contains(&0.35));
    assert!(
        d.metrics.ttft_boundaries().contains(&0.3),
        "the default SLO stays a boundary"
    );
    assert!(d.metrics.tokens_per_second_boundaries().contains(&42.0));
    assert!(
        d.metrics
            .tokens_per_second_boundaries()
            .windows(2)
            .all(|w| w[0] < w[1]),
        "sorted, no duplicates"
    );
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_taken_port_is_a_typed_start_error_that_names_the_address() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let cfg = common::parse(&common::yaml(
        "http://127.0.0.1:9/v1",
        "10s",
        &common::scenario("chat", 8),
        "",
    ));
    let err = match llm_probe::daemon::Daemon::start(cfg, addr, None).await {
        Ok(_) => panic!("a second listener on {addr} must not start"),
        Err(e) => e,
    };
    assert!(
        matches!(
            &err,
            llm_probe::daemon::StartError::Listen(llm_probe::server::ListenError::Bind { addr: a, .. }) if *a == addr
        ),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(
        text.starts_with(&format!("cannot listen on {addr}: "))
            && text.contains("--web.listen-address"),
        "{text}"
    );
    drop(taken);
}
