//! The exporter's own HTTP server under hostile or heavy use (connection
//! limits, slow clients, probe-now limits): a scrape flood shares renders and leaves the
//! probes' TTFT accurate; idle and half-sent connections are closed after the header-read
//! timeout, capped, and ended on stop; `/-/reload` answers a bad file without its details;
//! "probe now" is limited per target and can be switched off; `healthcheck` passes only on
//! llm-probe's own answer and says "timed out" for a slow server; `HEAD /metrics` renders
//! nothing.

use crate::common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use llm_probe::daemon::Daemon;
use llm_probe::server::{ConnectionLimits, DebugProbePolicy, ServerOptions};
use llm_probe::simulate::Script;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// One test at a time: the flood's timing assertions need the machine to themselves.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Reads from `s` until EOF or an error; true if the server closed it within `limit`.
async fn closed_within(s: &mut TcpStream, limit: Duration) -> bool {
    let mut buf = [0u8; 1024];
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        match tokio::time::timeout_at(deadline, s.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0) | Err(_)) => return true,
            Ok(Ok(_)) => {}
        }
    }
}

/// Opens `n` connections that send nothing and `n` that send half a request's headers.
async fn slowloris(addr: SocketAddr, n: usize) -> Vec<TcpStream> {
    let mut conns = Vec::new();
    for i in 0..2 * n {
        let mut s = TcpStream::connect(addr).await.unwrap();
        if i % 2 == 1 {
            s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ")
                .await
                .unwrap();
        }
        conns.push(s);
    }
    conns
}

fn limits(max_connections: usize, header_read_timeout: Duration) -> ServerOptions {
    ServerOptions {
        limits: ConnectionLimits {
            max_connections,
            header_read_timeout: Some(header_read_timeout),
            write_stall_timeout: Some(Duration::from_millis(500)),
            shutdown_grace: Duration::from_secs(1),
        },
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_are_closed_after_the_header_timeout_while_scrapes_are_answered() {
    let _serial = SERIAL.lock().await;
    let cfg = common::parse(&common::idle_yaml());
    let d = common::daemon_with(cfg, limits(512, Duration::from_millis(800))).await;
    let started = Instant::now();
    let mut idle = slowloris(d.addr, 150).await;
    // And one kept alive after a request: the same time to send the next one.
    let mut kept = TcpStream::connect(d.addr).await.unwrap();
    kept.write_all(b"GET /-/healthy HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut answer = [0u8; 512];
    let n = kept.read(&mut answer).await.unwrap();
    assert!(answer[..n].starts_with(b"HTTP/1.1 200"));
    idle.push(kept);
    // 300 idle connections held: scrapes are still answered, promptly.
    for _ in 0..5 {
        let t = Instant::now();
        let (status, _, body) = common::get(d.addr, "/metrics", None).await;
        assert_eq!(status, 200);
        assert!(body.contains("llm_probe_"));
        assert!(
            t.elapsed() < Duration::from_millis(700),
            "{:?}",
            t.elapsed()
        );
    }
    // Each is closed once its header-read time is up; none before.
    let mut closed = 0;
    for s in &mut idle {
        closed += usize::from(closed_within(s, Duration::from_secs(5)).await);
    }
    assert_eq!(closed, idle.len(), "every idle connection was closed");
    assert!(
        started.elapsed() >= Duration::from_millis(800),
        "not before the timeout"
    );
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_connection_cap_a_scrape_waits_for_a_free_slot() {
    let _serial = SERIAL.lock().await;
    let cfg = common::parse(&common::idle_yaml());
    let d = common::daemon_with(cfg, limits(4, Duration::from_millis(600))).await;
    let opened = Instant::now();
    let _idle = slowloris(d.addr, 2).await;
    // All 4 slots are held: the scrape is answered only when the first idle one is dropped.
    let (status, _, _) = common::get(d.addr, "/metrics", None).await;
    assert_eq!(status, 200);
    let waited = opened.elapsed();
    assert!(
        waited >= Duration::from_millis(550) && waited < Duration::from_secs(5),
        "{waited:?}"
    );
    d.stop().await;
}

/// A scraper that accepts gzip (as Prometheus does) gets `/metrics` compressed, naming it; one
/// that refuses it, or says nothing, gets it plain; both responses say they vary with `Accept`
/// and `Accept-Encoding`.
/// A default simulator (keep it alive) and a daemon with default server options probing `n`
/// targets on it every second.
async fn probing_simulated_targets(n: usize) -> (llm_probe::simulate::Simulator, Daemon) {
    let sim = common::simulator(Script::default()).await;
    let cfg = common::parse(&common::many_targets(&sim.base_url(), n, "1s"));
    let d = common::daemon_with(cfg, ServerOptions::default()).await;
    (sim, d)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_gzipped_for_a_scraper_that_accepts_gzip() {
    let _serial = SERIAL.lock().await;
    let (_sim, d) = probing_simulated_targets(3).await;
    // Until every target has been probed once, so the body has every family.
    let mut rx = d.subscribe();
    for _ in 0..3 {
        tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .expect("a probe within 10 s")
            .expect("outcomes");
    }
    // reqwest is built without its decoders here: the body arrives as sent.
    let client = reqwest::Client::new();
    let get = |accept_encoding: Option<&'static str>, accept: &'static str| {
        let mut r = client
            .get(format!("http://{}/metrics", d.addr))
            .header("accept", accept);
        if let Some(a) = accept_encoding {
            r = r.header("accept-encoding", a);
        }
        r.send()
    };
    for accept in ["text/plain", "application/openmetrics-text"] {
        let r = get(Some("gzip"), accept).await.unwrap();
        assert_eq!(r.status(), 200);
        assert_eq!(r.headers()["content-encoding"], "gzip");
        assert_eq!(r.headers()["vary"], "Accept, Accept-Encoding");
        let gz = r.bytes().await.unwrap();
        let mut text = String::new();
        std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&gz[..]), &mut text)
            .expect("a gzip body of UTF-8 text");
        for t in ["t0", "t1", "t2"] {
            assert!(
                text.contains(&format!("llm_probe_probes_total{{target=\"{t}\"")),
                "{accept}: {t} in the decompressed body"
            );
        }
        assert!(
            gz.len() * 5 < text.len(),
            "{accept}: {} bytes compressed for {} plain",
            gz.len(),
            text.len()
        );
        if accept.contains("openmetrics") {
            assert!(text.ends_with("# EOF\n"), "a whole OpenMetrics body");
        }
    }
    for refused in [None, Some("gzip;q=0"), Some("identity"), Some("br")] {
        let r = get(refused, "text/plain").await.unwrap();
        assert_eq!(r.status(), 200);
        assert!(r.headers().get("content-encoding").is_none(), "{refused:?}");
        assert_eq!(r.headers()["vary"], "Accept, Accept-Encoding");
        let body = r.text().await.unwrap();
        assert!(
            body.contains("llm_probe_probes_total{target=\"t0\""),
            "{refused:?}"
        );
    }
    d.stop().await;
}

/// `HEAD /metrics` (uptime checkers, load balancers) gets the headers a GET would, without a
/// render: no body, no `Content-Length` (known only once rendered), and the render count
/// unchanged; a GET after it renders.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn head_metrics_answers_the_headers_without_rendering() {
    let _serial = SERIAL.lock().await;
    let (_sim, d) = probing_simulated_targets(1).await;
    let client = reqwest::Client::new();
    let url = format!("http://{}/metrics", d.addr);
    for (accept, encoding, content_type) in [
        ("text/plain", None, "text/plain; version=0.0.4"),
        (
            "application/openmetrics-text",
            Some("gzip"),
            "application/openmetrics-text",
        ),
    ] {
        let mut req = client.head(&url).header("accept", accept);
        if let Some(e) = encoding {
            req = req.header("accept-encoding", e);
        }
        let r = req.send().await.unwrap();
        assert_eq!(r.status(), 200, "{accept}");
        let ct = r.headers()["content-type"].to_str().unwrap();
        assert!(ct.starts_with(content_type), "{accept}: {ct}");
        assert_eq!(r.headers()["vary"], "Accept, Accept-Encoding");
        assert_eq!(
            r.headers()
                .get("content-encoding")
                .map(|v| v.to_str().unwrap()),
            encoding,
            "{accept}"
        );
        assert!(
            r.headers().get("content-length").is_none(),
            "{accept}: a HEAD must not claim a length it did not render: {:?}",
            r.headers().get("content-length")
        );
        assert!(r.bytes().await.unwrap().is_empty());
    }
    assert_eq!(d.server.scrapes.renders(), 0, "HEAD rendered nothing");
    // "Probe now" sends a real request: a HEAD of it is refused, not run.
    let r = client
        .head(format!("http://{}/probe?target=t0", d.addr))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 405);
    assert_eq!(r.headers()["allow"], "GET");
    let r = client.get(&url).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.text().await.unwrap().contains("llm_probe_"));
    assert_eq!(d.server.scrapes.renders(), 1, "the GET rendered once");
    d.stop().await;
}

/// Repeated `Accept` headers are read as one list (RFC 9110 §5.3), whichever comes first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_accept_headers_are_one_list() {
    let _serial = SERIAL.lock().await;
    let (_sim, d) = probing_simulated_targets(1).await;
    let client = reqwest::Client::new();
    for order in [
        ["application/openmetrics-text", "text/plain;q=0.5"],
        ["text/plain;q=0.5", "application/openmetrics-text"],
    ] {
        let mut req = client.get(format!("http://{}/metrics", d.addr));
        for a in order {
            req = req.header(reqwest::header::ACCEPT, a);
        }
        let r = req.send().await.unwrap();
        assert_eq!(r.status(), 200);
        let ct = r.headers()["content-type"].to_str().unwrap().to_string();
        assert!(
            ct.starts_with("application/openmetrics-text"),
            "{order:?}: {ct}"
        );
    }
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_ends_every_connection() {
    let _serial = SERIAL.lock().await;
    let cfg = common::parse(&common::idle_yaml());
    // A header timeout far beyond the test: only stopping can close these.
    let d = common::daemon_with(cfg, limits(512, Duration::from_secs(600))).await;
    let addr = d.addr;
    let mut idle = slowloris(addr, 20).await;
    let t = Instant::now();
    d.stop().await;
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    for s in &mut idle {
        assert!(closed_within(s, Duration::from_secs(1)).await);
    }
    assert!(TcpStream::connect(addr).await.is_err(), "nothing listens");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_reload_answers_without_the_files_details() {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("probes.yaml");
    let good = common::idle_yaml();
    std::fs::write(&path, &good).unwrap();
    let d = Daemon::start(
        common::parse(&good),
        "127.0.0.1:0".parse().unwrap(),
        Some(path.clone()),
    )
    .await
    .unwrap();
    let client = reqwest::Client::new();
    let url = format!("http://{}/-/reload", d.addr);
    for bad in [
        good.replace("http://127.0.0.1:1/v1", "http://admin:SECRETPW@/v1"),
        good.replace(
            "http://127.0.0.1:1/v1",
            "https://api.example.com/v1?key=SECRETPW",
        ),
        good.replace("max_tokens: 8", "max_tokens: SECRETPW"),
        "targets: [SECRETPW".to_string(),
    ] {
        std::fs::write(&path, &bad).unwrap();
        let r = client.post(&url).send().await.unwrap();
        assert_eq!(r.status(), 500);
        let body = r.text().await.unwrap();
        assert!(
            body.contains("failed to reload") && body.contains("log"),
            "{body}"
        );
        for leak in ["SECRETPW", "admin", "probes.yaml", "max_tokens", "line"] {
            assert!(!body.contains(leak), "{leak} in {body}");
        }
    }
    // Only POST reloads.
    for method in [reqwest::Method::GET, reqwest::Method::PUT] {
        let r = client.request(method, &url).send().await.unwrap();
        assert_eq!(r.status(), 405);
        assert_eq!(r.headers()["allow"], "POST");
    }
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_rapid_probe_now_requests_cause_one_probe() {
    let _serial = SERIAL.lock().await;
    let sim = common::simulator(Script {
        ttft: Duration::from_millis(20),
        tokens: 3,
        ..Script::default()
    })
    .await;
    // An interval of an hour: no scheduled probe reaches the simulator within the test
    // (the first one's slot is 7.9 s away; the limit's period is the interval).
    let cfg = common::parse(&common::yaml(
        &sim.base_url(),
        "1h",
        &common::scenario("chat", 8),
        "",
    ));
    let before = sim.received().len();
    let d = common::daemon_with(cfg, ServerOptions::default()).await;
    let client = reqwest::Client::new();
    let url = format!("http://{}/probe?target=sim&debug=true", d.addr);
    let answers: Vec<_> = (0..50)
        .map(|_| tokio::spawn(client.get(&url).send()))
        .collect();
    let mut ok = 0;
    for a in answers {
        let r = a.await.unwrap().unwrap();
        match r.status().as_u16() {
            200 => ok += 1,
            429 => {
                let retry: u64 = r.headers()["retry-after"]
                    .to_str()
                    .unwrap()
                    .parse()
                    .unwrap();
                assert!((1..=3600).contains(&retry), "Retry-After {retry}");
            }
            other => panic!("status {other}"),
        }
    }
    assert_eq!(ok, 1, "one probe now per target per period");
    let probes = sim.received().len() - before;
    assert!(probes <= 1, "the simulator saw {probes} requests");
    d.stop().await;

    // Switched off: 403, and the landing page offers no button.
    let cfg = common::parse(&common::yaml(
        &sim.base_url(),
        "1h",
        &common::scenario("chat", 8),
        "",
    ));
    let off = ServerOptions {
        debug_probe: DebugProbePolicy {
            enabled: false,
            min_interval: None,
        },
        ..Default::default()
    };
    let d = common::daemon_with(cfg, off).await;
    let before = sim.received().len();
    let (status, _, _) = common::get(d.addr, "/probe?target=sim&debug=true", None).await;
    assert_eq!(status, 403);
    let (_, _, page) = common::get(d.addr, "/targets/sim", None).await;
    assert!(
        page.contains("sim") && !page.contains("probe now") && !page.contains("/probe?"),
        "{page}"
    );
    assert_eq!(sim.received().len(), before);
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthcheck_wants_llm_probes_answer_and_names_a_timeout() {
    let _serial = SERIAL.lock().await;
    // Another server that answers 200 on the path does not pass.
    let other = llm_probe::server::bind("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let other_addr = other.local_addr().unwrap();
    let stop = tokio_util::sync::CancellationToken::new();
    tokio::spawn(llm_probe::server::serve(
        other,
        stop.clone(),
        |_req| async {
            hyper::Response::new(http_body_util::Full::new(bytes::Bytes::from_static(
                b"OK\n",
            )))
        },
    ));
    let e = llm_probe::healthcheck::check(&common::healthcheck_args(
        &format!("http://{other_addr}/-/healthy"),
        &["--timeout".into(), "1s".into()],
    ))
    .await
    .unwrap_err();
    assert!(
        e.to_string().contains("not as llm-probe's /-/healthy"),
        "{e}"
    );

    // A server that accepts and never answers: a timeout, said as such.
    let slow = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let slow_addr = slow.local_addr().unwrap();
    let holder = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = slow.accept().await {
            held.push(s);
        }
    });
    let t = Instant::now();
    let e = llm_probe::healthcheck::check(&common::healthcheck_args(
        &format!("http://{slow_addr}/-/healthy"),
        &["--timeout".into(), "1s".into()],
    ))
    .await
    .unwrap_err();
    assert!(
        matches!(e, llm_probe::healthcheck::HealthError::Timeout { .. }),
        "{e:?}"
    );
    assert!(e.to_string().contains("timed out"), "{e}");
    assert!(!e.to_string().contains("error sending request"), "{e}");
    assert!(t.elapsed() < Duration::from_secs(3));
    holder.abort();

    // llm-probe itself passes.
    let d = common::daemon(common::parse(&common::idle_yaml())).await;
    llm_probe::healthcheck::check(&common::healthcheck_args(
        &format!("http://{}/-/healthy", d.addr),
        &["--timeout".into(), "1s".into()],
    ))
    .await
    .unwrap();
    d.stop().await;
    stop.cancel();
}

#[test]
fn the_server_ends_with_its_runtime_even_without_stop() {
    let _serial = SERIAL.blocking_lock();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let d = rt.block_on(common::daemon_with(
        common::parse(&common::idle_yaml()),
        ServerOptions::default(),
    ));
    let addr = d.addr;
    assert!(std::net::TcpStream::connect(addr).is_ok());
    drop(d);
    drop(rt);
    // The server's own threads notice and close the port.
    let deadline = Instant::now() + Duration::from_secs(5);
    while std::net::TcpStream::connect(addr).is_ok() {
        assert!(Instant::now() < deadline, "still serving on {addr}");
        std::thread::sleep(Duration::from_millis(50));
    }
}
