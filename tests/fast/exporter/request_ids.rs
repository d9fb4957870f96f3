//! Request ids on records: a target's own `x-request-id` longer than the exemplar allows is
//! recorded whole (up to 1 KiB) or not at all, and record URLs under a route prefix refuse
//! hostile paths and say when a probe rolled out. (The hostile request id through a real
//! Prometheus is in the end-to-end tier, `prometheus::request_ids`.)

use crate::common;

use std::time::{Duration, SystemTime};

use llm_probe::simulate::Script;

/// A target's own request id longer than 128 characters is recorded whole (up to 1 KiB), not
/// cut: a cut id names a request that was never sent. Longer than 1 KiB: sent, not recorded.
/// A non-ASCII one is recorded as sent, and is the exemplar's `request_id` (OpenMetrics label
/// values are UTF-8; the label set's limit counts characters, not bytes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_request_id_is_recorded_whole_or_not_at_all() {
    let sim = common::simulator(Script {
        tokens: 2,
        ..Script::default()
    })
    .await;
    let cases = [
        (200, true),
        (1024, true),
        (1025, false),
        (0, true),
        (78, true),
    ];
    for (len, recorded) in cases {
        // 0: a short non-ASCII id; 78: non-ASCII, at the label limit in characters (156 bytes).
        let id: String = match len {
            0 => "r\u{e9}q-\u{202e}1".to_string(),
            78 => "\u{e9}".repeat(78),
            _ => (0..len)
                .map(|i| if i % 2 == 0 { 'a' } else { 'B' })
                .collect(),
        };
        let cfg = common::parse(&common::yaml(
            &sim.base_url(),
            "1s",
            &common::scenario("chat", 4),
            &format!("    headers:\n      x-request-id: {id}\n"),
        ));
        let t = cfg.targets[0].clone();
        let s = t.scenarios[0].clone();
        let o = llm_probe::probe::Prober::new(t).unwrap().probe(&s).await;
        assert!(o.is_success(), "{:?}", o.result);
        let want = recorded.then_some(id.as_str());
        assert_eq!(o.observations.request_id.as_deref(), want, "{len}");
        let json = llm_probe::report::to_json(&o);
        assert_eq!(json["request_id"].as_str(), want, "{len}");
        if id.chars().count() <= 78 {
            // Within the label limit: the exemplar carries it.
            let m = llm_probe::metrics::Metrics::new(&[]);
            m.observe(&o);
            let (_, om) = m.render(Some("application/openmetrics-text"));
            assert!(
                om.contains(&format!(",request_id=\"{id}\"}} ")),
                "{len}: {}",
                om.lines()
                    .filter(|l| l.contains(" # {"))
                    .collect::<Vec<_>>()
                    .join("\n")
            );
        }
    }
}

fn kept(trace: &str, failed: bool) -> llm_probe::history::RecentProbe {
    llm_probe::history::RecentProbe {
        target: std::sync::Arc::from("sim"),
        scenario: std::sync::Arc::from("chat"),
        replica: "".into(),
        started_at: SystemTime::now(),
        ttft: (!failed).then_some(Duration::from_millis(100)),
        output_tokens_per_second: None,
        tpot: None,
        itl: None,
        e2e: None,
        output_tokens: None,
        failure: failed.then(|| {
            (
                llm_probe::measure::FailureReason::Timeout,
                "<script>alert(1)</script>".into(),
            )
        }),
        identity: None,
        trace_id: llm_probe::measure::TraceId::parse(trace),
    }
}

async fn raw_get(addr: std::net::SocketAddr, path: &str, accept: &str) -> (u16, String, String) {
    // reqwest would normalise `.` segments; a raw request sends the path as written.
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req =
        format!("GET {path} HTTP/1.1\r\nhost: x\r\naccept: {accept}\r\nconnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.unwrap();
    let out = String::from_utf8_lossy(&out).into_owned();
    let (head, body) = out.split_once("\r\n\r\n").unwrap_or((&out, ""));
    let status = head.split(' ').nth(1).unwrap_or("0").parse().unwrap_or(0);
    let ct = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-type: ")
                .map(str::to_string)
        })
        .unwrap_or_default();
    (status, ct, body.to_string())
}

/// `/probes/{trace_id}` under `--web.route-prefix`: hostile paths and queries are 400 or 404
/// (never another page, never a reflected script), and a probe that rolled out of the history
/// is a 404 that says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn record_urls_under_a_route_prefix_refuse_hostile_paths_and_say_when_a_probe_rolled_out() {
    let cfg = common::parse(&common::yaml(
        "http://127.0.0.1:1/v1",
        "1h",
        &common::scenario("chat", 4),
        "",
    ));
    let options = llm_probe::server::ServerOptions {
        urls: llm_probe::server::WebUrls::new(Some("https://probe.example/llm/"), None).unwrap(),
        ..Default::default()
    };
    let d =
        llm_probe::daemon::Daemon::start_with(cfg, "127.0.0.1:0".parse().unwrap(), None, options)
            .await
            .unwrap();
    // A probe 1.5 s short of the history's age limit; then enough later probes of the pair to
    // go past its count (the 10-minute state window keeps recent ones beyond it).
    let first = "0af7651916cd43dd8448eb211c80319c";
    let max_age = d.history.limits().max_age;
    let mut old = kept(first, false);
    old.started_at = SystemTime::now() - max_age + Duration::from_millis(1500);
    d.history.push_probe(old);
    let (status, _, _) = raw_get(d.addr, &format!("/llm/probes/{first}"), "application/json").await;
    assert_eq!(status, 200);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let n = d.history.limits().max_probes;
    let last = format!("{:032x}", n + 1);
    for i in 1..=n + 1 {
        d.history.push_probe(kept(&format!("{i:032x}"), i == n + 1));
    }
    let (status, _, body) =
        raw_get(d.addr, &format!("/llm/probes/{first}"), "application/json").await;
    assert_eq!(status, 404, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .contains("rolled out of the history"),
        "{v}"
    );
    let (status, ct, body) = raw_get(d.addr, &format!("/llm/probes/{first}"), "text/html").await;
    assert_eq!(
        (status, ct.as_str()),
        (404, "text/plain; charset=utf-8"),
        "{body}"
    );
    assert!(
        body.contains(first) && body.contains("rolled out"),
        "{body}"
    );
    // The failed one is served, its hostile detail escaped on the page and in the JSON.
    let (status, ct, page) = raw_get(d.addr, &format!("/llm/probes/{last}"), "text/html").await;
    assert_eq!(status, 200, "{page}");
    assert!(ct.starts_with("text/html"), "{ct}");
    assert!(
        !page.contains("<script>") && page.contains("&lt;script&gt;"),
        "{page}"
    );
    let (_, _, json) = raw_get(d.addr, &format!("/llm/probes/{last}"), "application/json").await;
    assert!(
        !json.contains('<') && json.contains("\\u003cscript"),
        "{json}"
    );
    // The first `format` wins; an unknown one falls back to Accept.
    let (_, ct, _) = raw_get(
        d.addr,
        &format!("/llm/probes/{last}?format=html&format=json"),
        "application/json",
    )
    .await;
    assert!(ct.starts_with("text/html"), "{ct}");
    let (_, ct, _) = raw_get(
        d.addr,
        &format!("/llm/probes/{last}?format=%3Cx%3E"),
        "application/json",
    )
    .await;
    assert_eq!(ct, "application/json");
    let long = "a".repeat(4000);
    for (path, want) in [
        (format!("/llm/probes/{last}/"), 400),
        (format!("/llm/probes/{last}%2F"), 400),
        (format!("/llm/probes/./{last}"), 400),
        (format!("/llm/probes/{last}/../../metrics"), 400),
        (format!("/llm/probes/%2e%2e/{last}"), 400),
        (format!("/llm/probes/{last};x=1"), 400),
        (format!("/llm/probes/{long}"), 400),
        (format!("/llm/probes/{}", last.replace('0', "%30")), 400),
        (format!("/llm//probes/{last}"), 404),
        (format!("/llm/../probes/{last}"), 404),
        (format!("/llmprobes/{last}"), 404),
        (format!("/probes/{last}"), 404),
    ] {
        let (status, _, body) = raw_get(d.addr, &path, "text/html").await;
        assert_eq!(status, want, "{path}: {body}");
        assert!(!body.contains("<script"), "{path}: {body}");
        assert!(body.len() < 2000, "{path}: {} bytes echoed", body.len());
    }
    d.stop().await;
}
