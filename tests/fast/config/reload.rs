//! Validate-then-swap reload (SIGHUP, `POST /-/reload`): a bad file keeps the old configuration
//! running and sets `llm_probe_config_last_reload_successful 0`; a good one keeps unchanged
//! probes on their schedule with their series, removes the series of removed targets, starts
//! new ones; a flood of reloads never duplicates a schedule.

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use llm_probe::daemon::Daemon;
use llm_probe::reload::ReloadError;

fn target(name: &str, base_url: &str) -> String {
    format!("  - name: {name}\n    protocol: openai-chat\n    base_url: {base_url}\n    model: m\n    scenarios: [chat]\n")
}

/// The probes files' interval.
const INTERVAL: Duration = Duration::from_millis(400);

fn write(path: &Path, targets: &[String]) {
    let yaml = format!(
        "defaults:\n  interval: {}ms\nscenarios:\n{}targets:\n{}",
        INTERVAL.as_millis(),
        common::scenario("chat", 8),
        targets.concat()
    );
    std::fs::write(path, yaml).unwrap();
}

async fn metrics(d: &Daemon) -> String {
    common::get(d.addr, "/metrics", None).await.2
}

fn probes(text: &str, target: &str) -> Option<f64> {
    common::sample(text, "llm_probe_probes_total", &[("target", target)])
}

/// `sim` was probed on one [`INTERVAL`] schedule, not two. Its ticks are `t0 + n × INTERVAL` and a
/// probe is never early, so over the span from the first request to the last there are at most
/// span / INTERVAL + 2 of them, however late a busy host sends any one (up to an interval); a
/// second schedule doubles the count. (Gaps between arrivals would judge the host's load: a
/// late probe followed by a punctual one is a short gap on one schedule.)
fn assert_one_schedule(sim: &llm_probe::simulate::Simulator) {
    let arrivals: Vec<_> = sim.received().iter().map(|r| r.arrived).collect();
    let (Some(first), Some(last)) = (arrivals.first(), arrivals.last()) else {
        panic!("no probe arrived");
    };
    let span = *last - *first;
    let most = (span.as_secs_f64() / INTERVAL.as_secs_f64()).floor() as usize + 2;
    assert!(
        arrivals.len() <= most,
        "{} probes in {span:?} on a {INTERVAL:?} interval (at most {most} on one schedule): a second schedule",
        arrivals.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_file_keeps_the_old_config_and_good_file_swaps() {
    let (a, b, c) = (
        common::simulator(common::stream(5, 1, 4)).await,
        common::simulator(common::stream(5, 1, 4)).await,
        common::simulator(common::stream(5, 1, 4)).await,
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("probes.yaml");
    write(
        &path,
        &[target("a", &a.base_url()), target("b", &b.base_url())],
    );
    let cfg = llm_probe::config::load(&path).unwrap();
    let d = Daemon::start(cfg, "127.0.0.1:0".parse().unwrap(), Some(path.clone()))
        .await
        .unwrap();
    let mut rx = d.subscribe();
    common::outcomes(&mut rx, 4, Duration::from_secs(15)).await;

    // A broken file: rejected with file, line and field; the old targets keep probing.
    std::fs::write(
        &path,
        std::fs::read_to_string(&path)
            .unwrap()
            .replace("interval: 400ms", "interval: soon"),
    )
    .unwrap();
    let err = d.reload().await.unwrap_err();
    assert!(matches!(err, ReloadError::Config(_)), "{err:?}");
    let err = err.to_string();
    assert!(
        err.contains("probes.yaml:2:") && err.contains("interval"),
        "{err}"
    );
    let text = metrics(&d).await;
    assert_eq!(
        common::sample(&text, "llm_probe_config_last_reload_successful", &[]),
        Some(0.0)
    );
    let before = probes(&text, "b").unwrap();
    common::outcomes(&mut rx, 4, Duration::from_secs(15)).await;
    assert!(
        probes(&metrics(&d).await, "b").unwrap() > before,
        "the old config keeps probing"
    );

    // A good file: a unchanged, b removed, c new.
    write(
        &path,
        &[target("a", &a.base_url()), target("c", &c.base_url())],
    );
    let a_before = probes(&metrics(&d).await, "a").unwrap();
    let summary = d.reload().await.unwrap();
    assert!(
        summary.contains("kept 1")
            && summary.contains("removed 1")
            && summary.contains("started 1"),
        "{summary}"
    );
    let text = metrics(&d).await;
    assert_eq!(
        common::sample(&text, "llm_probe_config_last_reload_successful", &[]),
        Some(1.0)
    );
    assert!(
        !text.contains("target=\"b\""),
        "every series of the removed target is gone"
    );
    assert!(
        probes(&text, "a").unwrap() >= a_before,
        "the unchanged target keeps its series"
    );
    common::outcomes(&mut rx, 6, Duration::from_secs(15)).await;
    let text = metrics(&d).await;
    assert!(probes(&text, "c").unwrap() >= 1.0, "the new target probes");

    // Over all of it, target a was probed on one schedule (a restarted one shows in the
    // summary as changed, not kept).
    assert_one_schedule(&a);
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_reload_and_a_flood_of_reloads() {
    let a = common::simulator(common::stream(5, 1, 4)).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("probes.yaml");
    write(&path, &[target("a", &a.base_url())]);
    let cfg = llm_probe::config::load(&path).unwrap();
    let d = Daemon::start(cfg, "127.0.0.1:0".parse().unwrap(), Some(path.clone()))
        .await
        .unwrap();
    let client = reqwest::Client::new();
    let url = format!("http://{}/-/reload", d.addr);
    assert_eq!(client.get(&url).send().await.unwrap().status(), 405);
    let r = client.post(&url).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.text().await.unwrap().contains("kept 1"));

    // 25 reloads at once: every one is answered, applied one at a time.
    let flood: Vec<_> = (0..25)
        .map(|_| tokio::spawn(client.post(&url).send()))
        .collect();
    for r in flood {
        assert_eq!(r.await.unwrap().unwrap().status(), 200);
    }
    // Three more probes after the flood (a duplicated schedule would bring them early).
    let before = a.received().len();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while a.received().len() < before + 3 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "probing stopped after the flood: {} probes",
            a.received().len() - before
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_one_schedule(&a);
    // A reload of a daemon without a config file is refused, not a crash.
    let d2 = common::daemon(common::parse(&common::yaml(
        &a.base_url(),
        "10s",
        &common::scenario("chat", 8),
        "",
    )))
    .await;
    let err = d2.reload().await.unwrap_err();
    assert!(matches!(err, ReloadError::NoConfigFile), "{err:?}");
    assert!(err.to_string().contains("without a config file"), "{err}");
    d2.stop().await;
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reloads_the_running_binary() {
    let a = common::simulator(common::stream(5, 1, 4)).await;
    let b = common::simulator(common::stream(5, 1, 4)).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("probes.yaml");
    write(&path, &[target("a", &a.base_url())]);
    let mut child = common::ChildGuard(
        Command::new(env!("CARGO_BIN_EXE_llm-probe"))
            .args([
                "run",
                "--web.listen-address",
                "127.0.0.1:0",
                "--config.file",
            ])
            .arg(&path)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut err = BufReader::new(child.0.stderr.take().unwrap());
    let addr: std::net::SocketAddr = tokio::task::spawn_blocking(move || loop {
        let mut line = String::new();
        assert!(err.read_line(&mut line).unwrap() > 0);
        if let Some(rest) = line.split("serving metrics on http://").nth(1) {
            // Keep draining stderr so the child never blocks on a full pipe.
            std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
            break rest.split('/').next().unwrap().parse().unwrap();
        }
    })
    .await
    .unwrap();
    write(
        &path,
        &[target("a", &a.base_url()), target("b", &b.base_url())],
    );
    common::signal(&child.0, libc::SIGHUP);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let text = common::get(addr, "/metrics", None).await.2;
        if probes(&text, "b").is_some_and(|n| n >= 1.0) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "target b never appeared after SIGHUP:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(!b.received().is_empty());
}

/// The budgets that once panicked the reloader or wrapped the interval to 1 ms: each reloads, its
/// interval only ever lengthens (to a day at most), and the reloader keeps working after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_at_the_float_limits_reloads_and_only_lengthens_the_interval() {
    let a = common::simulator(common::stream(5, 1, 4)).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("probes.yaml");
    write(&path, &[target("a", &a.base_url())]);
    let cfg = llm_probe::config::load(&path).unwrap();
    let d = Daemon::start(cfg, "127.0.0.1:0".parse().unwrap(), Some(path.clone()))
        .await
        .unwrap();
    let client = reqwest::Client::new();
    let url = format!("http://{}/-/reload", d.addr);
    for (prices, budget) in [
        ("input_per_million: 1, output_per_million: 1", "1e-300"),
        (
            "input_per_million: 1, output_per_million: 1",
            "1.1915468611789493e-16",
        ),
        ("input_per_million: 1e9, output_per_million: 1e9", "5e-324"),
    ] {
        let cost = format!("    interval: 16s\n    cost: {{{prices}, monthly_budget: {budget}}}\n");
        write(&path, &[target("a", &a.base_url()) + &cost]);
        let r = client.post(&url).send().await.unwrap();
        assert_eq!(r.status(), 200, "{budget}: {}", r.text().await.unwrap());
        let text = metrics(&d).await;
        let interval = common::sample(&text, "llm_probe_probe_interval_seconds", &[]).unwrap();
        assert_eq!(interval, 86_400.0, "{budget}");
        let loaded = common::sample(&text, "llm_probe_config_last_reload_successful", &[]);
        assert_eq!(loaded, Some(1.0), "{budget}");
    }
    // And the reloader still applies the next file.
    write(&path, &[target("a", &a.base_url())]);
    let r = client.post(&url).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let text = metrics(&d).await;
    let interval = common::sample(&text, "llm_probe_probe_interval_seconds", &[]).unwrap();
    assert_eq!(interval, 0.4);
    d.stop().await;
}

/// SLO values are bucket boundaries fixed at start: a reload that brings a new prefill floor
/// is refused with the fix (restart), as a new TTFT or tokens-per-second SLO is; one already a
/// boundary reloads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_prefill_floor_needs_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("probes.yaml");
    let file = |floor: &str| {
        format!("defaults:\n  interval: 1h\n  slo: {{prefill_tokens_per_second_min: {floor}}}\nscenarios:\n  - name: long\n    prompt_tokens: 100\n    max_tokens: 8\ntargets:\n{}", target("a", "http://127.0.0.1:9/v1").replace("[chat]", "[long]"))
    };
    std::fs::write(&path, file("1234")).unwrap();
    let cfg = llm_probe::config::load(&path).unwrap();
    let d = Daemon::start(cfg, "127.0.0.1:0".parse().unwrap(), Some(path.clone()))
        .await
        .unwrap();
    assert!(d.metrics.prefill_boundaries().contains(&1234.0));
    std::fs::write(&path, file("3333")).unwrap();
    let err = d.reload().await.unwrap_err();
    assert!(matches!(err, ReloadError::NeedsRestart(_)), "{err:?}");
    assert!(
        err.to_string()
            .contains("slo.prefill_tokens_per_second_min 3333 is not a prefill bucket boundary"),
        "{err}"
    );
    let text = metrics(&d).await;
    assert_eq!(
        common::sample(
            &text,
            "llm_probe_slo_prefill_tokens_per_second",
            &[("target", "a")]
        ),
        Some(1234.0),
        "the old floor stays"
    );
    // A standard boundary needs no restart.
    std::fs::write(&path, file("2500")).unwrap();
    d.reload().await.unwrap();
    d.stop().await;
}
