//! TLS to a real rustls server on loopback with certificates made for the test: an extra CA
//! (`tls.ca_file`), an unknown CA (a `tls` failure), `insecure_skip_verify` (succeeds, and says
//! so loudly), and mutual TLS (`tls.cert_file` + `tls.key_file`) with and without a client
//! certificate. Connection setup time against a server that holds its handshake back. Config
//! errors for the TLS block name the file and never print its contents.

use crate::common;

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use common::pki::{pki, Pki};
use llm_probe::measure::FailureReason;
use llm_probe::probe::Prober;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const SSE: &str = "data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\" there\"}}]}\n\ndata: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":{\"completion_tokens\":2}}\n\ndata: [DONE]\n\n";

/// An HTTPS server on loopback that answers every request with a short chat stream; with
/// `require_client_cert`, only clients with a certificate from the test CA get through. Each
/// TLS handshake starts `handshake_delay` after the TCP connection is accepted.
async fn https_server(
    pki: &Pki,
    require_client_cert: bool,
    handshake_delay: Duration,
) -> SocketAddr {
    let config = common::https::server_config(pki, require_client_cert, &[]);
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                tokio::time::sleep(handshake_delay).await;
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                // Read the request head and body (Content-Length), then stream the answer.
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    let Ok(n) = tls.read(&mut chunk).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    let text = String::from_utf8_lossy(&buf).to_string();
                    if let Some(end) = text.find("\r\n\r\n") {
                        let len = text
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase()
                                    .strip_prefix("content-length:")
                                    .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                            })
                            .unwrap_or(0);
                        if buf.len() >= end + 4 + len {
                            break;
                        }
                    }
                }
                let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
                let _ = tls.write_all(head.as_bytes()).await;
                let _ = tls.write_all(SSE.as_bytes()).await;
                let _ = tls.shutdown().await;
            });
        }
    });
    addr
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

fn config(addr: SocketAddr, tls_yaml: &str) -> llm_probe::config::Config {
    let base = format!("https://{addr}/v1");
    common::parse(&common::yaml(
        &base,
        "10s",
        &common::scenario("chat", 8),
        &format!("    timeout: 5s\n{tls_yaml}"),
    ))
}

#[tokio::test]
async fn extra_ca_is_trusted_and_an_unknown_ca_is_a_tls_failure() {
    let pki = pki();
    let dir = tempfile::tempdir().unwrap();
    let ca = write(dir.path(), "ca.pem", &pki.ca_pem);
    let addr = https_server(&pki, false, Duration::ZERO).await;

    let o = common::probe_first(
        &config(addr, &format!("    tls:\n      ca_file: {ca}\n")),
        None,
    )
    .await;
    let m = o
        .result
        .as_ref()
        .unwrap_or_else(|f| panic!("with the CA: {f}"));
    assert_eq!(m.output_tokens, 2);

    let o = common::probe_first(&config(addr, ""), None).await;
    assert_eq!(
        o.failure_reason(),
        Some(FailureReason::Tls),
        "{:?}",
        o.result
    );
}

#[tokio::test]
async fn insecure_skip_verify_connects_and_is_flagged_in_the_summary() {
    let pki = pki();
    let addr = https_server(&pki, false, Duration::ZERO).await;
    let cfg = config(addr, "    tls:\n      insecure_skip_verify: true\n");
    assert!(
        cfg.targets[0].summary().ends_with("TLS-VERIFICATION-OFF"),
        "{}",
        cfg.targets[0].summary()
    );
    let o = common::probe_first(&cfg, None).await;
    assert!(o.is_success(), "{:?}", o.result);
}

#[tokio::test]
async fn mutual_tls_needs_the_client_certificate() {
    let pki = pki();
    let dir = tempfile::tempdir().unwrap();
    let ca = write(dir.path(), "ca.pem", &pki.ca_pem);
    let cert = write(dir.path(), "client.pem", &pki.client_cert_pem);
    let key = write(dir.path(), "client-key.pem", &pki.client_key_pem);
    let addr = https_server(&pki, true, Duration::ZERO).await;

    let with =
        format!("    tls:\n      ca_file: {ca}\n      cert_file: {cert}\n      key_file: {key}\n");
    let o = common::probe_first(&config(addr, &with), None).await;
    assert!(o.is_success(), "with a client certificate: {:?}", o.result);

    let o = common::probe_first(
        &config(addr, &format!("    tls:\n      ca_file: {ca}\n")),
        None,
    )
    .await;
    let reason = o.failure_reason();
    assert!(
        matches!(
            reason,
            Some(FailureReason::Tls | FailureReason::Connect | FailureReason::Truncated)
        ),
        "without a client certificate the server refuses: {:?}",
        o.result
    );
    assert!(!o.is_success());
}

/// The target's reqwest client (proxied targets' probes, `version_path`, engine metrics) takes
/// the same TLS settings as the probe's own client: the extra CA, mutual TLS and
/// `insecure_skip_verify`, and a server it cannot verify is refused.
#[tokio::test]
async fn the_reqwest_client_takes_the_same_tls_settings() {
    let pki = pki();
    let dir = tempfile::tempdir().unwrap();
    let ca = write(dir.path(), "ca.pem", &pki.ca_pem);
    let cert = write(dir.path(), "client.pem", &pki.client_cert_pem);
    let key = write(dir.path(), "client-key.pem", &pki.client_key_pem);
    let plain = https_server(&pki, false, Duration::ZERO).await;
    let mutual = https_server(&pki, true, Duration::ZERO).await;
    let send = |addr: SocketAddr, tls: String| async move {
        let cfg = config(addr, &tls);
        let client = llm_probe::probe::build_client(&cfg.targets[0]).unwrap();
        let url = format!("https://{addr}/v1/chat/completions");
        client.post(url).body("{}").send().await.map(|r| r.status())
    };
    let with_ca = format!("    tls:\n      ca_file: {ca}\n");
    assert_eq!(send(plain, with_ca.clone()).await.unwrap(), 200);
    assert!(send(plain, String::new()).await.is_err(), "unknown CA");
    let insecure = "    tls:\n      insecure_skip_verify: true\n".to_string();
    assert_eq!(send(plain, insecure).await.unwrap(), 200);
    let identity = format!("{with_ca}      cert_file: {cert}\n      key_file: {key}\n");
    assert_eq!(send(mutual, identity).await.unwrap(), 200);
    assert!(
        send(mutual, with_ca).await.is_err(),
        "no client certificate"
    );
}

/// Connection setup is measured on its own and is part of TTFT: against a server that starts each
/// TLS handshake 150 ms after accepting the connection, every probe (fresh connections, the
/// default) reports a setup of at least 150 ms, a TTFT at least that long, and one observation
/// in `llm_probe_connection_setup_seconds`, in the bucket the delay falls in.
#[tokio::test]
async fn connection_setup_covers_a_slow_tls_handshake_and_is_part_of_ttft() {
    const DELAY: Duration = Duration::from_millis(150);
    let pki = pki();
    let dir = tempfile::tempdir().unwrap();
    let ca = write(dir.path(), "ca.pem", &pki.ca_pem);
    let addr = https_server(&pki, false, DELAY).await;
    let cfg = config(addr, &format!("    tls:\n      ca_file: {ca}\n"));
    let t = cfg.targets[0].clone();
    let prober = Prober::new(t.clone()).unwrap();
    let metrics = llm_probe::metrics::Metrics::new(&[]);
    for _ in 0..2 {
        let o = prober.probe(&t.scenarios[0]).await;
        let m = o.result.as_ref().unwrap_or_else(|f| panic!("{f}"));
        let setup = o
            .observations
            .timeline
            .connection_setup()
            .expect("a new connection");
        assert!(setup >= DELAY, "setup {setup:?} < the handshake delay");
        assert!(
            setup < DELAY + Duration::from_millis(100),
            "setup {setup:?}"
        );
        assert!(
            m.ttft >= setup,
            "TTFT {:?} includes setup {setup:?}",
            m.ttft
        );
        let report = llm_probe::report::to_json(&o);
        assert_eq!(report["connection_setup_seconds"], setup.as_secs_f64());
        metrics.observe(&o);
    }
    let (_, text) = metrics.render(None);
    let series = r#"{target="sim",model="sim-model",scenario="chat""#;
    for (line, value) in [
        (
            format!("llm_probe_connection_setup_seconds_bucket{series},le=\"0.1\"}}"),
            0,
        ),
        (
            format!("llm_probe_connection_setup_seconds_bucket{series},le=\"0.25\"}}"),
            2,
        ),
        (
            format!("llm_probe_connection_setup_seconds_count{series}}}"),
            2,
        ),
    ] {
        assert!(
            text.contains(&format!("{line} {value}\n")),
            "{line} {value}:\n{text}"
        );
    }
}

/// The connect timeout covers the TLS handshake, as reqwest's: against a server that accepts
/// the TCP connection and never starts its handshake, the probe fails as `timeout` once
/// `connect_timeout` (300 ms) has passed, well before its own 5 s timeout.
#[tokio::test]
async fn a_stalled_tls_handshake_ends_at_the_connect_timeout() {
    let pki = pki();
    let addr = https_server(&pki, false, Duration::from_secs(30)).await;
    let cfg = config(
        addr,
        "    connect_timeout: 300ms\n    tls:\n      insecure_skip_verify: true\n",
    );
    let started = std::time::Instant::now();
    let o = common::probe_first(&cfg, None).await;
    let took = started.elapsed();
    assert_eq!(
        o.failure_reason(),
        Some(FailureReason::Timeout),
        "{:?}",
        o.result
    );
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(3),
        "{took:?}"
    );
    let detail = o.result.as_ref().unwrap_err().to_string();
    assert!(detail.contains("timed out"), "{detail}");
}

#[test]
fn tls_config_errors_name_the_file_and_the_fix() {
    let pki = pki();
    let dir = tempfile::tempdir().unwrap();
    let key = write(dir.path(), "client-key.pem", &pki.client_key_pem);
    let not_pem = write(dir.path(), "ca.txt", "just text");
    let cases = [
        (
            "https://h/v1",
            format!("    tls:\n      key_file: {key}\n"),
            "tls.cert_file and tls.key_file go together",
        ),
        (
            "https://h/v1",
            "    tls:\n      ca_file: /nonexistent/ca.pem\n".to_string(),
            "tls.ca_file /nonexistent/ca.pem cannot be read",
        ),
        (
            "https://h/v1",
            format!("    tls:\n      ca_file: {not_pem}\n"),
            "is not a PEM file",
        ),
        (
            "http://h/v1",
            "    tls:\n      insecure_skip_verify: true\n".to_string(),
            "tls is set but base_url is not https",
        ),
        (
            "http://h/v1",
            "    connection: sometimes\n".to_string(),
            "use fresh (a new connection per probe, the default) or reuse",
        ),
        (
            "http://h/v1",
            "    tls:\n      verify: false\n".to_string(),
            "unknown key \"verify\"",
        ),
    ];
    for (base, extra, expected) in cases {
        let yaml = common::yaml(base, "10s", &common::scenario("chat", 8), &extra);
        let err = llm_probe::config::parse(&yaml, "t.yaml", &|_| None)
            .unwrap_err()
            .to_string();
        assert!(err.contains(expected), "{extra}: {err}");
        assert!(
            !err.contains("PRIVATE KEY"),
            "key material in an error: {err}"
        );
    }
}
