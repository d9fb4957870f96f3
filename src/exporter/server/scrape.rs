//! `/metrics` under load: one render at a time, shared by every scrape that arrives while it
//! runs (single-flight, per exposition format and content coding).
//!
//! A scraper that accepts gzip (`Accept-Encoding`, RFC 9110 §12.5.3; Prometheus sends
//! `gzip`) gets the body compressed as it is rendered ([`Metrics::render_gzip`]): about 5 % of
//! the bytes on the wire, and the daemon never holds the uncompressed body (18 MiB at 1,000
//! pairs) whole.
//!
//! A render of thousands of series takes tens of milliseconds of CPU (BENCHMARKS.md, table 4)
//! and a body of megabytes. Rendering once per scrape let 200 concurrent scrapers hold 200
//! bodies and 200 blocking threads, and starve the probes of CPU. Here a
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

/// What a render makes: a format in a coding.
type Key = (Exposition, BodyCoding);

/// The content coding of a `/metrics` body.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BodyCoding {
    /// Uncompressed.
    Identity,
    /// gzip (RFC 1952).
    Gzip,
}

impl BodyCoding {
    /// gzip when the request's `Accept-Encoding` values (each a comma-separated list, RFC 9110
    /// §12.5.3) give `gzip` (or `x-gzip`, or failing both `*`) a weight above 0; identity
    /// otherwise, also for a header that is absent. A weight outside RFC 9110's `qvalue`
    /// grammar (0 to 1, at most three decimals) counts as 0, and an element that is not ASCII
    /// text is skipped: an unreadable header gets the body every client can read.
    pub fn negotiate<'a>(accept_encoding: impl IntoIterator<Item = &'a [u8]>) -> Self {
        let (mut gzip, mut any) = (None, None);
        for element in accept_encoding
            .into_iter()
            .flat_map(|v| v.split(|&b| b == b','))
        {
            let Some(element) = std::str::from_utf8(element).ok().filter(|e| e.is_ascii()) else {
                continue;
            };
            let mut params = element.split(';');
            let coding = params.next().unwrap_or("").trim();
            let weight = params
                .filter_map(|p| p.trim().split_once('='))
                .find(|(k, _)| k.trim().eq_ignore_ascii_case("q"))
                .map_or(1000, |(_, q)| qvalue(q.trim()).unwrap_or(0));
            if coding.eq_ignore_ascii_case("gzip") || coding.eq_ignore_ascii_case("x-gzip") {
                gzip = Some(weight);
            } else if coding == "*" {
                any = Some(weight);
            }
        }
        match gzip.or(any) {
            Some(w) if w > 0 => BodyCoding::Gzip,
            _ => BodyCoding::Identity,
        }
    }

    /// The `Content-Encoding` value, `None` for identity.
    pub fn content_encoding(self) -> Option<&'static str> {
        match self {
            BodyCoding::Identity => None,
            BodyCoding::Gzip => Some("gzip"),
        }
    }
}

/// An RFC 9110 `qvalue` (`0[.ddd]` or `1[.000]`) in thousandths; `None` outside the grammar.
fn qvalue(q: &str) -> Option<u16> {
    let (int, frac) = q.split_once('.').unwrap_or((q, ""));
    if frac.len() > 3 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let thousandths = frac.bytes().chain(std::iter::repeat(b'0')).take(3);
    let frac = thousandths.fold(0u16, |n, d| n * 10 + u16::from(d - b'0'));
    match int {
        "0" => Some(frac),
        "1" if frac == 0 => Some(1000),
        _ => None,
    }
}

/// The renders in progress and how many have been done.
pub struct Scrapes {
    in_flight: Mutex<HashMap<Key, watch::Receiver<Option<Rendered>>>>,
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

    /// A body of `metrics` in `format` and `coding` rendered after this call began or joined
    /// the render in progress when it began; `None` if that render failed.
    pub async fn body(
        self: &Arc<Self>,
        metrics: &Arc<Metrics>,
        format: Exposition,
        coding: BodyCoding,
    ) -> Rendered {
        let key = (format, coding);
        let mut rx = {
            let mut in_flight = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
            match in_flight.get(&key) {
                Some(rx) => rx.clone(),
                None => {
                    let (tx, rx) = watch::channel(None);
                    in_flight.insert(key, rx.clone());
                    self.renders.fetch_add(1, Ordering::Relaxed);
                    // In its own task: a scraper that hangs up does not cancel the render the
                    // others wait for.
                    tokio::spawn(self.clone().render(metrics.clone(), key, tx));
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
        key: Key,
        tx: watch::Sender<Option<Rendered>>,
    ) {
        let (format, coding) = key;
        let render = move || match coding {
            BodyCoding::Identity => metrics.render_as(format),
            BodyCoding::Gzip => metrics.render_gzip(format),
        };
        let body = match self.render_permit.clone().acquire_owned().await {
            Ok(_permit) => match tokio::task::spawn_blocking(render).await {
                Ok(Ok(body)) => Some(Bytes::from(body)),
                Ok(Err(e)) => {
                    tracing::error!(error = %e, "rendering /metrics failed");
                    None
                }
                Err(_) => None,
            },
            Err(_) => None,
        };
        // Later scrapes start a fresh render; the waiting ones get this body.
        self.in_flight
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&key);
        let _ = tx.send(Some(body));
    }
}

#[cfg(test)]
mod tests {
    use super::BodyCoding::{self, Gzip, Identity};

    fn coding(values: &[&str]) -> BodyCoding {
        BodyCoding::negotiate(values.iter().map(|v| v.as_bytes()))
    }

    #[test]
    fn weights_follow_the_qvalue_grammar() {
        for (q, want) in [
            ("1", Gzip),
            ("1.000", Gzip),
            ("0.5", Gzip),
            ("0.001", Gzip),
            ("0", Identity),
            ("0.000", Identity),
            // Outside the grammar: a refusal.
            ("1.001", Identity),
            ("2", Identity),
            ("inf", Identity),
            ("1e999", Identity),
            (".5", Identity),
            ("5.", Identity),
            ("+0.5", Identity),
            ("0.0001", Identity),
            ("-1", Identity),
            ("NaN", Identity),
            ("", Identity),
            ("\"1\"", Identity),
        ] {
            assert_eq!(coding(&[&format!("gzip;q={q}")]), want, "q={q}");
        }
    }

    #[test]
    fn an_element_that_is_not_ascii_is_skipped_not_the_line() {
        assert_eq!(
            BodyCoding::negotiate([&b"gzip, \xc3\xa9"[..]]),
            Gzip,
            "a UTF-8 element"
        );
        assert_eq!(BodyCoding::negotiate([&b"\xff, gzip"[..]]), Gzip);
        assert_eq!(BodyCoding::negotiate([&b"gzip\xff"[..]]), Identity);
    }

    #[test]
    fn accept_encoding_is_negotiated_as_rfc_9110_says() {
        // What Prometheus sends, and the common browser and curl forms.
        assert_eq!(coding(&["gzip"]), Gzip);
        assert_eq!(coding(&["gzip, deflate, br"]), Gzip);
        assert_eq!(coding(&["deflate, gzip;q=1.0, *;q=0.5"]), Gzip);
        assert_eq!(coding(&["X-GZIP"]), Gzip);
        assert_eq!(coding(&[" gzip ; q=0.3 "]), Gzip);
        // Repeated header lines are one list.
        assert_eq!(coding(&["br", "gzip"]), Gzip);
        // `*` covers gzip unless gzip is named.
        assert_eq!(coding(&["*"]), Gzip);
        assert_eq!(coding(&["*;q=0.1, gzip;q=0"]), Identity);
        // Refused, absent, or not offered.
        assert_eq!(coding(&[]), Identity);
        assert_eq!(coding(&[""]), Identity);
        assert_eq!(coding(&["identity"]), Identity);
        assert_eq!(coding(&["br, zstd"]), Identity);
        assert_eq!(coding(&["gzip;q=0"]), Identity);
        assert_eq!(coding(&["gzip;q=0.000"]), Identity);
        assert_eq!(coding(&["*;q=0"]), Identity);
        // An unreadable weight is a refusal (every client reads identity).
        assert_eq!(coding(&["gzip;q=high"]), Identity);
        // A coding whose name merely contains gzip is another coding.
        assert_eq!(coding(&["gzipped"]), Identity);
    }

    #[test]
    fn only_gzip_names_a_content_encoding() {
        assert_eq!(Gzip.content_encoding(), Some("gzip"));
        assert_eq!(Identity.content_encoding(), None);
    }
}
