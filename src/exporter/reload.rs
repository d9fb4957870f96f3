//! Reloading the configuration: the request that SIGHUP, `POST /-/reload`, `--config.watch`
//! and [`crate::daemon::Daemon::reload`] send to the daemon's supervisor, its typed outcome
//! ([`ReloadError`]) and the log line for that outcome.
//!
//! The exporter's server and the daemon both depend on this module, not on each other.

use tokio::sync::{mpsc, oneshot};

use crate::config::ConfigError;

/// What a reload answers: a one-line summary of the new running set, or why the new files were
/// rejected (the old configuration keeps running).
pub type ReloadResult = Result<String, ReloadError>;

/// A request to reload the configuration file; the reply is the [`ReloadResult`].
pub type ReloadRequest = oneshot::Sender<ReloadResult>;

/// Why a reload was refused. `Display` is the detail for the log (it can quote what a file
/// holds, never a secret value); the HTTP endpoint answers a generic message instead.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// The probes file is invalid (every problem, located).
    #[error("{0}")]
    Config(ConfigError),
    /// The web config file (`--web.config.file`) is invalid (every problem, located).
    #[error("{0}")]
    WebConfig(ConfigError),
    /// The new file is valid but cannot be applied to the running exporter (an SLO threshold
    /// that is not a bucket boundary: buckets are fixed at start). The message names the file,
    /// the target, the field and the fix (restart).
    #[error("{0}")]
    NeedsRestart(String),
    /// A new target's HTTP client cannot be built (nothing was changed).
    #[error("target \"{target}\": cannot build an HTTP client: {source}")]
    Client {
        /// The target's name.
        target: String,
        /// What reqwest reported.
        source: reqwest::Error,
    },
    /// The reload hit a bug in llm-probe (a panic, named): nothing was left half applied
    /// when `restored` (the configuration that ran before runs again).
    #[error("{}", internal(what, *restored))]
    Internal {
        /// The panic's message.
        what: String,
        /// Whether the configuration that ran before was applied again.
        restored: bool,
    },
    /// The daemon was started without a config file.
    #[error("this daemon was started without a config file, so there is nothing to reload")]
    NoConfigFile,
    /// The daemon stopped before it answered.
    #[error("the daemon is shutting down")]
    ShuttingDown,
}

fn internal(what: &str, restored: bool) -> String {
    let state = match restored {
        true => "the configuration that ran before this reload still runs",
        false => "some probes may not run as configured until a reload succeeds",
    };
    format!(
        "the reload failed inside llm-probe ({what}): a bug, please report it with this message; \
         {state}. Fix or change the file and reload again"
    )
}

/// Sends a reload request to the daemon's queue `tx` and waits for its result.
///
/// Errors: [`ReloadError::ShuttingDown`] if the daemon stops first; else the daemon's answer.
pub async fn request(tx: &mpsc::Sender<ReloadRequest>) -> ReloadResult {
    let (reply, rx) = oneshot::channel();
    tx.send(reply)
        .await
        .map_err(|_| ReloadError::ShuttingDown)?;
    rx.await.map_err(|_| ReloadError::ShuttingDown)?
}

/// Logs a reload's outcome: the summary at info, the full reason at error.
pub fn log_outcome(result: &ReloadResult) {
    match result {
        Ok(summary) => tracing::info!(%summary, "configuration reloaded"),
        Err(e) => {
            tracing::error!(error = %e, "configuration reload failed; the previous configuration keeps running")
        }
    }
}
