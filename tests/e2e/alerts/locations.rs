//! Two probe locations under one Prometheus: two daemons probe the same
//! target `sim`, scraped with different `location` target labels. The network path of one
//! location is made slow by pointing it at a slow simulator (400 ms TTFT against the 300 ms SLO).
//! One slow location: LlmProbeTTFTP95AboveSLOFromOneLocation fires for it and the quorum alert
//! LlmProbeTTFTP95AboveSLO stays silent; both slow (a reload): the quorum alert fires, once.

use crate::common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::rules::{Prometheus, Scrape};
use llm_probe::daemon::Daemon;
use llm_probe::simulate::{Script, Simulator};

const QUORUM: &str = "LlmProbeTTFTP95AboveSLO";
const ONE: &str = "LlmProbeTTFTP95AboveSLOFromOneLocation";

async fn simulator(ttft_ms: u64) -> Simulator {
    common::simulator(Script {
        ttft: Duration::from_millis(ttft_ms),
        itl: Duration::from_millis(2),
        tokens: 4,
        ..Script::default()
    })
    .await
}

fn write_probes(file: &Path, sim: &Simulator) {
    let yaml = common::yaml(&sim.base_url(), "1s", &common::scenario("chat", 4), "");
    std::fs::write(file, yaml).unwrap();
}

async fn location(file: &Path, sim: &Simulator) -> Daemon {
    write_probes(file, sim);
    let cfg = llm_probe::config::load(file).expect("loads");
    Daemon::start(
        cfg,
        "127.0.0.1:0".parse().unwrap(),
        Some(file.to_path_buf()),
    )
    .await
    .expect("daemon starts")
}

/// (state, location label) of each active alert named `name`.
async fn states(p: &Prometheus, name: &str) -> Vec<(String, String)> {
    common::rules::alerts(p, name)
        .await
        .iter()
        .map(|a| {
            (
                a["state"].as_str().unwrap_or("").to_string(),
                a["labels"]["location"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_slow_location_warns_and_two_page() {
    let (fast, slow) = (simulator(20).await, simulator(400).await);
    let dir = tempfile::tempdir().unwrap();
    let (file_eu, file_us) = (dir.path().join("eu.yaml"), dir.path().join("us.yaml"));
    let eu = location(&file_eu, &fast).await;
    let us = location(&file_us, &slow).await;
    let prom = common::rules::start(
        dir.path(),
        &[
            Scrape {
                addr: eu.addr,
                labels: &[("location", "eu")],
            },
            Scrape {
                addr: us.addr,
                labels: &[("location", "us")],
            },
        ],
    )
    .await;

    // Until both locations count as judged (the alerts' probe-count guard): before that, the only
    // location with enough probes is "every location", and the quorum rule rightly judges on it
    // alone (a single-location setup pages as before).
    let deadline = Instant::now() + Duration::from_secs(60);
    let reporting = "count(target_model_scenario:llm_probe_ttft_slo:judged)";
    while common::rules::scalar(&prom, reporting).await != Some(2.0) {
        assert!(
            Instant::now() < deadline,
            "both locations were never judged"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // A quorum state from an evaluation before both counted (when us alone was "every location")
    // is cleared by the next evaluations: judge from evaluations after this point.
    common::rules::wait_for_evaluations(&prom, QUORUM, 2).await;
    // us slow, eu fast: the one-location warning fires for us; the quorum alert never starts.
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let quorum = states(&prom, QUORUM).await;
        assert!(
            quorum.is_empty(),
            "{QUORUM} with one slow location: {quorum:?}"
        );
        let one = states(&prom, ONE).await;
        if one.iter().any(|(s, _)| s == "firing") {
            assert_eq!(one, [("firing".to_string(), "us".to_string())]);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{ONE} did not fire (last {one:?})"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // Both series per location exist: the rules kept `location`.
    let p95 = common::rules::vector(
        &prom,
        "target_model_scenario:llm_probe_time_to_first_token_seconds:p95_10m",
    )
    .await;
    assert_eq!(p95.len(), 2, "{p95:?}");

    // eu's path gets slow too: the quorum alert fires, once, without a location; the
    // one-location warning ends.
    write_probes(&file_eu, &slow);
    eu.reload().await.expect("reload succeeds");
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let quorum = states(&prom, QUORUM).await;
        let one = states(&prom, ONE).await;
        if quorum.iter().any(|(s, _)| s == "firing") && one.is_empty() {
            assert_eq!(quorum, [("firing".to_string(), String::new())]);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "after both locations got slow: {QUORUM} {quorum:?}, {ONE} {one:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    eu.stop().await;
    us.stop().await;
}
