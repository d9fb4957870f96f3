//! `llm-probe baseline save --prometheus.url` end to end: the daemon probes the in-process simulator every second (TTFT 200 ms),
//! a real Prometheus scrapes it every second; `baseline save` over a ~15 s window writes a file
//! whose percentiles are Prometheus's own `histogram_quantile` over that window, whose samples
//! are the probes Prometheus counted in it, and which the probes file loads as
//! `baseline_file:`. Also the command's usage errors and Prometheus errors (exit 2).

use crate::common;

use std::process::{Command, Output};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use llm_probe::simulate::Script;

use common::prometheus::Prometheus;

/// The window of the test (shortened from hours).
const WINDOW: Duration = Duration::from_secs(15);

fn llm_probe(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_llm-probe"))
        .args(args)
        .output()
        .expect("run llm-probe")
}

/// `baseline save ARGS…`.
fn save<S: AsRef<str>>(args: &[S]) -> Output {
    let all: Vec<&str> = ["baseline", "save"]
        .into_iter()
        .chain(args.iter().map(AsRef::as_ref))
        .collect();
    llm_probe(&all)
}

/// `--prometheus.url URL --target sim --scenario SCENARIO --window WINDOW` (without the
/// window when it is empty), then `extra`.
fn from_prometheus(url: &str, scenario: &str, window: &str, extra: &[&str]) -> Vec<String> {
    let mut a = vec![
        "--prometheus.url",
        url,
        "--target",
        "sim",
        "--scenario",
        scenario,
    ];
    if !window.is_empty() {
        a.extend(["--window", window]);
    }
    a.extend(extra);
    a.into_iter().map(String::from).collect()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Now, whole Unix seconds rounded up (a window end in whole seconds is the same instant for
/// `baseline save` and for the test's own queries).
fn next_second() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 1
}

fn rfc3339(unix: u64) -> String {
    humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_secs(unix)).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_window_of_probes_becomes_a_baseline_the_probes_file_loads() {
    let sim = common::simulator(Script {
        ttft: Duration::from_millis(200),
        itl: Duration::from_millis(12),
        tokens: 8,
        model: "model-a".into(),
        ..Script::default()
    })
    .await;
    let yaml = common::yaml(&sim.base_url(), "1s", &common::scenario("chat", 8), "");
    let daemon = common::daemon(common::parse(&yaml)).await;
    let dir = tempfile::tempdir().unwrap();
    let prom = Prometheus::start(dir.path(), &[], daemon.addr).await;

    // The window starts once Prometheus holds a sample of the probes (so the counts before it
    // are known), lasts WINDOW, and is read once its last scrape is in.
    let count = r#"llm_probe_time_to_first_token_seconds_count{target="sim",scenario="chat"}"#;
    let deadline = Instant::now() + Duration::from_secs(60);
    while prom.sum(count, None).await < 1.0 {
        assert!(Instant::now() < deadline, "no probe scraped in 60 s");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let start = next_second();
    tokio::time::sleep(WINDOW).await;
    let end = next_second();
    while next_second() < end + 2 {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // START as Unix seconds, END as RFC 3339: both forms of compare's windows.
    let window = format!("{start}/{}", rfc3339(end));
    let out_file = dir.path().join("sim-chat.baseline.json");
    let out_s = out_file.display().to_string();
    let args = from_prometheus(&prom.url, "chat", &window, &["--out", &out_s]);
    let out = save(&args);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    eprintln!("{stdout}{stderr}");
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        !stderr.contains("warning"),
        "one endpoint identity throughout: {stderr}"
    );
    let b = llm_probe::baseline::parse(&std::fs::read_to_string(&out_file).unwrap()).unwrap();

    // Samples: what the TTFT histogram's `_count` series (not read by `baseline save`) rose by
    // over the window; about one probe a second.
    let truth = prom.sum(count, Some(end as f64)).await - prom.sum(count, Some(start as f64)).await;
    assert_eq!(b.samples as f64, truth, "{b:#?}");
    assert!(
        b.samples as f64 >= WINDOW.as_secs_f64() / 2.0,
        "only {} probes in {WINDOW:?}",
        b.samples
    );
    // The percentiles are Prometheus's own histogram_quantile over the same window (to the
    // file's six decimals).
    let bucket = r#"llm_probe_time_to_first_token_seconds_bucket{target="sim",scenario="chat"}"#;
    for (q, ours) in [
        (0.5, b.ttft_seconds.p50),
        (0.95, b.ttft_seconds.p95),
        (0.99, b.ttft_seconds.p99),
    ] {
        let promql =
            format!("histogram_quantile({q}, sum by (le) ({bucket} @ {end} - {bucket} @ {start}))");
        let theirs = prom.sum(&promql, None).await;
        assert!(
            (ours - theirs).abs() < 1e-6,
            "TTFT {q}: {ours} vs Prometheus {theirs}"
        );
    }
    // The simulator's TTFT is 200 ms, plus loopback and scheduling: every probe, and so the
    // P50, lies in the bucket (0.2, 0.25] that starts at 0.2 s; the output names that bucket.
    assert!(
        b.ttft_seconds.p50 > 0.2 && b.ttft_seconds.p50 <= 0.25,
        "{b:#?}"
    );
    let ttft_line = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("TTFT P50 "))
        .unwrap_or_else(|| panic!("a TTFT bucket line: {stdout}"));
    assert!(ttft_line.contains(" in 200–250, P95 "), "{ttft_line}");
    assert!(
        stdout.starts_with(&format!(
            "baseline for target sim scenario chat: window {}/{} (histogram buckets in Prometheus), {} samples",
            rfc3339(start),
            rfc3339(end),
            b.samples
        )),
        "{stdout}"
    );
    assert!(b.tpot_seconds.is_some() && b.output_tokens_per_second.is_some());
    assert!(b.e2e_seconds.unwrap().p50 > b.ttft_seconds.p50);

    // Where it came from, and the endpoint the daemon saw.
    assert_eq!(b.source.kind, "prometheus");
    assert_eq!(b.source.file, prom.url);
    assert_eq!(
        b.source.level,
        format!("window {}/{}", rfc3339(start), rfc3339(end))
    );
    assert_eq!(b.measured_at, rfc3339(end));
    assert_eq!(b.model.as_deref(), Some("sim-model"));
    assert_eq!(b.endpoint.response_model.as_deref(), Some("model-a"));

    // The probes file loads it (check-config passes and lists it).
    let probes = dir.path().join("probes.yaml");
    std::fs::write(
        &probes,
        common::yaml(
            &sim.base_url(),
            "1s",
            &common::scenario("chat", 8),
            &format!("    baseline_file: {out_s}\n"),
        ),
    )
    .unwrap();
    let check = llm_probe(&[
        "check-config",
        "--config.file",
        &probes.display().to_string(),
    ]);
    assert_eq!(check.status.code(), Some(0), "{}", text(&check.stderr));
    assert!(
        text(&check.stdout).contains("baselines=[chat]"),
        "{}",
        text(&check.stdout)
    );

    // A scenario without probes in the window: exit 2, the reason names the pair and the
    // Prometheus, and the file already written stays.
    let before = std::fs::read_to_string(&out_file).unwrap();
    let none = from_prometheus(&prom.url, "code", &window, &["--out", &out_s]);
    let out = save(&none);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("the window (")
            && err.contains("has no successful probes of target \"sim\" scenario \"code\"")
            && err.contains(&prom.url),
        "{err}"
    );
    assert!(out.stdout.is_empty());
    assert_eq!(std::fs::read_to_string(&out_file).unwrap(), before);

    daemon.stop().await;
}

/// Both sources, or a Prometheus source without its window: usage errors (exit 2), nothing
/// written.
#[test]
fn sources_are_exclusive_and_complete() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("b.json");
    let out_s = out.display().to_string();
    let url = "http://127.0.0.1:1";
    let both = from_prometheus(
        url,
        "chat",
        "now-1h/now",
        &["--from", "run.json", "--out", &out_s],
    );
    let o = save(&both);
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o.stderr);
    assert!(
        err.contains("--from")
            && err.contains("cannot be used with")
            && err.contains("--prometheus.url"),
        "{err}"
    );
    let o = save(&["--out", &out_s]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("--from"), "{}", text(&o.stderr));
    let o = save(&from_prometheus(url, "chat", "", &["--out", &out_s]));
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("--range"), "{}", text(&o.stderr));
    let with_level = from_prometheus(
        url,
        "chat",
        "now-1h/now",
        &["--level", "4", "--out", &out_s],
    );
    let o = save(&with_level);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("--level"), "{}", text(&o.stderr));
    let o = save(&["--window", "now-1h", "--from", "x.json", "--out", &out_s]);
    assert_eq!(o.status.code(), Some(2));
    assert!(!out.exists());
}

/// Nothing listens at the Prometheus URL: exit 2, the URL named without its password.
#[test]
fn an_unreachable_prometheus_is_named_redacted() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("b.json");
    let url = format!("http://admin:hunter2@127.0.0.1:{}", common::free_port());
    let out_s = out.display().to_string();
    let o = save(&from_prometheus(
        &url,
        "chat",
        "now-1h/now",
        &["--prometheus.timeout", "2s", "--out", &out_s],
    ));
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o.stderr);
    assert!(
        err.contains("cannot connect") && err.contains("Prometheus at http://***@127.0.0.1:"),
        "{err}"
    );
    assert!(!err.contains("hunter2"), "{err}");
    assert!(!out.exists());
}
