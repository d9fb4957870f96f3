//! A pool (a target with `replicas:`) on the status pages and the API: the pair is the pool,
//! and its replicas are listed worst first, each judged over its own probes.

use crate::common;

use std::time::Duration;

use llm_probe::simulate::{Fault, Script};
use serde_json::Value;

use common::fleet::{addrs, pool_yaml, simulator_at, ttft, until, write_sd};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_target_page_and_the_api_list_the_replicas_worst_first() {
    let healthy = simulator_at("127.0.0.41", 0, common::stream(20, 2, 4)).await;
    let slow = simulator_at("127.0.0.42", 0, common::stream(150, 2, 4)).await;
    let failing = simulator_at(
        "127.0.0.43",
        0,
        Script {
            fault: Fault::Http500,
            ..common::stream(20, 2, 4)
        },
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let sd = dir.path().join("pool.json");
    write_sd(&sd, &addrs(&[&healthy, &slow, &failing]));
    let cfg = common::parse(&pool_yaml(
        &format!("      file_sd: {}\n      refresh: 200ms\n", sd.display()),
        "300ms",
        "",
    ));
    let d = common::daemon(cfg).await;
    let (h, s, f) = (
        healthy.addr.to_string(),
        slow.addr.to_string(),
        failing.addr.to_string(),
    );
    until(&d, "two probes per replica", Duration::from_secs(30), |t| {
        [&h, &s].iter().all(|r| ttft(t, r).1 >= 2.0) && failing.received().len() >= 2
    })
    .await;

    // The API: one pair (the pool), its replicas worst first: the failing one (down), then the
    // slow one (higher P95 TTFT), then the healthy one.
    let (status, _, body) = common::get(d.addr, "/api/v1/targets", None).await;
    assert_eq!(status, 200);
    let v: Value = serde_json::from_str(&body).unwrap();
    let pairs = v["pairs"].as_array().unwrap();
    assert_eq!(pairs.len(), 1, "{body}");
    let replicas = pairs[0]["replicas"].as_array().unwrap();
    let order: Vec<&str> = replicas
        .iter()
        .map(|r| r["replica"].as_str().unwrap())
        .collect();
    assert_eq!(order, [f.as_str(), s.as_str(), h.as_str()], "{body}");
    assert_eq!(replicas[0]["state"], "down");
    assert_eq!(replicas[0]["reason"]["reason"], "http_status");
    assert!(replicas[0].get("target").is_none(), "{}", replicas[0]);
    let p95 = |r: &Value| r["ttft_p95_ms"].as_f64().unwrap();
    assert!(
        p95(&replicas[1]) > 100.0 && p95(&replicas[2]) < 100.0,
        "{body}"
    );
    // The pool's own state is over every replica's probes: some failed, not all.
    assert_eq!(pairs[0]["state"], "failing", "{body}");
    // Each replica keeps one backend identity (the failing one reveals less than the others):
    // the pool's identity changes are the replicas' own, none.
    assert_eq!(
        pairs[0]["identity_changes"],
        serde_json::json!([]),
        "{body}"
    );
    assert_eq!(pairs[0]["replicas_not_listed"], 0);

    // "Probe now" on the pool goes through base_url (no replica): shown, not kept.
    let (status, _, _) = common::get(d.addr, "/probe?target=pool&scenario=chat", None).await;
    assert_eq!(status, 200);

    // Each kept probe names its replica.
    let (_, _, body) = common::get(d.addr, "/api/v1/probes?target=pool", None).await;
    let v: Value = serde_json::from_str(&body).unwrap();
    let probes = v["probes"].as_array().unwrap();
    assert!(probes.len() >= 6, "{body}");
    for p in probes {
        let r = p["replica"].as_str().unwrap_or_default();
        assert!([&h, &s, &f].iter().any(|a| a.as_str() == r), "{p}");
    }
    // A probe's record page (where an exemplar leads) names its replica.
    let p = &probes[0];
    let id = p["trace_id"].as_str().expect("a kept probe has a trace id");
    let (status, _, record) =
        common::get(d.addr, &format!("/probes/{id}"), Some("text/html")).await;
    assert_eq!(status, 200);
    let replica = p["replica"].as_str().unwrap();
    assert!(
        record.contains(&format!(" at replica <code>{replica}</code>")),
        "{record}"
    );

    // The overview's card of the pool names its worst replica.
    let (_, _, overview) = common::get(d.addr, "/", None).await;
    assert!(
        overview.contains(&format!("3; worst <code>{f}</code>")),
        "{overview}"
    );

    // The target page: the table, in the same order.
    let (status, _, page) = common::get(d.addr, "/targets/pool", None).await;
    assert_eq!(status, 200);
    assert!(page.contains("Replicas (3), worst first"), "{page}");
    let at = |r: &str| page.find(&format!("<code>{r}</code>")).unwrap();
    assert!(at(&f) < at(&s) && at(&s) < at(&h), "{page}");
    d.stop().await;
}

/// A pool whose discovery never succeeded (its file_sd file is missing) is still on the
/// overview and the API, as "no data", and its target page answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_without_replicas_is_listed_as_no_data() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("not-there.json");
    let cfg = common::parse(&pool_yaml(
        &format!(
            "      file_sd: {}\n      refresh: 200ms\n",
            missing.display()
        ),
        "300ms",
        "",
    ));
    let d = common::daemon(cfg).await;
    let (_, _, body) = common::get(d.addr, "/api/v1/targets", None).await;
    let v: Value = serde_json::from_str(&body).unwrap();
    let pairs = v["pairs"].as_array().unwrap();
    assert_eq!(pairs.len(), 1, "{body}");
    assert_eq!(pairs[0]["target"], "pool");
    assert_eq!(pairs[0]["state"], "no_data");
    let (status, _, _) = common::get(d.addr, "/targets/pool", None).await;
    assert_eq!(status, 200);
    d.stop().await;
}
