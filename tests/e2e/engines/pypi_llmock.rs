//! A real third-party Gemini server: PyPI `llmock` 0.2.2, a mock server that serves Google's
//! `streamGenerateContent?alt=sse` at `/gemini/v1beta/models/{m}:streamGenerateContent` (so the
//! `gemini` protocol's `base_url` is `http://host:port/gemini`), started on loopback and probed
//! with the `gemini` protocol: a paced stream (N from `usageMetadata`, `modelVersion` as the
//! response model, inter-token latencies of its chunk delay), a stream it cuts short without a
//! `finishReason` (`truncated`), and an HTTP 503 (`http_status`).
//!
//! Installed by `scripts/install-test-deps.sh` into `~/.cache/llm-probe-mocks/llmock-venv`;
//! never skipped.

use crate::common;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use llm_probe::measure::{FailureReason, ProbeOutcome, TokenCountSource};

fn llmock_bin() -> PathBuf {
    let home = std::env::var_os("HOME").expect("HOME is set");
    let bin = PathBuf::from(home).join(".cache/llm-probe-mocks/llmock-venv/bin/llmock");
    assert!(
        bin.is_file(),
        "{} is missing: run scripts/install-test-deps.sh (it installs llmock 0.2.2 from PyPI into ~/.cache/llm-probe-mocks/llmock-venv)",
        bin.display()
    );
    bin
}

/// `llmock serve` on a free loopback port with `args`, killed on drop.
struct Llmock {
    port: u16,
    _child: common::GroupGuard,
}

fn llmock(args: &[&str]) -> Llmock {
    let port = common::free_port();
    let mut cmd = Command::new(llmock_bin());
    // `echo`: the answer repeats the prompt, one chunk per word (more than the 6 chunks its
    // stream faults may wait for), instead of a random canned text.
    cmd.args(["serve", "--host", "127.0.0.1", "--log-level", "warning"])
        .args(["--response-style", "echo"])
        .args(["--port", &port.to_string()])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let child = common::spawn_listening(&mut cmd, port);
    Llmock {
        port,
        _child: child,
    }
}

async fn probe_llmock(mock: &Llmock) -> ProbeOutcome {
    let yaml = format!(
        "defaults:\n  interval: 10s\n  timeout: 5s\nscenarios:\n  - name: s\n    messages: [{{role: system, content: \"Be brief.\"}}, {{role: user, content: \"Repeat: one two three four five six seven eight nine ten.\"}}]\n    max_tokens: 64\ntargets:\n  - name: llmock\n    protocol: gemini\n    base_url: http://127.0.0.1:{}/gemini\n    model: gemini-2.5-flash\n    api_key_env: GEMINI_TEST_KEY\n",
        mock.port
    );
    let cfg = llm_probe::config::parse(&yaml, "<test>", &|k| {
        (k == "GEMINI_TEST_KEY").then(|| "test-key".to_string())
    })
    .unwrap();
    common::probe_first(&cfg, None).await
}

#[tokio::test]
async fn a_paced_gemini_stream_is_measured_from_its_chunks_and_usage_metadata() {
    let mock = tokio::task::spawn_blocking(|| llmock(&["--stream-chunk-delay-ms", "30"]))
        .await
        .unwrap();
    // llmock's first request pays for its lazy imports: not measured.
    let _ = probe_llmock(&mock).await;
    let o = probe_llmock(&mock).await;
    let m = o.result.as_ref().unwrap_or_else(|f| panic!("{f}"));
    let obs = &o.observations;
    // Its text comes in several chunks, the last with finishReason STOP and usageMetadata.
    assert!(m.token_events >= 8, "{m:?}");
    assert_eq!(m.token_count_source, TokenCountSource::Usage);
    assert_eq!(obs.usage.completion_tokens, Some(m.output_tokens));
    assert!(m.output_tokens >= m.token_events as u64, "{m:?}");
    assert!(obs.usage.prompt_tokens.is_some());
    assert_eq!(
        obs.identity.response_model.as_deref(),
        Some("gemini-2.5-flash")
    );
    assert!(
        obs.terminated && obs.finished,
        "the close after STOP ends it"
    );
    assert!(
        !obs.anomalies
            .contains(&llm_probe::measure::Anomaly::MissingTerminator),
        "{:?}",
        obs.anomalies
    );
    // Paced 30 ms apart: every gap is at least ~30 ms (never a coalesced burst read as 0),
    // and the median is within a generous band on a busy 2-core machine.
    let mut itl = m.inter_token_latencies.clone();
    itl.sort();
    assert!(itl[0] >= Duration::from_millis(20), "{itl:?}");
    let median = itl[itl.len() / 2];
    assert!(median < Duration::from_millis(150), "{itl:?}");
}

#[tokio::test]
async fn a_gemini_stream_cut_before_its_finish_reason_is_truncated() {
    let mock = tokio::task::spawn_blocking(|| {
        llmock(&[
            "--stream-fault",
            "truncate=1.0",
            "--stream-chunk-delay-ms",
            "5",
        ])
    })
    .await
    .unwrap();
    for _ in 0..3 {
        let o = probe_llmock(&mock).await;
        let f = o.result.as_ref().expect_err("a cut stream is no success");
        assert_eq!(f.reason, FailureReason::Truncated, "{f}");
        assert!(!o.observations.finished);
    }
}

#[tokio::test]
async fn a_gemini_503_is_http_status() {
    let mock = tokio::task::spawn_blocking(|| llmock(&["--error-rate-503", "1.0"]))
        .await
        .unwrap();
    let o = probe_llmock(&mock).await;
    let f = o.result.as_ref().expect_err("a 503 is no success");
    assert_eq!(f.reason, FailureReason::HttpStatus, "{f}");
    assert_eq!(o.observations.http_status, Some(503));
}
