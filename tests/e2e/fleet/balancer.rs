//! One pool seen two ways, in a real Prometheus running the shipped rules (every duration
//! divided by 15, `common::rules`): eight simulators behind a real balancer (haproxy, round
//! robin), probed once through the balancer (target `front`, the users' view) and once per
//! replica (target `pool`, `replicas:` from a file_sd file), every second (15 s in the scaled
//! world). Six replicas are healthy (TTFT 100 ms), one is 50 % slower on every request, one
//! fails every fifth request (HTTP 500).
//!
//! Through the balancer the two sick replicas hide in the mix: the front door's failure ratio
//! stays under LlmProbeFailureRatioHigh's 10 % and nothing names a replica. The replica target
//! names both, and only them; a real Alertmanager running the shipped example (its timers
//! divided by 15 too) sends one notification per replica problem, in the pool's group, to the
//! ticket receiver, and nothing for the front door. The times are printed for docs/alerting.md.

use crate::common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::alertmanager::{self, Alertmanager, Note};
use common::fleet::{simulator_at, write_sd, Haproxy};
use common::rules::scalar;
use llm_probe::simulate::{Fault, Script};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_balancer_hides_the_sick_replicas_and_the_replica_alerts_name_them() {
    let healthy = || common::stream(100, 20, 4);
    let mut sims = Vec::new();
    for _ in 0..6 {
        sims.push(simulator_at("127.0.0.1", 0, healthy()).await);
    }
    let slow = simulator_at("127.0.0.1", 0, common::stream(150, 20, 4)).await;
    let failing = simulator_at(
        "127.0.0.1",
        0,
        Script {
            fault: Fault::Http500,
            fault_every: 5,
            ..healthy()
        },
    )
    .await;
    let (slow_addr, failing_addr) = (slow.addr.to_string(), failing.addr.to_string());
    sims.push(slow);
    sims.push(failing);

    let dir = tempfile::tempdir().unwrap();
    let lb = Haproxy::start(dir.path(), &sims.iter().map(|s| s.addr).collect::<Vec<_>>());
    let sd = dir.path().join("pool.json");
    write_sd(
        &sd,
        &sims.iter().map(|s| s.addr.to_string()).collect::<Vec<_>>(),
    );
    let cfg = common::parse(&format!(
        "defaults:\n  interval: 1s\n  timeout: 1s\nscenarios:\n{}targets:\n  - name: front\n    protocol: openai-chat\n    base_url: http://{}/v1\n    model: m\n  - name: pool\n    protocol: openai-chat\n    base_url: http://pool.test:8000/v1\n    model: m\n    replicas:\n      file_sd: {}\n",
        common::scenario("chat", 4),
        lb.addr,
        sd.display()
    ));
    let (hook, notes) = alertmanager::webhook().await;
    let am = Alertmanager::start(dir.path(), hook).await;
    let daemon = common::daemon(cfg).await;
    let started = Instant::now();
    let prom = common::rules::start_alerting(dir.path(), daemon.addr, am.host_port()).await;

    let mut first_firing: Vec<(String, Duration)> = Vec::new();
    let mut front_alerts = BTreeSet::new();
    common::rules::wait_for_replica_alerts(
        &prom,
        &[
            ("LlmProbeReplicaTTFTOutlier", &slow_addr),
            ("LlmProbeReplicaFailing", &failing_addr),
        ],
        &[&slow_addr, &failing_addr],
        |a| {
            let name = a["labels"]["alertname"].as_str().unwrap_or("");
            let replica = a["labels"]["replica"].as_str().unwrap_or("");
            if a["labels"]["target"] == "front" {
                front_alerts.insert(format!("{name} ({})", a["state"]));
            }
            let key = format!("{name} {replica}");
            if a["state"] == "firing" && !first_firing.iter().any(|(k, _)| *k == key) {
                first_firing.push((key, started.elapsed()));
            }
        },
    )
    .await;
    // The front door over the same window: its share of failures is the failing replica's
    // 20 % diluted eightfold, under the failure-ratio alert's 10 %.
    let front = |q: &str| {
        let prom = &prom;
        let q = q.to_string();
        async move { scalar(prom, &q).await }
    };
    let ratio = front(r#"target_model_scenario:llm_probe_probe_failures:ratio10m{target="front"}"#)
        .await
        .expect("the front door's failure ratio is recorded");
    let p95 = front(
        r#"target_model_scenario:llm_probe_time_to_first_token_seconds:p95_10m{target="front"}"#,
    )
    .await;
    let replica_ratio = scalar(
        &prom,
        &format!(
            r#"target_model_scenario_replica:llm_probe_probe_failures:ratio_page_window{{target="pool",replica="{failing_addr}"}}"#
        ),
    )
    .await;
    eprintln!(
        "balancer: front door failure ratio {ratio:.3}, P95 TTFT {p95:?}; the failing replica's ratio {replica_ratio:?}; \
         alerts on the front door: {front_alerts:?}; first firing (seconds since the daemon started; x15 in production time): {first_firing:?}"
    );
    // Alertmanager (the shipped example, timers divided by 15): the pool's replica alerts are
    // one group (`target`), so each replica problem adds one notification that names it.
    let deadline = Instant::now() + Duration::from_secs(60);
    let named = |n: &[Note]| -> BTreeSet<String> {
        n.iter()
            .filter(|n| n.group("target") == "pool")
            .flat_map(|n| n.firing())
            .map(|(_, replica)| replica)
            .collect()
    };
    let want: BTreeSet<String> = [slow_addr.clone(), failing_addr.clone()].into();
    let notes = loop {
        let n = notes.lock().unwrap().clone();
        if named(&n).is_superset(&want) {
            break n;
        }
        assert!(
            Instant::now() < deadline,
            "Alertmanager did not notify both replicas within 60 s of their alerts firing: {n:#?}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let mut first_notified = Vec::new();
    for replica in &want {
        let at = notes
            .iter()
            .find(|n| n.group("target") == "pool" && n.firing().iter().any(|(_, r)| r == replica))
            .unwrap()
            .at;
        first_notified.push((replica.clone(), at.duration_since(started)));
    }
    let pool_notes: Vec<&Note> = notes
        .iter()
        .filter(|n| n.group("target") == "pool")
        .collect();
    eprintln!(
        "balancer: first notification naming each replica (seconds since the daemon started; x15 in production time): {first_notified:?}; \
         {} notifications for the pool",
        pool_notes.len()
    );
    assert!(
        pool_notes.len() <= want.len(),
        "more notifications than replica problems: {pool_notes:#?}"
    );
    for n in &pool_notes {
        assert_eq!(n.path, "/ticket", "replica alerts are warnings: {n:?}");
        for (name, replica) in n.firing() {
            assert!(
                name.starts_with("LlmProbeReplica") && want.contains(&replica),
                "the pool's notification names {name} on {replica:?}"
            );
        }
    }
    assert!(
        !notes.iter().any(|n| n.group("target") == "front"),
        "a notification for the front door: {notes:#?}"
    );
    assert!(
        ratio < 0.1,
        "through the balancer 20 % of one replica in eight is about 2.5 %: {ratio}"
    );
    assert!(
        !front_alerts
            .iter()
            .any(|a| a.starts_with("LlmProbeFailureRatioHigh")),
        "the front door's failure ratio alert: {front_alerts:?}"
    );
    daemon.stop().await;
}
