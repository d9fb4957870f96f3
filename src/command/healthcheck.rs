//! `llm-probe healthcheck`: exit 0 if a running llm-probe answers its health endpoint, for
//! container health checks (the image has no shell or curl). It speaks TLS (a CA file, a
//! client certificate, or no verification) and basic auth, and passes only on llm-probe's
//! own answer ([`crate::server::HEALTHY_BODY`]), so that another server's 200 on the port
//! does not count as healthy.

use std::process::ExitCode;

use crate::server::web_config::read_capped;
use crate::server::HEALTHY_BODY;

/// What to ask and how (the `healthcheck` command's flags, or their environment variables,
/// mapped by the command line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// The health endpoint to ask (`https://` for an exporter with TLS); user-info and query
    /// are never shown in messages.
    pub url: String,
    /// How long to wait for the whole answer.
    pub timeout: std::time::Duration,
    /// CA certificates (PEM) that sign the exporter's certificate (default: the system's).
    pub ca_file: Option<std::path::PathBuf>,
    /// Client certificate (PEM); used only together with `key_file`.
    pub cert_file: Option<std::path::PathBuf>,
    /// The client certificate's private key (PEM).
    pub key_file: Option<std::path::PathBuf>,
    /// Accept any server certificate (liveness only; the answer is still checked).
    pub insecure_skip_verify: bool,
    /// Basic auth user name; used only together with `password_file`.
    pub username: Option<String>,
    /// File holding the basic auth password (its content without the trailing line break).
    pub password_file: Option<std::path::PathBuf>,
}

/// Why a health check failed: one line for stderr.
#[derive(Debug, thiserror::Error)]
pub enum HealthError {
    /// A flag's file cannot be used.
    #[error("{0}")]
    Setup(String),
    /// No complete answer within the time limit.
    #[error("{url}: no answer within {timeout} (timed out)")]
    Timeout {
        /// The URL asked (without user-info or query).
        url: String,
        /// The time limit.
        timeout: String,
    },
    /// The request failed (connection refused, TLS, …).
    #[error("{url}: {detail}")]
    Request {
        /// The URL asked.
        url: String,
        /// The error and its causes.
        detail: String,
    },
    /// An answer other than llm-probe's healthy one.
    #[error("{url}: {detail}")]
    Unhealthy {
        /// The URL asked.
        url: String,
        /// What came back.
        detail: String,
    },
}

/// Runs the check and prints why it failed; exit code 0 or 1.
pub async fn run(args: &Options) -> ExitCode {
    match check(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // What came back is a stranger's text: escaped before it reaches a terminal.
            crate::logging::stderr_line(format_args!(
                "llm-probe: healthcheck: {}",
                crate::sanitize::terminal_safe(&e.to_string())
            ));
            ExitCode::FAILURE
        }
    }
}

/// `url` without user-info and query (which may hold secrets).
fn shown(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut u) => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.set_query(None);
            u.to_string()
        }
        Err(_) => "the --url".to_string(),
    }
}

fn read(path: &std::path::Path, flag: &str) -> Result<Vec<u8>, HealthError> {
    read_capped(path).map_err(|e| HealthError::Setup(format!("{flag}: {e}")))
}

fn client(args: &Options) -> Result<reqwest::Client, HealthError> {
    let mut builder = reqwest::Client::builder()
        .timeout(args.timeout)
        .redirect(reqwest::redirect::Policy::none())
        .danger_accept_invalid_certs(args.insecure_skip_verify);
    if let Some(ca) = &args.ca_file {
        let pem = read(ca, "--tls.ca-file")?;
        let certs = reqwest::Certificate::from_pem_bundle(&pem)
            .ok()
            .filter(|c| !c.is_empty())
            .ok_or_else(|| {
                HealthError::Setup(format!(
                    "--tls.ca-file: {} holds no PEM certificate",
                    ca.display()
                ))
            })?;
        for c in certs {
            builder = builder.add_root_certificate(c);
        }
    }
    if let (Some(cert), Some(key)) = (&args.cert_file, &args.key_file) {
        let mut pem = read(cert, "--tls.cert-file")?;
        pem.push(b'\n');
        pem.extend(read(key, "--tls.key-file")?);
        let identity = reqwest::Identity::from_pem(&pem).map_err(|_| {
            HealthError::Setup(format!(
                "--tls.cert-file/--tls.key-file: {} and {} are not a PEM certificate and its private key",
                cert.display(),
                key.display()
            ))
        })?;
        builder = builder.identity(identity);
    }
    builder
        .build()
        .map_err(|e| HealthError::Setup(format!("cannot build an HTTP client: {e}")))
}

/// Asks the health endpoint once.
///
/// # Errors
/// A [`HealthError`] naming the URL (without secrets) and what went wrong.
pub async fn check(args: &Options) -> Result<(), HealthError> {
    let url = shown(&args.url);
    let client = client(args)?;
    let mut request = client.get(&args.url);
    if let (Some(user), Some(file)) = (&args.username, &args.password_file) {
        let password = read(file, "--basic-auth.password-file")?;
        let password = String::from_utf8(password).map_err(|_| {
            HealthError::Setup("--basic-auth.password-file: the file is not UTF-8 text".into())
        })?;
        request = request.basic_auth(user, Some(password.trim_end_matches(['\r', '\n'])));
    }
    let failed = |e: reqwest::Error| {
        if e.is_timeout() {
            HealthError::Timeout {
                url: url.clone(),
                timeout: humantime::format_duration(args.timeout).to_string(),
            }
        } else {
            HealthError::Request {
                url: url.clone(),
                detail: crate::sanitize::http_error(e),
            }
        }
    };
    let response = request.send().await.map_err(failed)?;
    let status = response.status();
    let body = response.text().await.map_err(failed)?;
    let unhealthy = |detail: String| HealthError::Unhealthy {
        url: url.clone(),
        detail,
    };
    match status.as_u16() {
        200 if body == HEALTHY_BODY => Ok(()),
        200 => Err(unhealthy(format!(
            "answered 200 but not as llm-probe's /-/healthy does ({:?}); is another server on this port?",
            HEALTHY_BODY.trim_end()
        ))),
        401 => Err(unhealthy(
            "answered 401: the exporter requires basic auth; give --basic-auth.username and --basic-auth.password-file".into(),
        )),
        code => Err(unhealthy(format!("answered HTTP {code}"))),
    }
}
