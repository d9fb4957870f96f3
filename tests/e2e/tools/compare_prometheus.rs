//! `llm-probe compare --prometheus.url` end to end with real components: the daemon probes the in-process simulator every second (model A, TTFT 200 ms, ITL
//! 12 ms, 8 tokens), a real Prometheus scrapes the daemon every second; the simulator is
//! restarted on the same port as model B at TTFT 300 ms; `compare --around-change` with short
//! windows finds the change and reports the TTFT regression (exit 1) with both windows' probe
//! counts. Also: the errors a real Prometheus gives (no data, no change) and a Prometheus that
//! never answers.

use crate::common;
use common::ScriptExt;

use std::process::{Command, Output};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use llm_probe::simulate::{Script, Simulator};
use serde_json::Value;

use common::prometheus::Prometheus;

/// The daemon's probe interval and Prometheus's scrape interval (tests/support/prometheus.rs).
/// The simulator's ITL: well inside the TPOT bucket (0.01, 0.015] s, so a busy machine's delays
/// of a few milliseconds do not move decode into the next bucket in one window only.
const ITL_MS: u64 = 12;
const INTERVAL: f64 = 1.0;
const SCRAPE: f64 = 1.0;
/// `--window` and `--settle` of the test (shortened from hours and minutes).
const WINDOW: f64 = 12.0;
const SETTLE: f64 = 2.0;

fn unix(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH).unwrap().as_secs_f64()
}

fn compare(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_llm-probe"))
        .arg("compare")
        .args(args)
        .output()
        .expect("run llm-probe compare")
}

/// `compare --prometheus.url URL --target sim --before BEFORE --after AFTER EXTRA…`.
fn compare_windows(url: &str, before: &str, after: &str, extra: &[&str]) -> Output {
    let mut args = vec![
        "--prometheus.url",
        url,
        "--target",
        "sim",
        "--before",
        before,
        "--after",
        after,
    ];
    args.extend_from_slice(extra);
    compare(&args)
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Starts a simulator on `addr` as soon as the port is free again (the stopped one lets its
/// connections finish for up to a second before it closes the listener).
async fn restart_on(addr: std::net::SocketAddr, script: Script) -> Simulator {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match Simulator::start(addr, script.clone()).await {
            Ok(s) => return s,
            Err(e) => {
                assert!(Instant::now() < deadline, "cannot rebind {addr}: {e}");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn around_change_finds_the_restart_and_the_ttft_regression() {
    let started = Instant::now();
    let sim_a = common::simulator(common::stream(200, ITL_MS, 8).model("model-a")).await;
    let addr = sim_a.addr;
    let yaml = common::yaml(&sim_a.base_url(), "1s", &common::scenario("chat", 8), "");
    let daemon = common::daemon(common::parse(&yaml)).await;
    let mut outcomes = daemon.subscribe();
    let dir = tempfile::tempdir().unwrap();
    let prom = Prometheus::start(dir.path(), &[], daemon.addr).await;

    // Model A until Prometheus has scraped its probes for longer than one window (so the
    // BEFORE window lies after Prometheus's first sample).
    let count = r#"llm_probe_time_to_first_token_seconds_count{target="sim"}"#;
    let deadline = Instant::now() + Duration::from_secs(60);
    while prom.sum(count, None).await < 1.0 {
        assert!(
            Instant::now() < deadline,
            "Prometheus did not scrape A's probes in 60 s"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    tokio::time::sleep(Duration::from_secs_f64(WINDOW + 3.0)).await;

    // The upgrade: A stops, B starts on the same port.
    drop(sim_a);
    let _sim_b = restart_on(addr, common::stream(300, ITL_MS, 8).model("model-b")).await;
    let restart = unix(SystemTime::now());
    // Ground truth from the daemon itself: the first probe that met B, and the probes that
    // failed before it (one that meets the port between A's stop and B's bind is refused).
    let mut failed_before_b = Vec::new();
    let first_b = loop {
        let o = tokio::time::timeout(Duration::from_secs(30), outcomes.recv())
            .await
            .expect("a probe within 30 s")
            .expect("outcome channel");
        if let Err(f) = &o.result {
            failed_before_b.push(format!(
                "{} at {:.3}",
                f.reason.as_str(),
                unix(o.started_at)
            ));
        }
        if o.observations.identity.response_model.as_deref() == Some("model-b") {
            break (unix(o.started_at), unix(SystemTime::now()));
        }
    };
    let (b_started, b_finished) = first_b;
    // The first probe after the restart starts within one probe interval of it.
    assert!(
        b_started >= restart - 0.05 && b_started - restart <= INTERVAL + 0.5,
        "first probe of B started {:.2} s after the restart",
        b_started - restart
    );
    // Wait until the AFTER window (settle, then a whole window) has been scraped.
    let ready = b_finished + SCRAPE + SETTLE + WINDOW + SCRAPE + 0.5;
    while unix(SystemTime::now()) < ready {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let window = format!("{WINDOW}s");
    let settle = format!("{SETTLE}s");
    let args = [
        "--prometheus.url",
        &prom.url,
        "--target",
        "sim",
        "--scenario",
        "chat",
        "--around-change",
        "--window",
        &window,
        "--settle",
        &settle,
        "--lookback",
        "5m",
    ];
    let json_args: Vec<&str> = args.iter().copied().chain(["--output", "json"]).collect();
    let out = compare(&json_args);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            stderr(&out)
        )
    });
    assert_eq!(
        out.status.code(),
        Some(1),
        "a regression exits 1: {doc:#}\n{}",
        stderr(&out)
    );
    assert_eq!(doc["schema"], "llm-probe.compare.prometheus/v1");
    assert_eq!(doc["regression"], true);

    // The change: the old label set's last sample before the first B probe finished, the new
    // one's first sample at or after it, at most one scrape later; so within one probe
    // interval, the probe's duration and one scrape interval of the real restart.
    let ch = &doc["change"];
    assert_eq!(ch["old"]["response_model"], "model-a", "{ch:#}");
    assert_eq!(ch["new"]["response_model"], "model-b", "{ch:#}");
    let (last_old, first_new) = (
        ch["last_old"].as_f64().unwrap(),
        ch["first_new"].as_f64().unwrap(),
    );
    // (`slack`: between the daemon recording the probe and this test receiving it, on a busy
    // machine.)
    let slack = 0.5;
    assert!(
        last_old < b_finished + slack,
        "{ch:#} vs first B probe finished {b_finished}"
    );
    assert!(
        first_new >= b_finished - slack,
        "{ch:#} vs first B probe finished {b_finished}"
    );
    assert!(
        first_new - b_finished <= SCRAPE + slack,
        "{ch:#}: {b_finished}"
    );
    let e2e = b_finished - b_started;
    assert!(
        first_new - restart <= INTERVAL + e2e + SCRAPE + slack,
        "change found {:.2} s after the restart",
        first_new - restart
    );
    eprintln!(
        "restart at {restart:.3}; change found after {last_old:.3}, by {first_new:.3} ({:+.2} s); \
         failed before B: {failed_before_b:?}",
        first_new - restart
    );

    // The windows: before ends at the old set's last sample, after starts `settle` after the
    // new one's first.
    assert_eq!(doc["before"]["end"].as_f64().unwrap(), last_old);
    assert!(
        (doc["before"]["end"].as_f64().unwrap()
            - doc["before"]["start"].as_f64().unwrap()
            - WINDOW)
            .abs()
            < 1e-6
    );
    assert!((doc["after"]["start"].as_f64().unwrap() - first_new - SETTLE).abs() < 1e-6);

    let s = &doc["scenarios"][0];
    assert_eq!(s["scenario"], "chat");
    let ttft = &s["ttft_seconds"];
    assert_eq!(ttft["verdict"], "regression", "{ttft:#}");
    // Probe counts: exactly what the histogram's `_count` series (not read by compare) rose by
    // between the windows' ends, and a fair share of one probe a second.
    let (nb, na) = (
        ttft["n_before"].as_u64().unwrap(),
        ttft["n_after"].as_u64().unwrap(),
    );
    for (side, n) in [("before", nb), ("after", na)] {
        let at = |k: &str| doc[side][k].as_f64().unwrap().to_string();
        let (start, end) = (at("start"), at("end"));
        let value = |t: String| {
            let p = &prom;
            async move {
                let d = p
                    .api("/api/v1/query", &[("query", count), ("time", &t)])
                    .await;
                d["result"][0]["value"][1]
                    .as_str()
                    .unwrap()
                    .parse::<f64>()
                    .unwrap()
            }
        };
        // Prometheus's own histogram_quantile on the same window (the `@` modifier pins each
        // end): compare's percentiles are the dashboards' numbers.
        let bucket = r#"llm_probe_time_to_first_token_seconds_bucket{target="sim"}"#;
        for (q, key) in [(0.5, "p50"), (0.95, "p95")] {
            let promql = format!(
                "histogram_quantile({q}, sum by (le) ({bucket} @ {end} - {bucket} @ {start}))"
            );
            let d = prom.api("/api/v1/query", &[("query", &promql)]).await;
            let theirs: f64 = d["result"][0]["value"][1]
                .as_str()
                .unwrap()
                .parse()
                .unwrap();
            let ours = ttft[side][key]["value"].as_f64().unwrap();
            assert!(
                (ours - theirs).abs() < 1e-9,
                "{side} {key}: {ours} vs Prometheus {theirs}"
            );
        }
        let truth = value(end).await - value(start).await;
        assert_eq!(n as f64, truth, "{side}: {ttft:#}");
        assert!(
            n as f64 >= WINDOW / INTERVAL / 2.0,
            "{side}: only {n} probes"
        );
    }
    // Every probe sent in the window either observed a TTFT or failed; a failure can only be
    // one the daemon reported before B (at the restart: A stopped, B not yet bound).
    let failed = s["failure_ratio"]["failed_before"].as_u64().unwrap();
    assert_eq!(
        s["failure_ratio"]["sent_before"].as_u64().unwrap(),
        nb + failed,
        "{s:#}"
    );
    assert!(
        failed as usize <= failed_before_b.len(),
        "{failed} failures in BEFORE, the daemon reported {failed_before_b:?}"
    );
    assert_eq!(s["failure_ratio"]["failed_after"], 0, "{s:#}");
    // The P50s: A's in (0.2, 0.25], B's in (0.3, 0.4] (TTFT 200/300 ms plus loopback).
    let bucket = |side: &str| {
        let p = &ttft[side]["p50"];
        (
            p["bucket_lower"].as_f64().unwrap(),
            p["bucket_upper"].as_f64().unwrap(),
        )
    };
    assert_eq!(bucket("before"), (0.2, 0.25), "{ttft:#}");
    assert_eq!(bucket("after"), (0.3, 0.4), "{ttft:#}");
    assert!(ttft["mann_whitney_p"].as_f64().unwrap() < 0.001, "{ttft:#}");
    // The share above the default SLO (300 ms, a bucket bound): all after (B's TTFT is at least
    // 300 ms), hardly any before (a 100 ms stall of a busy machine, at most).
    let slo = &s["slo"][0];
    assert_eq!(slo["metric"], "ttft_seconds");
    assert_eq!(slo["bucket_bound"], 0.3);
    assert!(slo["before"]["beyond"].as_u64().unwrap() <= 2, "{slo:#}");
    assert_eq!(slo["after"]["beyond"], slo["after"]["total"], "{slo:#}");
    assert_eq!(slo["verdict"], "regression");
    // The decode side did not change (same ITL): not a regression.
    assert_ne!(
        s["time_per_output_token_seconds"]["verdict"], "regression",
        "{s:#}"
    );

    // The terminal table says the same, with the bucket bounds in words.
    let text = compare(&args);
    assert_eq!(text.status.code(), Some(1));
    let table = String::from_utf8_lossy(&text.stdout);
    eprintln!("{table}");
    assert!(
        table.contains("Bucket resolution: TTFT P95 between "),
        "{table}"
    );
    assert!(
        table.contains(" in 200–250 → ") && table.contains(" in 300–400 ms"),
        "bucket bounds in the cells: {table}"
    );
    assert!(table.contains("response_model=\"model-b\""), "{table}");
    assert!(
        table.contains("RESULT: regression (exit status 1)"),
        "{table}"
    );
    // The answer first, lines within 120 columns, the SLO share in the summary.
    assert!(table.starts_with("REGRESSION: TTFT median +"), "{table}");
    assert!(
        table
            .lines()
            .next()
            .unwrap()
            .contains("TTFT > 300 ms 0 % → 100 %"),
        "{table}"
    );
    for line in table.lines() {
        assert!(
            line.chars().count() <= 120,
            "{} columns: {line}",
            line.chars().count()
        );
    }
    let md_args: Vec<&str> = args
        .iter()
        .copied()
        .chain(["--output", "markdown"])
        .collect();
    let md = compare(&md_args);
    assert_eq!(md.status.code(), Some(1));
    let md = String::from_utf8_lossy(&md.stdout);
    eprintln!("{md}");
    assert!(
        md.contains("| TTFT | ") && md.contains("**RESULT: regression"),
        "{md}"
    );

    // The same windows given explicitly (Unix seconds, and RFC 3339 for AFTER): the same
    // counts and verdict, and the endpoint seen in each window instead of a change.
    let w = |side: &str, k: &str| doc[side][k].as_f64().unwrap();
    let before = format!("{}/{}", w("before", "start"), w("before", "end"));
    let after = format!(
        "{}/{}",
        doc["after"]["start_rfc3339"].as_str().unwrap(),
        doc["after"]["end_rfc3339"].as_str().unwrap()
    );
    let out = compare_windows(&prom.url, &before, &after, &["--output", "json"]);
    let given: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(1), "{given:#}");
    assert_eq!(given["change"], Value::Null);
    let ids = &given["identities"];
    assert_eq!(ids["before"][0]["response_model"], "model-a", "{ids:#}");
    assert_eq!(ids["after"][0]["response_model"], "model-b", "{ids:#}");
    let ttft2 = &given["scenarios"][0]["ttft_seconds"];
    assert_eq!(ttft2["n_before"], ttft["n_before"]);
    // RFC 3339 with milliseconds: the AFTER window may be a fraction of a millisecond wider.
    assert!(
        ttft2["n_after"].as_u64().unwrap().abs_diff(na) <= 1,
        "{ttft2:#}"
    );
    assert_eq!(ttft2["verdict"], "regression");

    daemon.stop().await;
    eprintln!("wall time {:?}", started.elapsed());
}

/// Prometheus up, but nothing of llm-probe in it: a clear error, exit 2, not an empty report.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prometheus_without_probes_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    // Scrapes a port where nothing listens.
    let nowhere = format!("127.0.0.1:{}", common::free_port())
        .parse()
        .unwrap();
    let prom = Prometheus::start(dir.path(), &[], nowhere).await;
    let out = compare_windows(&prom.url, "now-2m/now-1m", "now-1m/now", &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("BEFORE window") && err.contains("no successful probes"),
        "{err}"
    );
    assert!(err.contains(&prom.url), "names the Prometheus: {err}");
    assert!(out.stdout.is_empty());

    let out = compare(&[
        "--prometheus.url",
        &prom.url,
        "--target",
        "sim",
        "--around-change",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("no llm_probe_endpoint_info series"), "{err}");
    assert!(err.contains("--before"), "says what to do instead: {err}");

    // A URL that is not the Prometheus API's root: the answer is named for what it is.
    let out = compare(&[
        "--prometheus.url",
        &format!("{}/not-prometheus/?token=s3cret", prom.url),
        "--target",
        "sim",
        "--around-change",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("HTTP 404") && err.contains("llm_probe_endpoint_info"),
        "{err}"
    );
    assert!(!err.contains("s3cret"), "query values are redacted: {err}");
}

/// A Prometheus that accepts the connection and never answers: bounded by --prometheus.timeout.
#[test]
fn a_silent_prometheus_times_out() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://admin:hunter2@{}", silent.local_addr().unwrap());
    let t0 = Instant::now();
    let out = compare(&[
        "--prometheus.url",
        &url,
        "--prometheus.timeout",
        "1s",
        "--target",
        "sim",
        "--around-change",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    let err = stderr(&out);
    assert!(err.contains("timed out"), "{err}");
    assert!(
        err.contains("http://***@127.0.0.1"),
        "names the URL, redacted: {err}"
    );
    assert!(!err.contains("hunter2"), "{err}");
}

/// A server on the way to Prometheus (here: the environment's HTTP proxy) that echoes the
/// request in a non-JSON error page: the excerpt compare shows holds no credential — neither
/// the --prometheus.url's basic auth (sent as `Authorization`, base64) nor its query values,
/// nor the proxy's `Proxy-Authorization`. They were shown in the error.
#[test]
fn an_echoed_request_shows_no_credentials() {
    use base64::Engine;
    use std::io::{Read, Write};
    let echo = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = echo.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut conn in echo.incoming().flatten() {
            let mut head = Vec::new();
            let mut buf = [0u8; 4096];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match conn.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
            }
            // The credentials first, so the excerpt's 200 characters hold them.
            let text = String::from_utf8_lossy(&head);
            let mut lines: Vec<&str> = text.lines().collect();
            lines.sort_by_key(|l| !l.contains("uthorization"));
            let body = lines.join("\n");
            let _ = conn.write_all(
                format!(
                    "HTTP/1.1 400 Bad Request\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                )
                .as_bytes(),
            );
        }
    });
    let out = Command::new(env!("CARGO_BIN_EXE_llm-probe"))
        .env("HTTP_PROXY", format!("http://pu:ProxyPw-4d1e@{addr}"))
        .env_remove("http_proxy")
        .env_remove("NO_PROXY")
        .env_remove("no_proxy")
        .args([
            "compare",
            "--prometheus.url",
            "http://admin:PromPw-7c2a@prometheus.invalid:9090/?tenant=TenantTok-91b0",
            "--target",
            "sim",
            "--around-change",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("HTTP 400") && err.contains("[redacted]"),
        "the echo is shown, redacted: {err}"
    );
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    for secret in [
        "ProxyPw-4d1e".to_string(),
        "PromPw-7c2a".into(),
        "TenantTok-91b0".into(),
        b64("pu:ProxyPw-4d1e"),
        b64("admin:PromPw-7c2a"),
    ] {
        assert!(!err.contains(&secret), "{secret} in {err}");
    }
}

/// A rolling upgrade half-way, per replica: two targets with `replicas:` (file_sd), each with
/// two replicas running `model-v1` (TTFT 200 ms) from the start and two `model-v2` replicas
/// added a few seconds later. For `up` the new replicas are 25 % slower (250 ms), for `aa` they
/// are as fast (the A/A case). `compare --by-identity` over one window puts the v1 replicas
/// BEFORE and the v2 replicas AFTER: a TTFT regression for `up` (exit 1), none for `aa`
/// (exit 0); before the v2 replicas exist, it says every replica runs one identity (exit 2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn by_identity_judges_the_new_replicas_against_the_old_during_a_rolling_upgrade() {
    use common::fleet::{simulator_at, write_sd};
    let v = |ttft: u64, model: &str| common::stream(ttft, ITL_MS, 8).model(model);
    let mut sims = Vec::new();
    for (ttft, model) in [
        (200, "model-v1"),
        (200, "model-v1"),
        (250, "model-v2"),
        (250, "model-v2"),
    ]
    .into_iter()
    .chain([
        (200, "model-v1"),
        (200, "model-v1"),
        (200, "model-v2"),
        (200, "model-v2"),
    ]) {
        sims.push(simulator_at("127.0.0.1", 0, v(ttft, model)).await);
    }
    let addrs: Vec<String> = sims.iter().map(|s| s.addr.to_string()).collect();
    let dir = tempfile::tempdir().unwrap();
    let (up_sd, aa_sd) = (dir.path().join("up.json"), dir.path().join("aa.json"));
    write_sd(&up_sd, &addrs[0..2]);
    write_sd(&aa_sd, &addrs[4..6]);
    let target = |name: &str, sd: &std::path::Path| {
        format!(
            "  - name: {name}\n    protocol: openai-chat\n    base_url: http://{name}.test:8000/v1\n    model: m\n    replicas:\n      file_sd: {}\n      refresh: 200ms\n",
            sd.display()
        )
    };
    let yaml = format!(
        "defaults:\n  interval: 500ms\n  timeout: 500ms\nscenarios:\n{}targets:\n{}{}",
        common::scenario("chat", 8),
        target("up", &up_sd),
        target("aa", &aa_sd)
    );
    let daemon = common::daemon(common::parse(&yaml)).await;
    let dir_prom = tempfile::tempdir().unwrap();
    let prom = Prometheus::start(dir_prom.path(), &[], daemon.addr).await;
    let count = r#"llm_probe_time_to_first_token_seconds_count{target="up"}"#;
    let deadline = Instant::now() + Duration::from_secs(60);
    while prom.sum(count, None).await < 2.0 {
        assert!(
            Instant::now() < deadline,
            "Prometheus did not scrape v1's probes"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let by_identity = |target: &'static str, url: String| {
        compare(&[
            "--prometheus.url",
            &url,
            "--target",
            target,
            "--by-identity",
            "--window",
            &format!("{WINDOW}s"),
            "--lookback",
            "5m",
            "--output",
            "json",
        ])
    };
    // Only v1 so far: nothing to compare.
    let out = by_identity("up", prom.url.clone());
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("every replica of target \"up\" runs one identity"),
        "{}",
        stderr(&out)
    );

    // The new replicas join; once a whole window holds their probes, compare.
    tokio::time::sleep(Duration::from_secs(2)).await;
    write_sd(&up_sd, &addrs[0..4]);
    write_sd(&aa_sd, &addrs[4..8]);
    tokio::time::sleep(Duration::from_secs_f64(WINDOW + 3.0 * SCRAPE)).await;

    let out = by_identity("up", prom.url.clone());
    let doc: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", stderr(&out)));
    assert_eq!(out.status.code(), Some(1), "{doc:#}\n{}", stderr(&out));
    assert_eq!(
        doc["identities"]["before"][0]["response_model"], "model-v1",
        "{doc:#}"
    );
    assert_eq!(
        doc["identities"]["after"][0]["response_model"], "model-v2",
        "{doc:#}"
    );
    let sides = |side: &str| -> Vec<String> {
        doc["replicas"][side]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_str().unwrap().to_string())
            .collect()
    };
    let mut old = addrs[0..2].to_vec();
    let mut new = addrs[2..4].to_vec();
    old.sort();
    new.sort();
    assert_eq!((sides("before"), sides("after")), (old, new));
    for k in ["start", "end"] {
        assert_eq!(doc["before"][k], doc["after"][k], "one window: {doc:#}");
    }
    let ttft = &doc["scenarios"][0]["ttft_seconds"];
    assert_eq!(ttft["verdict"], "regression", "{ttft:#}");

    // A/A: the new identity as fast as the old: no regression.
    let out = by_identity("aa", prom.url.clone());
    let doc: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", stderr(&out)));
    assert_eq!(out.status.code(), Some(0), "{doc:#}\n{}", stderr(&out));
    assert_ne!(
        doc["scenarios"][0]["ttft_seconds"]["verdict"], "regression",
        "{doc:#}"
    );
    daemon.stop().await;
}
