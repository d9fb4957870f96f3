//! One kept probe by its trace id: `GET /probes/{trace_id}`, the stable URL an
//! exemplar's `trace_id` leads to from Grafana. A page for browsers (`Accept: text/html`, or
//! `?format=html`), JSON otherwise (`?format=json` forces it): the probe as
//! `/api/v1/probes` lists it, with its `trace_id`. Served while the probe is in the history
//! ([`crate::history::History::find`]); afterwards, and for a trace id no probe here sent, a
//! 404 that says so. Anything but 32 hex digits is a 400.

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Response, StatusCode};
use maud::html;
use serde_json::json;

use super::probe_page::wants_html;
use super::{api, encode, layout, page, query_pairs, tame, ExporterState, View};
use crate::history::RecentProbe;
use crate::measure::TraceId;

/// The record URL's path (under the route prefix) of the probe that sent `id`.
pub fn path(id: TraceId) -> String {
    format!("/probes/{id}")
}

/// `GET /probes/{segment}` with `query` and the request's `Accept`.
pub(super) fn serve(
    state: &ExporterState,
    segment: &str,
    query: &str,
    accept: Option<&str>,
) -> Response<Full<Bytes>> {
    let params = query_pairs(query);
    let format = params
        .iter()
        .find(|(k, _)| k == "format")
        .map(|(_, v)| v.as_str());
    let html = wants_html(format, accept);
    let Some(id) = TraceId::parse(segment) else {
        return answer(
            html,
            StatusCode::BAD_REQUEST,
            &format!(
                "{:?} is not a trace id: give the 32 hex digits of a probe's trace id (an exemplar's trace_id, or trace_id in probe-once JSON)",
                tame(segment)
            ),
        );
    };
    let Some(p) = state.history.find(id) else {
        let limits = state.history.limits();
        return answer(
            html,
            StatusCode::NOT_FOUND,
            &format!(
                "no probe with trace id {id} is kept here: it rolled out of the history (the last {} probes per pair, and every probe of the last 10 minutes, at most {} back; failures 4× as long), or another exporter sent it",
                limits.max_probes,
                humantime::format_duration(limits.max_age)
            ),
        );
    };
    if html {
        page(record_page(state, id, &p))
    } else {
        let mut v = api::probe(&p);
        v["trace_id"] = id.to_string().into();
        api::respond(StatusCode::OK, &v)
    }
}

/// An error in the form asked for: JSON `{"error": …}` or text.
fn answer(html: bool, status: StatusCode, msg: &str) -> Response<Full<Bytes>> {
    if html {
        super::secured(super::text(
            status,
            "text/plain; charset=utf-8",
            format!("{msg}\n"),
        ))
    } else {
        api::respond(status, &json!({ "error": msg }))
    }
}

/// Milliseconds for people, or a dash.
fn ms(d: Option<std::time::Duration>) -> String {
    d.map_or("–".into(), |d| format!("{:.1} ms", d.as_secs_f64() * 1e3))
}

fn record_page(state: &ExporterState, id: TraceId, p: &RecentProbe) -> maud::Markup {
    let u = &state.urls;
    let (target, scenario) = (&*p.target, &*p.scenario);
    let content = html! {
        h1 {
            "Probe of " code { (target) } " / " code { (scenario) }
            @if !p.replica.is_empty() { " at replica " code { (p.replica) } }
        }
        @match &p.failure {
            None => p.outcome { span.state.ok { "success" } " TTFT " (ms(p.ttft)) ", E2E " (ms(p.e2e)) },
            Some((reason, detail)) => p.outcome.reason {
                span.state.down { "failed" } " " strong { (reason.as_str()) } " — " span.detail { (detail) }
            },
        }
        dl.probe {
            dt { "trace id" } dd { code.trace-id { (id) } }
            dt { "started" } dd { (humantime::format_rfc3339_millis(p.started_at)) }
            dt { "TTFT" } dd { (ms(p.ttft)) }
            dt { "TPOT" } dd { (ms(p.tpot)) }
            dt { "ITL P50 / P95" } dd { (ms(p.itl.map(|i| i.p50))) " / " (ms(p.itl.map(|i| i.p95))) }
            dt { "E2E" } dd { (ms(p.e2e)) }
            dt { "output tokens" } dd { (p.output_tokens.map_or("–".into(), |n| n.to_string())) }
            dt { "tokens/s" } dd { (p.output_tokens_per_second.map_or("–".into(), |v| format!("{v:.1}"))) }
            dt { "backend" } dd.identity { (p.identity.as_deref().unwrap_or("unknown")) }
        }
        p.muted {
            "The engine's own spans and logs carry this trace id (W3C " code { "traceparent" } ") and the probe's "
            code { "x-request-id" } "."
        }
        p {
            a href=(u.link(&format!("/targets/{}#{}", encode(target), encode(scenario)))) { "Back to " (target) }
            " · scripts get this as JSON (" code { "Accept: application/json" } " or " code { "?format=json" } ")."
        }
    };
    layout(state, &format!("probe {id}"), View::Once, content)
}
