//! The replica alerts in a real Prometheus running the shipped rules (every duration divided by
//! 15, `common::rules`): one target with `replicas:` from a file_sd file, five replicas probed
//! every second (a 15 s pool in the scaled world). Three are healthy (TTFT 100 ms), one is 50 %
//! slower on every request (150 ms), and at the fifth nothing listens. LlmProbeReplicaTTFTOutlier
//! names the slow replica and LlmProbeReplicaDown the dead one; no replica alert ever names a
//! healthy replica, and the pool as a whole is not down.

use crate::common;

use common::rules::scalar;
use llm_probe::simulate::Simulator;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_slow_and_the_dead_replica_are_named_and_no_other() {
    let sim = |ttft_ms| async move {
        Simulator::start(
            "127.0.0.1:0".parse().unwrap(),
            common::stream(ttft_ms, 20, 4),
        )
        .await
        .expect("the simulator starts")
    };
    let healthy = [sim(100).await, sim(100).await, sim(100).await];
    let slow = sim(150).await;
    let dead = format!("127.0.0.1:{}", common::free_port());
    let slow_addr = slow.addr.to_string();

    let dir = tempfile::tempdir().unwrap();
    let sd = dir.path().join("pool.json");
    let mut targets: Vec<String> = healthy.iter().map(|s| s.addr.to_string()).collect();
    targets.push(slow_addr.clone());
    targets.push(dead.clone());
    std::fs::write(&sd, serde_json::json!([{ "targets": targets }]).to_string()).unwrap();
    let cfg = common::parse(&format!(
        "defaults:\n  interval: 1s\n  timeout: 1s\nscenarios:\n{}targets:\n  - name: pool\n    protocol: openai-chat\n    base_url: http://pool.test:8000/v1\n    model: m\n    replicas:\n      file_sd: {}\n",
        common::scenario("chat", 4),
        sd.display()
    ));
    let daemon = common::daemon(cfg).await;
    let prom = common::rules::start_one(dir.path(), daemon.addr).await;

    common::rules::wait_for_replica_alerts(
        &prom,
        &[
            ("LlmProbeReplicaTTFTOutlier", &slow_addr),
            ("LlmProbeReplicaDown", &dead),
        ],
        &[&slow_addr, &dead],
        |a| {
            assert_ne!(
                a["labels"]["alertname"], "LlmProbeEndpointDown",
                "the pool is not down, one of five replicas is: {a}"
            )
        },
    )
    .await;
    // The pool behind the alert: five replicas judged, the median replica's mean TTFT that of a
    // healthy one (never below the scripted 100 ms), the slow one's above the alert's line.
    let judged = scalar(
        &prom,
        r#"target_model_scenario:llm_probe_replicas_judged:count_page_window{target="pool"}"#,
    )
    .await;
    assert_eq!(judged, Some(5.0));
    let median = scalar(
        &prom,
        r#"target_model_scenario:llm_probe_replica_time_to_first_token_seconds_mean:median_page_window{target="pool"}"#,
    )
    .await
    .expect("the median replica's mean TTFT is recorded");
    let slow_mean = scalar(
        &prom,
        &format!(
            r#"target_model_scenario_replica:llm_probe_time_to_first_token_seconds:mean_page_window{{target="pool",replica="{slow_addr}"}}"#
        ),
    )
    .await
    .expect("the slow replica's mean TTFT is recorded");
    assert!(
        median >= 0.1 && slow_mean > 1.2 * median + 0.01,
        "median replica {median} s, slow replica {slow_mean} s"
    );
    daemon.stop().await;
}
