//! SVG badges for READMEs and wikis: `/badge/{target}/{scenario}/ttft.svg` (P95 TTFT over the
//! SLO window, coloured by SLO state) and `/badge/{target}/{scenario}/status.svg` (the state).
//! Self-contained (presentation attributes, no CSS), so they render as `<img>` anywhere.

use std::time::SystemTime;

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Response, StatusCode};
use maud::html;

use super::summary::{SloState, Summary};
use super::{secured, summaries, text, ExporterState};

/// Okabe–Ito colours of the states.
fn colour(s: SloState) -> &'static str {
    match s {
        SloState::Ok => "#009E73",
        SloState::AtRisk => "#E69F00",
        SloState::Breached => "#D55E00",
        SloState::NoData => "#8a8a8a",
    }
}

/// Approximate width of `s` in 11 px Verdana.
fn width(s: &str) -> f64 {
    // Whole pixels: no floating-point noise (116.39999999999999) in the SVG.
    (s.chars().count() as f64 * 6.6 + 12.0).round()
}

/// The badge `kind` (`ttft.svg` or `status.svg`) of a pair; `None`: no such pair or kind.
pub(super) fn badge(
    state: &ExporterState,
    target: &str,
    scenario: &str,
    kind: &str,
    now: SystemTime,
) -> Option<Response<Full<Bytes>>> {
    let s: Summary = summaries(state, now, Some(target))
        .into_iter()
        .find(|s| s.target == target && s.scenario == scenario)?;
    let (label, value) = match kind {
        "ttft.svg" => (
            "TTFT P95".to_string(),
            s.ttft_p95_ms
                .map_or("no data".into(), |v| format!("{v:.0} ms")),
        ),
        "status.svg" => (
            format!("{target} / {scenario}"),
            s.state.label().to_string(),
        ),
        _ => return None,
    };
    let (lw, vw) = (width(&label), width(&value));
    let total = lw + vw;
    let svg = html! {
        svg xmlns="http://www.w3.org/2000/svg" width=(total) height="20" role="img"
            aria-label=(format!("{label}: {value}")) {
            title { (label) ": " (value) }
            rect width=(lw) height="20" fill="#555" {}
            rect x=(lw) width=(vw) height="20" fill=(colour(s.state)) {}
            g fill="#fff" font-family="Verdana,DejaVu Sans,sans-serif" font-size="11" text-anchor="middle" {
                text x=(lw / 2.0) y="14" { (label) }
                text x=(lw + vw / 2.0) y="14" { (value) }
            }
        }
    };
    Some(secured(text(
        StatusCode::OK,
        "image/svg+xml",
        svg.into_string(),
    )))
}
