//! Untrusted input that is not a stream, each over real loopback HTTP from a
//! small scripted server or through the config loader:
//! - a server that echoes the request's key back where the probe cuts the text (an error body's
//!   excerpt, a 128-character identity label) must not leave the key's beginning behind, and
//!   identity fields (model, fingerprint, version: labels on /metrics) are redacted too;
//! - a config nested thousands of flow levels deep is refused at once, not parsed for minutes;
//! - a content coding sent as two header lines is named, not decoded as if it were one.

use crate::common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use llm_probe::config::Config;
use llm_probe::measure::{FailureReason, ProbeOutcome};
use llm_probe::probe::{Limits, Prober};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

// ---- a scripted server ----------------------------------------------------------------------

type Answer = Arc<dyn Fn(&str) -> Vec<u8> + Send + Sync>;

/// A loopback server that reads each request (head and `content-length` body) and answers it
/// with `answer(request head as sent)`, then closes.
async fn server(answer: Answer) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = listener.accept().await {
            let answer = Arc::clone(&answer);
            tokio::spawn(async move {
                let head = common::read_request_head(&mut tcp).await;
                let _ = tcp.write_all(&answer(&head)).await;
                let _ = tcp.shutdown().await;
            });
        }
    });
    addr
}

/// The value of request header `name` (case-insensitive) in `head`.
fn header_of(head: &str, name: &str) -> String {
    head.lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
        })
        .unwrap_or_default()
}

fn response(status: &str, headers: &str, body: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {status}\r\n{headers}content-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body);
    out
}

const KEY: &str = "sk-live-0123456789abcdef";
const HEADER_SECRET: &str = "hdr-secret-fedcba9876543210";

/// One openai-chat target at `addr` with [`KEY`] as its API key and [`HEADER_SECRET`] in a
/// secret header (written with spaces around it, which the server does not see), and a
/// `/version` path.
fn config(addr: SocketAddr) -> Config {
    let yaml = format!(
        "defaults:\n  interval: 10s\n  timeout: 3s\nscenarios:\n  - name: s\n    messages: [{{role: user, content: hi}}]\n    max_tokens: 8\ntargets:\n  - name: t\n    protocol: openai-chat\n    base_url: http://{addr}/v1\n    model: m\n    api_key_env: BREAKIT_KEY\n    version_path: /version\n    headers: {{X-Api-Key: \" {HEADER_SECRET} \"}}\n"
    );
    llm_probe::config::parse(&yaml, "<test>", &|name| {
        (name == "BREAKIT_KEY").then(|| KEY.to_string())
    })
    .unwrap()
}

async fn probe_echoing(addr: SocketAddr) -> ProbeOutcome {
    let limits = Limits {
        drain_after_end: Duration::from_millis(20),
        ..Limits::default()
    };
    common::probe_first(&config(addr), Some(limits)).await
}

/// Every output of a probe: its JSON line and its text block.
fn printed(o: &ProbeOutcome) -> String {
    format!(
        "{}\n{}",
        llm_probe::report::json_line(o),
        llm_probe::report::to_text(o)
    )
}

/// Asserts that no 4-byte beginning of `secret`, nor anything longer, is in `text`.
fn assert_no_part_of(text: &str, secret: &str) {
    assert!(
        !text.contains(&secret[..4]),
        "the beginning of a secret leaked:\n{text}"
    );
}

// ---- secrets that a cut would leave behind ----------------------------------------------------

#[tokio::test]
async fn an_echoed_key_cut_by_the_detail_excerpt_leaves_no_beginning_behind() {
    // The error body is shown as a 400-character excerpt; wherever the echoed key falls across
    // that cut, no piece of it may stay.
    for pad in (360..400).step_by(3) {
        let addr = server(Arc::new(move |head: &str| {
            let body = format!(
                "{}{} {}",
                "A".repeat(pad),
                header_of(head, "authorization"),
                header_of(head, "x-api-key")
            );
            response(
                "400 Bad Request",
                "content-type: text/plain\r\n",
                body.as_bytes(),
            )
        }))
        .await;
        let o = probe_echoing(addr).await;
        let f = o.result.as_ref().expect_err("a 400 fails");
        assert_eq!(f.reason, FailureReason::HttpStatus);
        let out = printed(&o);
        assert_no_part_of(&out, KEY);
        assert_no_part_of(&out, HEADER_SECRET);
    }
}

#[tokio::test]
async fn echoed_secrets_in_identity_fields_are_redacted_whole_and_cut() {
    // The model and fingerprint a stream reports and the version answer are labels of
    // llm_probe_endpoint_info: a server that echoes credentials into them must not publish them.
    // The model carries the key across its 128-character cut.
    let addr = server(Arc::new(|head: &str| {
        if head.starts_with("GET /version") {
            let body = format!(r#"{{"version":"v-{}"}}"#, header_of(head, "x-api-key"));
            return response("200 OK", "content-type: application/json\r\n", body.as_bytes());
        }
        let auth = header_of(head, "authorization");
        let model = format!("{}{auth}", "m".repeat(112));
        let events = [
            format!(
                r#"{{"id":"x","model":"{model}","system_fingerprint":"fp-{auth}","choices":[{{"index":0,"delta":{{"content":"hi"}}}}]}}"#
            ),
            r#"{"id":"x","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}"#.to_string(),
            "[DONE]".to_string(),
        ];
        let body: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
        response("200 OK", "content-type: text/event-stream\r\n", body.as_bytes())
    }))
    .await;
    let o = probe_echoing(addr).await;
    assert!(o.is_success(), "{:?}", o.result);
    let id = &o.observations.identity;
    assert!(
        id.server_version
            .as_deref()
            .is_some_and(|v| v.starts_with("v-")),
        "the version answer was read: {id:?}"
    );
    assert!(id
        .system_fingerprint
        .as_deref()
        .is_some_and(|v| v.starts_with("fp-")));
    let out = printed(&o);
    assert_no_part_of(&out, KEY);
    assert_no_part_of(&out, HEADER_SECRET);
    assert_no_part_of(&format!("{id:?}"), KEY);
}

// ---- a config nested very deeply -------------------------------------------------------------

#[test]
fn a_config_nested_very_deeply_is_refused_at_once() {
    // libyaml's scanner is quadratic in the flow nesting depth: 200,000 `[` took many minutes.
    // (Block nesting is cheap for it; serde_yaml's recursion limit refuses it.)
    let base = "scenarios:\n  - name: s\n    messages: [{role: user, content: hi}]\ntargets: []\n";
    for (name, deep) in [
        ("flow", format!("{base}x: {}\n", "[".repeat(200_000))),
        (
            "flow mappings",
            format!("{base}x: {}\n", "{a: ".repeat(100_000)),
        ),
        (
            "block",
            (0..2_000)
                .map(|i| format!("{}k{i}:\n", " ".repeat(i)))
                .collect::<String>(),
        ),
    ] {
        let (tx, rx) = std::sync::mpsc::channel();
        // A thread of its own: before the fix this ran for minutes (it ends with the process).
        std::thread::spawn(move || {
            let r = llm_probe::config::parse(&deep, "deep.yaml", &|_| None).map(|_| ());
            let _ = tx.send(r.map_err(|e| e.to_string()));
        });
        let e = rx
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|_| panic!("{name}: parsing a deeply nested file took over 10 s"))
            .expect_err(name);
        assert!(e.starts_with("deep.yaml:"), "{name}: {e}");
        if name != "block" {
            assert!(
                e.contains("nested more than 100 levels deep"),
                "{name}: {e}"
            );
        }
    }
}

// ---- content codings sent oddly ------------------------------------------------------------

#[tokio::test]
async fn a_content_coding_on_two_header_lines_or_with_odd_bytes_is_named_not_ignored() {
    let ok_stream = b"data: {\"id\":\"x\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n";
    let gzip = |b: &[u8]| {
        use std::io::Write;
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(b).unwrap();
        e.finish().unwrap()
    };
    let twice = gzip(&gzip(ok_stream));
    let cases: [(&str, Vec<u8>, &str); 2] = [
        // Two header lines: two codings stacked, as "gzip, gzip" on one line is.
        (
            "content-encoding: gzip\r\ncontent-encoding: gzip\r\n",
            twice,
            "\"gzip, gzip\"",
        ),
        // A value that is not ASCII is an unknown coding, not no coding.
        (
            "content-encoding: gzip\u{e9}\r\n",
            gzip(ok_stream),
            "Content-Encoding \"gzip",
        ),
    ];
    for (headers, body, named) in cases {
        let headers = format!("content-type: text/event-stream\r\n{headers}");
        let addr = server(Arc::new(move |_: &str| response("200 OK", &headers, &body))).await;
        let o = probe_echoing(addr).await;
        let f = o.result.as_ref().expect_err("an undecodable coding fails");
        assert_eq!(f.reason, FailureReason::Decode, "{f:?}");
        assert!(
            f.detail.contains(named) && f.detail.contains("cannot decode"),
            "the detail names the coding: {f:?}"
        );
    }
}

// ---- config messages for odd but harmless writing ---------------------------------------------

const SMALL: &str = "scenarios:\n  - name: s\n    messages: [{role: user, content: hi}]\n    max_tokens: 8\ntargets:\n  - name: t\n    protocol: openai-chat\n    base_url: http://127.0.0.1:8000/v1\n    model: m\n";

#[test]
fn a_file_with_two_byte_order_marks_is_read_like_one_with_one() {
    for boms in ["\u{feff}", "\u{feff}\u{feff}"] {
        let cfg = llm_probe::config::parse(&format!("{boms}{SMALL}"), "<test>", &|_| None);
        assert!(
            cfg.is_ok(),
            "{:?}: {:?}",
            boms.len(),
            cfg.err().map(|e| e.to_string())
        );
    }
}

#[test]
fn a_key_that_is_a_list_or_mapping_is_named_in_plain_words() {
    for (key, kind) in [
        ("? [a]\n    : b\n", "list"),
        ("? {a: b}\n    : c\n", "mapping"),
    ] {
        let text = format!("{SMALL}    {key}");
        let e = llm_probe::config::parse(&text, "<test>", &|_| None)
            .unwrap_err()
            .to_string();
        assert!(!e.contains("identifier"), "serde's words: {e}");
        assert!(e.contains(&format!("a key that is a {kind}")), "{e}");
        assert!(e.contains("<test>:10:"), "located: {e}");
    }
}

// ---- a refused proxy ---------------------------------------------------------------------------

#[test]
fn a_refused_proxy_is_named_as_the_proxy_and_its_credentials_never_shown() {
    // The target answers (a listener the kernel completes connects for); the proxy's port is
    // closed. Before, the detail said the *target* refused.
    let target = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let proxy_port = common::free_port();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("p.yaml");
    std::fs::write(
        &file,
        SMALL.replace("127.0.0.1:8000", &target.local_addr().unwrap().to_string()),
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_llm-probe"))
        .args([
            "--log.level",
            "trace",
            "probe-once",
            "--output",
            "json",
            "--config.file",
        ])
        .arg(&file)
        .env(
            "HTTP_PROXY",
            format!("http://user:PROXYSECRET@127.0.0.1:{proxy_port}"),
        )
        .env_remove("NO_PROXY")
        .env_remove("no_proxy")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON line");
    assert_eq!(line["failure_reason"], "connect", "{line}");
    let detail = line["failure_detail"].as_str().unwrap();
    assert!(
        detail.contains(&format!("through the proxy 127.0.0.1:{proxy_port}")),
        "{detail}"
    );
    assert!(!stdout.contains("PROXYSECRET") && !stderr.contains("PROXYSECRET"));
}

// ---- a stream refused without a token says why ---------------------------------------------------

#[tokio::test]
async fn an_empty_stream_names_the_finish_reason_that_emptied_it() {
    let sse = |events: &[(&str, &str)]| -> Vec<u8> {
        events
            .iter()
            .map(|(name, data)| match name {
                &"" => format!("data: {data}\n\n"),
                n => format!("event: {n}\ndata: {data}\n\n"),
            })
            .collect::<String>()
            .into_bytes()
    };
    let chat_filtered = sse(&[
        (
            "",
            r#"{"id":"x","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#,
        ),
        (
            "",
            r#"{"id":"x","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"content_filter"}]}"#,
        ),
        ("", "[DONE]"),
    ]);
    let anthropic_refused = sse(&[
        (
            "message_start",
            r#"{"type":"message_start","message":{"id":"m","model":"c","usage":{"input_tokens":3,"output_tokens":1}}}"#,
        ),
        (
            "message_delta",
            r#"{"type":"message_delta","delta":{"stop_reason":"refusal"},"usage":{"output_tokens":0}}"#,
        ),
        ("message_stop", r#"{"type":"message_stop"}"#),
    ]);
    let responses_incomplete = sse(&[
        (
            "response.created",
            r#"{"type":"response.created","response":{"id":"r","model":"m"}}"#,
        ),
        (
            "response.incomplete",
            r#"{"type":"response.incomplete","response":{"id":"r","model":"m","status":"incomplete","incomplete_details":{"reason":"content_filter"}}}"#,
        ),
    ]);
    let cases = [
        (
            "openai-chat",
            "/v1",
            "",
            chat_filtered.clone(),
            "content_filter",
        ),
        (
            "azure-openai",
            "",
            "    deployment: d\n",
            chat_filtered,
            "content_filter",
        ),
        ("anthropic", "/v1", "", anthropic_refused, "refusal"),
        (
            "openai-responses",
            "/v1",
            "",
            responses_incomplete,
            "content_filter",
        ),
    ];
    for (protocol, path, extra, body, reason) in cases {
        let addr = server(Arc::new(move |_: &str| {
            response("200 OK", "content-type: text/event-stream\r\n", &body)
        }))
        .await;
        let yaml = SMALL
            .replace("openai-chat", protocol)
            .replace("http://127.0.0.1:8000/v1", &format!("http://{addr}{path}"))
            + extra;
        let cfg = llm_probe::config::parse(&yaml, "<test>", &|_| None).unwrap();
        let o = common::probe_first(&cfg, None).await;
        let f = o.result.as_ref().expect_err(protocol);
        assert_eq!(f.reason, FailureReason::EmptyStream, "{protocol}: {f:?}");
        assert!(
            f.detail.contains(&format!("finish reason: \"{reason}\"")),
            "{protocol}: {f:?}"
        );
    }
}

// ---- a stream under the wrong content type ---------------------------------------------------------

#[tokio::test]
async fn a_stream_labelled_json_is_named_as_a_mislabelled_stream_not_as_text_without_events() {
    let sse: &[u8] = b"data: {\"id\":\"x\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n";
    let ndjson: &[u8] = b"{\"model\":\"m\",\"message\":{\"role\":\"assistant\",\"content\":\"Hi\"},\"done\":false}\n{\"model\":\"m\",\"done\":true}\n";
    for body in [sse, ndjson] {
        let addr = server(Arc::new(move |_: &str| {
            response("200 OK", "content-type: application/json\r\n", body)
        }))
        .await;
        let o = probe_echoing(addr).await;
        let f = o
            .result
            .as_ref()
            .expect_err("the content type says it is no stream");
        assert_eq!(f.reason, FailureReason::Decode);
        assert!(
            f.detail
                .contains("a stream sent under the wrong content type")
                && f.detail.contains("labels its stream application/json")
                && !f.detail.contains("without any event"),
            "{f:?}"
        );
    }
}

// ---- [DONE] with whitespace around it ----------------------------------------------------------------

#[tokio::test]
async fn a_done_with_spaces_around_it_ends_the_stream_like_done() {
    let head = "data: {\"id\":\"x\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\ndata: {\"id\":\"x\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1}}\n\n";
    for done in ["data: [DONE] \n\n", "data:  [DONE]\t\n\n"] {
        let body = format!("{head}{done}").into_bytes();
        let addr = server(Arc::new(move |_: &str| {
            response("200 OK", "content-type: text/event-stream\r\n", &body)
        }))
        .await;
        let o = probe_echoing(addr).await;
        assert!(o.is_success(), "{done:?}: {:?}", o.result);
        assert!(o.observations.terminated, "{done:?}");
        assert!(
            o.observations.anomalies.is_empty(),
            "{done:?}: {:?}",
            o.observations.anomalies
        );
    }
}

// ---- a file name that would forge output -------------------------------------------------------------

#[test]
fn a_config_file_name_with_control_characters_cannot_forge_check_config_output() {
    // A CI job that runs check-config on every file of a pull request prints names it did not
    // choose: "x\e[32m\nprod.yaml: OK, 1 target" must not become a second, green line.
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("ok\u{1b}[32m\nforged.yaml: OK, 9 targets");
    std::fs::write(&good, SMALL).unwrap();
    let bad = dir.path().join("bad\u{1b}[32m\nforged.yaml: OK, 9 targets");
    std::fs::write(&bad, "scenarios: [}\n").unwrap();
    let missing = dir.path().join("missing\u{1b}[2J\nforged.yaml: OK");
    for (file, ok) in [(&good, true), (&bad, false), (&missing, false)] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_llm-probe"))
            .args(["check-config", "--skip-secrets", "--config.file"])
            .arg(file)
            .output()
            .unwrap();
        assert_eq!(out.status.success(), ok, "{file:?}");
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            !all.contains('\u{1b}'),
            "an escape reached the terminal: {all:?}"
        );
        assert!(
            !all.lines().any(|l| l.starts_with("forged.yaml")),
            "a line was forged: {all:?}"
        );
        assert!(all.contains("\\x1b"), "the name is shown escaped: {all:?}");
    }
}

// ---- the debug probe's raw excerpt ---------------------------------------------------------------

#[tokio::test]
async fn the_raw_excerpt_a_debug_probe_keeps_has_no_echoed_secret() {
    // `/probe` shows the first bytes of the body to any HTTP client of the exporter.
    let addr = server(Arc::new(|head: &str| {
        let body = format!(
            "data: {{\"error\":{{\"message\":\"bad credentials: {} / {}\"}}}}\n\n",
            header_of(head, "authorization"),
            header_of(head, "x-api-key")
        );
        response(
            "200 OK",
            "content-type: text/event-stream\r\n",
            body.as_bytes(),
        )
    }))
    .await;
    let cfg = config(addr);
    let t = cfg.targets[0].clone();
    let limits = Limits {
        capture_bytes: 4096,
        ..Limits::default()
    };
    let o = Prober::new(t.clone())
        .unwrap()
        .with_limits(limits)
        .probe(&t.scenarios[0])
        .await;
    let raw = String::from_utf8_lossy(&o.observations.raw_excerpt).into_owned();
    assert!(
        raw.contains("bad credentials"),
        "the excerpt was kept: {raw}"
    );
    assert_no_part_of(&raw, KEY);
    assert_no_part_of(&raw, HEADER_SECRET);
    assert_no_part_of(&printed(&o), KEY);
}
