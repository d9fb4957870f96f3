//! SVG badges for READMEs and wikis: `/badge/{target}/{scenario}/ttft.svg` (P95 TTFT over the
//! state window, coloured by the pair's state) and `/badge/{target}/{scenario}/status.svg` (the
//! state, [`super::state::judge`]'s, as the page and the API say it).
//! Self-contained (presentation attributes, no CSS), so they render as `<img>` anywhere.

use std::time::SystemTime;

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Response, StatusCode};
use maud::html;

use super::state::PairState;
use super::summary::Summary;
use super::{markup, summaries, ExporterState};

/// The states' colours (the pages' too, `status.css`): red, vermillion, orange, yellow,
/// bluish green, grey; with the text colour that reads on each.
pub(super) fn colour(s: PairState) -> (&'static str, &'static str) {
    match s {
        PairState::Down => ("#B2182B", "#fff"),
        PairState::Failing => ("#D55E00", "#fff"),
        PairState::Breached => ("#E69F00", "#000"),
        PairState::AtRisk => ("#F0E442", "#000"),
        PairState::Ok => ("#009E73", "#fff"),
        PairState::NoData => ("#767676", "#fff"),
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
    let (fill, ink) = colour(s.state);
    let total = lw + vw;
    let svg = html! {
        svg xmlns="http://www.w3.org/2000/svg" width=(total) height="20" role="img"
            aria-label=(format!("{label}: {value}")) {
            title { (label) ": " (value) }
            rect width=(lw) height="20" fill="#555" {}
            rect x=(lw) width=(vw) height="20" fill=(fill) data-state=(s.state.as_str()) {}
            g font-family="Verdana,DejaVu Sans,sans-serif" font-size="11" text-anchor="middle" {
                text x=(lw / 2.0) y="14" fill="#fff" { (label) }
                text x=(lw + vw / 2.0) y="14" fill=(ink) { (value) }
            }
        }
    };
    Some(markup(StatusCode::OK, "image/svg+xml", svg))
}
