//! Other people's mock LLM servers from PyPI, started on loopback and probed through every
//! protocol they implement. Where one deviates from the real format, the probe must say so (a
//! failure reason or an anomaly), never publish a wrong number as if all were well.
//!
//! - `mockllm` 0.0.8: OpenAI chat (one character per chunk, no usage chunk) and a fake
//!   "Anthropic" (`message_delta` events wrapping content deltas, no `event:` lines, `[DONE]`).
//! - `llm-mock-api` 0.1.2: OpenAI chat, OpenAI Responses and proper Anthropic, with a fixed
//!   usage of 5 output tokens whatever the text.
//!
//! Installed by `scripts/install-test-deps.sh` into `~/.cache/llm-probe-mocks/venv`; never
//! skipped.

use crate::common;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use llm_probe::measure::{Anomaly, FailureReason, ProbeOutcome, TokenCountSource};

/// The text both mocks answer with (20 characters).
const ANSWER: &str = "Hello from the mock.";

fn venv_bin(name: &str) -> PathBuf {
    let home = std::env::var_os("HOME").expect("HOME is set");
    let bin = PathBuf::from(home)
        .join(".cache/llm-probe-mocks/venv/bin")
        .join(name);
    assert!(
        bin.is_file(),
        "{} is missing: run scripts/install-test-deps.sh (it installs mockllm and llm-mock-api from PyPI into ~/.cache/llm-probe-mocks/venv)",
        bin.display()
    );
    bin
}

/// A mock server process on a loopback port, killed on drop.
struct Mock {
    port: u16,
    _child: common::GroupGuard,
    _dir: tempfile::TempDir,
}

/// Starts `cmd` (which listens on `port`) in `dir` and waits until the port accepts
/// connections (uvicorn binds after the app has started).
fn start(mut cmd: Command, port: u16, dir: tempfile::TempDir) -> Mock {
    cmd.current_dir(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let child = common::spawn_listening(&mut cmd, port);
    Mock {
        port,
        _child: child,
        _dir: dir,
    }
}

/// `mockllm start` with a responses file: every prompt gets [`ANSWER`], one character per
/// chunk, about 10 ms apart (its `lag_enabled` with `lag_factor: 10`).
fn mockllm() -> Mock {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("responses.yml"),
        format!("responses: {{}}\ndefaults:\n  unknown_response: \"{ANSWER}\"\nsettings:\n  lag_enabled: true\n  lag_factor: 10\n"),
    )
    .unwrap();
    let port = common::free_port();
    let mut cmd = Command::new(venv_bin("mockllm"));
    cmd.args([
        "start",
        "--responses",
        "responses.yml",
        "--host",
        "127.0.0.1",
    ])
    .args(["--port", &port.to_string()]);
    start(cmd, port, dir)
}

/// `llm-mock-api start`: no rules, so every prompt gets the fallback [`ANSWER`], in chunks of
/// 10 characters (its default) every 20 ms.
fn llm_mock_api() -> Mock {
    let dir = tempfile::tempdir().unwrap();
    let port = common::free_port();
    let mut cmd = Command::new(venv_bin("llm-mock-api"));
    cmd.args(["start", "--config", "absent.json", "--host", "127.0.0.1"])
        .args(["--port", &port.to_string(), "--latency", "20"])
        .args(["--fallback", ANSWER, "--log-level", "none"]);
    start(cmd, port, dir)
}

async fn probe_mock(mock: &Mock, protocol: &str) -> ProbeOutcome {
    let yaml = format!(
        "defaults:\n  interval: 10s\n  timeout: 5s\nscenarios:\n  - name: s\n    messages: [{{role: user, content: \"Say something.\"}}]\n    max_tokens: 64\ntargets:\n  - name: mock\n    protocol: {protocol}\n    base_url: http://127.0.0.1:{}/v1\n    model: gpt-4o\n",
        mock.port
    );
    common::probe_first(&common::parse(&yaml), None).await
}

fn success(o: &ProbeOutcome) -> &llm_probe::measure::Measurement {
    o.result.as_ref().unwrap_or_else(|f| {
        panic!(
            "{}: {f} (anomalies {:?})",
            o.target, o.observations.anomalies
        )
    })
}

#[tokio::test]
async fn mockllm_openai_chat_has_no_usage_so_n_is_counted_from_events() {
    let mock = tokio::task::spawn_blocking(mockllm).await.unwrap();
    for _ in 0..2 {
        let o = probe_mock(&mock, "openai-chat").await;
        let m = success(&o);
        // One event per character, `role: null` on content chunks, no usage chunk.
        assert_eq!(
            (m.output_tokens, m.token_count_source, m.token_events),
            (ANSWER.len() as u64, TokenCountSource::Events, ANSWER.len())
        );
        assert_eq!(o.observations.anomalies, vec![Anomaly::MissingUsage]);
        assert!(o.observations.terminated, "mockllm sends [DONE]");
        assert_eq!(
            o.observations.identity.response_model.as_deref(),
            Some("gpt-4o")
        );
    }
}

#[tokio::test]
async fn mockllm_fake_anthropic_is_a_failure_with_anomalies_not_a_number() {
    let mock = tokio::task::spawn_blocking(mockllm).await.unwrap();
    let o = probe_mock(&mock, "anthropic").await;
    // Its content rides inside `message_delta` (not `content_block_delta`), and it ends with
    // OpenAI's `[DONE]` instead of `message_stop`: no token, no finish, no terminator.
    let f = o.result.as_ref().unwrap_err();
    assert_eq!(f.reason, FailureReason::Truncated, "{f}");
    assert!(
        f.detail
            .contains("after 0 token events without a terminator"),
        "{f}"
    );
    assert_eq!(o.observations.timeline.token_events.len(), 0);
    assert_eq!(
        o.observations.anomalies,
        vec![Anomaly::UnknownEvent, Anomaly::NonJsonData],
        "the foreign message_delta shape and the [DONE] sentinel are both flagged"
    );
}

#[tokio::test]
async fn llm_mock_api_every_protocol_reports_its_fixed_usage_and_flags_multi_token_events() {
    let mock = tokio::task::spawn_blocking(llm_mock_api).await.unwrap();
    for protocol in ["openai-chat", "openai-responses", "anthropic"] {
        for _ in 0..2 {
            let o = probe_mock(&mock, protocol).await;
            let m = success(&o);
            // Two chunks of 10 characters; usage says 5 output tokens (a constant in
            // llm-mock-api): N is the server's count, and 5 tokens in 2 events is flagged.
            assert_eq!(
                (m.output_tokens, m.token_count_source, m.token_events),
                (5, TokenCountSource::Usage, 2),
                "{protocol}"
            );
            assert_eq!(
                o.observations.anomalies,
                vec![Anomaly::MultiTokenEvents],
                "{protocol}"
            );
            assert!(o.observations.terminated, "{protocol}");
            assert!(
                m.ttft >= Duration::from_millis(15),
                "{protocol}: the first chunk comes after the 20 ms latency: {:?}",
                m.ttft
            );
            assert_eq!(o.observations.usage.prompt_tokens, Some(10), "{protocol}");
        }
    }
}
