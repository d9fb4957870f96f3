//! `llm-probe baseline save --prometheus.url URL --target T --scenario S --range START/END`: a
//! [`Measured`] from a window of the daemon's classic histogram buckets in Prometheus, written
//! by [`save::finish`].
//!
//! - the bucket counts over `(START, END]` come from [`crate::compare::prometheus::fetch_window`]
//!   (whole observations, counter resets handled, summed over the series' other labels);
//! - P50/P95/P99 of TTFT, TPOT, output tokens/s and E2E are interpolated within their bucket as
//!   Prometheus's `histogram_quantile` does ([`Histogram::quantile`], the definition in
//!   [`crate::stats::histogram`]), so they match the dashboards; the bucket around each is printed (the file format, strict v1, has no field for
//!   it), and a percentile in the `+Inf` bucket is a warning (only its lower bound is known);
//! - `samples` is the successful probes in the window (the TTFT histogram's observations);
//! - the endpoint identity is the `llm_probe_endpoint_info` label set seen last in the window
//!   ([`crate::compare::prometheus::find_change`] over the window); a change inside the window,
//!   or two label sets at once, is a warning;
//! - `source` is `{kind: "prometheus", file: the URL without credentials, level: "window
//!   START/END" (RFC 3339 UTC)}`; `measured_at` is the window's end.

use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::save::{self, Measured};
use super::{Endpoint, Origin, Quantiles};
use crate::compare::buckets::ScenarioData;
use crate::compare::buckets_report::{quantile_cell, unit};
use crate::compare::from_prometheus::{describe, no_probes};
use crate::compare::prometheus::{self, show_identity, Client, Identity, NoChange};
use crate::compare::stats::binned::Histogram;
use crate::compare::window::{rfc3339, Range};
use crate::compare::Metric;

/// What `baseline save --prometheus.url` was asked.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// The Prometheus server's root URL.
    pub url: String,
    /// The target name (its `target` label).
    pub target: String,
    /// The scenario name (its `scenario` label).
    pub scenario: String,
    /// The window `(start, end]`.
    pub window: Range,
    /// Bound of every request to Prometheus.
    pub timeout: Duration,
}

/// The percentiles a baseline pins.
const PERCENTILES: [(f64, &str); 3] = [(0.5, "P50"), (0.95, "P95"), (0.99, "P99")];

/// P50/P95/P99 of `h` as `histogram_quantile` interpolates them (rounded to six decimals, as
/// the bench source), and a note naming the bucket around each (`TTFT P50 225.0 in 200–250, …
/// ms`); `None` without observations. Pure.
pub fn quantiles(metric: Metric, h: &Histogram) -> Option<(Quantiles, String, bool)> {
    let q = PERCENTILES.map(|(q, _)| h.quantile(q));
    let [Some(p50), Some(p95), Some(p99)] = q else {
        return None;
    };
    let round = |v: f64| (v * 1e6).round() / 1e6;
    let cells: Vec<String> = PERCENTILES
        .iter()
        .zip(q)
        .map(|((_, name), b)| format!("{name} {}", quantile_cell(metric, b)))
        .collect();
    let note = format!("{} {} {}", metric.label(), cells.join(", "), unit(metric));
    let open_ended = p99.upper.is_infinite();
    Some((
        Quantiles {
            p50: round(p50.value),
            p95: round(p95.value),
            p99: round(p99.value),
        },
        note,
        open_ended,
    ))
}

/// The endpoint identity from the labels of `llm_probe_endpoint_info`: the configured `model`
/// and the [`Endpoint`] fields (a label not set is `None`). Pure.
pub fn endpoint_of(id: &Identity) -> (Option<String>, Endpoint) {
    let get = |k: &str| id.iter().find(|(key, _)| key == k).map(|(_, v)| v.clone());
    (
        get("model"),
        Endpoint {
            response_model: get("response_model"),
            system_fingerprint: get("system_fingerprint"),
            server: get("server"),
            server_version: get("server_version"),
        },
    )
}

/// The percentiles (`"P50, P95"`) where `e2e` lies below `ttft`, `None` when none does. A
/// request's E2E is never below its TTFT; interpolated in different buckets, it can be.
fn e2e_below_ttft(e2e: &Quantiles, ttft: &Quantiles) -> Option<String> {
    let below: Vec<&str> = [
        ("P50", e2e.p50, ttft.p50),
        ("P95", e2e.p95, ttft.p95),
        ("P99", e2e.p99, ttft.p99),
    ]
    .into_iter()
    .filter(|(_, e, t)| e < t)
    .map(|(name, _, _)| name)
    .collect();
    (!below.is_empty()).then(|| below.join(", "))
}

/// The baseline numbers of `data` (one scenario's window); `None` without successful probes.
fn from_window(req: &Request, data: &ScenarioData, window: (f64, f64)) -> Option<Measured> {
    let samples = data.successful_probes();
    let mut notes = vec![format!(
        "{samples} successful probes ({} finished, {} failed); bucket resolution (interpolated value in bucket):",
        data.probes, data.failures
    )];
    let mut warnings = Vec::new();
    let mut of = |metric: Metric| {
        let (q, note, open_ended) = quantiles(metric, data.histogram(metric)?)?;
        notes.push(format!("  {note}"));
        if open_ended {
            warnings.push(format!(
                "{} P99 lies in the +Inf bucket: the file holds its lower bound, the largest \
                 finite bucket bound",
                metric.label()
            ));
        }
        Some(q)
    };
    let ttft = of(Metric::Ttft)?;
    let tpot = of(Metric::Tpot);
    let output_tokens_per_second = of(Metric::OutputTokensPerSecond);
    let e2e = of(Metric::E2e);
    // Each histogram is interpolated inside its own buckets, and E2E's are coarser than TTFT's:
    // an E2E percentile below the TTFT one is bucket arithmetic, not a measurement.
    if let Some(below) = e2e.as_ref().and_then(|e| e2e_below_ttft(e, &ttft)) {
        warnings.push(format!(
            "E2E {below} below TTFT's: each is interpolated in its own buckets (E2E's are \
             coarser), so read both as the bucket ranges printed above"
        ));
    }
    Some(Measured {
        target: req.target.clone(),
        scenario: req.scenario.clone(),
        model: None,
        measured_at: UNIX_EPOCH + Duration::from_secs_f64(window.1.max(0.0)),
        source: Origin {
            kind: "prometheus".into(),
            file: String::new(),
            level: format!("window {}/{}", rfc3339(window.0), rfc3339(window.1)),
            llm_probe_version: env!("CARGO_PKG_VERSION").into(),
        },
        endpoint: Endpoint::default(),
        samples,
        ttft,
        tpot,
        output_tokens_per_second,
        e2e,
        // The window's prefill histogram is not read: a baseline of a long-prompt scenario
        // with prefill speed is saved from a bench or probe-once file.
        prefill_tokens_per_second: None,
        why: "histogram buckets in Prometheus".into(),
        notes,
        warnings,
    })
}

/// What Prometheus holds for the request's pair over its window, resolved against `now` (Unix
/// seconds). Errors (for the user, exit 2): a bad URL or window; Prometheus cannot answer (the
/// message names the redacted URL and the query); no successful probes of the pair in the
/// window.
pub async fn measure(req: &Request, now: f64) -> Result<Measured, String> {
    let client = Client::new(&req.url, req.timeout).map_err(|e| e.to_string())?;
    let (start, end) = req
        .window
        .resolve(now)
        .map_err(|e| format!("--range: {e}"))?;
    let pair = describe(&req.target, Some(&req.scenario));
    let w = prometheus::fetch_window(&client, &req.target, Some(&req.scenario), start, end)
        .await
        .map_err(|e| e.to_string())?;
    let mut m = w
        .scenarios
        .get(&req.scenario)
        .and_then(|d| from_window(req, d, (start, end)))
        .ok_or_else(|| no_probes("the window", (start, end), &pair, client.shown_url()))?;
    m.source.file = client.shown_url().to_string();
    let identity = prometheus::find_change(&client, &req.target, end - start, end)
        .await
        .map_err(|e| e.to_string())?;
    let id = match identity {
        Ok(change) => {
            m.warnings.push(format!(
                "the endpoint identity ({}) changed inside the window, by {}: from {} to {}; \
                 the file holds the last one; pick a window after the change",
                prometheus::ENDPOINT_INFO,
                rfc3339(change.first_new),
                show_identity(&change.old),
                show_identity(&change.new)
            ));
            Some(change.new)
        }
        Err(NoChange::Unchanged { identity, .. }) => Some(identity),
        Err(NoChange::Concurrent { a, b }) => {
            m.warnings.push(format!(
                "two endpoint identities are current at once in the window ({} and {}): \
                 replicas see different backends; the file holds the first, seen last",
                show_identity(&a),
                show_identity(&b)
            ));
            Some(a)
        }
        Err(NoChange::NoSeries) => {
            m.warnings.push(format!(
                "no {} series of {pair} in the window: the file's endpoint identity is empty",
                prometheus::ENDPOINT_INFO
            ));
            None
        }
    };
    if let Some(id) = id {
        (m.model, m.endpoint) = endpoint_of(&id);
    }
    Ok(m)
}

/// `llm-probe baseline save --prometheus.url …`: measure and write `out` ([`save::finish`]).
/// Exit status 0 when written, 2 otherwise (nothing written).
pub async fn run(req: &Request, out: &Path) -> ExitCode {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    save::finish(measure(req, now).await, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_histogram_quantile_and_name_their_bucket() {
        // 10 observations in (0.2, 0.25], 10 in (0.25, 0.3]: histogram_quantile(0.5) = 0.25
        // (the end of the first bucket), 0.95 → 0.25 + 0.05 × 9/10 = 0.295, 0.99 → 0.2990.
        let h = Histogram::from_counts(&[0.2, 0.25, 0.3, f64::INFINITY], &[0, 10, 10, 0]).unwrap();
        let (q, note, open) = quantiles(Metric::Ttft, &h).unwrap();
        assert_eq!((q.p50, q.p95, q.p99), (0.25, 0.295, 0.299));
        assert_eq!(
            note,
            "TTFT P50 250.0 in 200–250, P95 295.0 in 250–300, P99 299.0 in 250–300 ms"
        );
        assert!(!open);
        let empty = Histogram::from_counts(&[0.2, f64::INFINITY], &[0, 0]).unwrap();
        assert!(quantiles(Metric::Ttft, &empty).is_none());
        let beyond = Histogram::from_counts(&[0.2, f64::INFINITY], &[1, 1]).unwrap();
        assert!(quantiles(Metric::Ttft, &beyond).unwrap().2, "P99 in +Inf");
    }

    #[test]
    fn an_e2e_interpolated_below_ttft_is_named() {
        let q = |p50, p95, p99| Quantiles { p50, p95, p99 };
        let ttft = q(0.45, 0.49, 0.5);
        assert_eq!(
            e2e_below_ttft(&q(0.375, 0.6, 0.7), &ttft).as_deref(),
            Some("P50")
        );
        assert_eq!(
            e2e_below_ttft(&q(0.3, 0.4, 0.45), &ttft).as_deref(),
            Some("P50, P95, P99")
        );
        assert_eq!(e2e_below_ttft(&q(0.5, 0.6, 0.7), &ttft), None);
    }

    #[test]
    fn identity_labels_fill_model_and_endpoint() {
        let id: Identity = vec![
            ("model".into(), "m".into()),
            ("response_model".into(), "m-2024".into()),
            ("server".into(), "vllm".into()),
        ];
        let (model, e) = endpoint_of(&id);
        assert_eq!(model.as_deref(), Some("m"));
        assert_eq!(e.response_model.as_deref(), Some("m-2024"));
        assert_eq!(e.server.as_deref(), Some("vllm"));
        assert_eq!((e.system_fingerprint, e.server_version), (None, None));
    }
}
