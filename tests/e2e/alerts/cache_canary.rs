//! The prefix-cache canary's alert end to end with real components:
//! Prometheus 2.x on loopback loads the shipped rules (every duration divided by 15,
//! `common::rules`: the 30 m window becomes 2 min, `for: 15m` becomes 60 s) and scrapes the
//! daemon, which sends a `cache_canary: true` scenario to the in-process simulator every second.
//! With the simulator's prefix cache switched off (`simulate --prefix-cache off`, the default)
//! the warm request is no faster than the cold one, the warm/cold TTFT ratio stays near 1 and
//! LlmProbePrefixCacheNotFaster fires; with the cache on (warm TTFT a quarter of the cold one)
//! it stays silent.

use crate::common;

use std::time::{Duration, Instant};

use common::rules::{scalar, Prometheus};
use llm_probe::simulate::{Script, Simulator};

const ALERT: &str = "LlmProbePrefixCacheNotFaster";
const RATIO: &str = r#"llm_probe_prefix_cache_warm_cold_ratio{target="sim",scenario="canary"}"#;

async fn setup(prefix_cache: bool) -> (Simulator, llm_probe::daemon::Daemon) {
    let sim = common::simulator(Script {
        ttft: Duration::from_millis(200),
        itl: Duration::from_millis(5),
        tokens: 8,
        prefix_cache,
        ..Script::default()
    })
    .await;
    let scenario = "  - name: canary\n    messages: [{role: user, content: \"A long shared prefix.\"}]\n    max_tokens: 8\n    cache_canary: true\n";
    let cfg = common::parse(&common::yaml(&sim.base_url(), "1s", scenario, ""));
    let daemon = common::daemon(cfg).await;
    (sim, daemon)
}

/// The ratio as Prometheus scraped it (waits at most 60 s for the first sample).
async fn scraped_ratio(prom: &Prometheus) -> f64 {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(r) = scalar(prom, RATIO).await {
            return r;
        }
        assert!(Instant::now() < deadline, "{RATIO} was never scraped");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prefix_cache_off_fires_the_canary_alert() {
    let (_sim, daemon) = setup(false).await;
    let dir = tempfile::tempdir().unwrap();
    let prom = common::rules::start_one(dir.path(), daemon.addr).await;

    let ratio = scraped_ratio(&prom).await;
    assert!(ratio > 0.8, "cache off: warm/cold {ratio}");
    common::rules::wait_until_firing(&prom, ALERT, "sim").await;
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prefix_cache_on_does_not_fire() {
    let (_sim, daemon) = setup(true).await;
    let dir = tempfile::tempdir().unwrap();
    let prom = common::rules::start_one(dir.path(), daemon.addr).await;

    // Positive control: the alert rule is loaded and the series it reads exists.
    let rules = prom.api("/api/v1/rules", &[]).await;
    assert!(rules.to_string().contains(ALERT), "{ALERT} not loaded");
    let ratio = scraped_ratio(&prom).await;
    assert!(ratio < 0.6, "cache on: warm/cold {ratio}");
    // Prometheus' own evaluations of the alert over the ratio it has, not a fixed wait.
    common::rules::wait_for_evaluations(&prom, ALERT, 2).await;
    common::rules::assert_silent_over_evaluations(&prom, ALERT, "sim", "with the prefix cache on")
        .await;
    daemon.stop().await;
}
