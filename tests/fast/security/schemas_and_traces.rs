//! Untrusted input against Gemini, Bedrock, answer checks, the TTFT split and trace
//! context: schemas that point elsewhere or at themselves, schema files that
//! are not small regular files, names that carry terminal escapes into messages.

use crate::common;

use std::time::{Duration, Instant};

use llm_probe::check::Schema;
use serde_json::json;

fn scenario_with(extra: &str) -> String {
    format!("{}{extra}", common::scenario("s", 8))
}

fn problems(extra: &str) -> String {
    let yaml = common::yaml("http://127.0.0.1:9", "10s", &scenario_with(extra), "");
    match llm_probe::config::parse(&yaml, "<test>", &|_| None) {
        Ok(_) => panic!("config should be refused:\n{yaml}"),
        Err(e) => e.to_string(),
    }
}

/// Regression guard (held before this pass): `{"$ref": "#"}` and a recursive property
/// validate without hanging or overflowing the stack.
#[test]
fn a_schema_that_refers_to_itself_neither_hangs_nor_overflows() {
    let s = Schema::compile(json!({"$ref": "#"})).unwrap();
    assert!(s.validate(&json!({"a": [1, 2, {"b": null}]})).is_ok());
    let s = Schema::compile(json!({"properties": {"a": {"$ref": "#"}, "b": {"type": "string"}}}))
        .unwrap();
    let mut deep = json!({"b": 1});
    for _ in 0..100 {
        deep = json!({ "a": deep });
    }
    assert!(s.validate(&deep).is_err(), "the innermost b is no string");
}

/// Regression guard: a remote or file `$ref` is refused at load time and never fetched (the
/// schema crate is built without its HTTP and file resolvers).
#[test]
fn remote_and_file_refs_are_refused_and_never_fetched() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let remote = Schema::compile(json!({"$ref": format!("http://127.0.0.1:{port}/s.json")}));
    assert!(remote.is_err());
    assert!(listener.accept().is_err(), "the schema's $ref was fetched");
    assert!(Schema::compile(json!({"$ref": "file:///etc/hostname"})).is_err());
}

/// Regression guard: a backtracking `pattern` (lookahead over nested repetition) in a schema
/// is bounded, not exponential, on an answer built to trigger it.
#[test]
fn a_backtracking_pattern_in_a_schema_is_bounded() {
    let s = Schema::compile(json!({"type": "string", "pattern": "^(?=(a+)+b)"})).unwrap();
    let t = Instant::now();
    assert!(s.validate(&json!("a".repeat(40))).is_err());
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
}

#[test]
fn a_json_schema_file_that_is_not_a_small_regular_file_is_refused_briefly() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.json");
    // 4 MiB of valid JSON that is no schema: refused for its size, not read and echoed.
    std::fs::write(&big, format!("[{}1]", "1,".repeat(2 << 20))).unwrap();
    let fifo = dir.path().join("fifo.json");
    common::mkfifo(&fifo);
    let cases = [
        (dir.path().to_path_buf(), "not a regular file"),
        (big, "larger than 1 MiB"),
        // Nobody writes to it: a plain read would block for ever.
        (fifo, "not a regular file"),
    ];
    for (f, why) in cases {
        let t = Instant::now();
        let p = problems(&format!(
            "    expect: {{json_schema_file: {}}}\n",
            f.display()
        ));
        assert!(
            p.contains("json_schema_file") && p.contains(why),
            "{}",
            &p[..p.len().min(600)]
        );
        assert!(p.len() < 2000, "the message is {} bytes", p.len());
        assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    }
}

#[test]
fn a_huge_invalid_inline_schema_is_not_echoed_whole() {
    let junk = format!("[{}1]", "1,".repeat(100_000));
    for extra in [
        format!("    expect: {{json_schema: {junk}}}\n"),
        format!("    response_format: {{type: json_schema, json_schema: {{name: x, schema: {junk}}}}}\n"),
        format!("    tools: [{{type: function, function: {{name: f, parameters: {junk}}}}}]\n"),
    ] {
        let p = problems(&extra);
        assert!(p.contains("is not a valid JSON Schema"), "{}", &p[..p.len().min(600)]);
        assert!(p.len() < 2000, "the message is {} bytes", p.len());
    }
}

#[test]
fn an_overlong_regex_is_refused_before_it_is_compiled() {
    // 100,000 nested groups would take the compiler a while (and its stack): the length
    // check comes first.
    let re = format!("{}a{}", "(".repeat(50_000), ")".repeat(50_000));
    let t = Instant::now();
    let p = problems(&format!("    expect: {{regex: \"{re}\"}}\n"));
    assert!(
        p.contains("longer than 1024 characters"),
        "{}",
        &p[..p.len().min(600)]
    );
    assert!(t.elapsed() < Duration::from_secs(10));
}

/// One probe of a target with the extra target keys `extra` against a quick simulator.
async fn probe_with(extra: &str) -> llm_probe::measure::ProbeOutcome {
    let sim = common::simulator(llm_probe::simulate::Script {
        ttft: Duration::from_millis(5),
        itl: Duration::from_millis(1),
        tokens: 3,
        ..Default::default()
    })
    .await;
    let yaml = common::yaml(&sim.base_url(), "10s", &common::scenario("s", 8), extra);
    let t = common::parse(&yaml).targets[0].clone();
    let prober = llm_probe::probe::Prober::new(t.clone()).unwrap();
    prober.probe(&t.scenarios[0]).await
}

#[tokio::test]
async fn a_trace_header_declared_secret_is_never_recorded() {
    let o = probe_with(
        "    headers: {x-request-id: tok-s3cr3t-0123456789, traceparent: tp-s3cr3t-0123456789}\n    secret_headers: [x-request-id, traceparent]\n",
    )
    .await;
    assert!(o.is_success(), "{:?}", o.result);
    let obs = &o.observations;
    for v in [&obs.request_id, &obs.traceparent].into_iter().flatten() {
        assert!(
            !v.contains("s3cr3t"),
            "a secret header value was recorded: {v}"
        );
    }
    let report = llm_probe::report::to_json(&o).to_string();
    assert!(!report.contains("s3cr3t"), "{report}");
}

#[tokio::test]
async fn a_targets_own_malformed_traceparent_is_kept_but_has_no_trace_id() {
    let o = probe_with("    headers: {traceparent: \"00-xyz-zz-01\"}\n").await;
    assert!(o.is_success(), "{:?}", o.result);
    let report = llm_probe::report::to_json(&o);
    assert_eq!(report["trace_id"], serde_json::Value::Null, "{report}");
}

#[tokio::test]
async fn a_trace_header_declared_secret_stays_out_of_the_text_report() {
    let o = probe_with(
        "    headers: {x-request-id: tok-s3cr3t-0123456789}\n    secret_headers: [x-request-id]\n",
    )
    .await;
    let text = llm_probe::report::to_text(&o);
    assert!(!text.contains("s3cr3t"), "{text}");
}
