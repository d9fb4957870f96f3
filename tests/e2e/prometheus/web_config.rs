//! `--web.config.file` with a real Prometheus: it scrapes over HTTPS with basic auth and with a
//! client certificate, and is refused without credentials, without the CA or without the
//! certificate.

use crate::common;
use common::web_tls::*;
use llm_probe::simulate::Script;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Polls `promql` until its first value satisfies `ok`; panics after 60 s.
async fn wait_for(port: u16, promql: &str, ok: impl Fn(f64) -> bool) -> f64 {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let r = common::prometheus_query(port, promql).await;
        if let Some(v) = r
            .first()
            .and_then(|s| s["value"][1].as_str())
            .and_then(|s| s.parse::<f64>().ok())
            .filter(|v| ok(*v))
        {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{promql}: last result {r:?}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_scrapes_over_https_with_basic_auth_and_with_a_client_certificate() {
    let prometheus = common::require_tool("prometheus", "apt-get install prometheus");
    let f = Files::new();
    let sim = common::simulator(Script {
        ttft: Duration::from_millis(30),
        tokens: 4,
        ..Script::default()
    })
    .await;
    let cfg = common::yaml(&sim.base_url(), "500ms", &common::scenario("chat", 8), "");
    let basic = start(&cfg, None, f.web("basic.yml", &basic_auth_web(PASSWORD))).await;
    let mtls = start(&cfg, None, f.web("mtls.yml", MTLS_WEB)).await;

    let job = |name: &str, addr: std::net::SocketAddr, tls: &str, auth: &str| {
        format!("  - job_name: {name}\n    scheme: https\n    tls_config:\n{tls}{auth}    static_configs:\n      - targets: ['{addr}']\n")
    };
    let ca = format!("      ca_file: {}\n", f.path("ca.pem").display());
    let creds = format!(
        "    basic_auth:\n      username: prometheus\n      password_file: {}\n",
        f.path("password").display()
    );
    let cert = format!(
        "{ca}      cert_file: {}\n      key_file: {}\n",
        f.path("client.crt").display(),
        f.path("client.key").display()
    );
    let prom_cfg = f.path("prometheus.yml");
    std::fs::write(
        &prom_cfg,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\nscrape_configs:\n{}{}{}{}{}",
            job("basic", basic.addr, &ca, &creds),
            job("basic_no_credentials", basic.addr, &ca, ""),
            job(
                "basic_no_ca",
                basic.addr,
                "      insecure_skip_verify: false\n",
                &creds
            ),
            job("mtls", mtls.addr, &cert, ""),
            job("mtls_no_certificate", mtls.addr, &ca, ""),
        ),
    )
    .unwrap();
    let port = common::free_port();
    let _prom = common::ChildGuard(
        Command::new(prometheus)
            .arg(format!("--config.file={}", prom_cfg.display()))
            .arg(format!("--storage.tsdb.path={}", f.path("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    // 200 connections that never send a byte (nor a TLS hello) are held against the exporter
    // the whole time: Prometheus' scrapes are answered all the same.
    let mut idle = Vec::new();
    for _ in 0..200 {
        idle.push(tokio::net::TcpStream::connect(basic.addr).await.unwrap());
    }
    // The TTFT histogram is queryable through both secured scrapes.
    for job in ["basic", "mtls"] {
        let count = wait_for(
            port,
            &format!("sum(llm_probe_time_to_first_token_seconds_count{{job=\"{job}\"}})"),
            |v| v >= 1.0,
        )
        .await;
        assert!(count >= 1.0);
        assert_eq!(
            wait_for(port, &format!("up{{job=\"{job}\"}}"), |_| true).await,
            1.0
        );
    }
    for job in ["basic_no_credentials", "basic_no_ca", "mtls_no_certificate"] {
        assert_eq!(
            wait_for(port, &format!("up{{job=\"{job}\"}}"), |_| true).await,
            0.0,
            "{job} scraped"
        );
    }
    drop(idle);
    let p95 = wait_for(
        port,
        "histogram_quantile(0.95, sum by (le) (rate(llm_probe_time_to_first_token_seconds_bucket{job=\"basic\"}[1m])))",
        f64::is_finite,
    )
    .await;
    assert!((0.025..=0.1).contains(&p95), "P95 TTFT {p95}");

    // The same refusals, seen from a client: 401 with a challenge (and the configured
    // headers), a TLS failure without the CA, a refused handshake without a certificate.
    let url = format!("https://{}/metrics", basic.addr);
    let r = client(&f).build().unwrap().get(&url).send().await.unwrap();
    assert_eq!(r.status(), 401);
    assert!(r.headers()["www-authenticate"]
        .to_str()
        .unwrap()
        .starts_with("Basic"));
    assert_eq!(r.headers()["x-frame-options"], "DENY");
    let r = client(&f)
        .build()
        .unwrap()
        .get(&url)
        .basic_auth("prometheus", Some("wrong"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let r = client(&f)
        .build()
        .unwrap()
        .get(&url)
        .basic_auth("prometheus", Some(PASSWORD))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["x-frame-options"], "DENY");
    let e = reqwest::Client::new()
        .get(&url)
        .basic_auth("prometheus", Some(PASSWORD))
        .send()
        .await
        .unwrap_err();
    assert!(format!("{e:?}").contains("UnknownIssuer"), "{e:?}");
    // Plain HTTP to the TLS port gets no page.
    assert!(reqwest::get(format!("http://{}/metrics", basic.addr))
        .await
        .map(|r| r.status() != 200)
        .unwrap_or(true));
    let mtls_url = format!("https://{}/-/healthy", mtls.addr);
    assert!(client(&f)
        .build()
        .unwrap()
        .get(&mtls_url)
        .send()
        .await
        .is_err());
    let r = client(&f)
        .identity(identity(&f))
        .build()
        .unwrap()
        .get(&mtls_url)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    // min_version TLS13: a TLS 1.2-only client is refused.
    let r = client(&f)
        .identity(identity(&f))
        .max_tls_version(reqwest::tls::Version::TLS_1_2)
        .build()
        .unwrap()
        .get(&mtls_url)
        .send()
        .await;
    assert!(r.is_err(), "{r:?}");
    // Bounded, so that a stop that never ends fails here instead of hanging the suite.
    for d in [basic, mtls] {
        tokio::time::timeout(Duration::from_secs(30), d.stop())
            .await
            .expect("the daemon stops within 30 s");
    }
}
