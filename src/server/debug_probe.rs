//! `GET /probe?target=NAME[&scenario=S][&debug=true]`, blackbox style: runs one probe of a
//! configured (target, scenario) now and returns it as JSON; with `debug=true` also its
//! timeline (every token event's offset from `sent`) and the first 8 KiB of the raw stream.
//!
//! Only targets in the configuration can be probed, by name: no URL is ever taken from the
//! request, so the endpoint is not an open proxy. At most [`super::DEBUG_PROBE_SLOTS`] run at
//! once. On-demand probes are logged and shown on the landing page but not observed into the
//! scheduled series (they would skew the histograms' cadence).

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};

use super::{text, ExporterState};
use crate::probe::Limits;
use crate::report;

/// Raw bytes a debug probe keeps.
pub const RAW_EXCERPT_BYTES: usize = 8192;

/// A request value echoed in an error: at most 64 printable characters.
fn tame(s: &str) -> String {
    s.chars().filter(|c| !c.is_control()).take(64).collect()
}

pub(super) async fn handle(
    state: &ExporterState,
    req: &Request<Incoming>,
) -> Response<Full<Bytes>> {
    let query = req.uri().query().unwrap_or("");
    let params: Vec<(String, String)> = reqwest::Url::parse(&format!("http://x/?{query}"))
        .map(|u| u.query_pairs().into_owned().collect())
        .unwrap_or_default();
    let param = |k: &str| params.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    let Some(target) = param("target") else {
        return text(
            StatusCode::BAD_REQUEST,
            "text/plain",
            "give a configured target: /probe?target=NAME[&scenario=S][&debug=true]\n",
        );
    };
    let debug = matches!(param("debug"), Some("true" | "1"));
    let prober = {
        let probers = state.probers.read().unwrap_or_else(|e| e.into_inner());
        match probers.get(target) {
            Some(p) => p.clone(),
            None => {
                let mut names: Vec<_> = probers.keys().cloned().collect();
                names.sort();
                return text(
                    StatusCode::NOT_FOUND,
                    "text/plain",
                    format!("target \"{}\" is not in the configuration; only configured targets can be probed: {}\n", tame(target), names.join(", ")),
                );
            }
        }
    };
    let scenarios = &prober.target().scenarios;
    let scenario = match param("scenario") {
        None => scenarios[0].clone(),
        Some(name) => match scenarios.iter().find(|s| s.name == name) {
            Some(s) => s.clone(),
            None => {
                let names: Vec<_> = scenarios.iter().map(|s| s.name.as_str()).collect();
                return text(
                    StatusCode::NOT_FOUND,
                    "text/plain",
                    format!(
                        "target \"{target}\" has no scenario \"{}\"; its scenarios: {}\n",
                        tame(name),
                        names.join(", ")
                    ),
                );
            }
        },
    };
    let Ok(_slot) = state.debug_slots.try_acquire() else {
        return text(
            StatusCode::TOO_MANY_REQUESTS,
            "text/plain",
            "debug probes are already running; try again shortly\n",
        );
    };
    let limits = Limits {
        capture_bytes: if debug { RAW_EXCERPT_BYTES } else { 0 },
        ..Limits::default()
    };
    let outcome = prober.with_limits(limits).probe(&scenario).await;
    crate::daemon::log_outcome(&outcome);
    state.history.push(&outcome);
    let mut body = report::to_json(&outcome);
    if debug {
        body["timeline"] = report::timeline_json(&outcome);
        body["raw_excerpt"] = String::from_utf8_lossy(&outcome.observations.raw_excerpt)
            .into_owned()
            .into();
    }
    text(
        StatusCode::OK,
        "application/json",
        report::json_text(&body, true),
    )
}
