//! The shipped dashboards' queries return data. The daemon probes five targets every second for
//! about two and a half minutes: `chat` (the simulator over OpenAI chat, behind a TCP relay that
//! switches it to a second simulator with another response model after two minutes: a backend
//! identity change), `prefill` (the simulator over llama.cpp's native protocol, which reports
//! its prefill time), `failing` (HTTP 500 on every probe) and `anomalous` (no usage: a
//! `missing_usage` anomaly on every probe, and rate-limit headers), and `cached` (a captured llama.cpp Anthropic stream,
//! `tests/fixtures/captured/llama-cpp-anthropic.txt`, replayed: 24 of its prompt tokens came
//! from the prefix cache); `prefill`/`chat` has a pinned baseline (`baseline_file:`). `chat` and
//! `prefill` also probe `long`, a generated long prompt (`prompt_tokens`; `prefill` with a prefill
//! floor), and `truncating` probes only it, against a context the simulator cuts it to (the
//! anomaly `prompt_truncated` and the check `context_truncated`). `conversing` probes only
//! `conversation`, a two-turn scenario (`turns`), against a simulator whose prefix cache serves
//! turn 1 on turn 2 and counts it (the Conversations row). A real Prometheus scrapes it every second and
//! evaluates the shipped rule files as they are. Then every query of every panel, annotation
//! and template variable of `dashboards/grafana/*.json` runs through the Prometheus HTTP API
//! (template variables substituted; `$__rate_interval` → 30s, `$__interval` → 10s,
//! `$__range` → 2m) and must return data — except the ones listed in [`NEEDS_HISTORY`], with the
//! reason, which are checked to be valid PromQL that Prometheus accepts.

use crate::common;
use common::ScriptExt;

use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::dashboards::{
    dashboard_exprs, dashboard_files, label_values_vars, read_json, rule_files,
    substitute_grafana_vars, QueryKind,
};
use common::prometheus::{Prometheus, Scrape};
use llm_probe::simulate::Fault;

/// Queries that need what a few minutes cannot have, by the start of the expression; each still
/// has to be accepted by Prometheus.
const NEEDS_HISTORY: &[(&str, &str)] = &[(
    "offset 1w",
    "compares with the same hour a week ago: needs a week of history",
)];

/// Time the first backend serves `chat` before the relay switches: longer than the 2m offset
/// of the identity-change annotation, so the old identity is in its look-back.
const BEFORE_SWITCH: Duration = Duration::from_secs(125);

/// The dashboards' time variables, shortened to what the run has.
const TIME_VARS: [(&str, &str); 3] = [
    ("$__rate_interval", "30s"),
    ("$__interval", "10s"),
    ("$__range", "2m"),
];

/// A TCP relay on a loopback port that connects every new connection to the port in `upstream`
/// at that moment (the probe opens a fresh connection per probe, so a switch takes effect on
/// the next probe).
async fn relay(upstream: Arc<AtomicU16>) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            let port = upstream.load(Ordering::SeqCst);
            tokio::spawn(async move {
                if let Ok(mut out) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut out).await;
                }
            });
        }
    });
    addr
}

/// An HTTP server on a loopback port that answers every request with `body` as an event stream.
async fn replay(body: &'static [u8]) -> std::net::SocketAddr {
    use hyper_util::rt::TokioIo;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let svc = hyper::service::service_fn(
                move |_req: hyper::Request<hyper::body::Incoming>| async move {
                    hyper::Response::builder()
                        .header("content-type", "text/event-stream")
                        .body(http_body_util::Full::new(bytes::Bytes::from_static(body)))
                },
            );
            tokio::spawn(
                hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(tcp), svc),
            );
        }
    });
    addr
}

fn substitute(expr: &str) -> String {
    let mut s = expr.to_string();
    for (var, val) in TIME_VARS {
        s = s.replace(var, val);
    }
    substitute_grafana_vars(&s)
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_dashboard_query_returns_data() {
    let v1 = common::simulator(common::stream(40, 4, 12).model("sim-v1").fault(Fault::None)).await;
    let v2 = common::simulator(common::stream(40, 4, 12).model("sim-v2").fault(Fault::None)).await;
    let prefill = common::simulator(
        common::stream(40, 4, 12)
            .model("sim-llama")
            .fault(Fault::None),
    )
    .await;
    let failing =
        common::simulator(common::stream(40, 4, 12).model("sim").fault(Fault::Http500)).await;
    // Also a hosted API's key with a quota it never reaches (the rate-limit headroom panel).
    let anomalous = common::simulator(llm_probe::simulate::Script {
        rate_limit: 1_000_000,
        ..common::stream(40, 4, 12).model("sim").fault(Fault::NoUsage)
    })
    .await;
    // A context far below the long prompt, cut silently (the truncation panel).
    let truncating = common::simulator(llm_probe::simulate::Script {
        context_limit: 64,
        context_overflow: llm_probe::simulate::ContextOverflow::Truncate,
        ..common::stream(40, 4, 12).model("sim").fault(Fault::None)
    })
    .await;
    // A prefix cache that serves a conversation's earlier turns and counts them (the
    // Conversations row: TTFT and cached share by turn).
    let conversing = common::simulator(llm_probe::simulate::Script {
        prefix_cache: true,
        ..common::stream(40, 4, 12).model("sim").fault(Fault::None)
    })
    .await;
    // Complete streams whose answers fail a check (the wrong-answer panel).
    let looping = common::simulator(
        common::stream(40, 4, 12)
            .model("sim")
            .fault(Fault::RepetitionLoop),
    )
    .await;
    let upstream = Arc::new(AtomicU16::new(v1.addr.port()));
    let chat = relay(upstream.clone()).await;
    let cached = replay(include_bytes!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/captured/llama-cpp-anthropic.txt"
    )))
    .await;

    // `long`: a generated prompt of 256 tokens (the Long prompts row), and `conversation`, two
    // turns (the Conversations row), each probed only where a target lists it.
    let scenarios = "  - name: chat\n    messages: [{role: user, content: \"Say something.\"}]\n    max_tokens: 12\n  - name: warm\n    messages: [{role: user, content: \"Say it again.\"}]\n    max_tokens: 12\n    prefix_cache: warm\n  - name: long\n    prompt_tokens: 256\n    max_tokens: 16\n  - name: conversation\n    messages: [{role: user, content: \"Say something.\"}]\n    turns: [\"And once more.\"]\n    max_tokens: 12\n";
    let target_with = |name: &str, protocol: &str, base: String, scenarios: &str| {
        format!("  - name: {name}\n    protocol: {protocol}\n    base_url: {base}\n    model: m\n    scenarios: [{scenarios}]\n")
    };
    let target =
        |name: &str, protocol: &str, base: String| target_with(name, protocol, base, "chat, warm");
    let baseline_dir = tempfile::tempdir().unwrap();
    // A pool of two replicas (the replica panels): v1 and v2 side by side.
    let pool_sd = baseline_dir.path().join("pool.json");
    common::fleet::write_sd(&pool_sd, &[v1.addr.to_string(), v2.addr.to_string()]);
    let yaml = format!(
        "defaults:\n  interval: 1s\n  timeout: 900ms\nscenarios:\n{scenarios}targets:\n{}{}{}{}{}{}{}{}{}",
        target_with("chat", "openai-chat", format!("http://{chat}/v1"), "chat, warm, long"),
        // A pinned baseline for prefill/chat: the baseline lines of the panels have data. The
        // llama.cpp protocol reports the server's prefill (its prefill speed), and the target
        // has a prefill floor (the floor line).
        target_with("prefill", "llama-cpp", prefill.root_url(), "chat, warm, long")
            + &common::baseline_file_line(baseline_dir.path(), "prefill", "chat")
            + "    slo: {prefill_tokens_per_second_min: 1000}\n",
        target("failing", "openai-chat", failing.base_url()),
        target("anomalous", "openai-chat", anomalous.base_url()),
        target("looping", "openai-chat", looping.base_url()),
        target("cached", "anthropic", format!("http://{cached}/v1")),
        target_with("truncating", "openai-chat", truncating.base_url(), "long"),
        target_with("conversing", "openai-chat", conversing.base_url(), "conversation"),
        target("pool", "openai-chat", "http://pool.test:8000/v1".into())
            + &format!("    replicas: {{file_sd: {}}}\n", pool_sd.display()),
    );
    let d = common::daemon(common::parse(&yaml)).await;
    let dir = tempfile::tempdir().unwrap();
    let rules: Vec<String> = rule_files()
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    // Scraped as one probe location (a target label, as the README's scrape config sets), so
    // the dashboards' `location` variable and per-location panels have a value to show.
    let scrape = Scrape {
        addr: d.addr,
        labels: &[("location", "test")],
    };
    let prom = Prometheus::start_scraping(dir.path(), &rules, &[scrape]).await;
    let start = now();

    // The rules loaded, and nothing in them fails to evaluate.
    let loaded = prom.api("/api/v1/rules", &[]).await;
    let groups = loaded["groups"].as_array().unwrap();
    assert_eq!(
        groups.len(),
        rules_groups(),
        "every shipped rule group is loaded"
    );

    tokio::time::sleep_until(tokio::time::Instant::now() + BEFORE_SWITCH).await;
    upstream.store(v2.addr.port(), Ordering::SeqCst);
    // Until Prometheus has scraped the new identity (the next probe, the next scrape).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let r = prom
            .api(
                "/api/v1/query",
                &[(
                    "query",
                    r#"llm_probe_endpoint_info{target="chat",response_model="sim-v2"}"#,
                )],
            )
            .await;
        if r["result"].as_array().is_some_and(|a| !a.is_empty()) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "Prometheus never saw the chat target's new backend identity"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // Past the next range-query step, so the new identity is inside the evaluated range.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let end = now();
    for g in prom.api("/api/v1/rules", &[]).await["groups"]
        .as_array()
        .unwrap()
    {
        // A group evaluated every 5 minutes or less often (the slow-burn windows over an hour)
        // may not have had its first evaluation yet in this short run: `unknown` then, never `err`.
        let slow_group = g["interval"].as_f64().is_some_and(|i| i >= 300.0);
        for r in g["rules"].as_array().unwrap() {
            let ok = r["health"] == "ok" || (slow_group && r["health"] == "unknown");
            assert!(ok, "rule {} in {}: {r}", r["name"], g["file"]);
        }
    }

    let (start_s, end_s) = (format!("{start:.3}"), format!("{end:.3}"));
    let mut empty = Vec::new();
    let mut checked = 0;
    // The native variants read native histograms, which this (classic) Prometheus never has.
    for path in dashboard_files()
        .into_iter()
        .filter(|p| !common::dashboards::is_native_variant(p))
    {
        let file = path.file_name().unwrap().to_string_lossy().to_string();
        let dash = read_json(&path);
        let exprs = dashboard_exprs(&path, &dash);
        let vars = label_values_vars(&dash);
        assert_eq!(
            exprs
                .iter()
                .filter(|e| e.kind == QueryKind::Variable)
                .count(),
            vars.len(),
            "{file}: a query variable that is not label_values(…); teach this test to run it"
        );
        for common::dashboards::LabelValuesVar {
            name,
            selector,
            label,
        } in vars
        {
            let sel = substitute(&selector);
            let r = prom
                .api(
                    &format!("/api/v1/label/{label}/values"),
                    &[("match[]", &sel), ("start", &start_s), ("end", &end_s)],
                )
                .await;
            let values: Vec<&str> = r
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|v| v.as_str())
                .collect();
            let expected: &[&str] = match label.as_str() {
                "target" => &["anomalous", "cached", "chat", "failing", "prefill"],
                "model" => &["m"],
                "scenario" => &["chat", "warm"],
                _ => &[],
            };
            assert!(
                !values.is_empty(),
                "{file}: variable {name} ({selector}, {label}) has no values"
            );
            for e in expected {
                assert!(
                    values.contains(e),
                    "{file}: variable {name} lacks {e:?}: {values:?}"
                );
            }
            checked += 1;
        }
        for q in exprs.iter().filter(|e| e.kind != QueryKind::Variable) {
            let expr = substitute(&q.expr);
            let data = if q.kind == QueryKind::Instant {
                prom.api("/api/v1/query", &[("query", &expr), ("time", &end_s)])
                    .await
            } else {
                prom.api(
                    "/api/v1/query_range",
                    &[
                        ("query", &expr),
                        ("start", &start_s),
                        ("end", &end_s),
                        ("step", "1"),
                    ],
                )
                .await
            };
            checked += 1;
            let has_data = data["result"].as_array().is_some_and(|a| !a.is_empty());
            let excused = NEEDS_HISTORY
                .iter()
                .find(|(needle, _)| q.expr.contains(needle));
            match (has_data, excused) {
                (true, Some((_, why))) => {
                    eprintln!("{} returned data although listed ({why})", q.place)
                }
                (true, None) | (false, Some(_)) => {}
                (false, None) => empty.push(format!("{}: {expr}", q.place)),
            }
        }
    }
    if !empty.is_empty() {
        let info = prom
            .api(
                "/api/v1/query_range",
                &[
                    ("query", "llm_probe_endpoint_info"),
                    ("start", &start_s),
                    ("end", &end_s),
                    ("step", "1"),
                ],
            )
            .await;
        for series in info["result"].as_array().unwrap() {
            let v = series["values"].as_array().unwrap();
            eprintln!(
                "endpoint_info {} from {} to {} ({} points; run {start_s}..{end_s})",
                series["metric"],
                v[0][0],
                v[v.len() - 1][0],
                v.len()
            );
        }
    }
    d.stop().await;
    assert!(checked >= 40, "only {checked} queries found");
    assert!(
        empty.is_empty(),
        "{} dashboard queries returned no data:\n{}",
        empty.len(),
        empty.join("\n")
    );
}

/// How many rule groups the shipped rule files define.
fn rules_groups() -> usize {
    rule_files()
        .iter()
        .map(|p| {
            common::dashboards::read_yaml(p)["groups"]
                .as_sequence()
                .unwrap()
                .len()
        })
        .sum()
}
