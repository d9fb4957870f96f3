//! A unique API key is set and every output channel is searched for it: stdout and stderr of
//! `check-config`, `probe-once` (text and JSON, success and failure) and `run` at trace level,
//! `/metrics` in both formats, and the landing page. The simulator's log of received requests
//! proves the key was really sent, so the test cannot pass vacuously.

mod common;

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::time::Duration;

use llm_probe::simulate::{Fault, Script};

const BIN: &str = env!("CARGO_BIN_EXE_llm-probe");
const KEY: &str = "sk-llmprobe-SECRET-7d41c9e2";
const KEY_ENV: &str = "LLM_PROBE_TEST_SECRET_KEY";

fn config(dir: &tempfile::TempDir, base_url: &str) -> std::path::PathBuf {
    let yaml = common::yaml(
        base_url,
        "1s",
        &common::scenario("chat", 8),
        &format!("    api_key_env: {KEY_ENV}\n"),
    );
    let p = dir.path().join("probes.yaml");
    std::fs::write(&p, yaml).unwrap();
    p
}

fn run(args: &[&str], config: &std::path::Path) -> String {
    let out = Command::new(BIN)
        .args(["--log.level", "trace"])
        .args(args)
        .arg("--config.file")
        .arg(config)
        .env(KEY_ENV, KEY)
        .output()
        .unwrap();
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn assert_no_key(channel: &str, text: &str) {
    assert!(
        !text.contains(KEY),
        "the API key leaked into {channel}:\n{text}"
    );
    assert!(
        !text.contains("7d41c9e2"),
        "part of the API key leaked into {channel}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_key_never_appears_in_any_output() {
    let script = Script {
        ttft: Duration::from_millis(10),
        itl: Duration::from_millis(1),
        tokens: 5,
        ..Script::default()
    };
    let ok = common::simulator(script.clone()).await;
    let bad = common::simulator(Script {
        fault: Fault::Http500,
        ..script
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let ok_cfg = config(&dir, &ok.base_url());
    let bad_dir = tempfile::tempdir().unwrap();
    let bad_cfg = config(&bad_dir, &bad.base_url());

    let checks = tokio::task::spawn_blocking(move || {
        let mut outputs = vec![
            ("check-config", run(&["check-config"], &ok_cfg)),
            ("probe-once text", run(&["probe-once"], &ok_cfg)),
            (
                "probe-once json",
                run(&["probe-once", "--output", "json"], &ok_cfg),
            ),
            (
                "probe-once failing",
                run(&["probe-once", "--output", "json"], &bad_cfg),
            ),
            (
                "check-config --log.format json",
                run(&["--log.format", "json", "check-config"], &ok_cfg),
            ),
        ];
        // The daemon at trace level, its /metrics and landing page.
        let mut child = common::ChildGuard(
            Command::new(BIN)
                .args([
                    "--log.level",
                    "trace",
                    "run",
                    "--web.listen-address",
                    "127.0.0.1:0",
                    "--config.file",
                ])
                .arg(&ok_cfg)
                .env(KEY_ENV, KEY)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        );
        let mut err = BufReader::new(child.0.stderr.take().unwrap());
        let mut log = String::new();
        let addr = loop {
            let mut line = String::new();
            assert!(
                err.read_line(&mut line).unwrap() > 0,
                "daemon exited early:\n{log}"
            );
            log += &line;
            if let Some(rest) = line.split("serving metrics on http://").nth(1) {
                break rest.split('/').next().unwrap().to_string();
            }
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let get = |path: &str, accept: &str| {
            rt.block_on(async {
                reqwest::Client::new()
                    .get(format!("http://{addr}{path}"))
                    .header("accept", accept)
                    .send()
                    .await
                    .unwrap()
                    .text()
                    .await
                    .unwrap()
            })
        };
        // Until the daemon has counted a probe and its last probe succeeded (the series is
        // registered at 0 when the daemon starts, so its presence alone proves nothing).
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        let metrics = loop {
            let metrics = get("/metrics", "text/plain");
            let probes = common::sample(&metrics, "llm_probe_probes_total", &[("target", "sim")]);
            let ok = common::sample(
                &metrics,
                "llm_probe_last_probe_success",
                &[("target", "sim")],
            );
            if probes.is_some_and(|n| n >= 1.0) && ok == Some(1.0) {
                break metrics;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the daemon finished no successful probe within 15 s:\n{metrics}"
            );
            std::thread::sleep(Duration::from_millis(100));
        };
        outputs.push(("/metrics", metrics));
        outputs.push((
            "/metrics openmetrics",
            get("/metrics", "application/openmetrics-text"),
        ));
        outputs.push(("landing page", get("/", "text/html")));
        common::interrupt(&child.0);
        child.0.wait().unwrap();
        err.read_to_string(&mut log).unwrap();
        let mut stdout = String::new();
        child
            .0
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut stdout)
            .unwrap();
        assert!(log.contains("level=trace"), "trace logging was on: {log}");
        outputs.push(("daemon stderr at trace", log));
        outputs.push(("daemon stdout", stdout));
        outputs
    })
    .await
    .unwrap();

    for (channel, text) in &checks {
        assert_no_key(channel, text);
    }
    // And the key was really used: every probe carried it in its Authorization header.
    let sent = ok.received();
    assert!(
        sent.len() >= 3,
        "probe-once twice and the daemon at least once: {}",
        sent.len()
    );
    for r in sent.iter().chain(bad.received().iter()) {
        let auth = r
            .headers
            .iter()
            .find(|(k, _)| k == "authorization")
            .map(|(_, v)| v.as_str());
        assert_eq!(auth, Some(format!("Bearer {KEY}").as_str()));
    }
}
