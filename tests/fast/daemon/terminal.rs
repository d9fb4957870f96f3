//! Terminal injection: strings a server sends (its model name, an error body) reach the
//! terminal and the log only escaped. A model name with an escape sequence and a newline must
//! not recolour the terminal or forge an `ok TTFT 1.0 ms` line in `probe-once`'s text; the JSON
//! output still carries the exact string (as `\u` escapes); the daemon's log, in both formats,
//! holds no raw control or bidirectional-control character.

use crate::common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::Command;
use std::time::Duration;

use llm_probe::sanitize::is_unsafe_char;
use llm_probe::simulate::Script;

const BIN: &str = env!("CARGO_BIN_EXE_llm-probe");
/// Recolours, clears the screen, forges a result line, and reverses the rest of the line.
const HOSTILE: &str = "m\x1b[31m\x1b[2J\r\n  ok          TTFT 1.0 ms\u{9b}\u{202e}gnp.exe\u{2028}x";

fn config(dir: &tempfile::TempDir, base_url: &str) -> std::path::PathBuf {
    let p = dir.path().join("probes.yaml");
    std::fs::write(
        &p,
        common::yaml(base_url, "1s", &common::scenario("chat", 8), ""),
    )
    .unwrap();
    p
}

fn output(args: &[&str], config: &std::path::Path) -> String {
    let out = Command::new(BIN)
        .args(args)
        .arg("--config.file")
        .arg(config)
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap() + &String::from_utf8(out.stderr).unwrap()
}

/// No character a terminal would act on, except the newlines that end lines.
fn assert_printable(channel: &str, text: &str) {
    let bad: Vec<char> = text
        .chars()
        .filter(|c| *c != '\n' && is_unsafe_char(*c))
        .collect();
    assert!(bad.is_empty(), "{channel} printed {bad:?}:\n{text}");
}

/// A server that answers every request with HTTP 500 and a hostile body.
fn hostile_500_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut length = 0usize;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
                if line == "\r\n" {
                    break;
                }
            }
            let mut body = vec![0; length];
            let _ = reader.read_exact(&mut body);
            let _ = write!(
                stream,
                "HTTP/1.1 500 Internal Server Error\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{HOSTILE}",
                HOSTILE.len()
            );
        }
    });
    format!("http://{addr}/v1")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_once_escapes_a_hostile_model_name_and_error_body() {
    let sim = common::simulator(Script {
        ttft: Duration::from_millis(5),
        itl: Duration::from_millis(1),
        tokens: 3,
        model: HOSTILE.into(),
        ..Script::default()
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let ok_cfg = config(&dir, &sim.base_url());
    let bad_dir = tempfile::tempdir().unwrap();
    let bad_cfg = config(&bad_dir, &hostile_500_server());
    let (text, json, failed) = tokio::task::spawn_blocking(move || {
        (
            output(&["probe-once"], &ok_cfg),
            output(&["probe-once", "--output", "json"], &ok_cfg),
            output(&["probe-once"], &bad_cfg),
        )
    })
    .await
    .unwrap();

    assert_printable("probe-once text", &text);
    let ok_lines = text
        .lines()
        .filter(|l| l.trim_start().starts_with("ok"))
        .count();
    assert_eq!(ok_lines, 1, "one result line, none forged:\n{text}");
    assert!(
        text.contains(
            r"model m\x1b[31m\x1b[2J\r\n  ok          TTFT 1.0 ms\x9b\u{202e}gnp.exe\u{2028}x,"
        ),
        "the model is shown, escaped:\n{text}"
    );

    assert_printable("probe-once json", &json);
    let v: serde_json::Value = serde_json::from_str(json.lines().next().unwrap()).unwrap();
    // Server-sent identities are made visible where the probe reads them (control and bidi
    // characters as escapes), so JSON, /metrics and the pages show what the terminal shows.
    assert_eq!(
        v["response_model"],
        r"m\x1b[31m\x1b[2J\r\n  ok          TTFT 1.0 ms\x9b\u{202e}gnp.exe\u{2028}x",
        "JSON holds the visible form, no raw control character"
    );

    assert_printable("probe-once failing", &failed);
    assert!(failed.contains("FAILED      http_status"), "{failed}");
    assert_eq!(
        failed
            .lines()
            .filter(|l| l.trim_start().starts_with("ok"))
            .count(),
        0,
        "{failed}"
    );
}

/// The daemon logs the failing probe's detail (the hostile body) in logfmt and JSON.
#[test]
fn the_log_escapes_a_hostile_error_body() {
    let url = hostile_500_server();
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&dir, &url);
    for format in ["logfmt", "json"] {
        let (child, mut err) = common::spawn_logged(
            BIN,
            &[
                "--log.format",
                format,
                "run",
                "--web.listen-address",
                "127.0.0.1:0",
            ],
            &cfg,
            &[],
        );
        err.until("probe failed");
        common::interrupt(&child.0);
        let mut child = child;
        child.0.wait().unwrap();
        let log = err.finish();
        assert_printable(format, &log);
        assert!(log.contains("HTTP 500"), "{log}");
        for line in log.lines() {
            assert!(
                line.starts_with("ts=") || line.starts_with('{') || line.starts_with("llm-probe:"),
                "{format}: a line that is not a log record: {line:?}\n{log}"
            );
        }
    }
}
