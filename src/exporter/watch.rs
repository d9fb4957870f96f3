//! `run --config.watch`: reload the probes file when its content changes, for a file mounted
//! from a Kubernetes ConfigMap.
//!
//! The kubelet updates a ConfigMap volume by writing a new timestamped directory, pointing a
//! `..data_tmp` symlink at it and renaming that over `..data` (`probes.yaml` itself is a symlink
//! to `..data/probes.yaml`), so the file's inode, path and mtime as seen through the link all
//! change at once and inotify watches on the old target go stale. Polling is robust to that:
//! every period the watcher reads the file through its symlinks and hashes the content (XXH3);
//! a new hash seen on two consecutive polls (debounce: the swap and any editor's
//! write-then-rename have settled) is sent through the same validate-then-swap reload as SIGHUP,
//! once. A file that is missing or unreadable for a moment (mid-swap) is skipped, not reloaded.
//! A rejected file is not retried until its content changes again.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use xxhash_rust::xxh3::xxh3_64;

use crate::config::files::MAX_CONFIG_BYTES;
use crate::reload::{request as request_reload, ReloadRequest};

/// How often `--config.watch` reads the file.
pub const PERIOD: Duration = Duration::from_secs(1);

/// The XXH3 hash of the file's content (through symlinks), or `None` if it cannot be read now.
/// Read as the configuration is ([`crate::config::files::read`]): a regular file only, opened
/// without blocking (a FIFO at the path blocked a plain open for ever, and with it the watcher
/// and the process's exit), within a size cap and a time limit. A file over the cap has one
/// fingerprint of its own, so that becoming too large is reloaded once and its error logged.
fn fingerprint(path: &Path) -> Option<u64> {
    match crate::config::files::read(path, MAX_CONFIG_BYTES) {
        Ok(bytes) => Some(xxh3_64(&bytes)),
        Err(crate::config::files::ReadError::TooLarge(_)) => Some(TOO_LARGE),
        Err(_) => None,
    }
}

/// The fingerprint of a file over [`MAX_CONFIG_BYTES`].
const TOO_LARGE: u64 = u64::MAX;

/// `fingerprint` on a blocking thread: take it *before* loading the file and pass it to
/// [`watch`], so that a change between the load and the watcher's start is never missed (at
/// worst it causes one extra reload).
pub async fn fingerprint_off_runtime(path: &Path) -> Option<u64> {
    let path = path.to_path_buf();
    tokio::task::spawn_blocking(move || fingerprint(&path))
        .await
        .ok()
        .flatten()
}

/// Polls `path` every `period` until `shutdown`, sending one reload request to `reload` per
/// settled content change (see the module docs). `applied` is the [`fingerprint_off_runtime`]
/// of the file taken before the running configuration was loaded from it.
pub async fn watch(
    path: PathBuf,
    applied: Option<u64>,
    reload: mpsc::Sender<ReloadRequest>,
    shutdown: CancellationToken,
    period: Duration,
) {
    let mut applied = applied;
    let mut pending = None;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(period) => {}
        }
        let Some(now) = fingerprint_off_runtime(&path).await else {
            tracing::debug!(path = %path.display(), "config watch: the file cannot be read right now; trying again");
            pending = None;
            continue;
        };
        if Some(now) == applied {
            pending = None;
            continue;
        }
        if pending != Some(now) {
            // Changed: wait one more period for it to settle.
            pending = Some(now);
            continue;
        }
        applied = Some(now);
        pending = None;
        tracing::info!(path = %path.display(), "config watch: the file changed; reloading");
        // The daemon logs the outcome and sets llm_probe_config_last_reload_successful.
        if request_reload(&reload).await.is_err() && shutdown.is_cancelled() {
            return;
        }
    }
}
