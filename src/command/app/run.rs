//! `llm-probe run`: the daemon, until SIGINT or SIGTERM; SIGHUP (and `--config.watch`) reload
//! its configuration.

use std::process::ExitCode;

use tokio_util::sync::CancellationToken;

use crate::config::{self, Config};
use crate::daemon::Daemon;

use super::signals::{hangup_signal, next, shutdown_signal, Hangup};

/// Runs the daemon on the probes file `config_file`, serving on `listen` with `web`, until a
/// signal ends it (`--config.watch`, `--shard.*`, `--probe.coalesce-reads` as the flags say).
pub(super) async fn daemon(
    config_file: std::path::PathBuf,
    listen: std::net::SocketAddr,
    web: crate::server::ServerOptions,
    config_watch: bool,
    shard: crate::cli::ShardArgs,
    coalesce_reads: std::time::Duration,
) -> ExitCode {
    crate::probe::coalesce::set_wait(coalesce_reads);
    tracing::info!(
        wait = %humantime::format_duration(crate::probe::coalesce::wait()),
        "wake-up coalescing (--probe.coalesce-reads; 0s: off)"
    );
    let shard = match crate::shard::from_flags(shard.index, shard.index_from_hostname, shard.count)
    {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "llm-probe cannot run");
            return ExitCode::FAILURE;
        }
    };
    // Before the config loads: a SIGHUP or SIGTERM while a large file is read must not
    // end the process with the signal's default action.
    let shutdown = shutdown_signal();
    let hup = hangup_signal();
    // What --config.watch compares with: the content before it was loaded.
    let watched = match config_watch {
        true => Some(crate::watch::fingerprint_off_runtime(&config_file).await),
        false => None,
    };
    let loaded = tokio::select! {
        _ = shutdown.cancelled() => return ExitCode::SUCCESS,
        c = load_for_run(&config_file) => c,
    };
    let Some(cfg) = loaded else {
        return ExitCode::FAILURE;
    };
    let run = Serve {
        config_file,
        shard,
        watched,
        web,
    };
    // The daemon's errors are log records too: every line `run` writes is in the --log.format.
    match serve_until_signal(cfg, listen, run, shutdown, hup).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %format!("{e:#}"), "llm-probe cannot run");
            ExitCode::FAILURE
        }
    }
}

/// `run`'s configuration (credentials isolated, see [`config::Secrets::Isolate`]), or `None`
/// after logging every problem, one log record each.
async fn load_for_run(path: &std::path::Path) -> Option<Config> {
    match config::load_off_runtime(path.to_path_buf(), config::Secrets::Isolate).await {
        Ok(c) => {
            crate::daemon::log_credential_problems(&c);
            for w in config::hints::warnings(&c) {
                tracing::warn!(source = %c.source, warning = %w, "the configuration looks wrong");
            }
            config::cost::log_spend(&c);
            Some(c)
        }
        Err(e) => {
            for p in &e.problems {
                tracing::error!(problem = %p, "the configuration is invalid; llm-probe cannot run");
            }
            None
        }
    }
}

/// How `run` serves, beyond the configuration and the address.
struct Serve {
    config_file: std::path::PathBuf,
    shard: crate::shard::Shard,
    /// `Some(fingerprint before loading)` with --config.watch.
    watched: Option<Option<u64>>,
    /// The exporter's own server (`--web.*`).
    web: crate::server::ServerOptions,
}

async fn serve_until_signal(
    cfg: Config,
    listen: std::net::SocketAddr,
    run: Serve,
    shutdown: CancellationToken,
    hup: Hangup,
) -> anyhow::Result<()> {
    let daemon = Daemon::start_full(
        cfg,
        listen,
        Some(run.config_file.clone()),
        run.web,
        run.shard,
    )
    .await?;
    let scheme = if daemon.server.web.current().tls.is_some() {
        "https"
    } else {
        "http"
    };
    if let Some(applied) = run.watched {
        tokio::spawn(crate::watch::watch(
            run.config_file,
            applied,
            daemon.reloader(),
            shutdown.clone(),
            crate::watch::PERIOD,
        ));
    }
    let url = format!(
        "{scheme}://{}{}/metrics",
        daemon.addr,
        daemon.server.urls.route_prefix()
    );
    tracing::info!("serving metrics on {url}");
    reload_on_sighup(daemon.reloader(), shutdown.clone(), hup);
    shutdown.cancelled().await;
    daemon.stop().await;
    Ok(())
}

/// Reloads the configuration on every SIGHUP until `shutdown`.
fn reload_on_sighup(
    tx: tokio::sync::mpsc::Sender<crate::reload::ReloadRequest>,
    shutdown: CancellationToken,
    mut hup: Hangup,
) {
    #[cfg(unix)]
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = next(&mut hup) => {}
            }
            tracing::info!("SIGHUP: reloading the configuration");
            // The daemon logs the outcome.
            let _ = crate::reload::request(&tx).await;
        }
    });
    #[cfg(not(unix))]
    let _ = (tx, shutdown, hup);
}
