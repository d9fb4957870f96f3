//! `--web.config.file`: the endpoint that changes state is behind the same auth as the
//! metrics; the web config is re-read on reload (validate, then swap); bad files give located
//! errors and keep the old configuration; `healthcheck` talks to such an exporter, with basic
//! auth and with a client certificate. (A real Prometheus scraping over HTTPS is in the
//! end-to-end tier, `prometheus::web_config`.)

use crate::common;

use std::path::Path;
use std::process::Command;

use common::web_tls::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_is_behind_auth_and_swaps_the_web_config_only_when_valid() {
    let f = Files::new();
    let cfg = common::idle_yaml();
    let probes = f.path("probes.yaml");
    std::fs::write(&probes, &cfg).unwrap();
    let web = f.web("web.yml", &basic_auth_web(PASSWORD));
    let d = start(&cfg, Some(probes), web.clone()).await;
    let c = client(&f).build().unwrap();
    let url = |p: &str| format!("https://{}{p}", d.addr);

    // Unauthenticated: refused, nothing reloaded.
    assert_eq!(status(c.post(url("/-/reload"))).await, 401);
    assert_eq!(status(c.get(url("/probe?target=sim"))).await, 401);
    // The status pages, their stylesheet, the API and the badges too.
    for path in [
        "/",
        "/status.css",
        "/targets/sim",
        "/api/v1/targets",
        "/api/v1/probes",
        "/badge/sim/chat/status.svg",
    ] {
        assert_eq!(status(c.get(url(path))).await, 401, "{path}");
    }
    // Authenticated: GET is 405, POST reloads.
    let auth =
        |r: reqwest::RequestBuilder, pw: &str| r.basic_auth("prometheus", Some(pw.to_string()));
    for path in [
        "/",
        "/targets/sim",
        "/api/v1/targets",
        "/badge/sim/chat/ttft.svg",
    ] {
        assert_eq!(
            status(auth(c.get(url(path)), PASSWORD)).await,
            200,
            "{path}"
        );
    }
    assert_eq!(status(auth(c.get(url("/-/reload")), PASSWORD)).await, 405);
    assert_eq!(status(auth(c.post(url("/-/reload")), PASSWORD)).await, 200);

    // A new password takes effect on reload.
    std::fs::write(&web, basic_auth_web("new password")).unwrap();
    assert_eq!(status(auth(c.get(url("/metrics")), PASSWORD)).await, 200);
    assert!(d.reload().await.is_ok());
    assert_eq!(status(auth(c.get(url("/metrics")), PASSWORD)).await, 401);
    assert_eq!(
        status(auth(c.get(url("/metrics")), "new password")).await,
        200
    );

    // Bad web config files are rejected on reload; the one in force stays.
    let good = std::fs::read_to_string(&web).unwrap();
    for bad in [
        good.replace("prometheus: $2", "prometheus: not-a-hash-$2"),
        good.replace("key_file: server.key", "key_file: missing.key"),
        good.replace("basic_auth_users:", "basic_auth_user:"),
    ] {
        std::fs::write(&web, &bad).unwrap();
        let e = d.reload().await.unwrap_err();
        assert!(
            matches!(e, llm_probe::reload::ReloadError::WebConfig(_)),
            "{e:?}"
        );
        let e = e.to_string();
        assert!(e.contains("web.yml:"), "{e}");
        let r = auth(c.post(url("/-/reload")), "new password")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 500);
        assert!(!r.text().await.unwrap().contains("web.yml"));
        assert_eq!(
            status(auth(c.get(url("/metrics")), "new password")).await,
            200
        );
    }
    // The reload-status gauge says so.
    let r = auth(c.get(url("/metrics")), "new password")
        .send()
        .await
        .unwrap();
    let text = r.text().await.unwrap();
    assert_eq!(
        common::sample(&text, "llm_probe_config_last_reload_successful", &[]),
        Some(0.0)
    );
    d.stop().await;
}

fn problems(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    llm_probe::server::WebConfig::load(&p)
        .map(|_| String::new())
        .unwrap_or_else(|e| e.to_string())
}

#[test]
fn bad_web_config_files_give_located_errors() {
    let f = Files::new();
    let dir = f.dir.path();
    let hash = bcrypt::hash("x", 4).unwrap();
    let tls = "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n";

    // A hash that is not bcrypt: the user's line.
    let e = problems(
        dir,
        "w1.yml",
        &format!("{tls}basic_auth_users:\n  alice: {hash}\n  bob: plaintext-password\n"),
    );
    assert!(e.contains("w1.yml:6:"), "{e}");
    assert!(
        e.contains("basic_auth_users.bob") && e.contains("not a bcrypt hash"),
        "{e}"
    );
    assert!(
        !e.contains("plaintext-password"),
        "never echo the value: {e}"
    );
    assert!(!e.contains("alice"), "{e}");

    // A key file that is not there: the key's line, the path, the reason.
    let e = problems(
        dir,
        "w2.yml",
        "tls_server_config:\n  cert_file: server.crt\n  key_file: nowhere/server.key\n",
    );
    assert!(e.contains("w2.yml:3:"), "{e}");
    assert!(
        e.contains("tls_server_config.key_file")
            && e.contains("nowhere/server.key")
            && e.contains("No such file"),
        "{e}"
    );

    // Unknown keys, at each level: located, with what is allowed.
    let e = problems(
        dir,
        "w3.yml",
        &format!("{tls}basic_auth_user:\n  alice: {hash}\n"),
    );
    assert!(
        e.contains("w3.yml:4:") && e.contains("basic_auth_user"),
        "{e}"
    );
    let e = problems(dir, "w4.yml", &format!("{tls}  cert_fil: x\n"));
    assert!(
        e.contains("w4.yml:4:") && e.contains("cert_fil") && e.contains("cert_file"),
        "{e}"
    );

    // Everything wrong is reported at once, each on its line.
    let e = problems(
        dir,
        "w5.yml",
        "tls_server_config:\n  cert_file: server.key\n  key_file: server.crt\n  min_version: TLS11\n  client_ca_file: ca.pem\n  cipher_suites: [TLS_AES_128_GCM_SHA256]\nhttp_server_config:\n  headers:\n    Content-Type: text/html\n",
    );
    for want in [
        "w5.yml:2:", // a key where the certificate should be
        "holds no PEM certificate",
        "w5.yml:3:",
        "holds no PEM private key",
        "w5.yml:4:",
        "TLS12 or TLS13",
        "w5.yml:5:",
        "client_auth_type",
        "w5.yml:6:",
        "cipher_suites",
        "w5.yml:9:",
        "content-type is set by llm-probe",
    ] {
        assert!(e.contains(want), "{want} missing in:\n{e}");
    }
    assert!(
        !e.contains("PRIVATE KEY-----"),
        "never the key's content: {e}"
    );

    // A file that is not a regular file, or not there.
    let e = problems(dir, "w6.yml", "");
    assert_eq!(e, "", "an empty file is no TLS and no auth");
    let e = llm_probe::server::WebConfig::load(dir)
        .unwrap_err()
        .to_string();
    assert!(e.contains("not a regular file"), "{e}");
    // A FIFO (as web config or as a key file) is refused at once, never waited on.
    let fifo = dir.join("fifo");
    common::mkfifo(&fifo);
    let e = llm_probe::server::WebConfig::load(&fifo)
        .unwrap_err()
        .to_string();
    assert!(e.contains("not a regular file"), "{e}");
    let e = problems(dir, "w7.yml", &tls.replace("server.key", "fifo"));
    assert!(
        e.contains("w7.yml:3:") && e.contains("not a regular file"),
        "{e}"
    );

    // The binary refuses to start on a bad web config, with the located error.
    let bad = f.web("bad.yml", &format!("{tls}basic_auth_users:\n  bob: nope\n"));
    let probes = f.path("probes.yaml");
    std::fs::write(&probes, common::idle_yaml()).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_llm-probe"))
        .args([
            "run",
            "--web.listen-address",
            "127.0.0.1:0",
            "--config.file",
        ])
        .arg(&probes)
        .arg("--web.config.file")
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("bad.yml:5:") && stderr.contains("not a bcrypt hash"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthcheck_talks_to_a_tls_exporter_with_basic_auth() {
    let f = Files::new();
    let cfg = common::idle_yaml();
    let d = start(&cfg, None, f.web("web.yml", &basic_auth_web(PASSWORD))).await;
    let url = format!("https://{}/-/healthy", d.addr);
    let run = |extra: &[&str]| {
        let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        common::healthcheck_args(&url, &extra)
    };
    let ca = f.path("ca.pem").display().to_string();
    let pw = f.path("password").display().to_string();
    let creds = [
        "--basic-auth.username",
        "prometheus",
        "--basic-auth.password-file",
        &pw,
    ];
    let with_ca: Vec<&str> = ["--tls.ca-file", ca.as_str()]
        .into_iter()
        .chain(creds)
        .collect();
    llm_probe::healthcheck::check(&run(&with_ca)).await.unwrap();
    let insecure: Vec<&str> = ["--tls.insecure-skip-verify"]
        .into_iter()
        .chain(creds)
        .collect();
    llm_probe::healthcheck::check(&run(&insecure))
        .await
        .unwrap();
    let e = llm_probe::healthcheck::check(&run(&["--tls.ca-file", &ca]))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("401") && e.contains("--basic-auth.username"),
        "{e}"
    );
    let e = llm_probe::healthcheck::check(&run(&creds))
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("certificate"), "{e}");
    assert!(!e.contains(PASSWORD));
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_certificate_modes_and_a_healthcheck_with_a_certificate() {
    let f = Files::new();
    let stranger = common::pki::pki();
    let stranger_id = reqwest::Identity::from_pem(
        format!("{}\n{}", stranger.client_cert_pem, stranger.client_key_pem).as_bytes(),
    )
    .unwrap();
    let optional = MTLS_WEB.replace("RequireAndVerifyClientCert", "VerifyClientCertIfGiven");
    let d = start(&common::idle_yaml(), None, f.web("optional.yml", &optional)).await;
    let url = format!("https://{}/-/healthy", d.addr);
    let get = |c: reqwest::ClientBuilder| {
        let url = url.clone();
        async move {
            c.build()
                .unwrap()
                .get(url)
                .send()
                .await
                .map(|r| r.status().as_u16())
        }
    };
    assert_eq!(
        get(client(&f)).await.unwrap(),
        200,
        "no certificate: allowed"
    );
    assert_eq!(get(client(&f).identity(identity(&f))).await.unwrap(), 200);
    assert!(
        get(client(&f).identity(stranger_id)).await.is_err(),
        "a certificate from another CA is refused"
    );
    d.stop().await;

    let d = start(&common::idle_yaml(), None, f.web("mtls.yml", MTLS_WEB)).await;
    let url = format!("https://{}/-/healthy", d.addr);
    let args = |extra: &[String]| common::healthcheck_args(&url, extra);
    let p = |n: &str| f.path(n).display().to_string();
    let ca = ["--tls.ca-file".to_string(), p("ca.pem")];
    let e = llm_probe::healthcheck::check(&args(&ca)).await.unwrap_err();
    assert!(
        matches!(e, llm_probe::healthcheck::HealthError::Request { .. }),
        "{e}"
    );
    let with_cert: Vec<String> = ca
        .iter()
        .cloned()
        .chain([
            "--tls.cert-file".into(),
            p("client.crt"),
            "--tls.key-file".into(),
            p("client.key"),
        ])
        .collect();
    llm_probe::healthcheck::check(&args(&with_cert))
        .await
        .unwrap();
    d.stop().await;
}
