//! The status pages: the overview (`/`, filtered by `?state=&target=&location=`, dense with
//! `?view=wall`), one page per target (`/targets/{target}`), the JSON API (`/api/v1/targets`,
//! `/api/v1/probes`), SVG badges (`/badge/{target}/{scenario}/…`), the readable page of an
//! on-demand probe ([`probe_page`]) and the record of a kept probe by its trace id
//! (`/probes/{trace_id}`, [`record`]). Every pair's state comes from one function,
//! [`state::judge`], over the alerts' 10-minute window.
//!
//! Everything is rendered on the server from the in-memory [`crate::history::History`]: HTML
//! through maud (every interpolated string is escaped, and every page and badge passes through
//! `markup`, which writes control characters as visible escapes), charts as inline SVG (`svg`), no
//! script at all (the pages refresh with `<meta http-equiv=refresh>`, the filter is a plain
//! GET form), one same-origin stylesheet (`/status.css`), and a strict
//! `Content-Security-Policy` ([`CSP`]). Every link starts with the `--web.external-url` /
//! `--web.route-prefix` path ([`super::WebUrls`]). The pages sit behind the server's basic
//! auth and TLS like every other endpoint; "probe now" links appear only when
//! `--web.enable-debug-probe` is on. Never a key or header value: targets are shown by name,
//! model and the identity the backend revealed.

mod api;
mod badge;
mod overview;
pub mod probe_page;
pub mod record;
pub mod state;
mod summary;
mod svg;
mod target;

use std::time::SystemTime;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_SECURITY_POLICY, X_CONTENT_TYPE_OPTIONS};
use hyper::{Response, StatusCode};
use maud::{html, Markup, DOCTYPE};

pub use state::{judge, PairState, Verdict, WINDOW};
pub use summary::Summary;

use super::debug_probe::tame;
use super::{text, ExporterState};

/// The pages' policy: nothing but same-origin styles and images; no script, no frames; forms
/// (the overview's filter, a GET) submit to the exporter only.
pub const CSP: &str = "default-src 'none'; style-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// Seconds between the pages' refreshes.
const REFRESH_SECONDS: u32 = 30;

const CSS: &str = include_str!("status.css");

/// Answers the status routes (`path` is the request's path under the route prefix, `accept`
/// its `Accept` header); `None` for any other path.
pub(super) fn route(
    state: &ExporterState,
    path: &str,
    query: &str,
    accept: Option<&str>,
) -> Option<Response<Full<Bytes>>> {
    let now = SystemTime::now();
    let r = match path {
        "/" => page(overview::page(state, &query_pairs(query), now)),
        "/status.css" => secured(text(StatusCode::OK, "text/css; charset=utf-8", CSS)),
        "/api/v1/targets" => api::targets(state, now),
        "/api/v1/probes" => api::probes(state, query),
        _ => {
            if let Some(name) = path.strip_prefix("/targets/") {
                let name = decode(name)?;
                match target::page(state, &name, now) {
                    Some(body) => page(body),
                    None => not_found(&format!(
                        "no target \"{}\" is probed here; the overview ({}) lists those that are",
                        tame(&name),
                        state.urls.link("/")
                    )),
                }
            } else if let Some(id) = path.strip_prefix("/probes/") {
                record::serve(state, id, query, accept)
            } else if let Some(rest) = path.strip_prefix("/badge/") {
                let mut parts = rest.split('/');
                let (t, s, kind) = (parts.next()?, parts.next()?, parts.next()?);
                if parts.next().is_some() {
                    return None;
                }
                let (t, s) = (decode(t)?, decode(s)?);
                badge::badge(state, &t, &s, kind, now)
                    .unwrap_or_else(|| not_found("no such badge: use /badge/{target}/{scenario}/ttft.svg or status.svg for a pair probed here"))
            } else {
                return None;
            }
        }
    };
    Some(r)
}

fn not_found(msg: &str) -> Response<Full<Bytes>> {
    secured(text(
        StatusCode::NOT_FOUND,
        "text/plain; charset=utf-8",
        format!("{msg}\n"),
    ))
}

/// A percent-decoded path segment (`None`: not UTF-8).
fn decode(segment: &str) -> Option<String> {
    percent_encoding::percent_decode_str(segment)
        .decode_utf8()
        .ok()
        .map(|s| s.into_owned())
}

/// What a link's path segment or query value escapes: everything but letters, digits and the
/// other characters of target and scenario names (`_ . : -`).
const ESCAPED: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'_')
    .remove(b'.')
    .remove(b':')
    .remove(b'-');

/// A path segment or query value percent-encoded for a link.
pub(crate) fn encode(segment: &str) -> String {
    percent_encoding::utf8_percent_encode(segment, ESCAPED).to_string()
}

/// `r` with the CSP, `nosniff` and no caching.
fn secured(mut r: Response<Full<Bytes>>) -> Response<Full<Bytes>> {
    let h = r.headers_mut();
    h.insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    h.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

fn page(body: Markup) -> Response<Full<Bytes>> {
    markup(StatusCode::OK, "text/html; charset=utf-8", body)
}

/// Every HTML and SVG answer: `body` rendered, with the control and bidirectional characters
/// maud does not escape written as visible escapes ([`crate::sanitize::markup_safe`]: a
/// failure detail's ESC or CR reaches no page, whichever template put it there), and
/// [`secured`].
fn markup(status: StatusCode, content_type: &str, body: Markup) -> Response<Full<Bytes>> {
    secured(text(
        status,
        content_type,
        crate::sanitize::markup_safe(body.into_string()),
    ))
}

/// The query's parameters, decoded, in order.
pub(crate) fn query_pairs(query: &str) -> Vec<(String, String)> {
    url::form_urlencoded::parse(query.as_bytes())
        .into_owned()
        .collect()
}

/// The exporter's identity in a few words: `instance · location · shard 2 of 3`.
fn identity_words(state: &ExporterState) -> Vec<String> {
    let shard = state.shard.read().unwrap_or_else(|e| e.into_inner()).shard;
    let id = &state.identity;
    let mut words = Vec::new();
    if !id.instance.is_empty() {
        words.push(id.instance.clone());
    }
    if let Some(l) = &id.location {
        words.push(format!("location {l}"));
    }
    if shard.count > 1 {
        words.push(format!("shard {} of {}", shard.index, shard.count));
    }
    words
}

/// How a page is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum View {
    /// Header, navigation, footer.
    Full,
    /// The wall screen: no chrome but a one-line identity.
    Wall,
    /// As `Full`, without the periodic refresh (a page that must not be fetched again by
    /// itself: an on-demand probe's).
    Once,
}

/// The page around `content`: head, header with the exporter's identity and links (relative
/// to the route prefix), footer saying how far back it goes.
fn layout(state: &ExporterState, title: &str, view: View, content: Markup) -> Markup {
    let limits = state.history.limits();
    let id = identity_words(state);
    let u = &state.urls;
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="color-scheme" content="light dark";
                @if view != View::Once { meta http-equiv="refresh" content=(REFRESH_SECONDS); }
                title {
                    (title) " — llm-probe"
                    @if !id.is_empty() { " — " (id.join(" · ")) }
                }
                link rel="stylesheet" href=(u.link("/status.css"));
            }
            body class=[(view == View::Wall).then_some("wall")] {
                @if view == View::Wall {
                    header.wall-head {
                        a.brand href=(u.link("/")) { "llm-probe" }
                        @for w in &id { " " span.ident-word { (w) } }
                    }
                } @else {
                    header {
                        a.brand href=(u.link("/")) { "llm-probe" }
                        span.version { (env!("CARGO_PKG_VERSION")) }
                        @if !id.is_empty() {
                            span.whoami { @for (k, w) in id.iter().enumerate() { @if k > 0 { " · " } span.ident-word { (w) } } }
                        }
                        nav {
                            a href=(u.link("/")) { "Overview" } " · "
                            a href=(u.link("/?view=wall")) { "Wall" } " · "
                            a href=(u.link("/metrics")) { "Metrics" } " · "
                            a href=(u.link("/api/v1/targets")) { "API" } " · "
                            a href=(u.link("/-/healthy")) { "Health" }
                        }
                    }
                }
                main { (content) }
                @if view != View::Wall {
                    footer {
                        "States over the last " (humantime::format_duration(WINDOW)) " (the alerts' window). "
                        "In memory: the last " (limits.max_probes) " probes per pair (all of the state window), at most "
                        (humantime::format_duration(limits.max_age)) " back (failures 4× as long); "
                        "Prometheus keeps the long-term series."
                        @if view == View::Full { " Refreshes every " (REFRESH_SECONDS) " s." }
                    }
                }
            }
        }
    }
}

/// The pairs this replica probes (only `target`'s when given), each summarised, sorted by
/// target then scenario.
fn summaries(state: &ExporterState, now: SystemTime, target: Option<&str>) -> Vec<Summary> {
    let owned = state
        .shard
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .owned
        .clone();
    let slos: std::collections::HashMap<String, crate::config::Slo> = {
        let probers = state.probers.read().unwrap_or_else(|e| e.into_inner());
        probers
            .iter()
            .filter(|(name, _)| target.is_none_or(|t| t == name.as_str()))
            .map(|(name, p)| (name.clone(), p.target().slo))
            .collect()
    };
    owned
        .iter()
        .filter_map(|(t, s)| {
            let slo = *slos.get(t)?;
            Some(state.history.with_pair(t, s, |probes, failures| {
                Summary::new(t, s, slo, probes, failures, now)
            }))
        })
        .collect()
}

/// `target`'s one-line summary (protocol, URL without secrets, model), if configured.
fn configured(state: &ExporterState, target: &str) -> Option<String> {
    let probers = state.probers.read().unwrap_or_else(|e| e.into_inner());
    probers.get(target).map(|p| p.target().summary())
}

/// Milliseconds for people.
fn ms(v: Option<f64>) -> String {
    v.map_or("–".into(), |v| format!("{v:.0} ms"))
}

/// Tokens/s for people.
fn rate(v: Option<f64>) -> String {
    v.map_or("–".into(), |v| format!("{v:.1} tokens/s"))
}
