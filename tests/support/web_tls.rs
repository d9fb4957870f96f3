//! A TLS exporter's files (CA, server and client certificates, a password) and a daemon started
//! with `--web.config.file`: shared by the web-config tests of the fast and end-to-end tiers.

use std::path::PathBuf;

use llm_probe::daemon::Daemon;
use llm_probe::server::ServerOptions;

pub const PASSWORD: &str = "correct horse battery staple";

/// The files of a TLS exporter in a temporary directory.
pub struct Files {
    pub dir: tempfile::TempDir,
    pub pki: super::pki::Pki,
}

impl Files {
    pub fn new() -> Files {
        let dir = tempfile::tempdir().unwrap();
        let pki = super::pki::pki();
        let write = |name: &str, text: &str| std::fs::write(dir.path().join(name), text).unwrap();
        write("ca.pem", &pki.ca_pem);
        write("server.crt", &pki.server_cert_pem);
        write("server.key", &pki.server_key_pem);
        write("client.crt", &pki.client_cert_pem);
        write("client.key", &pki.client_key_pem);
        write("password", &format!("{PASSWORD}\n"));
        Files { dir, pki }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Writes `web.yml` (relative file names: resolved against its directory).
    pub fn web(&self, name: &str, text: &str) -> PathBuf {
        let p = self.path(name);
        std::fs::write(&p, text).unwrap();
        p
    }
}

/// A web config with TLS and the user `prometheus` whose password is `password` (bcrypt at
/// the lowest cost, 4: the tests check who gets in, not how slowly a hash is checked).
pub fn basic_auth_web(password: &str) -> String {
    format!(
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\nhttp_server_config:\n  headers:\n    X-Frame-Options: DENY\nbasic_auth_users:\n  prometheus: {}\n",
        bcrypt::hash(password, 4).unwrap()
    )
}

pub const MTLS_WEB: &str = "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.pem\n  min_version: TLS13\n";

pub async fn start(cfg_yaml: &str, config_file: Option<PathBuf>, web: PathBuf) -> Daemon {
    let options = ServerOptions {
        web_config_file: Some(web),
        ..Default::default()
    };
    Daemon::start_with(
        super::parse(cfg_yaml),
        "127.0.0.1:0".parse().unwrap(),
        config_file,
        options,
    )
    .await
    .expect("daemon starts")
}

/// Sends `r`; its HTTP status.
pub async fn status(r: reqwest::RequestBuilder) -> u16 {
    r.send().await.unwrap().status().as_u16()
}

pub fn client(f: &Files) -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(f.pki.ca_pem.as_bytes()).unwrap())
}

pub fn identity(f: &Files) -> reqwest::Identity {
    reqwest::Identity::from_pem(
        format!("{}\n{}", f.pki.client_cert_pem, f.pki.client_key_pem).as_bytes(),
    )
    .unwrap()
}
