//! Hostile input, second pass: spending limits of `/probe` that hold when clients
//! give up, bounded API answers, freed history, and a responsive exporter under load.

use crate::common;

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

/// The "two at once" cap holds while the probes run, not while their
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

/// A kept probe of `target`/`scenario` started `age` before the test's first call (so that
/// probes of equal ages share their instant).
fn kept(target: &str, scenario: &str, age: Duration) -> llm_probe::history::RecentProbe {
    static BASE: std::sync::OnceLock<std::time::SystemTime> = std::sync::OnceLock::new();
    llm_probe::history::RecentProbe {
        target: target.into(),
        scenario: scenario.into(),
        replica: "".into(),
        started_at: *BASE.get_or_init(std::time::SystemTime::now) - age,
        ttft: Some(Duration::from_millis(100)),
        output_tokens_per_second: Some(50.0),
        tpot: None,
        itl: None,
        e2e: Some(Duration::from_millis(300)),
        output_tokens: Some(4),
        failure: None,
        identity: None,
        trace_id: None,
    }
}

/// The history of pairs that leave the configuration on reload is freed and
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

/// GETs `path` and parses the JSON answer; panics unless 200.
async fn json(addr: std::net::SocketAddr, path: &str) -> serde_json::Value {
    let (status, _, body) = common::get(addr, path, None).await;
    assert_eq!(status, 200, "{path}: {body}");
    serde_json::from_str(&body).unwrap()
}

/// `/api/v1/probes` answers a bounded page (newest first, `limit` with a
/// default and a maximum) and a cursor to the next, so no answer is the whole history; the
/// pages together hold every kept probe exactly once. `/-/healthy` stays quick while 100 slow
/// readers hold pages of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_probes_api_is_paged_and_the_exporter_stays_responsive() {
    let sim = common::simulator(Script::default()).await;
    let d = daemon_with(&sim.base_url(), "24h", ServerOptions::default()).await;
    // 50 pairs × 120 probes (the default ring), 1 s apart, the pairs' probes sharing instants.
    for pair in 0..50 {
        for i in 0..120u64 {
            d.history
                .push_probe(kept(&format!("t{pair}"), "a2", Duration::from_secs(i + 1)));
        }
    }
    let all = 50 * 120;
    let first = json(d.addr, "/api/v1/probes").await;
    let page = first["probes"].as_array().unwrap();
    assert_eq!(page.len(), 200, "the default limit");
    let times: Vec<&str> = page
        .iter()
        .map(|p| p["started_at"].as_str().unwrap())
        .collect();
    assert!(times.windows(2).all(|w| w[0] >= w[1]), "newest first");
    let (status, _, body) = common::get(d.addr, "/api/v1/probes?limit=100000", None).await;
    assert_eq!(status, 400);
    assert!(body.contains("limit") && body.contains("1000"), "{body}");
    // Every kept probe once, through the cursor.
    let mut seen = std::collections::HashSet::new();
    // 999: a page would end inside a group of 50 probes of one instant.
    let mut path = "/api/v1/probes?limit=999".to_string();
    let mut pages = 0;
    loop {
        let v = json(d.addr, &path).await;
        pages += 1;
        for p in v["probes"].as_array().unwrap() {
            assert!(seen.insert(p.to_string()), "seen twice: {p}");
        }
        match v["next"].as_str() {
            Some(cursor) => path = format!("/api/v1/probes?limit=999&before={cursor}"),
            None => break,
        }
        assert!(pages < 20, "the cursor does not advance");
    }
    assert_eq!(seen.len(), all);
    // Filters combine with the cursor.
    let v = json(d.addr, "/api/v1/probes?target=t3&limit=50").await;
    assert_eq!(v["probes"].as_array().unwrap().len(), 50);
    let next = v["next"].as_str().unwrap().to_string();
    let v = json(
        d.addr,
        &format!("/api/v1/probes?target=t3&limit=1000&before={next}"),
    )
    .await;
    assert_eq!(v["probes"].as_array().unwrap().len(), 70);
    assert!(v.get("next").is_none_or(|n| n.is_null()));
    // 100 readers that read nothing of their pages.
    let mut slow = Vec::new();
    for _ in 0..100 {
        use tokio::io::AsyncWriteExt;
        let mut s = tokio::net::TcpStream::connect(d.addr).await.unwrap();
        s.write_all(b"GET /api/v1/probes?limit=1000 HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .unwrap();
        slow.push(s);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut slowest = Duration::ZERO;
    for _ in 0..5 {
        let t = Instant::now();
        let (status, _, _) = common::get(d.addr, "/-/healthy", None).await;
        assert_eq!(status, 200);
        let took = t.elapsed();
        assert!(took < Duration::from_secs(1), "/-/healthy took {took:?}");
        slowest = slowest.max(took);
    }
    eprintln!("/-/healthy with 100 slow readers of /api/v1/probes: slowest {slowest:?}");
    drop(slow);
    d.stop().await;
}

/// A `since` before 1970 is a time, not "not RFC 3339".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_since_before_1970_is_a_time() {
    let sim = common::simulator(Script::default()).await;
    let d = daemon_with(&sim.base_url(), "24h", ServerOptions::default()).await;
    d.history
        .push_probe(kept("sim", "a2", Duration::from_secs(1)));
    let v = json(d.addr, "/api/v1/probes?since=0001-01-01T00:00:00Z").await;
    assert_eq!(v["probes"].as_array().unwrap().len(), 1);
    d.stop().await;
}

/// Control and bidirectional characters a server puts in its identity (the
/// response model here) reach `/metrics` label values as visible escapes, never raw.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identity_labels_carry_no_raw_control_or_bidi_characters() {
    let sim = common::simulator(Script {
        model: "evil\u{202e}txt.exe\u{1b}[2J".into(),
        tokens: 2,
        ..Script::default()
    })
    .await;
    let d = daemon_with(&sim.base_url(), "1s", no_period()).await;
    let (status, _, _) = common::get(d.addr, "/probe?target=sim", None).await;
    assert_eq!(status, 200);
    let mut rx = d.subscribe();
    common::outcomes(&mut rx, 1, Duration::from_secs(20)).await;
    let (_, text) = d.metrics.render(None);
    let line = text
        .lines()
        .find(|l| l.starts_with("llm_probe_endpoint_info{"))
        .expect("the identity is exported");
    assert!(!line.contains(['\u{202e}', '\u{1b}']), "{line:?}");
    assert!(line.contains("evil\\\\u{202e}txt.exe"), "{line:?}");
    d.stop().await;
}
