//! Hostile input, second pass (issue 27): spending limits of `/probe` that hold when clients
//! give up, bounded API answers, freed history, and a responsive exporter under load.

mod common;

use std::time::{Duration, Instant};

use llm_probe::server::{DebugProbePolicy, ServerOptions};
use llm_probe::simulate::Script;

/// A daemon on `sim` (interval `interval`) with on-demand probes at no per-target period.
async fn daemon_with(
    base_url: &str,
    interval: &str,
    options: ServerOptions,
) -> llm_probe::daemon::Daemon {
    llm_probe::daemon::Daemon::start_with(
        common::parse(&common::yaml(
            base_url,
            interval,
            &common::scenario("a2", 4),
            "",
        )),
        "127.0.0.1:0".parse().unwrap(),
        None,
        options,
    )
    .await
    .unwrap()
}

fn no_period() -> ServerOptions {
    ServerOptions {
        debug_probe: DebugProbePolicy {
            enabled: true,
            min_interval: Some(Duration::ZERO),
        },
        ..Default::default()
    }
}

/// Issue 27, item 1(b): the "two at once" cap holds while the probes run, not while their
/// clients wait: ten clients that give up after 300 ms leave at most two probes in flight.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_that_give_up_do_not_free_the_on_demand_slots() {
    let sim = common::simulator(Script {
        ttft: Duration::from_secs(4),
        tokens: 2,
        ..Script::default()
    })
    .await;
    // The schedule's first probe is minutes away (interval 24 h): requests are /probe's.
    let d = daemon_with(&sim.base_url(), "24h", no_period()).await;
    let client = reqwest::Client::builder()
        .timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let mut refused = 0;
    for _ in 0..10 {
        match client
            .get(format!("http://{}/probe?target=sim", d.addr))
            .send()
            .await
        {
            Ok(r) => {
                assert_eq!(r.status(), 429);
                refused += 1;
            }
            Err(e) => assert!(e.is_timeout(), "{e}"),
        }
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let sent = sim.received().len();
    assert!(
        sent <= 2,
        "{sent} probes were started; at most 2 run at once"
    );
    assert!(refused >= 8, "only {refused} refused");
    d.stop().await;
}

/// A kept probe of `target`/`scenario` started `age` ago.
fn kept(target: &str, scenario: &str, age: Duration) -> llm_probe::history::RecentProbe {
    llm_probe::history::RecentProbe {
        target: target.into(),
        scenario: scenario.into(),
        started_at: std::time::SystemTime::now() - age,
        ttft: Some(Duration::from_millis(100)),
        output_tokens_per_second: Some(50.0),
        tpot: None,
        itl: None,
        e2e: Some(Duration::from_millis(300)),
        output_tokens: Some(4),
        failure: None,
        identity: None,
    }
}

/// Issue 27, item 5: the history of pairs that leave the configuration on reload is freed and
/// no longer served (renamed targets kept their rings for the life of the process).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_frees_the_history_of_removed_pairs() {
    let sim = common::simulator(Script::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("probes.yaml");
    let yaml = common::yaml(&sim.base_url(), "24h", &common::scenario("a2", 4), "");
    std::fs::write(&file, &yaml).unwrap();
    let d = llm_probe::daemon::Daemon::start(
        common::parse(&yaml),
        "127.0.0.1:0".parse().unwrap(),
        Some(file.clone()),
    )
    .await
    .unwrap();
    for i in 0..50 {
        d.history
            .push_probe(kept(&format!("renamed-{i}"), "a2", Duration::from_secs(5)));
    }
    d.history
        .push_probe(kept("sim", "a2", Duration::from_secs(5)));
    d.history
        .push_probe(kept("sim", "gone-scenario", Duration::from_secs(5)));
    assert_eq!(d.history.pairs().len(), 52);
    d.reload().await.expect("the same file reloads");
    assert_eq!(
        d.history.pairs(),
        vec![("sim".to_string(), "a2".to_string())],
        "only the configured pair keeps its history"
    );
    let (_, _, api) = common::get(d.addr, "/api/v1/probes", None).await;
    assert!(
        !api.contains("renamed-") && !api.contains("gone-scenario"),
        "{api}"
    );
    d.stop().await;
}
