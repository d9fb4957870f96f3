//! The client phases of a probe: DNS resolved, TCP connected, TLS handshake done,
//! request written, first response byte, response head, first token, against the simulator
//! over plain HTTP and over TLS (a TLS terminator with the test CA in front of it), addressed
//! by IP and by `localhost`. Each phase is present exactly when it happened, the phases are in
//! order and end before the first token, and a reused connection has no DNS, TCP or TLS phase
//! (null, never 0).

use crate::common;

use std::time::{Duration, Instant};

use llm_probe::measure::{ProbeOutcome, Timeline};
use llm_probe::probe::Prober;

/// `n` probes in a row by one prober of `base_url` with `target_extra` config keys.
async fn probes(base_url: &str, target_extra: &str, n: usize) -> Vec<ProbeOutcome> {
    let cfg = common::parse(&common::yaml(
        base_url,
        "5s",
        &common::scenario("chat", 8),
        target_extra,
    ));
    let t = cfg.targets[0].clone();
    let prober = Prober::new(t.clone()).unwrap();
    let mut out = Vec::new();
    for _ in 0..n {
        let o = prober.probe(&t.scenarios[0]).await;
        assert!(o.is_success(), "{:?}", o.result);
        out.push(o);
    }
    out
}

/// Which phases a probe has: (dns, tcp, tls, written, first byte).
fn present(tl: &Timeline) -> [bool; 5] {
    [
        tl.dns_resolved.is_some(),
        tl.tcp_connected.is_some(),
        tl.tls_done.is_some(),
        tl.request_written.is_some(),
        tl.first_byte.is_some(),
    ]
}

/// The phases that happened are in order (dns ≤ tcp ≤ tls ≤ written ≤ first byte ≤ head ≤
/// first token), all after the connect started (itself not before `sent`), and none is later
/// than TTFT after `sent`.
fn assert_ordered(o: &ProbeOutcome) {
    let tl = &o.observations.timeline;
    let ttft = o.result.as_ref().unwrap().ttft;
    let first_token = tl.first_token().expect("a first token");
    assert_eq!(first_token - tl.sent, ttft, "TTFT is sent → first token");
    let chain: Vec<(&str, Instant)> = [
        ("sent", Some(tl.sent)),
        ("connect started", tl.connect_started),
        ("dns", tl.dns_resolved),
        ("tcp", tl.tcp_connected),
        ("tls", tl.tls_done),
        ("written", tl.request_written),
        ("first byte", tl.first_byte),
        ("head", tl.headers),
        ("first token", Some(first_token)),
    ]
    .into_iter()
    .filter_map(|(n, t)| Some((n, t?)))
    .collect();
    for w in chain.windows(2) {
        assert!(
            w[0].1 <= w[1].1,
            "{} at {:?} after {} at {:?}",
            w[0].0,
            w[0].1 - tl.sent,
            w[1].0,
            w[1].1 - tl.sent
        );
    }
    // The durations between consecutive phases sum to no more than TTFT.
    let sum: Duration = chain.windows(2).map(|w| w[1].1 - w[0].1).sum();
    assert!(sum <= ttft, "phases {sum:?} > TTFT {ttft:?}");
    // The simulator answers the head at once and waits 20 ms before the first token: that
    // wait comes after the request was written (which is not, then, stamped at the end).
    if let Some(w) = tl.request_written {
        let wait = first_token - w;
        assert!(
            wait >= Duration::from_millis(15),
            "first token {wait:?} after written"
        );
    }
}

#[tokio::test]
async fn plain_http_by_ip_and_by_name() {
    let sim = common::simulator(common::stream(20, 2, 5)).await;
    // An IP literal: nothing to resolve.
    let o = probes(&sim.base_url(), "", 1).await.remove(0);
    assert_ordered(&o);
    assert_eq!(
        present(&o.observations.timeline),
        [false, true, false, true, true],
        "IP, plain HTTP"
    );
    // `localhost`: a name the probe resolves.
    let by_name = sim.base_url().replace("127.0.0.1", "localhost");
    let o = probes(&by_name, "", 1).await.remove(0);
    assert_ordered(&o);
    assert_eq!(
        present(&o.observations.timeline),
        [true, true, false, true, true],
        "localhost, plain HTTP"
    );
}

#[tokio::test]
async fn a_reused_connection_has_no_connect_phases() {
    let sim = common::simulator(common::stream(20, 2, 5)).await;
    let by_name = sim.base_url().replace("127.0.0.1", "localhost");
    let o = probes(&by_name, "    connection: reuse\n", 2).await;
    assert_eq!(
        present(&o[0].observations.timeline),
        [true, true, false, true, true]
    );
    assert_eq!(
        present(&o[1].observations.timeline),
        [false, false, false, true, true],
        "the second probe went out on the first one's connection"
    );
    assert_ordered(&o[1]);
    // probe-once's JSON: null, never 0, for the phases that did not happen.
    let json = llm_probe::report::timeline_json(&o[1]);
    for k in [
        "dns_resolved_seconds",
        "tcp_connected_seconds",
        "tls_done_seconds",
    ] {
        assert!(json[k].is_null(), "{k}: {json}");
    }
    for k in [
        "request_written_seconds",
        "first_byte_seconds",
        "headers_seconds",
    ] {
        assert!(json[k].as_f64().is_some(), "{k}: {json}");
    }
    // The same in probe-once's `client_phases`.
    let phases = &llm_probe::report::to_json(&o[1])["client_phases"];
    assert!(phases["dns_resolved_seconds"].is_null(), "{phases}");
    assert!(phases["tcp_connected_seconds"].is_null(), "{phases}");
    let ttft = o[1].result.as_ref().unwrap().ttft.as_secs_f64();
    assert!((phases["first_token_seconds"].as_f64().unwrap() - ttft).abs() < 1e-9);
    let first_phases = &llm_probe::report::to_json(&o[0])["client_phases"];
    assert!(
        first_phases["dns_resolved_seconds"].as_f64().is_some(),
        "{first_phases}"
    );
    let first = llm_probe::report::timeline_json(&o[0]);
    let (dns, tcp) = (
        first["dns_resolved_seconds"].as_f64().unwrap(),
        first["tcp_connected_seconds"].as_f64().unwrap(),
    );
    assert!(dns <= tcp, "{first}");
    let text = llm_probe::report::to_text(&o[0]);
    assert!(text.contains("  phases      dns "), "{text}");
    assert!(text.contains(" · first byte "), "{text}");
}

/// A TLS terminator on loopback with the test PKI (ALPN `alpn`) in front of the simulator at
/// `backend` ([`common::https::tls_front`]).
async fn tls_front(
    pki: &common::pki::Pki,
    alpn: &[&[u8]],
    backend: std::net::SocketAddr,
) -> std::net::SocketAddr {
    common::https::tls_front("127.0.0.1:0", pki, alpn, backend)
        .await
        .0
}

#[tokio::test]
async fn over_tls_by_ip_and_by_name() {
    let sim = common::simulator(common::stream(20, 2, 5)).await;
    let backend: std::net::SocketAddr = sim
        .root_url()
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .parse()
        .unwrap();
    let pki = common::pki::pki();
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, &pki.ca_pem).unwrap();
    let keys = format!("    tls:\n      ca_file: {}\n", ca.display());
    let front = tls_front(&pki, &[b"http/1.1"], backend).await;
    for (host, dns) in [("127.0.0.1", false), ("localhost", true)] {
        let url = format!("https://{host}:{}/v1", front.port());
        let o = probes(&url, &keys, 1).await.remove(0);
        assert_ordered(&o);
        let tl = &o.observations.timeline;
        assert_eq!(
            present(tl),
            [dns, true, true, true, true],
            "{host} over TLS"
        );
        assert_eq!(
            tl.tls_done, tl.connected,
            "TLS done is when the connection was ready"
        );
        assert!(tl.tcp_connected < tl.tls_done, "the handshake takes time");
    }
}
