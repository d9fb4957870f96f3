//! `GET /probe`: an on-demand probe of a configured target, with its timeline and a raw
//! excerpt; never of anything else (no open proxy); not observed into the scheduled series.

use crate::common;

use std::time::Duration;

use llm_probe::simulate::Script;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn debug_probe_of_a_configured_target_returns_its_timeline() {
    let script = Script {
        ttft: Duration::from_millis(40),
        itl: Duration::from_millis(3),
        tokens: 6,
        ..Script::default()
    };
    let sim = common::simulator(script).await;
    let scenarios = format!("{}{}", common::scenario("a2", 8), common::scenario("b2", 4));
    // Two on-demand probes of one target in a row: no per-target period here (see
    // tests/fast/exporter/server.rs for the limit).
    let options = common::on_demand_probes();
    let d = llm_probe::daemon::Daemon::start_with(
        common::parse(&common::yaml(&sim.base_url(), "60s", &scenarios, "")),
        "127.0.0.1:0".parse().unwrap(),
        None,
        options,
    )
    .await
    .unwrap();

    let (status, ct, body) =
        common::get(d.addr, "/probe?target=sim&scenario=b2&debug=true", None).await;
    assert_eq!(status, 200, "{body}");
    assert!(ct.starts_with("application/json"));
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["scenario"], "b2");
    assert_eq!(v["success"], true);
    assert_eq!(v["output_tokens"], 4);
    let events = v["timeline"]["events"].as_array().unwrap();
    assert_eq!(events.len(), 4);
    let first = events[0]["offset_seconds"].as_f64().unwrap();
    assert!(
        (first - v["ttft_seconds"].as_f64().unwrap()).abs() < 1e-9,
        "the first event is the TTFT mark"
    );
    assert!(first >= 0.040);
    assert!(events
        .windows(2)
        .all(|w| w[0]["offset_seconds"].as_f64() <= w[1]["offset_seconds"].as_f64()));
    let tl = &v["timeline"];
    assert!(tl["headers_seconds"].as_f64().unwrap() < first);
    // A fresh connection (the default): opened after `sent`, ready before the headers, and its
    // setup is the gap between the two marks.
    let (start, ready) = (
        tl["connect_started_seconds"].as_f64().unwrap(),
        tl["connected_seconds"].as_f64().unwrap(),
    );
    assert!(0.0 <= start && start <= ready, "{tl}");
    assert!(ready <= tl["headers_seconds"].as_f64().unwrap(), "{tl}");
    let setup = v["connection_setup_seconds"].as_f64().unwrap();
    assert!((setup - (ready - start)).abs() < 1e-6, "{setup} vs {tl}");
    let raw = v["raw_excerpt"].as_str().unwrap();
    assert!(
        raw.starts_with("data: {") && raw.contains("[DONE]"),
        "{raw}"
    );

    // Without debug: the numbers, no timeline or raw bytes; default scenario is the first.
    let (_, _, body) = common::get(d.addr, "/probe?target=sim", None).await;
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["scenario"], "a2");
    assert!(v.get("timeline").is_none() && v.get("raw_excerpt").is_none());

    // On-demand probes are not in the scheduled series: the schedule's first probe of (sim, b2)
    // is 7.3 s away (its slot, `schedule::slot`).
    let (_, text) = d.metrics.render(None);
    assert_eq!(
        common::sample(&text, "llm_probe_probes_total", &[("scenario", "b2")]),
        Some(0.0)
    );
    // But they are on the status pages.
    let (_, _, page) = common::get(d.addr, "/targets/sim", None).await;
    assert!(page.contains("probe now"), "{page}");
    let (_, _, api) = common::get(d.addr, "/api/v1/probes?scenario=b2", None).await;
    assert!(api.contains("\"scenario\":\"b2\""), "{api}");
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_configured_targets_can_be_probed() {
    let sim = common::simulator(Script::default()).await;
    let other = common::simulator(Script::default()).await;
    // The schedule's first probe of (sim, a2) is 7.3 s away (its slot, `schedule::slot`, is
    // a fraction of min(interval, 10 s)), after the test: any request is the endpoint's.
    let d = common::daemon(common::parse(&common::yaml(
        &sim.base_url(),
        "24h",
        &common::scenario("a2", 8),
        "",
    )))
    .await;
    let evil = format!("/probe?target={}&debug=true", other.base_url());
    for path in [
        evil.as_str(),
        "/probe?target=nope",
        "/probe?target=sim&scenario=zzz",
        "/probe",
    ] {
        let (status, _, body) = common::get(d.addr, path, None).await;
        assert!(status == 404 || status == 400, "{path}: {status} {body}");
        assert!(!body.contains("\"success\""), "{path} ran a probe: {body}");
    }
    // An unknown target is named as unknown; the configured ones are not listed to anyone
    // who asks: the landing page lists them.
    let (_, _, body) = common::get(d.addr, "/probe?target=nope", None).await;
    assert!(
        body.contains("\"nope\" is not in the configuration") && body.contains("landing page (/)"),
        "{body}"
    );
    assert!(
        !body.contains("sim"),
        "a configured target is listed: {body}"
    );
    assert!(
        other.received().is_empty(),
        "a URL in the query is never contacted"
    );
    assert!(
        sim.received().is_empty(),
        "nothing ran for the rejected requests"
    );
    d.stop().await;
}

/// A reload that only adds a scenario keeps the target's prober (its clients and connections
/// stay), yet the scenario is configured from then on: `/probe` probes it and the target's
/// summary lists it; a reload that removes it again makes `/probe` refuse it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scenario_added_by_a_reload_can_be_probed_on_demand() {
    let sim = common::simulator(Script::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let probes = dir.path().join("probes.yaml");
    let one = common::yaml(&sim.base_url(), "24h", &common::scenario("a2", 8), "");
    let two = common::yaml(
        &sim.base_url(),
        "24h",
        &format!("{}{}", common::scenario("a2", 8), common::scenario("b2", 4)),
        "",
    );
    std::fs::write(&probes, &one).unwrap();
    let options = common::on_demand_probes();
    let d = llm_probe::daemon::Daemon::start_with(
        common::parse(&one),
        "127.0.0.1:0".parse().unwrap(),
        Some(probes.clone()),
        options,
    )
    .await
    .unwrap();
    std::fs::write(&probes, &two).unwrap();
    let summary = d.reload().await.expect("the file with b2 reloads");
    assert!(summary.contains("started 1"), "{summary}");
    let (status, _, body) = common::get(d.addr, "/probe?target=sim&scenario=b2", None).await;
    assert_eq!(status, 200, "{body}");
    let (_, _, page) = common::get(d.addr, "/targets/sim", None).await;
    assert!(page.contains("scenarios=[a2, b2]"), "{page}");
    std::fs::write(&probes, &one).unwrap();
    d.reload().await.expect("the file without b2 reloads");
    let (status, _, body) = common::get(d.addr, "/probe?target=sim&scenario=b2", None).await;
    assert_eq!(status, 404, "{body}");
    d.stop().await;
}

/// The slots the tests above rely on (a scheduled probe must not land inside them).
#[test]
fn the_slots_these_tests_rely_on() {
    use llm_probe::schedule::slot;
    let long = Duration::from_secs(60);
    assert!(slot("sim", &["a2", "b2"], 1, long).first > Duration::from_secs(7));
    assert!(slot("sim", &["a2"], 0, long).first > Duration::from_secs(7));
    assert!(slot("sim", &["chat"], 0, long).first > Duration::from_secs(7));
}
