//! Connection setup time is given to the probe whose request opened the connection, and only to
//! it: with `connection: fresh` (the default) every probe opens one and reports its setup; with
//! `connection: reuse` the first probe opens one and the next, sent while it is idle in the
//! pool, reports none. Under concurrency, with one HTTP client shared by 20 targets, over
//! HTTP/1.1 and HTTP/2: each probe gets its own connection's setup, and no connection is counted
//! twice.

use crate::common;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::service::service_fn;
use llm_probe::config::Config;
use llm_probe::probe::{build_client, Prober};

/// Three probes of one target with `target_extra` config keys; each one's connection setup.
async fn setups(target_extra: &str) -> Vec<Option<Duration>> {
    let sim = common::simulator(common::stream(20, 2, 5)).await;
    let cfg = common::parse(&common::yaml(
        &sim.base_url(),
        "5s",
        &common::scenario("chat", 8),
        target_extra,
    ));
    let target = cfg.targets[0].clone();
    let prober = Prober::new(target.clone()).unwrap();
    let mut out = Vec::new();
    for k in 0..3 {
        let o = prober.probe(&target.scenarios[0]).await;
        let m = o.result.as_ref().unwrap_or_else(|f| panic!("{f}"));
        let tl = &o.observations.timeline;
        let setup = tl.connection_setup();
        if let Some(s) = setup {
            assert!(m.ttft > s, "TTFT {:?} includes setup {s:?}", m.ttft);
            // Ground truth of the same run: the connection was ready before the request it
            // carried reached the simulator.
            let arrived = sim.received()[k].arrived;
            assert!(
                tl.connected.unwrap() <= arrived,
                "setup {s:?} ends after the request arrived"
            );
        }
        out.push(setup);
    }
    out
}

#[tokio::test]
async fn fresh_connections_each_report_their_setup() {
    let s = setups("").await;
    assert!(s.iter().all(Option::is_some), "{s:?}");
}

#[tokio::test]
async fn a_reused_connection_reports_no_setup() {
    let s = setups("    connection: reuse\n").await;
    assert!(
        s[0].is_some(),
        "the first probe opens the connection: {s:?}"
    );
    assert_eq!(&s[1..], &[None, None], "the next probes reuse it: {s:?}");
}

const SSE: &str = "data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\ndata: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":{\"completion_tokens\":1}}\n\ndata: [DONE]\n\n";

/// Connection `id` (in accept order) starts its TLS handshake this long after the accept: five
/// values 100 ms apart, so that connections set up at once finish at different times.
fn handshake_delay(id: usize) -> Duration {
    Duration::from_millis(50 + 100 * (id as u64 % 5))
}

/// What the server saw of one connection, by its tag: when it accepted it, when it began the
/// TLS handshake (after the connection's delay), when the first request on it arrived.
#[derive(Debug, Clone, Copy)]
struct ServerMarks {
    accepted: Instant,
    handshake: Instant,
    first_request: Option<Instant>,
}

type Marks = Arc<Mutex<HashMap<String, ServerMarks>>>;

/// An HTTPS server on loopback (hyper; HTTP/2 when `h2` and the client offers it, else
/// HTTP/1.1) that holds each handshake back [`handshake_delay`] and names the connection in
/// the `server` header of every response: `conn-{id}-delay-{ms}`; with what it saw of each.
async fn tagged_https_server(pki: &common::pki::Pki, h2: bool) -> (SocketAddr, Marks) {
    let alpn: &[&[u8]] = if h2 {
        &[b"h2", b"http/1.1"]
    } else {
        &[b"http/1.1"]
    };
    let acceptor = tokio_rustls::TlsAcceptor::from(common::https::server_config(pki, false, alpn));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = AtomicUsize::new(0);
    let marks = Marks::default();
    let all = marks.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let at = Instant::now();
            let id = accepted.fetch_add(1, Ordering::SeqCst);
            let acceptor = acceptor.clone();
            let marks = all.clone();
            tokio::spawn(async move {
                let delay = handshake_delay(id);
                tokio::time::sleep(delay).await;
                let tag = format!("conn-{id}-delay-{}", delay.as_millis());
                let seen = ServerMarks {
                    accepted: at,
                    handshake: Instant::now(),
                    first_request: None,
                };
                marks.lock().unwrap().insert(tag.clone(), seen);
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let svc = service_fn(move |_req: hyper::Request<hyper::body::Incoming>| {
                    let tag = tag.clone();
                    let now = Instant::now();
                    if let Some(m) = marks.lock().unwrap().get_mut(&tag) {
                        m.first_request.get_or_insert(now);
                    }
                    async move {
                        // Long enough that all probes of a round are in flight at once.
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        hyper::Response::builder()
                            .header("content-type", "text/event-stream")
                            .header("server", tag)
                            .body(Full::new(Bytes::from_static(SSE.as_bytes())))
                    }
                });
                common::https::serve(tls, svc).await;
            });
        }
    });
    (addr, marks)
}

/// 20 targets at `addr` trusting `ca_file`, with `extra` target keys.
fn twenty_targets(addr: SocketAddr, ca_file: &str, extra: &str) -> Config {
    let mut y = format!("scenarios:\n{}targets:\n", common::scenario("chat", 8));
    for i in 0..20 {
        y += &format!("  - name: t{i}\n    protocol: openai-chat\n    base_url: https://{addr}/v1\n    model: m\n    timeout: 10s\n    tls:\n      ca_file: {ca_file}\n{extra}");
    }
    common::parse(&y)
}

/// One probe's connection and its client marks: the server's tag, and when the probe began
/// opening its connection and when that was ready (`None`: it opened none).
type Row = (String, Option<(Instant, Instant)>);

/// Probes every target at once, each in its own task, with one client shared by all (as the
/// daemon shares one between targets of equal settings); each probe's row.
async fn concurrent_round(cfg: &Config) -> Vec<Row> {
    let client = build_client(&cfg.targets[0]).unwrap();
    let probes: Vec<_> = cfg
        .targets
        .iter()
        .map(|t| {
            let prober = Prober::with_client(t.clone(), client.clone());
            tokio::spawn(async move {
                let o = prober.probe(&prober.target().scenarios[0]).await;
                let m = o.result.as_ref().unwrap_or_else(|f| panic!("{f}"));
                let tl = &o.observations.timeline;
                if let Some(s) = tl.connection_setup() {
                    assert!(m.ttft > s, "TTFT {:?} includes setup {s:?}", m.ttft);
                }
                let marks = tl.connect_started.zip(tl.connected);
                assert_eq!(marks.is_some(), tl.connection_setup().is_some());
                (
                    o.observations.identity.server_header.clone().unwrap(),
                    marks,
                )
            })
        })
        .collect();
    let mut rows = Vec::new();
    for p in probes {
        rows.push(p.await.unwrap());
    }
    rows
}

/// A setup belongs to the connection the response came on, by what the server saw of that
/// connection in the same run (causal bounds, no margin): the probe began connecting before
/// the server accepted it, was connected only after the server began its handshake (after the
/// connection's delay), and before the first request on it arrived. No connection is counted
/// by two probes.
fn check_setups_belong_to_their_connections(rows: &[Row], marks: &Marks) {
    let marks = marks.lock().unwrap();
    let mut counted = HashMap::<&str, usize>::new();
    for (tag, client) in rows {
        let Some((started, connected)) = client else {
            continue;
        };
        let server = marks[tag];
        let first_request = server.first_request.expect("a request came on it");
        assert!(
            *started <= server.accepted
                && server.handshake <= *connected
                && *connected <= first_request,
            "{tag}: the probe's connection marks are another connection's: client {:?}, server {server:?}\n{rows:#?}",
            (started, connected)
        );
        *counted.entry(tag).or_default() += 1;
    }
    for (tag, n) in counted {
        assert_eq!(n, 1, "{tag} counted by {n} probes\n{rows:#?}");
    }
}

/// Certificates for a test, and the CA's PEM written to a file (the path; kept while the
/// directory lives).
fn pki_and_ca_file() -> (common::pki::Pki, tempfile::TempDir, String) {
    let pki = common::pki::pki();
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, &pki.ca_pem).unwrap();
    let ca = ca.display().to_string();
    (pki, dir, ca)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_probes_each_get_their_own_connections_setup() {
    let (pki, _dir, ca) = pki_and_ca_file();
    for h2 in [false, true] {
        let (addr, marks) = tagged_https_server(&pki, h2).await;
        let rows = concurrent_round(&twenty_targets(addr, &ca, "")).await;
        // `fresh`: a connection per probe, so every probe reports one, each its own.
        assert!(rows.iter().all(|r| r.1.is_some()), "h2 {h2}: {rows:#?}");
        check_setups_belong_to_their_connections(&rows, &marks);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reused_http2_connections_are_counted_once() {
    let (pki, _dir, ca) = pki_and_ca_file();
    let (addr, marks) = tagged_https_server(&pki, true).await;
    let cfg = twenty_targets(addr, &ca, "    connection: reuse\n");
    let rows = concurrent_round(&cfg).await;
    // Requests share HTTP/2 connections; hyper may drop a probe's new connection for another
    // one being set up and send its request there (that probe then reports no setup).
    assert!(rows.iter().any(|r| r.1.is_some()), "{rows:#?}");
    check_setups_belong_to_their_connections(&rows, &marks);
}
