//! `--web.config.file`: TLS, basic auth and extra response headers for every endpoint of the
//! exporter, in the format of the Prometheus exporter toolkit
//! (<https://prometheus.io/docs/prometheus/latest/configuration/https/>), the subset that fits
//! a rustls server:
//!
//! ```yaml
//! tls_server_config:
//!   cert_file: server.crt          # PEM chain, leaf first
//!   key_file: server.key           # PEM private key (PKCS#8, PKCS#1 or SEC1)
//!   client_auth_type: RequireAndVerifyClientCert  # or VerifyClientCertIfGiven, NoClientCert
//!   client_ca_file: clients-ca.crt # required by the two verifying modes
//!   min_version: TLS12             # TLS12 (default) or TLS13
//!   max_version: TLS13
//! http_server_config:
//!   headers: { Strict-Transport-Security: max-age=31536000 }
//! basic_auth_users:
//!   prometheus: $2y$10$…           # bcrypt hash (htpasswd -nBC 10 "" | tr -d ':')
//! ```
//!
//! Relative paths are resolved against the directory of the web config file. Keys of the
//! toolkit's format that a rustls server cannot honour (`cipher_suites`, `curve_preferences`,
//! `prefer_server_cipher_suites`, `client_allowed_sans`, `RequestClientCert`,
//! `RequireAnyClientCert`, TLS 1.0/1.1) are errors that say so; other unknown keys are errors.
//! Every problem is reported, each with `file:line:column` and the key's path.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use hyper::header::{HeaderName, HeaderValue};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde::Deserialize;

use crate::config::{ConfigError, Problem};

/// The highest bcrypt cost accepted in `basic_auth_users` (2^12 rounds, about 0.5 s of CPU per
/// check on a busy 2-core machine; 14 took 1.8–3.3 s): every wrong password costs one check at
/// this cost and anyone can send one, so a higher cost lets a few clients hold the checks'
/// turns for minutes. `htpasswd -B` makes cost 5 by default, `-C 10` is usual.
pub const MAX_BCRYPT_COST: u32 = 12;

/// Largest web config file, certificate or key file read.
pub const MAX_FILE_BYTES: u64 = 1 << 20;

/// Longest time reading the web config file and its PEM files may take.
pub const LOAD_TIME_LIMIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Response headers a web config may not set: the server owns them.
const RESERVED_HEADERS: &[&str] = &[
    "content-type",
    "content-length",
    // `/metrics` names its coding, and what its body varies with (a configured value would
    // mislabel a gzip body, or a plain one).
    "content-encoding",
    "vary",
    "transfer-encoding",
    "connection",
    "www-authenticate",
    "retry-after",
    "date",
];

/// A validated web configuration.
#[derive(Default)]
pub struct WebConfig {
    /// The TLS server settings; `None` serves plain HTTP.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// User name → bcrypt hash; empty means no authentication.
    pub users: BTreeMap<String, String>,
    /// Added to every response.
    pub headers: Vec<(HeaderName, HeaderValue)>,
}

impl std::fmt::Debug for WebConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the hashes.
        f.debug_struct("WebConfig")
            .field("tls", &self.tls.is_some())
            .field("users", &self.users.keys().collect::<Vec<_>>())
            .field("headers", &self.headers.len())
            .finish()
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    tls_server_config: Option<RawTls>,
    http_server_config: Option<RawHttp>,
    #[serde(default, deserialize_with = "unique_users")]
    basic_auth_users: Option<BTreeMap<String, String>>,
}

/// `basic_auth_users` with each user named once: a second entry for a user would silently
/// replace the first one's password.
fn unique_users<'de, D>(d: D) -> Result<Option<BTreeMap<String, String>>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    struct Users;
    impl<'de> serde::de::Visitor<'de> for Users {
        type Value = Option<BTreeMap<String, String>>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a map of user names to bcrypt hashes")
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_map<M: serde::de::MapAccess<'de>>(
            self,
            mut m: M,
        ) -> Result<Self::Value, M::Error> {
            let mut users = BTreeMap::new();
            while let Some((user, hash)) = m.next_entry::<String, String>()? {
                if users.contains_key(&user) {
                    return Err(serde::de::Error::custom(format_args!(
                        "user {user:?} is listed twice in basic_auth_users; keep one entry per user"
                    )));
                }
                users.insert(user, hash);
            }
            Ok(Some(users))
        }
    }
    d.deserialize_any(Users)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTls {
    cert_file: Option<String>,
    key_file: Option<String>,
    client_auth_type: Option<String>,
    client_ca_file: Option<String>,
    min_version: Option<String>,
    max_version: Option<String>,
    // Keys of the toolkit's format rustls cannot honour: parsed to report them clearly.
    cipher_suites: Option<serde_yaml::Value>,
    curve_preferences: Option<serde_yaml::Value>,
    prefer_server_cipher_suites: Option<serde_yaml::Value>,
    client_allowed_sans: Option<serde_yaml::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHttp {
    /// Accepted for compatibility; llm-probe serves HTTP/1.1 only.
    #[allow(dead_code)]
    http2: Option<bool>,
    headers: Option<BTreeMap<String, String>>,
}

/// Reads a regular file of at most [`MAX_FILE_BYTES`]: a FIFO, a device or a huge file is an
/// error, never a hang or an allocation of everything it yields. Opened without blocking and
/// checked once open ([`crate::config::files::read`]): a FIFO swapped in after a check of the
/// path would block a plain open for ever.
pub(crate) fn read_capped(path: &Path) -> Result<Vec<u8>, String> {
    crate::config::files::read(path, MAX_FILE_BYTES).map_err(|e| match e {
        crate::config::files::ReadError::TooLarge(_) => format!(
            "{} is more than the {MAX_FILE_BYTES} bytes a web config or PEM file may have",
            path.display()
        ),
        crate::config::files::ReadError::NotRegular(_) => {
            format!("{} is not a regular file", path.display())
        }
        crate::config::files::ReadError::NotFound => {
            format!("cannot read {}: No such file or directory", path.display())
        }
        e => format!("cannot read {}: {e}", path.display()),
    })
}

/// Collects located problems of one file.
struct Problems<'a> {
    source: &'a str,
    locations: crate::config::locate::Locations,
    list: Vec<Problem>,
}

impl Problems<'_> {
    fn add(&mut self, path: &str, message: String) {
        let loc = self.locations.find_key(path);
        self.list.push(Problem {
            source: self.source.to_string(),
            line: loc.map(|l| l.0),
            column: loc.map(|l| l.1),
            path: path.to_string(),
            message,
        });
    }
}

impl WebConfig {
    /// Reads and validates the web config file at `path`, and the certificate and key files
    /// it names (relative to its directory).
    ///
    /// # Errors
    /// Every problem found, each naming the file, line, column and key and how to fix it.
    pub fn load(path: &Path) -> Result<WebConfig, ConfigError> {
        let source = path.display().to_string();
        let single = |message: String| ConfigError::single(&source, message);
        let bytes = read_capped(path)
            .map_err(|e| single(format!("{e}; check --web.config.file and its permissions")))?;
        let text = String::from_utf8(bytes)
            .map_err(|_| single("the web config file is not UTF-8 text".into()))?;
        let dir = path.parent().unwrap_or(Path::new("."));
        parse(&text, &source, dir)
    }
}

/// Parses and validates web config `text`; `source` names it in errors, `dir` is where
/// relative file names are resolved.
///
/// # Errors
/// As [`WebConfig::load`].
pub fn parse(text: &str, source: &str, dir: &Path) -> Result<WebConfig, ConfigError> {
    let raw: Raw = if text.trim().is_empty() {
        Raw {
            tls_server_config: None,
            http_server_config: None,
            basic_auth_users: None,
        }
    } else {
        serde_yaml::from_str(text).map_err(|e| {
            let loc = e.location();
            let message = e.to_string();
            let message = match message.rsplit_once(" at line ") {
                Some((m, _)) => m.to_string(),
                None => message,
            };
            ConfigError {
                problems: vec![Problem {
                    source: source.to_string(),
                    line: loc.as_ref().map(|l| l.line()),
                    column: loc.as_ref().map(|l| l.column()),
                    path: String::new(),
                    message: format!(
                        "{message} (the Prometheus exporter toolkit's web config format)"
                    ),
                }],
            }
        })?
    };
    let mut problems = Problems {
        source,
        locations: crate::config::locate::Locations::build(text),
        list: Vec::new(),
    };
    let mut web = WebConfig::default();
    if let Some(tls) = &raw.tls_server_config {
        web.tls = tls_config(tls, dir, &mut problems).map(Arc::new);
    }
    for (user, hash) in raw.basic_auth_users.unwrap_or_default() {
        let path = format!("basic_auth_users.{user}");
        if user.is_empty() || user.contains(':') {
            problems.add(
                &path,
                "a user name must be non-empty and contain no ':' (basic auth sends user:password)"
                    .into(),
            );
        }
        match hash.parse::<bcrypt::HashParts>() {
            Err(_) => problems.add(&path, "is not a bcrypt hash (like $2y$10$ followed by 53 characters); make one with `htpasswd -nBC 10 \"\" | tr -d ':'`".into()),
            // Every wrong password costs one check at this cost, and anyone can send one: a
            // cost of 31 is minutes of CPU per request.
            Ok(parts) if parts.get_cost() > MAX_BCRYPT_COST => problems.add(&path, format!("has bcrypt cost {}, above the maximum of {MAX_BCRYPT_COST}: every wrong password would cost that much CPU; make one with `htpasswd -nBC 10 \"\" | tr -d ':'`", parts.get_cost())),
            Ok(_) => {}
        }
        web.users.insert(user, hash);
    }
    for (name, value) in raw
        .http_server_config
        .and_then(|h| h.headers)
        .unwrap_or_default()
    {
        let path = format!("http_server_config.headers.{name}");
        let parsed = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(&value),
        );
        match parsed {
            (Err(_), _) => problems.add(&path, "is not a valid HTTP header name".into()),
            (_, Err(_)) => problems.add(
                &path,
                "the value is not a valid HTTP header value (printable ASCII, no line breaks)"
                    .into(),
            ),
            (Ok(n), _) if RESERVED_HEADERS.contains(&n.as_str()) => problems.add(
                &path,
                format!("{n} is set by llm-probe itself and cannot be configured"),
            ),
            (Ok(n), Ok(v)) => web.headers.push((n, v)),
        }
    }
    if problems.list.is_empty() {
        Ok(web)
    } else {
        let mut list = problems.list;
        list.sort_by_key(|p| (p.line.unwrap_or(usize::MAX), p.column));
        Err(ConfigError { problems: list })
    }
}

/// Client certificate policies of the toolkit's format.
#[derive(Clone, Copy, PartialEq)]
enum ClientAuth {
    None,
    VerifyIfGiven,
    Require,
}

fn tls_config(
    raw: &RawTls,
    dir: &Path,
    problems: &mut Problems<'_>,
) -> Option<rustls::ServerConfig> {
    const P: &str = "tls_server_config";
    let before = problems.list.len();
    for (key, set) in [
        ("cipher_suites", raw.cipher_suites.is_some()),
        ("curve_preferences", raw.curve_preferences.is_some()),
        (
            "prefer_server_cipher_suites",
            raw.prefer_server_cipher_suites.is_some(),
        ),
        ("client_allowed_sans", raw.client_allowed_sans.is_some()),
    ] {
        if set {
            problems.add(&format!("{P}.{key}"), "is not supported by llm-probe (rustls negotiates only modern cipher suites and curves); remove the key".into());
        }
    }
    let client_auth = match raw.client_auth_type.as_deref() {
        None | Some("NoClientCert") => ClientAuth::None,
        Some("VerifyClientCertIfGiven") => ClientAuth::VerifyIfGiven,
        Some("RequireAndVerifyClientCert") => ClientAuth::Require,
        Some("RequestClientCert" | "RequireAnyClientCert") => {
            problems.add(&format!("{P}.client_auth_type"), "accepts client certificates without verifying them, which llm-probe does not do; use VerifyClientCertIfGiven or RequireAndVerifyClientCert with client_ca_file".into());
            ClientAuth::None
        }
        Some(other) => {
            problems.add(&format!("{P}.client_auth_type"), format!("\"{}\" is not a client auth type; use NoClientCert, VerifyClientCertIfGiven or RequireAndVerifyClientCert", tame(other)));
            ClientAuth::None
        }
    };
    let version = |key: &str, v: Option<&str>, problems: &mut Problems<'_>| match v {
        None => None,
        Some("TLS12") => Some(&rustls::version::TLS12),
        Some("TLS13") => Some(&rustls::version::TLS13),
        Some(other) => {
            problems.add(
                &format!("{P}.{key}"),
                format!(
                    "\"{}\" is not supported; use TLS12 or TLS13 (rustls speaks TLS 1.2 and 1.3 only)",
                    tame(other)
                ),
            );
            None
        }
    };
    let min = version("min_version", raw.min_version.as_deref(), problems);
    let max = version("max_version", raw.max_version.as_deref(), problems);
    let versions: Vec<&'static rustls::SupportedProtocolVersion> =
        [&rustls::version::TLS12, &rustls::version::TLS13]
            .into_iter()
            .filter(|v| {
                !(min == Some(&rustls::version::TLS13)
                    && v.version == rustls::ProtocolVersion::TLSv1_2)
            })
            .filter(|v| {
                !(max == Some(&rustls::version::TLS12)
                    && v.version == rustls::ProtocolVersion::TLSv1_3)
            })
            .collect();
    if versions.is_empty() {
        problems.add(
            &format!("{P}.max_version"),
            "is below min_version: no TLS version is left".into(),
        );
    }
    let certs = read_pem(
        dir,
        P,
        "cert_file",
        raw.cert_file.as_deref(),
        problems,
        |f, pem| {
            let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(pem)
                .filter_map(Result::ok)
                .collect();
            (!certs.is_empty()).then_some(certs).ok_or_else(|| {
                format!("{f} holds no PEM certificate (-----BEGIN CERTIFICATE-----)")
            })
        },
    );
    let key = read_pem(
        dir,
        P,
        "key_file",
        raw.key_file.as_deref(),
        problems,
        |f, pem| {
            // Never the file's content: it is a private key.
            PrivateKeyDer::from_pem_slice(pem)
                .map_err(|_| format!("{f} holds no PEM private key (PKCS#8, PKCS#1 or SEC1)"))
        },
    );
    let roots = match (raw.client_ca_file.as_deref(), client_auth) {
        (None, ClientAuth::None) => None,
        (Some(_), ClientAuth::None) => {
            problems.add(&format!("{P}.client_ca_file"), "is given but client_auth_type does not verify client certificates; set client_auth_type to RequireAndVerifyClientCert or VerifyClientCertIfGiven".into());
            None
        }
        (file, _) => read_pem(dir, P, "client_ca_file", file, problems, |f, pem| {
            let mut roots = rustls::RootCertStore::empty();
            for c in CertificateDer::pem_slice_iter(pem).filter_map(Result::ok) {
                let _ = roots.add(c);
            }
            (!roots.is_empty())
                .then(|| Arc::new(roots))
                .ok_or_else(|| format!("{f} holds no usable PEM CA certificate"))
        }),
    };
    if problems.list.len() > before {
        return None;
    }
    let (certs, key) = (certs?, key?);
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .ok()?;
    let builder = match roots {
        None => builder.with_no_client_auth(),
        Some(roots) => {
            let verifier =
                rustls::server::WebPkiClientVerifier::builder_with_provider(roots, provider);
            let verifier = if client_auth == ClientAuth::VerifyIfGiven {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            match verifier.build() {
                Ok(v) => builder.with_client_cert_verifier(v),
                Err(e) => {
                    problems.add(
                        &format!("{P}.client_ca_file"),
                        format!("cannot verify client certificates with it: {e}"),
                    );
                    return None;
                }
            }
        }
    };
    match builder.with_single_cert(certs, key) {
        Ok(mut c) => {
            c.alpn_protocols = vec![b"http/1.1".to_vec()];
            Some(c)
        }
        Err(e) => {
            problems.add(
                &format!("{P}.key_file"),
                format!("does not go with cert_file: {e}"),
            );
            None
        }
    }
}

/// Reads the PEM file `section.key` names (relative to `dir`) and parses it with `parse`
/// (given the name as written and the bytes); a missing key, an unreadable file or a parse
/// error is added to `problems`.
fn read_pem<T>(
    dir: &Path,
    section: &str,
    key: &str,
    file: Option<&str>,
    problems: &mut Problems<'_>,
    parse: impl FnOnce(&str, &[u8]) -> Result<T, String>,
) -> Option<T> {
    let path = format!("{section}.{key}");
    let Some(file) = file else {
        let what = match key {
            "cert_file" => "the server's certificate chain (PEM)",
            "key_file" => "the server's private key (PEM)",
            _ => "the CA certificates (PEM) that sign the clients' certificates",
        };
        problems.add(&path, format!("is required here: {what}"));
        return None;
    };
    let parsed = read_capped(&dir.join(file))
        .map_err(|e| {
            format!("{e} (a relative path is resolved against the web config file's directory)")
        })
        .and_then(|pem| parse(file, &pem));
    parsed.map_err(|e| problems.add(&path, e)).ok()
}

/// A value echoed in an error: at most 64 printable characters.
fn tame(s: &str) -> String {
    s.chars().filter(|c| !c.is_control()).take(64).collect()
}

/// Basic auth without TLS sends the passwords in clear text: allowed (as the exporter toolkit
/// does, e.g. behind a TLS-terminating proxy), but said.
fn warn_if_clear_text(config: &WebConfig) {
    if !config.users.is_empty() && config.tls.is_none() {
        tracing::warn!("basic_auth_users without tls_server_config: passwords cross the network in clear text unless a proxy terminates TLS");
    }
}

/// The web config in force and where it is re-read from on reload.
#[derive(Default)]
pub struct WebState {
    path: Option<PathBuf>,
    current: RwLock<Arc<WebConfig>>,
}

impl WebState {
    /// `config` in force, re-read from `path` on reload (`None`: no web config file).
    pub fn new(path: Option<PathBuf>, config: WebConfig) -> Self {
        warn_if_clear_text(&config);
        WebState {
            path,
            current: RwLock::new(Arc::new(config)),
        }
    }

    /// Loads `path` off the async runtime (a slow disk never stalls the server), giving up
    /// after [`LOAD_TIME_LIMIT`] (a hung network mount).
    ///
    /// # Errors
    /// As [`WebConfig::load`], or the time limit.
    pub async fn load(path: PathBuf) -> Result<WebConfig, ConfigError> {
        let source = path.display().to_string();
        let failed = |message: String| ConfigError::single(&source, message);
        let read = tokio::task::spawn_blocking(move || WebConfig::load(&path));
        match tokio::time::timeout(LOAD_TIME_LIMIT, read).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err(failed("reading the web config file failed".into())),
            Err(_) => Err(failed(format!(
                "reading the web config file and the files it names took longer than {}; is the disk or network mount hung?",
                humantime::format_duration(LOAD_TIME_LIMIT)
            ))),
        }
    }

    /// The configuration in force.
    pub fn current(&self) -> Arc<WebConfig> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Re-reads and validates the file, without applying it: `Ok(None)` when there is no
    /// web config file. Apply with [`WebState::swap`].
    ///
    /// # Errors
    /// As [`WebConfig::load`]; the configuration in force is unchanged.
    pub async fn prepare(&self) -> Result<Option<WebConfig>, ConfigError> {
        match &self.path {
            None => Ok(None),
            Some(p) => Self::load(p.clone()).await.map(Some),
        }
    }

    /// Puts a prepared configuration in force: new connections and requests use it.
    pub fn swap(&self, config: Option<WebConfig>) {
        if let Some(c) = config {
            warn_if_clear_text(&c);
            *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bcrypt_cost_above_the_maximum_is_a_located_problem() {
        // A valid bcrypt hash at cost 31 (each wrong password: 2^31 rounds) and one at cost 10.
        let at = |cost: u32| {
            format!("$2b${cost:02}$abcdefghijklmnopqrstuuNFzQf2nqtbIs1.BqQZtS7tLdqKnVPyS")
        };
        let text = format!(
            "basic_auth_users:\n  slow: '{}'\n  ok: '{}'\n",
            at(31),
            at(10)
        );
        let e = parse(&text, "web.yml", Path::new("."))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("web.yml:2:") && e.contains("basic_auth_users.slow"),
            "{e}"
        );
        assert!(e.contains("cost 31") && e.contains("maximum of 12"), "{e}");
        assert!(!e.contains("basic_auth_users.ok"), "cost 10 is fine: {e}");
    }

    #[test]
    fn headers_the_server_sets_cannot_be_configured() {
        for name in ["Content-Encoding", "Vary", "Content-Type", "content-length"] {
            let text = format!("http_server_config:\n  headers:\n    {name}: identity\n");
            let e = parse(&text, "web.yml", Path::new("."))
                .err()
                .unwrap_or_else(|| panic!("{name} accepted"))
                .to_string();
            assert!(
                e.contains("web.yml:3:") && e.contains("set by llm-probe itself"),
                "{name}: {e}"
            );
        }
        let ok = "http_server_config:\n  headers:\n    X-Frame-Options: DENY\n";
        assert!(parse(ok, "web.yml", Path::new(".")).is_ok());
    }

    #[test]
    fn a_user_listed_twice_is_refused_not_last_wins() {
        let text = "basic_auth_users:\n  ops: '$2b$04$x'\n  ops: '$2b$04$y'\n";
        let e = parse(text, "web.yml", Path::new("."))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("web.yml:") && e.contains("\"ops\" is listed twice"),
            "{e}"
        );
        assert!(!e.contains("$2b$"), "no hash in the message: {e}");
        assert!(parse("basic_auth_users:\n", "web.yml", Path::new(".")).is_ok());
    }
}
