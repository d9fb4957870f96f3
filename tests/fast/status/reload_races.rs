//! The status page, the API, reload and the scheduler racing each other,
//! each finding over a real daemon and the simulator on loopback:
//! - a probe (scheduled or on demand) that ends while its pair is removed by a reload must not
//!   bring the pair's series or history back;
//! - the probe-now page shows a server's bidirectional and control characters in the raw
//!   stream as visible escapes, not raw (they reorder or hide what is shown around them);
//! - a pair failing for days under the largest history the flags allow keeps its target page
//!   to a few MB (it was 43 MB for 20,000 failures, and grew with every one).

use crate::common;

use std::time::Duration;

use llm_probe::daemon::Daemon;
use llm_probe::server::{DebugProbePolicy, ServerOptions};
use llm_probe::simulate::Script;

/// A probe that ends while its pair is being removed must not bring the removed pair's series
/// (or its status history) back: they would stay on `/metrics` for ever, frozen, and a
/// staleness alert would fire for a target nobody probes. Seen with 100 pairs
/// at 100 ms, one reload renaming every target, left 3 pairs' series behind with count 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_probe_ending_during_a_reload_does_not_resurrect_removed_series() {
    let sim = common::simulator(Script {
        ttft: Duration::ZERO,
        itl: Duration::ZERO,
        tokens: 2,
        ..Script::default()
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("probes.yaml");
    let file = |prefix: &str| {
        let scenarios: String = (0..10)
            .map(|i| common::scenario(&format!("s{i}"), 4))
            .collect();
        let targets: String = (0..10)
            .map(|i| format!("  - name: {prefix}{i}\n    protocol: openai-chat\n    base_url: {}\n    model: m\n    slo: {{ttft_p95: 1s}}\n", sim.base_url()))
            .collect();
        format!("defaults:\n  interval: 100ms\n  timeout: 100ms\nscenarios:\n{scenarios}targets:\n{targets}")
    };
    std::fs::write(&path, file("a")).unwrap();
    let cfg = llm_probe::config::load(&path).unwrap();
    let d = Daemon::start(cfg, "127.0.0.1:0".parse().unwrap(), Some(path.clone()))
        .await
        .unwrap();
    let mut zombies = Vec::new();
    for round in 0..6 {
        let (old, new) = if round % 2 == 0 {
            ("a", "b")
        } else {
            ("b", "a")
        };
        // Every pair of `old` probing at 10 per second.
        tokio::time::sleep(Duration::from_millis(600)).await;
        std::fs::write(&path, file(new)).unwrap();
        d.reload().await.unwrap();
        // Long enough for every probe in flight at the reload to end (timeout 100 ms).
        tokio::time::sleep(Duration::from_millis(400)).await;
        let text = common::get(d.addr, "/metrics", None).await.2;
        zombies.extend(
            text.lines()
                .filter(|l| l.starts_with("llm_probe_probes_total{"))
                .filter(|l| l.contains(&format!("target=\"{old}")))
                .map(|l| format!("round {round}: {l}")),
        );
        let api = common::get(d.addr, "/api/v1/probes?limit=1000", None)
            .await
            .2;
        let v: serde_json::Value = serde_json::from_str(&api).unwrap();
        zombies.extend(
            v["probes"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|p| p["target"].as_str().unwrap().starts_with(old))
                .map(|p| format!("round {round}: history {}/{}", p["target"], p["scenario"])),
        );
    }
    d.stop().await;
    assert!(
        zombies.is_empty(),
        "removed pairs came back after their reload:\n{}",
        zombies.join("\n")
    );
}

/// The raw stream excerpt of a debug probe's page is a server's bytes: a right-to-left
/// override in it (here in the model name the chunks carry) must not reach the page raw.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_probe_page_shows_no_raw_bidi_or_control_characters() {
    let sim = common::simulator(Script {
        model: "evil\u{202e}txt.exe".into(),
        tokens: 2,
        ..Script::default()
    })
    .await;
    let d = Daemon::start_with(
        common::parse(&common::yaml(
            &sim.base_url(),
            "1h",
            &common::scenario("chat", 4),
            "",
        )),
        "127.0.0.1:0".parse().unwrap(),
        None,
        ServerOptions {
            debug_probe: DebugProbePolicy {
                enabled: true,
                min_interval: Some(Duration::ZERO),
            },
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let (status, _, page) = common::get(
        d.addr,
        "/probe?target=sim&scenario=chat&debug=true&format=html",
        None,
    )
    .await;
    d.stop().await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("Raw stream"), "{page}");
    let raw: Vec<char> = page
        .chars()
        .filter(|&c| llm_probe::sanitize::is_unsafe_char(c) && c != '\n')
        .collect();
    assert!(
        raw.is_empty(),
        "raw characters {raw:?} in the page:\n{page}"
    );
    assert!(page.contains("evil\\u{202e}txt.exe"), "{page}");
}

/// The largest history the flags allow (`--web.history.max-probes 100000`, `--web.history.max-age
/// 7d`) on a pair that has been failing for days: the target page must stay bounded in size and
/// render time (it drew and listed every kept failure: about 2 KB each, 4× max-probes kept).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_failing_pair_keeps_its_target_page_bounded() {
    let d = Daemon::start_with(
        common::parse(&common::yaml(
            "http://127.0.0.1:9/v1",
            "1d",
            &common::scenario("chat", 4),
            "",
        )),
        "127.0.0.1:0".parse().unwrap(),
        None,
        ServerOptions {
            history: llm_probe::history::HistoryLimits {
                max_probes: 100_000,
                max_age: Duration::from_secs(7 * 86_400),
            },
            ..Default::default()
        },
    )
    .await
    .unwrap();
    // The schedule's first probe (within 10 s of the start, the next a day later) fails too:
    // wait for it, so that the history holds exactly the failures pushed below and it.
    let mut rx = d.subscribe();
    common::outcomes(&mut rx, 1, Duration::from_secs(30)).await;
    let now = std::time::SystemTime::now();
    let detail = format!("HTTP 500 Internal Server Error: {}", "x".repeat(400));
    for i in 0..19_999u64 {
        d.history.push_probe(llm_probe::history::RecentProbe {
            target: "sim".into(),
            scenario: "chat".into(),
            replica: "".into(),
            started_at: now - Duration::from_secs(30 * (19_999 - i)),
            ttft: None,
            output_tokens_per_second: None,
            tpot: None,
            itl: None,
            e2e: None,
            output_tokens: None,
            failure: Some((
                llm_probe::measure::FailureReason::HttpStatus,
                detail.clone(),
            )),
            identity: None,
            trace_id: None,
        });
    }
    let t = std::time::Instant::now();
    let (status, _, page) = common::get(d.addr, "/targets/sim", None).await;
    let took = t.elapsed();
    d.stop().await;
    assert_eq!(status, 200);
    eprintln!("target page: {} bytes in {took:?}", page.len());
    assert!(
        page.len() < 4_000_000,
        "the target page is {} bytes for one scenario",
        page.len()
    );
    assert!(
        page.contains("20000 failures kept"),
        "the count is still given"
    );
}

/// An on-demand probe still running when a reload removes its pair must not put the pair's
/// history back once it ends (it was pushed after the reload had freed it, and the removed
/// target was served by the API until the next reload).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_on_demand_probe_ending_after_a_reload_does_not_resurrect_the_pair() {
    let sim = common::simulator(Script {
        ttft: Duration::from_millis(1500),
        tokens: 2,
        ..Script::default()
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("probes.yaml");
    let file = |extra: &str| {
        format!(
            "{}{extra}",
            common::yaml(&sim.base_url(), "1d", &common::scenario("chat", 4), "")
        )
    };
    std::fs::write(&path, file("")).unwrap();
    let d = Daemon::start_with(
        llm_probe::config::load(&path).unwrap(),
        "127.0.0.1:0".parse().unwrap(),
        Some(path.clone()),
        ServerOptions {
            debug_probe: DebugProbePolicy {
                enabled: true,
                min_interval: Some(Duration::ZERO),
            },
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let addr = d.addr;
    let probe =
        tokio::spawn(
            async move { common::get(addr, "/probe?target=sim&scenario=chat", None).await },
        );
    tokio::time::sleep(Duration::from_millis(500)).await;
    // The target renamed: "sim" is no longer configured.
    std::fs::write(
        &path,
        file("").replace("  - name: sim\n", "  - name: renamed\n"),
    )
    .unwrap();
    d.reload().await.unwrap();
    let (status, _, body) = probe.await.unwrap();
    assert_eq!(status, 200, "{body}");
    let pairs = d.history.pairs();
    d.stop().await;
    assert!(
        pairs.iter().all(|(t, _)| t != "sim"),
        "the removed target's history is back: {pairs:?}"
    );
}
