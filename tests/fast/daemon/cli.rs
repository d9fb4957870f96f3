//! The `llm-probe` binary as a user runs it: `check-config`, `probe-once` (text and JSON),
//! `simulate` and `demo`.

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use llm_probe::simulate::{Fault, Script};

const BIN: &str = env!("CARGO_BIN_EXE_llm-probe");

fn write_config(dir: &tempfile::TempDir, yaml: &str) -> std::path::PathBuf {
    let p = dir.path().join("probes.yaml");
    std::fs::write(&p, yaml).unwrap();
    p
}

fn two_scenarios(base_url: &str) -> String {
    let scenarios = format!(
        "{}{}",
        common::scenario("short", 8),
        common::scenario("long", 16)
    );
    common::yaml(base_url, "5s", &scenarios, "")
}

fn fast(fault: Fault) -> Script {
    Script {
        ttft: Duration::from_millis(20),
        itl: Duration::from_millis(2),
        tokens: 16,
        fault,
        ..Script::default()
    }
}

#[test]
fn check_config_accepts_the_example_and_prints_a_line_per_target() {
    let out = Command::new(BIN)
        .args([
            "check-config",
            "--config.file",
            concat!(env!("CARGO_MANIFEST_DIR"), "/probes.example.yaml"),
        ])
        // As a user who copied it and has no keys.
        .env_remove("LOCAL_VLLM_KEY")
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("OK, 2 targets, 4 scenarios"), "{stdout}");
    assert!(
        stdout
            .lines()
            .any(|l| l.trim_start().starts_with("local-vllm: openai-chat")),
        "{stdout}"
    );
    assert!(
        stdout
            .lines()
            .any(|l| l.trim_start().starts_with("llamacpp-smol: openai-chat")),
        "{stdout}"
    );
}

#[test]
fn check_config_rejects_a_broken_file_with_file_line_and_fix() {
    let dir = tempfile::tempdir().unwrap();
    let p = write_config(
        &dir,
        &two_scenarios("http://127.0.0.1:1/v1")
            .replace("model: sim-model", "model: sim-model\n    intervall: 5s"),
    );
    let out = Command::new(BIN)
        .args(["check-config", "--config.file"])
        .arg(&p)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    let expected = format!("{}:", p.display());
    assert!(stderr.starts_with(&expected), "{stderr}");
    assert!(
        stderr.contains("targets[0].intervall") && stderr.contains("did you mean \"interval\""),
        "{stderr}"
    );
}

#[test]
fn check_config_names_a_missing_file() {
    let out = Command::new(BIN)
        .args(["check-config", "--config.file", "/nonexistent/probes.yaml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/probes.yaml"));
}

/// `--skip-secrets` checks a file whose keys are not on this machine (a CI pipeline), and
/// only the key lookups are skipped: without it the same file fails on both keys, and with it
/// another mistake still fails.
#[test]
fn check_config_skip_secrets_skips_only_the_key_lookups() {
    let dir = tempfile::tempdir().unwrap();
    let targets = "targets:\n  - name: a\n    protocol: openai-chat\n    base_url: http://127.0.0.1:9/v1\n    model: m\n    api_key_env: LLM_PROBE_TEST_UNSET_KEY\n  - name: b\n    protocol: anthropic\n    base_url: http://127.0.0.1:9\n    model: m\n    api_key_file: keys/absent.key\n";
    let scenarios =
        "scenarios:\n  - name: s\n    messages: [{role: user, content: hi}]\n    max_tokens: 8\n";
    let check = |yaml: &str, skip: bool| {
        let p = write_config(&dir, yaml);
        let mut cmd = Command::new(BIN);
        cmd.args(["check-config", "--config.file"]).arg(&p);
        if skip {
            cmd.arg("--skip-secrets");
        }
        let out = cmd.env_remove("LLM_PROBE_TEST_UNSET_KEY").output().unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.code(), text)
    };

    let (code, text) = check(&format!("{scenarios}{targets}"), false);
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("LLM_PROBE_TEST_UNSET_KEY, which is not set"),
        "{text}"
    );
    assert!(text.contains("absent.key cannot be read"), "{text}");

    let (code, text) = check(&format!("{scenarios}{targets}"), true);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("OK, 2 targets, 1 scenario"), "{text}");
    assert!(
        text.contains("api_key=env LLM_PROBE_TEST_UNSET_KEY"),
        "{text}"
    );
    assert!(
        text.contains("API keys not checked (--skip-secrets)"),
        "{text}"
    );

    let typo = format!("{scenarios}{targets}").replace(
        "    model: m\n    api_key_file",
        "    modle: m\n    api_key_file",
    );
    let (code, text) = check(&typo, true);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("modle"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_once_json_has_every_field_and_nulls_for_unknowns() {
    let sim = common::simulator(fast(Fault::None)).await;
    let dir = tempfile::tempdir().unwrap();
    let p = write_config(&dir, &two_scenarios(&sim.base_url()));
    let out = tokio::process::Command::new(BIN)
        .args(["probe-once", "--output", "json", "--config.file"])
        .arg(&p)
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "one JSON object per probe");
    for (o, (scenario, n)) in lines.iter().zip([("short", 8), ("long", 16)]) {
        for key in [
            "target",
            "scenario",
            "model",
            "success",
            "failure_reason",
            "http_status",
            "ttft_seconds",
            "time_to_first_output_token_seconds",
            "tpot_seconds",
            "output_tokens_per_second",
            "e2e_seconds",
            "output_tokens",
            "token_count_source",
            "prompt_tokens",
            "token_events",
            "inter_token_latencies_seconds",
            "response_model",
            "system_fingerprint",
        ] {
            assert!(o.get(key).is_some(), "missing {key} in {o}");
        }
        assert_eq!(o["scenario"], scenario);
        assert_eq!(o["success"], true);
        assert_eq!(o["failure_reason"], serde_json::Value::Null);
        assert_eq!(o["output_tokens"], n);
        assert_eq!(o["token_count_source"], "usage");
        assert_eq!(o["token_events"], n);
        assert_eq!(
            o["inter_token_latencies_seconds"].as_array().unwrap().len(),
            n - 1
        );
        // The simulator counts the prompt's words: "[probe NONCE] Say something."
        assert_eq!(o["prompt_tokens"], 4);
        // The simulator reports no cache use and no server timing: unknown, not 0.
        assert_eq!(o["cached_prompt_tokens"], serde_json::Value::Null);
        assert_eq!(o["server_prompt_seconds"], serde_json::Value::Null);
        assert_eq!(o["response_model"], "llm-probe-simulator");
        assert!(o["ttft_seconds"].as_f64().unwrap() >= 0.020);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_once_fails_with_exit_1_and_a_typed_reason() {
    let sim = common::simulator(fast(Fault::Http500)).await;
    let dir = tempfile::tempdir().unwrap();
    let p = write_config(&dir, &two_scenarios(&sim.base_url()));
    let out = tokio::process::Command::new(BIN)
        .args([
            "probe-once",
            "--output",
            "json",
            "--scenario",
            "short",
            "--config.file",
        ])
        .arg(&p)
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let o: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(o["success"], false);
    assert_eq!(o["failure_reason"], "http_status");
    assert_eq!(o["http_status"], 500);
    assert_eq!(
        o["ttft_seconds"],
        serde_json::Value::Null,
        "a failed probe has no TTFT, not 0"
    );
    assert_eq!(o["output_tokens"], serde_json::Value::Null);
}

#[test]
fn probe_once_unknown_target_lists_the_known_ones() {
    let dir = tempfile::tempdir().unwrap();
    let p = write_config(&dir, &two_scenarios("http://127.0.0.1:1/v1"));
    let out = Command::new(BIN)
        .args(["probe-once", "--target", "nope", "--config.file"])
        .arg(&p)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("no target named \"nope\"") && stderr.contains("targets: sim"),
        "{stderr}"
    );
}

/// Reads lines from `r` until one contains `needle`; returns that line.
fn read_until(r: &mut impl BufRead, needle: &str) -> String {
    let mut seen = String::new();
    for _ in 0..200 {
        let mut line = String::new();
        if r.read_line(&mut line).unwrap() == 0 {
            panic!("output ended before {needle:?}; saw:\n{seen}");
        }
        if line.contains(needle) {
            return line;
        }
        seen += &line;
    }
    panic!("no {needle:?} in:\n{seen}");
}

#[test]
fn simulate_subcommand_serves_a_probeable_endpoint() {
    let mut child = common::ChildGuard(
        Command::new(BIN)
            .args([
                "simulate",
                "--web.listen-address",
                "127.0.0.1:0",
                "--ttft",
                "30ms",
                "--itl",
                "2ms",
                "--tokens",
                "10",
            ])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut err = BufReader::new(child.0.stderr.take().unwrap());
    let line = read_until(&mut err, "endpoint at ");
    let base_url = line
        .split("endpoint at ")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    let dir = tempfile::tempdir().unwrap();
    let p = write_config(&dir, &two_scenarios(&base_url));
    let out = Command::new(BIN)
        .args([
            "probe-once",
            "--output",
            "json",
            "--scenario",
            "long",
            "--config.file",
        ])
        .arg(&p)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let o: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        o["output_tokens"], 10,
        "--tokens 10 caps the answer below max_tokens 16"
    );
    let ttft = o["ttft_seconds"].as_f64().unwrap();
    // Far from the default 200 ms; the margin is a fresh process's first connection on a busy
    // machine (54 ms seen at load average 8).
    assert!(
        (0.030..0.120).contains(&ttft),
        "--ttft 30ms, measured {ttft}"
    );
}

#[test]
fn demo_prints_a_live_summary_serves_metrics_and_stops_on_ctrl_c() {
    let mut child = common::ChildGuard(
        Command::new(BIN)
            .args([
                "demo",
                "--web.listen-address",
                "127.0.0.1:0",
                "--every",
                "1s",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut out = BufReader::new(child.0.stdout.take().unwrap());
    let metrics_line = read_until(&mut out, "/metrics");
    let url = metrics_line.split_whitespace().last().unwrap().to_string();
    let summary = read_until(&mut out, "simulator/chat_short:");
    assert!(
        summary.contains("TTFT p50") && summary.contains("tokens/s"),
        "{summary}"
    );
    let body = reqwest::blocking_get(&url);
    assert!(
        body.contains("llm_probe_time_to_first_token_seconds_bucket"),
        "{body}"
    );
    common::interrupt(&child.0);
    let status = child.0.wait().unwrap();
    assert!(status.success(), "Ctrl-C ends the demo cleanly: {status}");
}

mod reqwest {
    /// A GET without a runtime (the demo test is synchronous).
    pub fn blocking_get(url: &str) -> String {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async { ::reqwest::get(url).await.unwrap().text().await.unwrap() })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_proxy_from_the_environment_is_used() {
    // The simulator answers absolute-form proxy requests too, so it can stand in for a proxy:
    // the target's host does not even resolve, only the proxy can reach "it".
    let proxy = common::simulator(fast(Fault::None)).await;
    let dir = tempfile::tempdir().unwrap();
    let p = write_config(&dir, &two_scenarios("http://llm.internal.invalid:8000/v1"));
    let out = tokio::process::Command::new(BIN)
        .args([
            "probe-once",
            "--output",
            "json",
            "--scenario",
            "short",
            "--config.file",
        ])
        .arg(&p)
        .env("HTTP_PROXY", format!("http://{}", proxy.addr))
        .env_remove("NO_PROXY")
        .env_remove("no_proxy")
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let r = proxy.received();
    assert_eq!(r.len(), 1, "the request went through the proxy");
    let host = r[0]
        .headers
        .iter()
        .find(|(k, _)| k == "host")
        .map(|(_, v)| v.as_str());
    assert_eq!(host, Some("llm.internal.invalid:8000"));
}

/// `simulate --prefix-cache on` serves a prompt it has seen before with a quarter of the TTFT;
/// `off` (the default) gives every request the scripted TTFT. Two `probe-once` runs of a
/// `prefix_cache: warm` scenario (the same prompt verbatim) against each.
#[test]
fn simulate_prefix_cache_switch() {
    let ttfts = |switch: &str| {
        let mut child = common::ChildGuard(
            Command::new(BIN)
                .args([
                    "simulate",
                    "--web.listen-address",
                    "127.0.0.1:0",
                    "--ttft",
                    "400ms",
                    "--itl",
                    "1ms",
                    "--tokens",
                    "4",
                    "--prefix-cache",
                    switch,
                ])
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        );
        let mut err = BufReader::new(child.0.stderr.take().unwrap());
        let line = read_until(&mut err, "endpoint at ");
        let base_url = line.split("endpoint at ").nth(1).unwrap();
        let base_url = base_url.split_whitespace().next().unwrap();
        let scenario = "  - name: warm\n    messages: [{role: user, content: \"A shared prefix.\"}]\n    max_tokens: 4\n    prefix_cache: warm\n";
        let dir = tempfile::tempdir().unwrap();
        let p = write_config(&dir, &common::yaml(base_url, "5s", scenario, ""));
        let once = || {
            let out = Command::new(BIN)
                .args(["probe-once", "--output", "json", "--config.file"])
                .arg(&p)
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "{err}");
            let o: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            o["ttft_seconds"].as_f64().unwrap()
        };
        (once(), once())
    };
    let (first, second) = ttfts("on");
    assert!(first >= 0.4, "cache on, first request: {first}");
    assert!(
        (0.1..0.3).contains(&second),
        "cache on, the prompt seen before: a quarter of 400 ms, measured {second}"
    );
    let (first, second) = ttfts("off");
    assert!(
        first >= 0.4 && second >= 0.4,
        "cache off: every request 400 ms ({first}, {second})"
    );
    let bad = Command::new(BIN)
        .args(["simulate", "--prefix-cache", "maybe"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--prefix-cache"));
}
