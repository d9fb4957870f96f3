//! The process signals: SIGINT and SIGTERM end it (within a deadline), SIGHUP reloads.

use tokio_util::sync::CancellationToken;

/// How long the process may take to end after SIGINT or SIGTERM before it exits regardless
/// (a thread stuck in a read or a computation would otherwise keep it alive for ever).
pub const SHUTDOWN_DEADLINE: std::time::Duration = std::time::Duration::from_secs(20);

/// Ends the process [`SHUTDOWN_DEADLINE`] from now unless it has ended by then: a plain thread,
/// so that it still runs while the async runtime waits for a blocked thread at its shutdown.
fn exit_after_deadline() {
    let _ = std::thread::Builder::new()
        .name("shutdown-deadline".into())
        .spawn(|| {
            std::thread::sleep(SHUTDOWN_DEADLINE);
            crate::logging::stderr_line(format_args!(
                "llm-probe: still running {} after the signal to stop (a stuck read or computation); exiting",
                humantime::format_duration(SHUTDOWN_DEADLINE)
            ));
            std::process::exit(1);
        });
}

/// A token cancelled on SIGINT or SIGTERM. The handlers are installed before this returns.
/// After the first signal the process ends within [`SHUTDOWN_DEADLINE`] whatever it is
/// doing, and a second signal ends it at once (exit status 130).
pub fn shutdown_signal() -> CancellationToken {
    let token = CancellationToken::new();
    let t = token.clone();
    #[cfg(unix)]
    {
        use tokio::signal::unix::SignalKind;
        let mut int = install(SignalKind::interrupt(), "SIGINT");
        let mut term = install(SignalKind::terminate(), "SIGTERM");
        tokio::spawn(async move {
            tokio::select! { _ = next(&mut int) => {}, _ = next(&mut term) => {} }
            tracing::info!("shutting down");
            exit_after_deadline();
            t.cancel();
            tokio::select! { _ = next(&mut int) => {}, _ = next(&mut term) => {} }
            crate::logging::stderr_line(format_args!(
                "llm-probe: a second signal to stop; exiting now"
            ));
            std::process::exit(130);
        });
    }
    #[cfg(not(unix))]
    tokio::spawn(async move {
        let _ = tokio::signal::ctrl_c().await;
        tracing::info!("shutting down");
        t.cancel();
    });
    token
}

#[cfg(unix)]
pub(super) type Hangup = Option<tokio::signal::unix::Signal>;
#[cfg(not(unix))]
pub(super) type Hangup = ();

/// The SIGHUP stream (installed now, so that from here on SIGHUP no longer ends the process).
pub(super) fn hangup_signal() -> Hangup {
    #[cfg(unix)]
    return install(tokio::signal::unix::SignalKind::hangup(), "SIGHUP");
}

/// A handler for `kind`, or `None` (logged) if it cannot be installed.
#[cfg(unix)]
fn install(
    kind: tokio::signal::unix::SignalKind,
    name: &str,
) -> Option<tokio::signal::unix::Signal> {
    tokio::signal::unix::signal(kind)
        .inspect_err(
            |e| tracing::error!(signal = name, error = %e, "cannot install a signal handler"),
        )
        .ok()
}

/// The next delivery of `signal`; never, if it has no handler.
#[cfg(unix)]
pub(super) async fn next(signal: &mut Option<tokio::signal::unix::Signal>) {
    if let Some(s) = signal {
        if s.recv().await.is_some() {
            return;
        }
    }
    std::future::pending().await
}
