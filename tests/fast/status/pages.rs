//! The status pages: hostile names and failure details are escaped on every page, in the API
//! and the badges; control characters are shown as escapes; API parameter errors. (The pages
//! in headless Chromium are in the end-to-end tier, `browser::status_pages`.)

use crate::common;
use common::ScriptExt;

use std::net::SocketAddr;
use std::time::{Duration, SystemTime};

use llm_probe::daemon::Daemon;
use llm_probe::history::RecentProbe;
use llm_probe::measure::FailureReason;

const HOSTILE_MODEL: &str = "<script>alert(\"m\")</script>'";
const HOSTILE_SERVED: &str = "\"><script>alert(1)</script>\n<img src=x onerror=alert(2)>";
const HOSTILE_DETAIL: &str = "</title><script>alert(\"d\")</script>\n\"'&";

fn pages() -> [&'static str; 7] {
    [
        "/",
        "/targets/sim",
        "/api/v1/targets",
        "/api/v1/probes",
        "/api/v1/probes?target=sim&scenario=chat",
        "/badge/sim/chat/ttft.svg",
        "/badge/sim/chat/status.svg",
    ]
}

/// GET with the response headers: (status, headers, body).
async fn get_full(addr: SocketAddr, path: &str) -> (u16, reqwest::header::HeaderMap, String) {
    let r = reqwest::get(format!("http://{addr}{path}")).await.unwrap();
    let (status, headers) = (r.status().as_u16(), r.headers().clone());
    (status, headers, r.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_names_and_details_are_escaped_on_every_page_api_and_badge() {
    let sim = common::simulator(common::stream(40, 5, 8).model(HOSTILE_SERVED)).await;
    let d = common::daemon(common::parse(&common::sim_target_yaml(
        &sim.base_url(),
        HOSTILE_MODEL,
        "1h",
    )))
    .await;
    let mut rx = d.subscribe();
    // The first probe comes within 10 s of the start, the next one an hour later: nothing but
    // this test adds to the history from here on.
    let o = common::outcomes(&mut rx, 1, Duration::from_secs(30)).await;
    assert!(o[0].result.is_ok(), "{:?}", o[0].result);
    d.history.push_probe(RecentProbe {
        target: "sim".into(),
        scenario: "chat".into(),
        replica: "".into(),
        started_at: SystemTime::now(),
        ttft: None,
        output_tokens_per_second: None,
        tpot: None,
        itl: None,
        e2e: None,
        output_tokens: None,
        failure: Some((FailureReason::Decode, HOSTILE_DETAIL.into())),
        identity: Some(format!("model={HOSTILE_SERVED}").into()),
        trace_id: None,
    });
    for path in pages() {
        let (status, headers, body) = get_full(d.addr, path).await;
        assert_eq!(status, 200, "{path}: {body}");
        let lower = body.to_lowercase();
        assert!(
            !lower.contains("<script") && !lower.contains("<img"),
            "{path} carries markup from a name or detail: {body}"
        );
        assert_eq!(headers["x-content-type-options"], "nosniff", "{path}");
        assert!(
            headers["content-security-policy"]
                .to_str()
                .unwrap()
                .starts_with("default-src 'none'"),
            "{path}"
        );
        if path.starts_with("/api/") {
            // JSON keeps the exact strings.
            let v: serde_json::Value = serde_json::from_str(&body).unwrap();
            let text = v.to_string();
            assert!(
                text.contains(&serde_json::to_string(HOSTILE_SERVED).unwrap()[1..20]),
                "{path}: {body}"
            );
        }
    }
    let (_, _, target) = get_full(d.addr, "/targets/sim").await;
    assert!(
        target.contains("&lt;/title&gt;&lt;script&gt;alert(&quot;d&quot;)&lt;/script&gt;"),
        "the failure detail is shown, escaped: {target}"
    );
    assert!(
        target.contains("&lt;script&gt;alert(&quot;m&quot;)"),
        "the model, escaped"
    );
    let (_, _, probes) = get_full(d.addr, "/api/v1/probes").await;
    let v: serde_json::Value = serde_json::from_str(&probes).unwrap();
    // Newest first.
    let last = v["probes"].as_array().unwrap().first().unwrap().clone();
    assert_eq!(last["failure"]["detail"], HOSTILE_DETAIL);
    // A hostile path is answered as plain text, without markup.
    let (status, headers, body) = get_full(d.addr, "/targets/%3Cscript%3Ex").await;
    assert_eq!(status, 404);
    assert!(headers["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/plain"));
    assert!(body.contains("<script>x"), "echoed as text only: {body}");
    // Every other answer too: errors, 404s, 405s, /metrics, /-/reload.
    let client = reqwest::Client::new();
    let base = format!("http://{}", d.addr);
    for (method, path, want) in [
        (reqwest::Method::GET, "/%3Cscript%3E", 404),
        (reqwest::Method::DELETE, "/metrics", 405),
        (reqwest::Method::GET, "/-/reload", 405),
        (reqwest::Method::POST, "/-/reload", 500),
        (reqwest::Method::GET, "/metrics", 200),
        (reqwest::Method::GET, "/-/healthy", 200),
    ] {
        let r = client
            .request(method.clone(), format!("{base}{path}"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), want, "{method} {path}");
        assert_eq!(
            r.headers()["x-content-type-options"],
            "nosniff",
            "{method} {path}"
        );
        assert_eq!(
            r.headers()["content-security-policy"],
            "default-src 'none'; frame-ancestors 'none'",
            "{method} {path}"
        );
    }
    d.stop().await;
}

/// A failure detail as a server can send it inside a JSON error: ESC (an erase-screen
/// sequence), CR, BEL and NUL.
const CONTROL_DETAIL: &str = "boom \u{1b}[2J\r\u{7}\u{0} forged";

/// An OpenAI-compatible endpoint whose every stream is one error event with
/// [`CONTROL_DETAIL`] as its message (JSON-escaped on the wire, raw once decoded).
async fn control_char_server() -> SocketAddr {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut req = Vec::new();
                let mut buf = [0u8; 4096];
                // The head, then as much body as it announces.
                let body_start = loop {
                    if let Some(i) = req.windows(4).position(|w| w == b"\r\n\r\n") {
                        break i + 4;
                    }
                    match sock.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => req.extend_from_slice(&buf[..n]),
                    }
                };
                let head = String::from_utf8_lossy(&req[..body_start]).to_ascii_lowercase();
                let length: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(0);
                while req.len() < body_start + length {
                    match sock.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => req.extend_from_slice(&buf[..n]),
                    }
                }
                let event = serde_json::json!({ "error": { "message": CONTROL_DETAIL } });
                let body = format!("data: {event}\n\n");
                let reply = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = sock.write_all(reply.as_bytes()).await;
                let _ = sock.shutdown().await;
            });
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_characters_in_a_failure_detail_are_escaped_on_every_page() {
    let addr = control_char_server().await;
    let options = common::on_demand_probes();
    let d = Daemon::start_with(
        common::parse(&common::sim_target_yaml(
            &format!("http://{addr}/v1"),
            "m",
            "1s",
        )),
        "127.0.0.1:0".parse().unwrap(),
        None,
        options,
    )
    .await
    .unwrap();
    let mut rx = d.subscribe();
    // Two failed probes: the target page's chart marks (with their <title>s) and its list.
    let o = common::outcomes(&mut rx, 2, Duration::from_secs(10)).await;
    let failure = o[1].result.as_ref().unwrap_err();
    assert!(
        failure.detail.contains('\u{1b}'),
        "the detail arrives raw: {failure:?}"
    );
    let trace_id = llm_probe::measure::TraceId::from_bytes([7; 16]).unwrap();
    d.history.push_probe(RecentProbe {
        target: "sim".into(),
        scenario: "chat".into(),
        replica: "".into(),
        started_at: SystemTime::now(),
        ttft: None,
        output_tokens_per_second: None,
        tpot: None,
        itl: None,
        e2e: None,
        output_tokens: None,
        failure: Some((FailureReason::Decode, CONTROL_DETAIL.into())),
        identity: Some(format!("model={CONTROL_DETAIL}").into()),
        trace_id: Some(trace_id),
    });
    let html = Some("text/html");
    for (path, accept) in [
        ("/".to_string(), html),
        ("/?view=wall".to_string(), html),
        ("/targets/sim".to_string(), html),
        (format!("/probes/{trace_id}?format=html"), html),
        (format!("/probes/{trace_id}"), html),
        (
            "/probe?target=sim&scenario=chat&format=html".to_string(),
            None,
        ),
        (
            "/probe?target=sim&scenario=chat&debug=true".to_string(),
            html,
        ),
        ("/badge/sim/chat/ttft.svg".to_string(), None),
        ("/badge/sim/chat/status.svg".to_string(), None),
    ] {
        let (status, ct, body) = common::get(d.addr, &path, accept).await;
        assert_eq!(status, 200, "{path}: {body}");
        assert!(
            ct.starts_with("text/html") || ct.starts_with("image/svg+xml"),
            "{path}: {ct}"
        );
        let raw: Vec<char> = body
            .chars()
            .filter(|&c| c != '\n' && llm_probe::sanitize::is_unsafe_char(c))
            .collect();
        assert!(raw.is_empty(), "{path} carries {raw:?} raw: {body}");
        if path != "/" && !path.starts_with("/badge") && !path.contains("wall") {
            assert!(
                body.contains("boom \\x1b[2J\\r\\x07\\x00 forged"),
                "{path} shows the detail escaped: {body}"
            );
        }
    }
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_rejects_bad_parameters_with_a_reason() {
    let sim = common::simulator(common::stream(40, 5, 8).model("m")).await;
    let d = common::daemon(common::parse(&common::sim_target_yaml(
        &sim.base_url(),
        "m",
        "1s",
    )))
    .await;
    let (status, _, body) = get_full(d.addr, "/api/v1/probes?since=yesterday").await;
    assert_eq!(status, 400);
    assert!(
        body.contains("since=") && body.contains("RFC 3339"),
        "{body}"
    );
    let (status, _, body) = get_full(d.addr, "/api/v1/probes?tagret=sim").await;
    assert_eq!(status, 400);
    assert!(body.contains("unknown parameter"), "{body}");
    let (status, _, body) = get_full(d.addr, "/api/v1/probes?since=0&since=1").await;
    assert_eq!(status, 400);
    assert!(body.contains("since is given twice"), "{body}");
    let future = SystemTime::now() + Duration::from_secs(3600);
    let since = humantime::format_rfc3339_seconds(future);
    let (status, _, body) = get_full(d.addr, &format!("/api/v1/probes?since={since}")).await;
    assert_eq!((status, body.trim()), (200, "{\"probes\":[]}"));
    assert_eq!(get_full(d.addr, "/badge/sim/nope/ttft.svg").await.0, 404);
    assert_eq!(get_full(d.addr, "/badge/sim/chat/other.svg").await.0, 404);
    d.stop().await;
}

/// BENCHMARKS.md §6: the overview, a target page and `/api/v1/targets` at 1,000 pairs with a
/// full default history, and the history's memory. By hand:
/// `cargo test --release --test fast status::pages:: -- --ignored --nocapture` (or without
/// `--release` for a debug build's upper bound).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement for BENCHMARKS.md, run by hand"]
async fn status_pages_at_1000_pairs() {
    const PAIRS: usize = 1000;
    let sim = common::simulator(common::stream(40, 5, 8).model("bench-model")).await;
    let mut y = format!(
        "defaults:\n  interval: 1h\nscenarios:\n{}targets:\n",
        common::scenario("chat", 8)
    );
    for i in 0..PAIRS {
        y += &format!(
            "  - name: target-{i:04}\n    protocol: openai-chat\n    base_url: {}\n    model: m\n",
            sim.base_url()
        );
    }
    let d = common::daemon(common::parse(&y)).await;
    let limits = d.history.limits();
    let before = common::rss_kib();
    let now = SystemTime::now();
    let interval = limits.max_age / limits.max_probes as u32;
    for i in 0..PAIRS {
        let name: std::sync::Arc<str> = format!("target-{i:04}").into();
        for k in 0..limits.max_probes {
            let failed = k % 50 == 7;
            d.history.push_probe(RecentProbe {
                target: name.clone(),
                scenario: "chat".into(),
                replica: "".into(),
                started_at: now - interval * (limits.max_probes - k) as u32,
                ttft: (!failed).then(|| Duration::from_millis(80 + (k as u64 * 37) % 200)),
                output_tokens_per_second: (!failed).then_some(50.0 + (k % 17) as f64),
                tpot: (!failed).then(|| Duration::from_millis(20)),
                itl: None,
                e2e: (!failed).then(|| Duration::from_millis(400)),
                output_tokens: (!failed).then_some(8),
                failure: failed.then(|| {
                    (
                        FailureReason::HttpStatus,
                        "HTTP 503: {\"error\":\"overloaded\"}".to_string(),
                    )
                }),
                identity: Some("model=bench-model fingerprint=b4242 server=llama.cpp".into()),
                trace_id: None,
            });
        }
    }
    let after = common::rss_kib();
    let kept: usize = (0..PAIRS)
        .map(|i| d.history.probes(&format!("target-{i:04}"), "chat").len())
        .sum();
    println!(
        "history: {kept} probes kept at {PAIRS} pairs; RSS +{:.1} MiB ({} bytes per probe)",
        (after - before) as f64 / 1024.0,
        (after - before) * 1024 / kept as u64
    );
    for path in ["/", "/targets/target-0042", "/api/v1/targets"] {
        let mut times = Vec::new();
        let mut size = 0;
        for _ in 0..10 {
            let t = std::time::Instant::now();
            let (status, _, body) = common::get(d.addr, path, None).await;
            times.push(t.elapsed().as_secs_f64() * 1e3);
            assert_eq!(status, 200);
            size = body.len();
            if std::env::var_os("SHOW_CARD").is_some() && path == "/" {
                let at = body.find("<article").unwrap();
                println!("{}", &body[at..at + 2000]);
            }
        }
        times.sort_by(f64::total_cmp);
        println!(
            "| `{path}` | {:.1} KiB | {:.1} ms | {:.1} ms |",
            size as f64 / 1024.0,
            times[4],
            times[9]
        );
    }
    d.stop().await;
}
