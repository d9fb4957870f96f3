//! `/metrics` under load: one render at a time, shared by every scrape that arrives while it
//! runs (single-flight, per exposition format).
//!
//! A render of thousands of series takes tens of milliseconds of CPU (BENCHMARKS.md, table 4)
//! and a body of megabytes. Rendering once per scrape let 200 concurrent scrapers hold 200
//! bodies and 200 blocking threads, and starve the probes of CPU (issue 18, item 5). Here a
//! scrape that finds a render of its format in progress waits for it and serves the same
//! body; renders of the three formats take turns (one permit), on a blocking thread so that a
//! probe's reads on the runtime's workers are never queued behind one.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use tokio::sync::{watch, Semaphore};

use crate::metrics::{Exposition, Metrics};

/// A finished render: the body, or `None` if rendering failed (a panic in the encoder).
type Rendered = Option<Bytes>;

/// The renders in progress and how many have been done.
pub struct Scrapes {
    in_flight: Mutex<HashMap<Exposition, watch::Receiver<Option<Rendered>>>>,
    renders: AtomicU64,
    render_permit: Arc<Semaphore>,
}

impl Default for Scrapes {
    fn default() -> Self {
        Self::new()
    }
}

impl Scrapes {
    /// No render in progress.
    pub fn new() -> Self {
        Scrapes {
            in_flight: Default::default(),
            renders: AtomicU64::new(0),
            render_permit: Arc::new(Semaphore::new(1)),
        }
    }

    /// Renders started so far (each served one or more scrapes).
    pub fn renders(&self) -> u64 {
        self.renders.load(Ordering::Relaxed)
    }

    /// A body of `metrics` in `format` rendered after this call began or joined the render in
    /// progress when it began; `None` if that render failed.
    pub async fn body(self: &Arc<Self>, metrics: &Arc<Metrics>, format: Exposition) -> Rendered {
        let mut rx = {
            let mut in_flight = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
            match in_flight.get(&format) {
                Some(rx) => rx.clone(),
                None => {
                    let (tx, rx) = watch::channel(None);
                    in_flight.insert(format, rx.clone());
                    self.renders.fetch_add(1, Ordering::Relaxed);
                    // In its own task: a scraper that hangs up does not cancel the render the
                    // others wait for.
                    tokio::spawn(self.clone().render(metrics.clone(), format, tx));
                    rx
                }
            }
        };
        // The sender is dropped without a value only if the render task itself was dropped
        // (the runtime shutting down).
        let body = rx.wait_for(Option::is_some).await.ok()?.clone();
        body.flatten()
    }

    async fn render(
        self: Arc<Self>,
        metrics: Arc<Metrics>,
        format: Exposition,
        tx: watch::Sender<Option<Rendered>>,
    ) {
        let body = match self.render_permit.clone().acquire_owned().await {
            Ok(_permit) => {
                match tokio::task::spawn_blocking(move || metrics.render_as(format)).await {
                    Ok(Ok(body)) => Some(Bytes::from(body)),
                    Ok(Err(e)) => {
                        tracing::error!(error = %e, "rendering /metrics failed");
                        None
                    }
                    Err(_) => None,
                }
            }
            Err(_) => None,
        };
        // Later scrapes start a fresh render; the waiting ones get this body.
        self.in_flight
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&format);
        let _ = tx.send(Some(body));
    }
}
